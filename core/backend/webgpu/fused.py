"""Generated WGSL for fused elementwise chains (``webgrad.graph.passes.fuse``).

A chain runs as the ``op()`` of the existing unary/binary/ternary shader (``source.assemble``,
through ``source.splice``: the one splicer of every fused hook, here and for the matmul
epilogue and reduction hooks below), with broadcasting and strided inputs as for any
elementwise op, so a fused chain costs one dispatch and writes one buffer.
"""
from __future__ import annotations

import functools

from ...kernels import Program
from . import large
from .elementwise import _plan, strided_runs
from .geometry import broadcast_strides, kind_of
from .source import accessors, aliases, assemble, fill, matmul_readers, read, splice


_PLANS: dict = {}  # launch geometry by (record, operands' geometry): replays repeat the same shapes


def launch_fused(backend, op, record, arrays, attrs, shape, dtype, out=None):
    out_kind = kind_of(dtype)
    shape = tuple(shape)
    if out is None:
        out = backend.empty(shape, out_kind, op.name)
        if large.too_large(backend, (*arrays, out)):  # once per window of the operands (large.py)
            operands = [a.view(shape, broadcast_strides(a.shape, a.strides, shape)) for a in arrays]
            for *parts, part in large.split([*operands, out], large.binding_limit(backend)):
                launch_fused(backend, op, record, parts, attrs, part.shape, dtype, out=part)
            return out
    geometry = (out.strides, out.offset)
    runs = strided_runs(backend)
    key = (record, out_kind, shape, geometry, runs, *[(a.kind, a.shape, a.strides, a.offset) for a in arrays])
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(op.name, arrays, shape, out_kind, geometry, runs)
    if plan is None:
        return out
    file, entry, types, constants, params, groups, label = plan
    program = Program.of(file, entry, types, None, constants, generated=record)
    backend.run_program(program, [a.buffer for a in arrays] + [out.buffer], params, backend.grid(groups, label), label,
                   source=assemble(file, types, chain=record))
    return out


@functools.lru_cache(maxsize=256)
def matmul_epilogue_source(record, types) -> str:
    """matmul.wgsl whose ``epilogue()`` runs the chain ``record`` on each stored value of C:
    chain input 0 is the product, inputs 1 and 2 the float32 buffers of matmul_epilogue.wgsl."""
    reads = ["v", "ext0_at(batch, row, col)", "ext1_at(batch, row, col)"][:record.inputs]
    return "\n".join(aliases(types) + matmul_readers(types) + [read("math.wgsl"), read("matmul_epilogue.wgsl"),
                      splice("fn chain(v: T, batch: u32, row: u32, col: u32) -> T", record, reads),
                      read("matmul.wgsl")])


@functools.lru_cache(maxsize=256)
def reduction_source(prologue, epilogue, types: tuple) -> str:
    """reduce.wgsl with hooks running the chains ``prologue`` (input 0: the element read)
    and ``epilogue`` (input 0: the result stored), either None; their other inputs are
    the one-element arrays S0, S1, ... (prologue's first) bound at 3.. and read at Params.ext."""
    parts = aliases(types) + accessors("reduce.wgsl", types)
    extras = range(sum(n.startswith("S") for n, _ in types))
    parts += [read("math.wgsl"), fill("reduce_fused.wgsl", [{"k": k, "binding": 3 + k} for k in extras])]
    reads = [f"s{k}_value()" for k in extras]
    split = 0 if prologue is None else prologue.inputs - 1
    parts.append(splice("fn prologue(v: X) -> T", prologue, ["v", *reads[:split]]))
    parts.append(splice("fn epilogue(v: T) -> O", epilogue, ["v", *reads[split:]]))
    parts.append(read("reduce.wgsl"))
    return "\n".join(parts)
