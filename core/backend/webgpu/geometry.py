"""Geometry the WebGPU launchers share: merging the dims of strided views, how
many dims a kernel indexes, folding workgroups into a grid, which adapters are
software (CPU) ones.

Pure functions of numbers and dicts, no device: every launcher takes them from
here so the rules cannot drift apart between kernels.
"""
from __future__ import annotations

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
