"""One dispatch for a group of optimizer updates (``webgrad.graph.passes.group``).

The generated kernel binds every member's gradient, parameter and state buffers
and runs one thread per element of all of them: thread ``t`` belongs to the member
whose element range ``[start, start + n)`` holds it. Each member's body is its
op's own entry point in ``optim.wgsl``, with the buffer names and the per-call
fields (n, offsets) made the member's: the update arithmetic stays in one place.

Uniform: optim.wgsl's ``Params`` (the scalars, shared: members of a group have
equal attrs), then one ``Member`` (n, grad offset, start, element offsets) each.
That and the storage-buffer limit bound a group's size (``capacity``).
"""
from __future__ import annotations

import functools
import re

import numpy as np

from ...kernels import Program
from .backend import WORKGROUP
from .optim import FILE, _pack, _scalars, update
from .source import read

UNIFORM_BYTES = 256   # one arena slot (device.UNIFORM_SLOT)
PARAMS_BYTES = 80     # optim.wgsl's Params
MEMBER_BYTES = 32
MAX_MEMBERS = (UNIFORM_BYTES - PARAMS_BYTES) // MEMBER_BYTES
BUFFER_NAMES = ("grad", "param", "state0", "state1", "state2")
_ENTRY = re.compile(r"@compute @workgroup_size\(WG\)\nfn (\w+)\(.*?\n\}\n", re.S)
_STORAGE = re.compile(r"@group\(0\) @binding\([1-9]\) var<storage.*\n")


def capacity(backend, arity: int) -> int:
    """Members per group: bound by the uniform slot and the storage buffers a shader may bind."""
    limit = int(backend.limits.get("max_storage_buffers_per_shader_stage", 8))
    return max(1, min(MAX_MEMBERS, limit // arity))


@functools.lru_cache(maxsize=64)
def group_source(op_name: str, arity: int, count: int) -> str:
    text = read(FILE)
    bodies = {m.group(1): m.group(0) for m in _ENTRY.finditer(text)}
    common = _STORAGE.sub("", _ENTRY.sub("", text))
    common = common.replace("var<uniform> p: Params;", "var<uniform> u: GroupParams;")
    common = re.sub(r"\bp\.", "u.p.", common)
    entry = bodies[op_name]
    body = entry[entry.index("{\n") + 2:entry.rindex("}")]
    body = "\n".join(line for line in body.split("\n")
                     if "thread_index(" not in line and "i >= p.n" not in line)
    parts = [common, f"struct Member {{\n  n: u32,\n  grad_offset: u32,\n  start: u32,\n  pad: u32,\n"
                     f"  offsets: vec4<u32>,\n}}\n"
                     f"struct GroupParams {{\n  p: Params,\n  m: array<Member, {count}>,\n}}"]
    dispatch = []
    for j in range(count):
        for k, name in enumerate(BUFFER_NAMES[:arity]):
            access = "read" if k == 0 else "read_write"
            parts.append(f"@group(0) @binding({1 + j * arity + k}) var<storage, {access}> {name}_{j}: array<f32>;")
        member = re.sub(r"\bp\.(n|grad_offset|offsets)\b", rf"u.m[{j}].\1", body)
        member = re.sub(r"\bp\.", "u.p.", member)
        member = re.sub(r"\b(grad|param|state[012])\[", rf"\1_{j}[", member)
        parts.append(f"fn member_{j}(i: u32) {{\n{member}}}")
        dispatch.append(f"  if (t < u.m[{j}].start + u.m[{j}].n) {{ member_{j}(t - u.m[{j}].start); return; }}")
    parts.append("@compute @workgroup_size(WG)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, "
                 "@builtin(num_workgroups) nwg: vec3<u32>) {\n  let t = thread_index(gid, nwg);\n"
                 + "\n".join(dispatch) + "\n}")
    return "\n".join(parts)


def _groupable(members) -> bool:
    """One kernel can run them: float32, contiguous written buffers, and no storage bound
    twice (WebGPU refuses a writable buffer at two bindings)."""
    storages = [a.storage for m in members for a in m]
    return (all(a.kind == "f32" for m in members for a in m)
            and all(a.is_contiguous() for m in members for a in m)
            and len({id(s) for s in storages}) == len(storages))


def optim_group(backend, op, record, arrays, attrs, shape, dtype):
    arity = record.arity
    members = [arrays[k * arity:(k + 1) * arity] for k in range(record.count)]
    if not _groupable(members):  # the single step copies or refuses, naming the problem
        for m in members:
            update(backend, record.op, record.op, list(m), attrs)  # optim.wgsl's entries are named after the ops
        return
    flags, values = _scalars(record.op, attrs)
    words = np.zeros(record.count * MEMBER_BYTES // 4, dtype=np.uint32).reshape(record.count, 8)
    start = 0
    for row, (*written, grad) in zip(words, members):
        n = written[0].numel()
        row[0:3] = (n, grad.offset, start)
        row[4:4 + len(written)] = [a.offset for a in written]
        start += n
    if start == 0:
        return
    params = _pack(0, flags, 0, [], values) + words.tobytes()
    label = f"{FILE}:{record.op}[{record.count} params]"
    program = Program.of(FILE, "main", constants={"WG": WORKGROUP}, generated=record)
    buffers = [a.buffer for *written, grad in members for a in (grad, *written)]
    backend.run_program(program, buffers, params, backend.grid(-(-start // WORKGROUP), label), label,
                   source=group_source(record.op, arity, record.count))
