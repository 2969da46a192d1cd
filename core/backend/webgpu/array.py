"""A tensor's data on the GPU: a pooled buffer plus a strided view of it.

Views (reshape of contiguous data, permute, expand, slicing) only change shape,
strides and offset; kernels read strided inputs directly, so they cost no copy.
Element kinds on the device: f32 (float32), i32 (int32 and int64), u32 (bool as
0/1), f16 and the packed narrow kinds; their sizes and types are in
``geometry.ELEMENTS``. Shapes, strides and offsets count elements, not bytes.
"""
from __future__ import annotations

from .geometry import itemsize


def contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class GPUArray:
    __slots__ = ("storage", "shape", "strides", "offset", "kind")

    def __init__(self, storage, shape, kind, strides=None, offset=0):
        self.storage = storage
        self.shape = tuple(shape)
        self.strides = contiguous_strides(shape) if strides is None else tuple(strides)
        self.offset = offset
        self.kind = kind

    @property
    def buffer(self):
        return self.storage.buffer

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        """Bytes of the view's elements (as numpy's ``nbytes``)."""
        return self.numel() * itemsize(self.kind)

    def is_contiguous(self) -> bool:
        return all(st == c for st, c, n in zip(self.strides, contiguous_strides(self.shape), self.shape) if n != 1)

    def view(self, shape, strides, offset=None) -> "GPUArray":
        return GPUArray(self.storage, shape, self.kind, strides, self.offset if offset is None else offset)
