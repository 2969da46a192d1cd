"""``einsum``: Einstein summation composed from existing ops, so it runs (and
differentiates) on every device with no kernel of its own.

The plan: each operand first takes the diagonal of any label it repeats
(``"ii->i"``) and sums out the labels no one else needs; then operands are
contracted left to right, each pair as one batched ``matmul`` (labels shared and
still needed are batch dims, labels shared and no longer needed are summed by the
product); finally the result is permuted into the output's label order. ``...``
stands for the same broadcast dims in every operand.
"""
from __future__ import annotations

import math
import string

from ._helpers import describe
from .registry import OpError
from ..creation import eye
from ..tensor import Tensor
from .elementwise import promote
from .autocasting import autocast_op

_ELLIPSIS_LABELS = "".join(chr(c) for c in range(0x3b1, 0x3b1 + 24))  # Greek: never in user input


def _parse(equation, operands):
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise OpError(f"einsum: equation {equation!r} names {len(inputs)} operands but {len(operands)} were given")
    ellipsis_rank = 0
    for term, t in zip(inputs, operands):
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, t.ndim - len(term.replace("...", "")))
    fill = _ELLIPSIS_LABELS[:ellipsis_rank]
    labels = []
    for term, t in zip(inputs, operands):
        for ch in term.replace("...", ""):
            if ch not in string.ascii_letters:
                raise OpError(f"einsum: invalid subscript {ch!r} in {equation!r}; use letters a-z, A-Z and '...'")
        if "..." in term:
            own = t.ndim - len(term.replace("...", ""))
            term = term.replace("...", fill[ellipsis_rank - own:] if own > 0 else "")
        if len(term) != t.ndim:
            raise OpError(f"einsum: term {term!r} has {len(term)} subscripts but operand {len(labels)} has "
                          f"shape {tuple(t.shape)}")
        labels.append(term)
    if arrow:
        if "..." in rhs:
            rhs = rhs.replace("...", fill)
        for ch in rhs:
            if ch not in "".join(labels):
                raise OpError(f"einsum: output subscript {ch!r} in {equation!r} appears in no input")
    else:
        counts = {}
        for term in labels:
            for ch in term:
                counts[ch] = counts.get(ch, 0) + 1
        rhs = fill + "".join(sorted(ch for ch, n in counts.items() if n == 1 and ch not in fill))
    return labels, rhs


def _diagonal(t, term):
    """Take the diagonal of every label that appears twice or more in one term."""
    while len(set(term)) < len(term):
        ch = next(c for c in term if term.count(c) > 1)
        a, b = term.index(ch), term.index(ch, term.index(ch) + 1)
        n = t.shape[a]
        if t.shape[b] != n:
            raise OpError(f"einsum: subscript {ch!r} has sizes {n} and {t.shape[b]} in one operand")
        mask_shape = [1] * t.ndim
        mask_shape[a], mask_shape[b] = n, n
        t = (t * eye(n, dtype=t.dtype, device=t.device).reshape(mask_shape)).sum(b)
        term = term[:b] + term[b + 1:]
    return t, term


def _sum_out(t, term, keep):
    dims = tuple(i for i, ch in enumerate(term) if ch not in keep)
    if dims:
        t = t.sum(dims)
        term = "".join(ch for ch in term if ch in keep)
    return t, term


def _contract(a, ta, b, tb, needed, sizes):
    """One batched matmul: a (batch, free_a, summed) @ b (batch, summed, free_b)."""
    batch = [ch for ch in ta if ch in tb and ch in needed]
    summed = [ch for ch in ta if ch in tb and ch not in needed]
    free_a = [ch for ch in ta if ch not in tb]
    free_b = [ch for ch in tb if ch not in ta]

    def arrange(t, term, order):
        t = t.permute(*[term.index(ch) for ch in order]) if order else t
        return t.expand(*[sizes[ch] for ch in order]) if order else t  # size-1 (broadcast) labels

    a = arrange(a, ta, batch + free_a + summed)
    b = arrange(b, tb, batch + summed + free_b)
    nb = [sizes[ch] for ch in batch]
    m, k, n = (math.prod(sizes[ch] for ch in group) for group in (free_a, summed, free_b))
    out = a.reshape(*nb, m, k) @ b.reshape(*nb, k, n)
    return out.reshape(*nb, *[sizes[ch] for ch in free_a + free_b]), "".join(batch + free_a + free_b)


@autocast_op("einsum")
def einsum(equation, *operands):
    """Einstein summation, e.g. ``einsum("bij,bjk->bik", x, y)`` (batched matmul),
    ``einsum("ii->i", x)`` (diagonal), ``einsum("i,j->ij", x, y)`` (outer), with ``...``.

    Example:
        >>> q, k = webgrad.randn(2, 4, 8), webgrad.randn(2, 5, 8)
        >>> webgrad.einsum("bqd,bkd->bqk", q, k).shape
        webgrad.Size([2, 4, 5])
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        raise TypeError("einsum: expected an equation and one or more Tensors")
    if len({t.dtype for t in operands}) > 1:
        operands = tuple(promote("einsum", *operands))
    labels, rhs = _parse(equation, operands)
    sizes = dict()  # label -> size (the largest, where size-1 dims broadcast)
    for t, term in zip(operands, labels):
        for ch, n in zip(term, t.shape):
            if sizes.get(ch, 1) not in (1, n) and n != 1:
                raise OpError(f"einsum: subscript {ch!r} has sizes {sizes[ch]} and {n} "
                              f"({', '.join(describe(t) for t in operands)})")
            sizes[ch] = max(sizes.get(ch, 1), n)
    terms = []
    for i, (t, term) in enumerate(zip(operands, labels)):
        t, term = _diagonal(t, term)
        others = rhs + "".join(labels[j] for j in range(len(labels)) if j != i)
        terms.append(_sum_out(t, term, others))
    acc, acc_term = terms[0]
    for i in range(1, len(terms)):
        later = rhs + "".join(term for _, term in terms[i + 1:])
        acc, acc_term = _contract(acc, acc_term, *terms[i], later, sizes)
    acc, acc_term = _sum_out(acc, acc_term, rhs)
    if acc_term != rhs:
        acc = acc.permute(*[acc_term.index(ch) for ch in rhs])
    shape = tuple(sizes[ch] for ch in rhs)
    return acc if tuple(acc.shape) == shape else acc.expand(*shape)
