"""Sizes in a bundle: a plain number, or one that follows the dynamic batch.

A bundle exported with ``dynamic_batch=True`` runs at any batch size ``B``. Every size
that follows it (a shape, a stride, a count of threads) is linear in ``B``:
``scale * B + offset``; in model.json it is written ``[scale, offset]``, a fixed one as a
plain int. Products of two batch-dependent sizes never occur (one axis follows ``B``), and
the arithmetic here refuses them rather than guess.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dim:
    """``scale * B + offset``; a Dim with scale 0 is never made (``dim`` gives an int)."""
    scale: int
    offset: int

    def __add__(self, other):
        s, o = split(other)
        return dim(self.scale + s, self.offset + o)

    __radd__ = __add__

    def __sub__(self, other):
        s, o = split(other)
        return dim(self.scale - s, self.offset - o)

    def __rsub__(self, other):
        s, o = split(other)
        return dim(s - self.scale, o - self.offset)

    def __mul__(self, other):
        if isinstance(other, Dim):
            raise ValueError(f"webgrad.export: a size would be a product of two batch-dependent sizes "
                             f"({self} * {other}); export with dynamic_batch=False")
        return dim(self.scale * int(other), self.offset * int(other))

    __rmul__ = __mul__

    def at(self, batch: int) -> int:
        return self.scale * batch + self.offset

    def __str__(self) -> str:
        scale = "B" if self.scale == 1 else f"{self.scale}*B"
        return f"{scale} {'+' if self.offset >= 0 else '-'} {abs(self.offset)}" if self.offset else scale


def dim(scale: int, offset: int):
    """A Dim, or a plain int when it does not follow the batch."""
    return Dim(int(scale), int(offset)) if scale else int(offset)


def split(n) -> tuple[int, int]:
    """(scale, offset) of an int or a Dim."""
    return (n.scale, n.offset) if isinstance(n, Dim) else (0, int(n))


def at(n, batch: int) -> int:
    """The number ``n`` stands for at batch size ``batch``."""
    return n.at(batch) if isinstance(n, Dim) else int(n)


def product(dims) -> Any:
    total: Any = 1
    for n in dims:
        total = total * n
    return total


def contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step = step * n
    return tuple(reversed(strides))


def to_json(n):
    """model.json's form: an int, or [scale, offset]."""
    return [n.scale, n.offset] if isinstance(n, Dim) else int(n)


def from_json(n, where: str):
    if isinstance(n, bool) or not isinstance(n, (int, list)):
        raise ValueError(f"{where}: a size must be an int or [scale, offset], got {n!r}")
    if isinstance(n, list):
        if len(n) != 2 or not all(isinstance(k, int) and not isinstance(k, bool) for k in n):
            raise ValueError(f"{where}: a size must be an int or [scale, offset], got {n!r}")
        return dim(n[0], n[1])
    return n
