"""Memory formats, as ``torch.preserve_format``, ``contiguous_format``, ``channels_last``
and ``channels_last_3d``.

webgrad keeps every tensor row-major (its kernels index row-major strides), so these
are accepted wherever PyTorch takes a ``memory_format`` (``Tensor.to``, ``contiguous``,
``clone``, ``empty_like`` and the other ``*_like`` functions) and change nothing:
code written for PyTorch runs unchanged. ``Tensor.is_contiguous(memory_format=...)``
answers truthfully for the row-major layout (channels_last only where the two coincide).

Example:
    >>> x = webgrad.zeros(2, 3, 4, 4)
    >>> x.contiguous(memory_format=webgrad.channels_last).is_contiguous()
    True
"""
from __future__ import annotations


class memory_format:  # noqa: N801  (torch.memory_format)
    """A memory layout name; see the module docstring."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"webgrad.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


preserve_format = memory_format("preserve_format")
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
_ALL = {f.name: f for f in (preserve_format, contiguous_format, channels_last, channels_last_3d)}


def _by_name(name: str) -> memory_format:
    return _ALL[name]


def check(op_name: str, value) -> None:
    """A TypeError naming the op unless ``value`` is a memory format (or None)."""
    if value is not None and not isinstance(value, memory_format):
        raise TypeError(f"{op_name}: memory_format must be a webgrad memory format (webgrad.contiguous_format, "
                        f"webgrad.channels_last, ...), got {type(value).__name__}")


def is_contiguous(shape, row_major: bool, fmt) -> bool:
    """Whether a tensor of ``shape`` whose memory is row-major (``row_major``) or not is
    contiguous in ``fmt``: channels_last(_3d) layouts coincide with row-major only when
    the channel dim or every spatial dim has size 1 (PyTorch's stride rule)."""
    check("is_contiguous", fmt)
    if fmt in (None, contiguous_format, preserve_format):
        return row_major
    rank = 4 if fmt is channels_last else 5
    if len(shape) != rank or not row_major:
        return False
    spatial = 1
    for size in shape[2:]:
        spatial *= size
    return shape[1] == 1 or spatial == 1
