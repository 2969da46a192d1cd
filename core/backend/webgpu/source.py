"""Assembling WGSL source: the one documented way parameters reach a shader.

1. Type parameters, element kinds, become ``alias`` lines of their WGSL types
   (``alias A = f32;``, from ``geometry.ELEMENTS``) at the top.
2. An elementwise expression becomes one spliced function ``op(...)``.
3. Preludes (``strided.wgsl``, ``math.wgsl``) are prepended where a kernel uses them.
4. Sizes and tiles are pipeline-override constants, never pasted text.
Shaders are read with importlib.resources from the installed package, so the
same code runs natively and inside Pyodide.
"""
from __future__ import annotations

import functools
from importlib import resources

from .geometry import ELEMENTS

PRELUDES = {
    "unary.wgsl": ("strided.wgsl", "math.wgsl"),
    "binary.wgsl": ("strided.wgsl", "math.wgsl"),
    "ternary.wgsl": ("strided.wgsl", "math.wgsl"),
    "softmax.wgsl": ("math.wgsl",),
    "reduce.wgsl": ("reduce_plain.wgsl",),
}
SPLICE_SIGNATURE = {
    "unary.wgsl": "fn op(a: A) -> O",
    "binary.wgsl": "fn op(a: A, b: A) -> O",
    "ternary.wgsl": "fn op(a: A, b: B, c: B) -> O",
    "matmul.wgsl": "fn epilogue(v: vec4<T>, batch: u32, row: u32, col: u32) -> vec4<T>",
}


@functools.lru_cache(maxsize=None)
def read(file: str) -> str:
    return resources.files("webgrad.wgsl_kernels").joinpath(file).read_text()


def all_files() -> list[str]:
    return sorted(p.name for p in resources.files("webgrad.wgsl_kernels").iterdir() if p.name.endswith(".wgsl"))


@functools.lru_cache(maxsize=None)
def assemble(file: str, types: tuple = (), expr: str | None = None) -> str:
    parts = [f"alias {name} = {ELEMENTS[kind].wgsl};" for name, kind in types]
    parts += [read(p) for p in PRELUDES.get(file, ())]
    if expr is not None:
        parts.append(f"{SPLICE_SIGNATURE[file]} {{\n  return {expr};\n}}")
    parts.append(read(file))
    return "\n".join(parts)
