"""One dispatch for a group of optimizer updates (``webgrad.graph.passes.group``).

The same kernel as a single update (optim.py: optim_step.wgsl filled for ``count``
members, each calling the op's function in optim.wgsl) with one member per parameter:
the uniform holds optim.wgsl's ``Params`` (the scalars, shared: members of a group have
equal attrs), then one ``Member`` (n, grad offset, first thread, element offsets) each.
That and the storage-buffer limit bound a group's size (``capacity``).
"""
from __future__ import annotations

from . import large
from .geometry import FLOATS
from .optim import FILE, MEMBER_BYTES, run, update

UNIFORM_BYTES = 256   # one arena slot (device.UNIFORM_SLOT)
PARAMS_BYTES = 80     # optim.wgsl's Params
MAX_MEMBERS = (UNIFORM_BYTES - PARAMS_BYTES) // MEMBER_BYTES


def capacity(backend, arity: int) -> int:
    """Members per group: bound by the uniform slot and the storage buffers a shader may bind."""
    limit = int(backend.limits.get("max_storage_buffers_per_shader_stage", 8))
    return max(1, min(MAX_MEMBERS, limit // arity))


def _groupable(backend, members) -> bool:
    """One kernel can run them: float kinds it reads, contiguous written buffers, no storage bound
    twice (WebGPU refuses a writable buffer at two bindings), each within one binding."""
    storages = [a.storage for m in members for a in m]
    return (all(a.kind in FLOATS for m in members for a in m)
            and all(a.is_contiguous() for m in members for a in m)
            and len({id(s) for s in storages}) == len(storages)
            and not large.too_large(backend, [a for m in members for a in m]))


def optim_group(backend, op, record, arrays, attrs, shape, dtype):
    arity = record.arity
    members = [arrays[k * arity:(k + 1) * arity] for k in range(record.count)]
    if not _groupable(backend, members):  # the single step copies or refuses, naming the problem
        for m in members:
            update(backend, record.op, list(m), attrs)  # optim.wgsl's functions are named after the ops
        return
    run(backend, record.op, members, attrs, f"{FILE}:{record.op}[{record.count} params]")
