"""The WGSL of a bundle's steps: templates in ``wgsl_kernels/lite/`` filled per step.

Every kernel follows one layout, which /lite.js and the native runner rely on:
binding 0 is ``P``, the step's parameters as u32 (sizes, strides, offsets, at the batch
size of the call); then the step's inputs in order; then its output. One thread per
``P[0]`` items, launched as ``ceil(P[0] / 64)`` workgroups of 64, folded into a second
grid dimension past 65535 (the thread's index is ``gid.x + gid.y * groups.x * 64``).
Elementwise chains splice each op's own WGSL expression (``source.splice``, as compile's
fused kernels do), with math.wgsl's helpers.
"""
from __future__ import annotations

import functools

from ..webgpu.source import read, fill, splice

MAX_INPUTS = 6  # of a fused elementwise step
WGSL = {"float32": "f32", "int32": "i32", "bool": "u32", "int8": "u32"}  # int8: four to a word
_MATH = "math.wgsl"


def _with_math(text: str) -> str:
    return read(_MATH) + "\n" + text


def elementwise(rank: int, in_dtypes: list, out_dtype: str, record) -> str:
    base = 2 + 2 * rank
    rows = [{"k": k, "binding": 1 + k, "type": WGSL[d], "base": base + k * (rank + 1)}
            for k, d in enumerate(in_dtypes)]
    signature = "fn op(" + ", ".join(f"v{k}: {WGSL[d]}" for k, d in enumerate(in_dtypes)) + f") -> {WGSL[out_dtype]}"
    hook = splice(signature, record, [f"v{k}" for k in range(len(in_dtypes))])
    body = fill("lite/elementwise.wgsl", rows, rank=rank, out_binding=1 + len(in_dtypes),
                out_type=WGSL[out_dtype], reads=", ".join(f"in{k}[at{k}]" for k in range(len(in_dtypes))))
    return _with_math(hook + "\n" + body)


def _weight_reader(quantized: bool) -> dict:
    """How matmul and conv2d read their second operand ``b``: float32, or int8 four to a u32
    word, times its row's scale (the row: the element's offset over P's last entry)."""
    if not quantized:
        return {"b_type": "f32", "scale_binding": "", "out_binding": 3,
                "load_b": "fn load_b(at: u32) -> f32 { return b[at]; }"}
    return {"b_type": "u32", "out_binding": 4,
            "scale_binding": "@group(0) @binding(3) var<storage, read> scale: array<f32>;",
            "load_b": "fn load_b(at: u32) -> f32 {\n"
                      "  let byte = (b[at >> 2u] >> ((at & 3u) * 8u)) & 0xffu;\n"
                      "  return f32(i32(byte << 24u) >> 24u) * scale[at / P[arrayLength(&P) - 1u]];\n}"}


@functools.lru_cache(maxsize=None)
def matmul(batch_rank: int, quantized: bool) -> str:
    return fill("lite/matmul.wgsl", rank=batch_rank, **_weight_reader(quantized))


@functools.lru_cache(maxsize=None)
def conv2d(quantized: bool) -> str:
    return fill("lite/conv2d.wgsl", **_weight_reader(quantized))


SOFTMAX_RESULT = {"softmax": "wg_exp(v) / total", "log_softmax": "v - wg_log(total)"}


@functools.lru_cache(maxsize=None)
def read_kernel(name: str) -> str:
    """The kernels without type parameters: max_pool2d, softmax, log_softmax, layer_norm."""
    if name in SOFTMAX_RESULT:
        return _with_math(fill("lite/softmax.wgsl", result=SOFTMAX_RESULT[name]))
    return _with_math(read(f"lite/{name}.wgsl"))


# Per reduction: (accumulator type, initial value, update of acc with v (index: v's place j), result).
def _reduction(op: str, in_type: str, out_type: str) -> tuple:
    is_float = in_type == "f32"
    if op in ("sum", "prod"):
        acc = out_type
        return (acc, f"{acc}({int(op == 'prod')})", f"acc {'+' if op == 'sum' else '*'}= {acc}(v);", "acc")
    if op in ("amax", "amin", "argmax", "argmin"):
        better = ">" if op in ("amax", "argmax") else "<"
        nan = "wg_isnan(v) || " if is_float else ""
        kept_nan = "!wg_isnan(acc) && " if is_float else ""
        take = "acc = v; index = j;"
        update = f"if (j == 0u || ({kept_nan}({nan}v {better} acc))) {{ {take} }}"
        return (in_type, f"{in_type}(0)", update, "acc" if op in ("amax", "amin") else f"{out_type}(index)")
    raise ValueError(op)


@functools.lru_cache(maxsize=None)
def reduce(op: str, kept: int, reduced: int, in_dtype: str, out_dtype: str) -> str:
    acc_type, init, update, result = _reduction(op, WGSL[in_dtype], WGSL[out_dtype])
    return _with_math(fill("lite/reduce.wgsl", kept=kept, reduced=reduced, in_type=WGSL[in_dtype],
                           out_type=WGSL[out_dtype], acc_type=acc_type, init=init, update=update, result=result))


@functools.lru_cache(maxsize=None)
def take(dtype: str) -> str:
    return fill("lite/take.wgsl", type=WGSL[dtype])
