"""Tensors larger than one storage binding.

A buffer may be as large as the adapter's ``maxBufferSize`` (2 GiB on llvmpipe), but a
kernel binds at most ``maxStorageBufferBindingSize`` bytes of one (128 MiB on llvmpipe
and in many browsers). The ops that split run once per window: each operand is
re-described as a view of a byte range of its buffer (``windowed``), so the kernels
bind the range and need no change. Splitting: elementwise kernels (so also copies,
fills and casts), random draws, sum/prod/amax/amin (so mean and norms), ``take`` and
``index_add`` along rows (an embedding's forward and backward) and the optimizer steps.
Any other kernel handed such a tensor raises a MemoryError naming the op, the tensor
and the limit (``check_bindings``). A compiled step that meets one runs eagerly: its
windowed dispatches break the recorded tape (recorder.py).
"""
from __future__ import annotations

from .array import GPUArray
from .geometry import itemsize
from .recorder import Window

ALIGN = 256  # minStorageBufferOffsetAlignment: a window starts on a multiple of it


class WindowStorage:
    """A ``Storage`` stand-in for a windowed view: the bound range, and the storage it
    belongs to kept alive for as long as the view."""

    __slots__ = ("parent", "buffer", "nbytes")

    def __init__(self, parent, window: Window):
        self.parent, self.buffer, self.nbytes = parent, window, window.size


def is_window(buffer) -> bool:
    return type(buffer) is Window


def binding_limit(backend) -> int:
    return backend.limits["max_storage_buffer_binding_size"]


def too_large(backend, arrays) -> bool:
    """Whether any of ``arrays`` lives in a buffer that one binding cannot hold."""
    if not backend.pool.large:
        return False
    limit = binding_limit(backend)
    return any(a.storage.nbytes > limit for a in arrays)


def _byte_range(array) -> tuple[int, int]:
    """(aligned first byte, end byte rounded to a word) of the elements ``array`` views."""
    low = high = array.offset
    for n, stride in zip(array.shape, array.strides):
        if n > 1:
            low += min(0, (n - 1) * stride)
            high += max(0, (n - 1) * stride)
    size = itemsize(array.kind)
    return low * size // ALIGN * ALIGN, -(-(high + 1) * size // 4) * 4


def windowed(array, limit: int) -> GPUArray:
    """``array`` as a view of the smallest aligned window of its buffer that holds its
    elements (itself when its whole buffer fits one binding)."""
    if array.storage.nbytes <= limit:
        return array
    start, end = _byte_range(array)
    if end - start > limit:
        raise MemoryError(f"webgpu: a view of shape {array.shape} spans {end - start} bytes, more than one "
                          f"binding ({limit} bytes)")
    window = Window(array.buffer, start, end - start)
    return GPUArray(WindowStorage(array.storage, window), array.shape, array.kind, array.strides,
                    array.offset - start // itemsize(array.kind))


def fits(array, limit: int) -> bool:
    if array.storage.nbytes <= limit:
        return True
    start, end = _byte_range(array)
    return end - start <= limit


def narrow(array, dim: int, lo: int, hi: int) -> GPUArray:
    shape = list(array.shape)
    shape[dim] = hi - lo
    return array.view(tuple(shape), array.strides, array.offset + lo * array.strides[dim])


def widest_dim(array) -> int:
    """The dim whose extent spans the most memory: halving it shrinks the window most."""
    return max(range(len(array.shape)), key=lambda d: (array.shape[d] - 1) * abs(array.strides[d]))


def split(arrays, limit: int):
    """Lists of windowed views of ``arrays`` (all of one shape, in step), halved along the
    widest dim of an operand that does not fit until every operand's window fits one binding."""
    wide = next((a for a in arrays if not fits(a, limit)), None)
    if wide is None:
        yield [windowed(a, limit) for a in arrays]
        return
    dim = widest_dim(wide)  # of more than one element: one element always fits
    half = wide.shape[dim] // 2
    for lo, hi in ((0, half), (half, wide.shape[dim])):
        yield from split([narrow(a, dim, lo, hi) for a in arrays], limit)


def window_step(array, limit: int, dim: int) -> int:
    """How many consecutive slices of ``array`` along ``dim`` one window holds (all of them
    when its buffer fits one binding); a MemoryError when not even one does."""
    if array.storage.nbytes <= limit:
        return max(array.shape[dim], 1)
    start, end = _byte_range(narrow(array, dim, 0, 1))
    if end - start + ALIGN > limit:
        raise MemoryError(f"webgpu: one slice along dim {dim} of a tensor of shape {array.shape} is larger than "
                          f"one binding ({limit} bytes, maxStorageBufferBindingSize)")
    step_bytes = abs(array.strides[dim]) * itemsize(array.kind)
    return max(1, (limit - ALIGN - (end - start)) // max(step_bytes, 1) + 1)


def row_windows(array, limit: int, dim: int = 0):
    """(first, count, windowed view) over consecutive ranges of ``array`` along ``dim``, as
    many per window as fit one binding: the windows of take, index_add and the reductions."""
    step = window_step(array, limit, dim)
    for first in range(0, array.shape[dim], step):
        count = min(step, array.shape[dim] - first)
        yield first, count, windowed(narrow(array, dim, first, first + count), limit)


def check_bindings(backend, buffers, label) -> None:
    """Raise when a kernel that does not split would bind a buffer larger than one binding."""
    limit = binding_limit(backend)
    for buffer in buffers:
        if type(buffer) is not Window and buffer.size > limit:
            raise MemoryError(f"webgpu: {label} would bind a tensor of {buffer.size} bytes, more than this "
                              f"adapter's maxStorageBufferBindingSize ({limit} bytes); this op does not split "
                              f"tensors that large (elementwise ops, sum/prod/amax/amin, take/embedding, "
                              f"index_add and the optimizer steps do): use smaller tensors or device='cpu'")
