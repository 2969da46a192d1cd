"""Assembling WGSL source: the one documented way parameters reach a shader.

1. Type parameters, element kinds, become ``alias`` lines of their WGSL types
   (``alias A = f32;``, from ``geometry.ELEMENTS``) at the top.
2. An elementwise expression becomes one spliced function ``op(...)``; a fused chain of
   them becomes a hook function (``splice``: fused elementwise ``op``, matmul
   ``epilogue``, reduction ``prologue``/``epilogue``), one small function per step.
3. Preludes (``strided.wgsl``, ``math.wgsl``) are prepended where a kernel uses them.
4. Sizes and tiles are pipeline-override constants, never pasted text.
5. A generated layout (optimizer updates over a group of parameters, a fused reduction's
   inputs) is a template file filled by ``fill``: fields, and lines repeated per item;
   no regular expression edits a shader.
Shaders are read with importlib.resources from the installed package, so the
same code runs natively and inside Pyodide.
"""
from __future__ import annotations

import functools
import re
from importlib import resources
from string import Template

from .geometry import ELEMENTS, KIND, PACKED, compute_kind

PRELUDES = {
    "unary.wgsl": ("strided.wgsl", "math.wgsl"),
    "binary.wgsl": ("strided.wgsl", "math.wgsl"),
    "ternary.wgsl": ("strided.wgsl", "math.wgsl"),
    "softmax.wgsl": ("math.wgsl",),
    "layer_norm.wgsl": ("math.wgsl",),
    "reduce.wgsl": ("math.wgsl", "reduce_plain.wgsl"),
    "conv.wgsl": ("math.wgsl",),
    "pool.wgsl": ("math.wgsl",),
}
SPLICE_SIGNATURE = {
    "unary.wgsl": "fn op(a: A) -> O",
    "binary.wgsl": "fn op(a: A, b: A) -> O",
    "ternary.wgsl": "fn op(a: A, b: B, c: B) -> O",
    "matmul.wgsl": "fn epilogue(v: vec4<T>, batch: u32, row: u32, col: u32) -> vec4<T>",
}
_TYPE_NAME = re.compile(r"\b([ABO])\b")
# The input buffers of the shaders that read any element kind, packed ones too, and the type
# each is computed in: each gets a load_<buffer>(i), and an elementwise shader's output a
# store_out(i, v) (``accessors``).
OPERANDS = {"unary.wgsl": (("a", "A"),), "binary.wgsl": (("a", "A"), ("b", "A")),
            "ternary.wgsl": (("a", "A"), ("b", "B"), ("c", "B")), "reduce.wgsl": (("x", "X"),),
            "conv.wgsl": (("a", "A"), ("b", "B")), "pool.wgsl": (("a", "A"), ("b", "B")),
            "softmax.wgsl": (("x", "X"),), "layer_norm.wgsl": (("x", "X"), ("w", "W"), ("b", "W"))}
STORES = ("unary.wgsl", "binary.wgsl", "ternary.wgsl")
# The packed kinds' bits per element, and math.wgsl's functions from an element's bits to its
# value and from a value to its bits.
PACKING = {"f16p": (16, "wg_f16_value", "wg_f16_bits"), "bf16": (16, "wg_bf16_value", "wg_bf16_bits"),
           "i16": (16, "wg_i16_value", "wg_low16_bits"), "i8": (8, "wg_i8_value", "wg_low8_bits"),
           "u8": (8, "wg_u8_value", "wg_low8_bits")}


@functools.lru_cache(maxsize=None)
def read(file: str) -> str:
    return resources.files("webgrad.wgsl_kernels").joinpath(file).read_text()


def aliases(types) -> list[str]:
    """The ``alias`` lines of each (name, element kind) pair: ``name`` is the type a kernel
    computes in, ``Sname`` the type its buffer stores (they differ for f16: stored f16,
    computed f32). A kernel that meets f16 starts with ``enable f16;``. A packed output (O)
    is stored as atomic words: several threads write parts of one word."""
    lines = ["enable f16;"] if any(kind == "f16" for _, kind in types) else []
    for name, kind in types:
        stored = "atomic<u32>" if name == "O" and kind in PACKED else ELEMENTS[kind].wgsl
        lines += [f"alias {name} = {ELEMENTS[compute_kind(kind)].wgsl};", f"alias S{name} = {stored};"]
    return lines


def accessors(file: str, types) -> list[str]:
    """A shader's ``load_a(i)``... (element i of a buffer, as the type it is computed in) and an
    elementwise shader's ``store_out(i, v)``: a conversion, or for a packed kind the bits of the
    word it lives in (a store clears them, then sets them: atomics, as the rest of the word
    may be other threads')."""
    kinds = dict(types)
    lines = []
    for buffer, name in OPERANDS[file]:
        kind = kinds[name]
        if kind in PACKED:
            word, shift, _ = _packed_at(kind)
            value = f"{PACKING[kind][1]}({buffer}[{word}] >> {shift})"
        else:
            value = f"{name}({buffer}[i])"
        lines.append(f"fn load_{buffer}(i: u32) -> {name} {{ return {value}; }}")
    if file not in STORES:
        return lines
    kind = kinds["O"]
    if kind in PACKED:
        word, shift, mask = _packed_at(kind)
        bits, _, bits_of = PACKING[kind]
        per_word = 32 // bits
        lines += ["fn store_out(i: u32, v: O) {", f"  let shift = {shift};",
                  f"  atomicAnd(&out[{word}], ~({mask} << shift));",
                  f"  atomicOr(&out[{word}], {bits_of}(v) << shift);", "}",
                  STORE_WORD.format(per_word=per_word, bits=bits, bits_of=bits_of)]
    else:
        lines += ["fn store_out(i: u32, v: O) { out[i] = SO(v); }", "fn store_word(t: u32) {}"]
    return lines


def matmul_readers(types) -> list[str]:
    """matmul.wgsl's a_at(e) / b_at(e) and a_vec(e) / b_vec(e) (see there) for the kinds of A and B:
    a buffer of vec4s of the element, or of packed 16-bit floats (two to a word, a vec4 of words
    holding 8)."""
    kinds = dict(types)
    lines = []
    for buffer in "ab":
        kind = kinds[buffer.upper()]
        if kind in PACKED:
            value = PACKING[kind][1]  # the value of a word's low 16 bits
            lines += [f"fn {buffer}_at(e: i32) -> T {{",
                      "  let u = u32(e);",
                      f"  return {value}({buffer}[u >> 3u][(u >> 1u) & 3u] >> ((u & 1u) * 16u));", "}",
                      f"fn {buffer}_vec(e: i32) -> vec4<T> {{",
                      f"  let q = {buffer}[u32(e) >> 3u];",
                      "  let w = select(q.xy, q.zw, (u32(e) & 4u) != 0u);",
                      f"  return vec4<T>({value}(w.x), {value}(w.x >> 16u), {value}(w.y), {value}(w.y >> 16u));",
                      "}"]
        else:
            lines += [f"fn {buffer}_at(e: i32) -> T {{ return T({buffer}[u32(e) >> 2u][u32(e) & 3u]); }}",
                      f"fn {buffer}_vec(e: i32) -> vec4<T> {{ return vec4<T>({buffer}[u32(e) >> 2u]); }}"]
    return lines


# An elementwise shader's whole output word t (its WORDS mode): elements per_word * t ... from a
# word's start, computed by value(offsets_of(i)) and stored at once; a last word the output only partly
# covers is stored element by element.
STORE_WORD = """fn store_word(t: u32) {{
  let first = {per_word}u * t;
  if (first >= p.n) {{ return; }}
  if (first + {per_word}u > p.n) {{
    for (var i = first; i < p.n; i++) {{ store_out(offsets_of(i).w, value(offsets_of(i))); }}
    return;
  }}
  var word = 0u;
  for (var k = 0u; k < {per_word}u; k++) {{ word |= {bits_of}(value(offsets_of(first + k))) << (k * {bits}u); }}
  atomicStore(&out[offsets_of(first).w / {per_word}u], word);
}}"""


# How index.wgsl sees a 32-bit kind's element bits as its value (value_of) and back (bits_of).
WORD_CODEC = {"f32": ("bitcast<f32>", "bitcast<u32>"), "i32": ("bitcast<i32>", "bitcast<u32>"), "u32": ("", "")}


def index_codec(types) -> list[str]:
    """index.wgsl's element layout for the kind of T: ``BITS`` per element, ``value_of(bits)``
    (as T is computed in) and ``bits_of(v)`` (rounded or wrapped to the kind), with math.wgsl
    where a narrow kind needs its conversions."""
    kind = dict(types)["T"]
    if kind in PACKED:
        bits, value, bits_of = PACKING[kind]
        prelude = [read("math.wgsl")]
    else:
        (bits, (value, bits_of)), prelude = (32, WORD_CODEC[kind]), []
    return prelude + [f"const BITS = {bits}u;", f"fn value_of(b: u32) -> T {{ return {value}(b); }}",
                      f"fn bits_of(v: T) -> u32 {{ return {bits_of}(v); }}"]


def _packed_at(kind: str) -> tuple[str, str, str]:
    """WGSL for element i of a packed ``kind``: its word, its bits' shift in the word, their mask."""
    bits = PACKING[kind][0]
    per_word = 32 // bits
    return (f"i >> {per_word.bit_length() - 1}u", f"((i & {per_word - 1}u) * {bits}u)", f"{(1 << bits) - 1:#x}u")


def fill(file: str, rows=(), **fields) -> str:
    """The template ``file`` with each ``${name}`` written as ``fields[name]``; a line that
    holds ``${k}`` is written once per row of ``rows`` (a dict of more fields), in order."""
    lines = []
    for line in read(file).splitlines():
        if "${k}" in line:
            lines += [Template(line).substitute(fields, **row) for row in rows]
        else:
            lines.append(Template(line).substitute(fields))
    return "\n".join(lines)


def all_files() -> list[str]:
    return sorted(p.name for p in resources.files("webgrad.wgsl_kernels").iterdir() if p.name.endswith(".wgsl"))


@functools.lru_cache(maxsize=1024)  # every dispatch asks: plain kernels and fused chains
def assemble(file: str, types: tuple = (), expr: str | None = None, chain=None) -> str:
    """``file`` with its type aliases and preludes, and its hook ``op()`` returning ``expr``
    or running the fused chain ``chain`` (over the inputs a, b, c)."""
    parts = aliases(types) + [read(p) for p in PRELUDES.get(file, ())]
    if file in OPERANDS:
        parts += accessors(file, types)
    if file == "matmul.wgsl":  # math.wgsl only where a packed operand needs it: every matmul compiles it
        parts += ([read("math.wgsl")] if any(kind in PACKED for _, kind in types) else []) + matmul_readers(types)
    if file == "index.wgsl":
        parts += index_codec(types)
    if expr is not None:
        parts.append(f"{SPLICE_SIGNATURE[file]} {{\n  return {expr};\n}}")
    if chain is not None:
        parts.append(splice(SPLICE_SIGNATURE[file], chain, "abc"[:chain.inputs]))
    parts.append(read(file))
    return "\n".join(parts)


def splice(signature: str, chain, inputs) -> str:
    """The WGSL of the hook function ``signature`` (e.g. ``fn op(a: A) -> O``) running the
    elementwise chain ``chain`` (a ``Fused`` record, or None for no step) on ``inputs``, the
    WGSL expressions of the chain's inputs in order. Each step is a function holding its
    op's own ``Elementwise`` expression with the type names A/B/O made concrete; the hook
    calls them in turn and returns the last value (with no step: input 0, converted to the
    return type). The one splicer of every fused hook: fused elementwise chains (fused.py),
    matmul epilogues and reduction prologues/epilogues."""
    name = signature[3:signature.index("(")]
    if chain is None:
        return f"{signature} {{ return {signature.rsplit('->', 1)[1].strip()}({inputs[0]}); }}"
    parts = []
    body = [f"  let x{k} = {value};" for k, value in enumerate(inputs)]
    for j, (op_name, args, in_dtypes, out_dtype, _) in enumerate(chain.steps):
        parts.append(_step(f"{name}_step{j}", op_name, chain.kernels[j], [KIND[d] for d in in_dtypes], KIND[out_dtype]))
        call = ", ".join(f"x{i}" if where == "in" else f"t{i}" for where, i in args)
        body.append(f"  let t{j} = {name}_step{j}({call});")
    body.append(f"  return t{len(chain.steps) - 1};")
    return "\n".join(parts + [f"{signature} {{", *body, "}"])


def _step(name, op_name, record, in_kinds, out_kind) -> str:
    in_kinds = [compute_kind(k) if k in PACKED else k for k in in_kinds]  # values, never words
    out_kind = compute_kind(out_kind) if out_kind in PACKED else out_kind
    in_kind = in_kinds[0] if len(in_kinds) < 3 else in_kinds[1]
    expr = record.expression(in_kind, out_kind)
    if expr is None:
        raise TypeError(f"fused {op_name}: not supported on webgpu for element type {in_kind}")
    wgsl = [ELEMENTS[k].wgsl for k in in_kinds]
    names = {"A": wgsl[0], "B": wgsl[1] if len(wgsl) == 3 else wgsl[0], "O": ELEMENTS[out_kind].wgsl}
    expr = _TYPE_NAME.sub(lambda m: names[m.group(1)], expr)
    params = ", ".join(f"{'abc'[i]}: {t}" for i, t in enumerate(wgsl))
    return f"fn {name}({params}) -> {names['O']} {{\n  return {expr};\n}}"
