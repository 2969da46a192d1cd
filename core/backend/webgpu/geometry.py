"""Geometry the WebGPU launchers share: the element kinds a buffer holds (bytes
per element, WGSL type, host dtype), merging the dims of strided views, how many
dims a kernel indexes, folding workgroups into a grid, which adapters are
software (CPU) ones.

Pure functions of numbers and dicts, no device: every launcher takes them from
here so the rules cannot drift apart between kernels.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from ...dtypes import DType, from_name


class Element(NamedTuple):
    """One element kind of device buffers (a GPUArray's ``kind``)."""

    wgsl: str       # the WGSL type shaders see it as (type aliases A, T, O, ... are set to it)
    itemsize: int   # bytes per element in a buffer: offsets and sizes in bytes scale by it
    numpy: type     # the host dtype of its bytes, for uploads and readbacks
    dtype: str      # the webgrad dtype it holds (int64 is stored as i32 too, see KIND)


ELEMENTS = {
    "f32": Element("f32", 4, np.float32, "float32"),
    "i32": Element("i32", 4, np.int32, "int32"),
    "u32": Element("u32", 4, np.uint32, "bool"),  # bool as 0/1
    "f16": Element("f16", 2, np.float16, "float16"),  # where the device has 'shader-f16' (use_f16)
    # Packed: two 16-bit or four 8-bit elements to a u32 word (element 0 in the low bits),
    # which WGSL can hold without any extension. Only the elementwise shaders read and write
    # them (source.py makes their loads and stores); other kernels get wider copies (backend.run).
    "f16p": Element("u32", 2, np.float16, "float16"),  # float16 where the device lacks 'shader-f16'
    "bf16": Element("u32", 2, np.uint16, "bfloat16"),  # bfloat16: the high half of a float32's bits
    "i16": Element("u32", 2, np.int16, "int16"),
    "i8": Element("u32", 1, np.int8, "int8"),
    "u8": Element("u32", 1, np.uint8, "uint8"),
}
PACKED = ("f16p", "bf16", "i16", "i8", "u8")
# The kind a kernel computes in for each narrower stored kind: 2-byte floats are loaded into
# f32 and rounded back when stored, so sums and products accumulate in f32 (as torch's half
# kernels do); the small integers are i32, wrapped to their range as they are stored.
COMPUTE = {"f16": "f32", "f16p": "f32", "bf16": "f32", "i16": "i32", "i8": "i32", "u8": "i32"}
# The 16-bit floats, which the float kernels (matmul, conv2d, pooling, softmax, layer norm, the
# optimizers) read as stored; those kernels write f16 as it is and a packed kind as f32, rounded
# after (``stored_kind``).
HALVES = ("f16", "f16p", "bf16")
FLOATS = ("f32", *HALVES)


def stored_kind(kind: str) -> str:
    """The kind a float kernel writes a result of ``kind`` as: f32 for a packed kind (rounded
    into it after), else ``kind``."""
    return "f32" if kind in PACKED else kind

# The kind each webgrad dtype is stored as on the device, at its own width; int64 values must
# fit in 32 bits. float16 is f16 where the device has 'shader-f16' (use_f16), else packed.
KIND = {"float32": "f32", "int32": "i32", "int64": "i32", "bool": "u32", "uint8": "u8", "int8": "i8", "int16": "i16",
        "float16": "f16p", "bfloat16": "bf16"}
_HALF_WARNED: list = []


# The features a device is asked for where its adapter has them: 'timestamp-query' lets the
# profiler time dispatches on the GPU; 'shader-f16' stores float16 tensors as f16 (use_f16).
OPTIONAL_FEATURES = ("timestamp-query", "shader-f16")
# The WGSL language feature whose dot4I8Packed sums four int8 products at once (qlinear.wgsl).
PACKED_DOT_FEATURE = "packed_4x8_integer_dot_product"


def use_f16(available: bool) -> None:
    """Store float16 as f16 elements (the device has 'shader-f16'), or packed two to a u32 word."""
    KIND["float16"] = "f16" if available else "f16p"


def compute_kind(kind: str) -> str:
    """The kind kernels compute ``kind``'s values in (f32 for the 2-byte floats, i32 for the small ints)."""
    return COMPUTE.get(kind, kind)


def itemsize(kind: str) -> int:
    """Bytes per element of ``kind``."""
    return ELEMENTS[kind].itemsize


def kind_of(dtype) -> str:
    """The element kind a webgrad dtype is stored as on the device."""
    try:
        kind = KIND[dtype.name]
    except KeyError:
        raise TypeError(f"webgpu: {dtype.name} tensors are not supported on the device; "
                        f"convert with .float() (or keep the tensor on 'cpu')") from None
    if kind == "f16p" and not _HALF_WARNED:
        _HALF_WARNED.append(True)
        warnings.warn("webgpu: this adapter lacks 'shader-f16': float16 tensors are stored as 2-byte float16, "
                      "two to a 32-bit word, and computed in float32 (rounded as they are stored), so they keep "
                      "their memory saving but not f16 arithmetic's speed", stacklevel=3)
    return kind


def dtype_of(kind: str) -> DType:
    """The webgrad dtype an array of ``kind`` holds (int32 for i32, bool for u32)."""
    return from_name(ELEMENTS[kind].dtype)

# Dims a strided kernel indexes: every Params uniform holds shapes and strides in
# arrays of 8 (strided.wgsl, reduce.wgsl, softmax.wgsl, index.wgsl, ...).
MAX_RANK = 8

# Names of software adapters as they appear in an adapter's info: Mesa's llvmpipe
# (lavapipe is its Vulkan driver, softpipe its older sibling), Chromium's SwiftShader,
# and Windows' WARP ("Microsoft Basic Render Driver").
CPU_ADAPTERS = ("llvmpipe", "lavapipe", "softpipe", "swiftshader", "warp", "microsoft basic render driver")


def is_cpu_adapter(info: dict) -> bool:
    """True for a software adapter, from its info dict (``device.adapter_info``):
    adapter_type "CPU", or a known software adapter's name in any field."""
    if str(info.get("adapter_type", "")).upper() == "CPU":
        return True
    text = " ".join(str(v) for v in info.values()).lower()
    return any(name in text for name in CPU_ADAPTERS)


def is_swiftshader(info: dict) -> bool:
    """True for Chromium's software adapter, whose kernel choices differ from llvmpipe's."""
    return "swiftshader" in " ".join(str(v) for v in info.values()).lower()


def broadcast_strides(shape, strides, target) -> list:
    """Strides that read a view of (``shape``, ``strides``) broadcast to ``target``
    (numpy's rules, already checked by the op): 0 for the new leading dims and for
    size-1 dims stretched, the view's own stride elsewhere."""
    lead = len(target) - len(shape)
    return [0] * lead + [0 if n == 1 and size != 1 else s for n, s, size in zip(shape, strides, target[lead:])]


def coalesce_dims(dims) -> list:
    """Drop size-1 dims and merge neighbours in ``dims``, tuples (size, stride, ...)
    with one stride per operand, where every operand steps evenly across the pair
    (outer stride == inner stride * inner size). The row-major walk over the result
    visits the same elements in the same order with fewer dims to index (usually
    one). Broadcast (zero) strides merge with each other."""
    merged: list = []
    for n, *strides in dims:
        if n == 1:
            continue
        if merged and all(outer == inner * n for outer, inner in zip(merged[-1][1:], strides)):
            merged[-1] = (merged[-1][0] * n, *strides)
        else:
            merged.append((n, *strides))
    return merged


def coalesce(shape, operand_strides) -> tuple[list, list]:
    """``coalesce_dims`` by columns: ``shape`` and one stride list per operand in,
    (sizes, one stride list per operand) out."""
    merged = coalesce_dims(zip(shape, *operand_strides))
    return [d[0] for d in merged], [[d[1 + k] for d in merged] for k in range(len(operand_strides))]


def fold_grid(groups: int, limit: int, label: str, dims: int = 2) -> tuple:
    """(x, y, z) workgroups, at least ``groups`` of them, over the first ``dims`` grid
    dimensions with at most ``limit`` in each, filling x first (the shader flattens
    them back into one index). More than ``limit ** dims`` raise a ValueError
    naming ``label``."""
    grid, rest = [], max(groups, 1)
    for _ in range(dims - 1):
        size = min(rest, limit)
        grid.append(size)
        rest = -(-rest // size)
    if rest > limit:
        raise ValueError(f"{label}: {groups} workgroups exceed this adapter's limit of "
                         f"{' x '.join([str(limit)] * dims)}")
    return (*grid, rest, *[1] * (3 - dims))


def looped_grid(groups: int, limit: int) -> tuple:
    """(x, y, 1) workgroups for a shader that loops over its workgroups (a grid-stride
    loop): ``groups`` folded into x and y as by ``fold_grid``, but capped at
    ``limit`` x ``limit``, the shader taking the rest in further rounds."""
    x = min(max(groups, 1), limit)
    return (x, max(min(-(-groups // x), limit), 1), 1)
