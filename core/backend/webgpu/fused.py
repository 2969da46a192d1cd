"""Generated WGSL for fused elementwise chains (``webgrad.graph.passes.fuse``).

``fused_source`` is the one function that splices expressions: each step of the
chain becomes a small WGSL function whose body is that op's own ``Elementwise``
expression (from its ``defop``, carried in the record) with the type names A/B/O made concrete, and
``op()`` calls them in order. The result runs in the existing unary/binary/ternary
shader (broadcasting and strided inputs as for any elementwise op), so a fused chain
costs one dispatch and writes one buffer.
"""
from __future__ import annotations

import functools
import re

from ...kernels import Fused, Program
from .backend import kind_of, launcher
from .elementwise import _plan
from .geometry import ELEMENTS, KIND
from .source import PRELUDES, SPLICE_SIGNATURE, read

_TYPE_NAME = re.compile(r"\b([ABO])\b")


def _step_function(j, name, record, in_kinds, out_kind, prefix="step") -> str:
    in_kind = in_kinds[0] if len(in_kinds) < 3 else in_kinds[1]
    expr = record.expression(in_kind, out_kind)
    if expr is None:
        raise TypeError(f"fused {name}: not supported on webgpu for element type {in_kind}")
    wgsl = [ELEMENTS[k].wgsl for k in in_kinds]
    names = {"A": wgsl[0], "B": wgsl[1] if len(wgsl) == 3 else wgsl[0], "O": ELEMENTS[out_kind].wgsl}
    expr = _TYPE_NAME.sub(lambda m: names[m.group(1)], expr)
    params = ", ".join(f"{'abc'[i]}: {t}" for i, t in enumerate(wgsl))
    return f"fn {prefix}{j}({params}) -> {names['O']} {{\n  return {expr};\n}}"


@functools.lru_cache(maxsize=512)
def fused_source(record, file: str, types: tuple) -> str:
    """The WGSL module of one fused chain in ``file``'s layout (type aliases ``types``)."""
    parts = [f"alias {n} = {ELEMENTS[kind].wgsl};" for n, kind in types]
    parts += [read(p) for p in PRELUDES.get(file, ())]
    body = []
    for j, (name, args, in_dtypes, out_dtype, _) in enumerate(record.steps):
        parts.append(_step_function(j, name, record.kernels[j], [KIND[d] for d in in_dtypes], KIND[out_dtype]))
        call = ", ".join("abc"[i] if kind == "in" else f"t{i}" for kind, i in args)
        body.append(f"  let t{j} = step{j}({call});")
    body.append(f"  return t{len(record.steps) - 1};")
    parts.append(SPLICE_SIGNATURE[file] + " {\n" + "\n".join(body) + "\n}")
    parts.append(read(file))
    return "\n".join(parts)


_PLANS: dict = {}  # launch geometry by (record, operands' geometry): replays repeat the same shapes


@launcher(Fused)
def launch_fused(backend, op, record, arrays, attrs, shape, dtype):
    out_kind = kind_of(dtype)
    out = backend.empty(shape, out_kind, op.name)
    key = (record, out_kind, tuple(shape), *[(a.kind, a.shape, a.strides, a.offset) for a in arrays])
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(op.name, arrays, tuple(shape), out_kind, None)
    if plan is None:
        return out
    file, entry, types, constants, params, groups, label = plan
    program = Program.of(file, entry, types, None, constants, generated=record)
    backend.run_program(program, [a.buffer for a in arrays] + [out.buffer], params, backend.grid(groups, label), label,
                   source=fused_source(record, file, types))
    return out


@functools.lru_cache(maxsize=256)
def matmul_epilogue_source(record, kind: str) -> str:
    """matmul.wgsl whose ``epilogue()`` runs the chain ``record`` on each stored value of C:
    chain input 0 is the product, inputs 1 and 2 are float32 buffers bound at 4 and 5 and
    read through the strides in ``Params.ext0``/``ext1`` (see matmul.wgsl)."""
    parts = [f"alias T = {ELEMENTS[kind].wgsl};", read("math.wgsl")]
    extra = record.inputs - 1
    names = ["r[c]"] + [f"e{k}" for k in range(extra)]
    body = ["  var r = v;", "  for (var c = 0u; c < 4u; c = c + 1u) {",
            "    let cc = min(col + c, p.dims.y - 1u);  // lanes past N are never stored"]
    for k in range(extra):
        parts.append(f"@group(0) @binding({4 + k}) var<storage, read> ext{k}: array<f32>;")
        body.append(f"    let e{k} = ext{k}[u32(i32(p.offsets.{'zw'[k]}) + i32(batch) * p.ext{k}.x"
                    f" + i32(row) * p.ext{k}.y + i32(cc) * p.ext{k}.z)];")
    for j, (name, args, in_dtypes, out_dtype, _) in enumerate(record.steps):
        parts.append(_step_function(j, name, record.kernels[j], [KIND[d] for d in in_dtypes], KIND[out_dtype]))
        call = ", ".join(names[i] if where == "in" else f"t{i}" for where, i in args)
        body.append(f"    let t{j} = step{j}({call});")
    body += [f"    r[c] = t{len(record.steps) - 1};", "  }", "  return r;"]
    parts.append(SPLICE_SIGNATURE["matmul.wgsl"] + " {\n" + "\n".join(body) + "\n}")
    parts.append(read("matmul.wgsl"))
    return "\n".join(parts)


def _hook(name, record, in_type, out_type, inputs) -> list:
    """The WGSL of reduce.wgsl's hook ``name`` (prologue or epilogue) running ``record``'s
    chain on its argument ``v``; ``inputs``: the WGSL reads of the chain's other inputs."""
    if record is None:
        return [f"fn {name}(v: {in_type}) -> {out_type} {{ return {out_type}(v); }}"]
    parts, body, names = [], [], ["v", *inputs]
    for j, (op_name, args, in_dtypes, out_dtype, _) in enumerate(record.steps):
        parts.append(_step_function(j, op_name, record.kernels[j], [KIND[d] for d in in_dtypes], KIND[out_dtype],
                                    prefix=f"{name}_step"))
        call = ", ".join(names[i] if where == "in" else f"t{i}" for where, i in args)
        body.append(f"  let t{j} = {name}_step{j}({call});")
    body.append(f"  return t{len(record.steps) - 1};")
    return parts + [f"fn {name}(v: {in_type}) -> {out_type} {{\n" + "\n".join(body) + "\n}"]


@functools.lru_cache(maxsize=256)
def reduction_source(prologue, epilogue, types: tuple) -> str:
    """reduce.wgsl with hooks running the chains ``prologue`` (input 0: the element read)
    and ``epilogue`` (input 0: the result stored), either None; their other inputs are
    the one-element arrays S0, S1, ... (prologue's first) bound at 3.. and read at Params.ext."""
    parts = [f"alias {n} = {ELEMENTS[kind].wgsl};" for n, kind in types]
    parts.append(read("math.wgsl"))
    extras = [n for n, _ in types if n.startswith("S")]
    for k, alias in enumerate(extras):
        parts.append(f"@group(0) @binding({3 + k}) var<storage, read> s{k}: array<{alias}>;")
    reads = [f"s{k}[p.ext[{k}]]" for k in range(len(extras))]
    split = 0 if prologue is None else prologue.inputs - 1
    parts += _hook("prologue", prologue, "X", "T", reads[:split])
    parts += _hook("epilogue", epilogue, "T", "O", reads[split:])
    parts.append(read("reduce.wgsl"))
    return "\n".join(parts)
