"""Products built on matmul and elementwise ops, as in PyTorch: the scaled-add family
(addmm, baddbmm, addbmm, addmv, addr), vector products (dot, vdot, mv, inner),
kron, tensordot, cross and chain_matmul. All composed, so they run on every device
and differentiate through matmul's own gradient.
"""
from __future__ import annotations

from ._helpers import describe, normalize_dim
from .linalg import matmul
from .movement import cat, permute, reshape
from .registry import OpError
from .autocasting import autocast_op


def _scaled_add(op_name, input, product, beta, alpha):  # noqa: A002  (torch's name)
    """beta * input + alpha * product. With beta == 0, input is ignored (its nan and inf
    too), as in PyTorch; the result still has the broadcast shape."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return (input * beta if beta != 1 else input) + product


def _need(op_name, t, ndim):
    if t.ndim != ndim:
        raise OpError(f"{op_name}: expected a {ndim}-D tensor, got {describe(t)}")


@autocast_op("addmm")
def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``, with ``mat1`` (n, m) and ``mat2`` (m, p).

    Example:
        >>> webgrad.addmm(webgrad.zeros(2, 2), webgrad.ones(2, 3), webgrad.ones(3, 2))
    """
    _need("addmm", mat1, 2)
    _need("addmm", mat2, 2)
    return _scaled_add("addmm", input, matmul(mat1, mat2), beta, alpha)


@autocast_op("baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * bmm(batch1, batch2)`` for (b, n, m) and (b, m, p) batches."""
    _need("baddbmm", batch1, 3)
    _need("baddbmm", batch2, 3)
    return _scaled_add("baddbmm", input, matmul(batch1, batch2), beta, alpha)


@autocast_op("addbmm")
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``."""
    _need("addbmm", batch1, 3)
    _need("addbmm", batch2, 3)
    # One matmul over the joined batch: (n, b*m) @ (b*m, p) sums the products of every batch.
    b, n, m = batch1.shape
    p = batch2.shape[2]
    left = reshape(permute(batch1, 1, 0, 2), (n, b * m))
    return _scaled_add("addbmm", input, matmul(left, reshape(batch2, (b * m, p))), beta, alpha)


@autocast_op("addmv")
def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat @ vec)`` for a (n, m) matrix and a (m,) vector."""
    _need("addmv", mat, 2)
    _need("addmv", vec, 1)
    return _scaled_add("addmv", input, matmul(mat, vec), beta, alpha)


@autocast_op("addr")
def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``."""
    _need("addr", vec1, 1)
    _need("addr", vec2, 1)
    return _scaled_add("addr", input, vec1.unsqueeze(1) * vec2.unsqueeze(0), beta, alpha)


@autocast_op("dot")
def dot(input, other):  # noqa: A002
    """The dot product of two 1-D tensors of the same length and dtype (a 0-d tensor).

    Example:
        >>> webgrad.dot(webgrad.tensor([2, 3]), webgrad.tensor([2, 1]))
        tensor(7)
    """
    if input.ndim != 1 or other.ndim != 1:
        raise OpError(f"dot: 1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape[0] != other.shape[0]:
        raise OpError(f"dot: inconsistent tensor size, expected tensor [{input.shape[0]}] and src "
                      f"[{other.shape[0]}] to have the same number of elements")
    if input.dtype is not other.dtype:
        raise OpError(f"dot: expected both vectors to have same dtype, got {describe(input, other)}")
    if input.dtype.category == "float":
        return matmul(input, other)
    return (input * other).sum(dtype=input.dtype)


@autocast_op("vdot")
def vdot(input, other):  # noqa: A002
    """``dot`` with the first argument conjugated; the same as ``dot`` for real tensors."""
    return dot(input, other)


@autocast_op("mv")
def mv(input, vec):  # noqa: A002
    """Matrix-vector product of a (n, m) matrix and a (m,) vector."""
    _need("mv", input, 2)
    _need("mv", vec, 1)
    return matmul(input, vec)


def inner(input, other):  # noqa: A002
    """Sum of products over the last dims; a 0-d operand just multiplies."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise OpError(f"inner: last dims differ ({describe(input, other)})")
    return tensordot(input, other, ([input.ndim - 1], [other.ndim - 1]))


def kron(input, other):  # noqa: A002
    """Kronecker product: blocks ``input[i, j] * other`` laid out in a grid.

    Example:
        >>> webgrad.kron(webgrad.eye(2), webgrad.ones(2, 2)).shape
        webgrad.Size([4, 4])
    """
    nd = max(input.ndim, other.ndim)
    a = reshape(input, (1,) * (nd - input.ndim) + tuple(input.shape))
    b = reshape(other, (1,) * (nd - other.ndim) + tuple(other.shape))
    # a's dims at even positions, b's at odd ones, then each pair merged.
    a_shape = tuple(s for n in a.shape for s in (n, 1))
    b_shape = tuple(s for n in b.shape for s in (1, n))
    out = reshape(a, a_shape) * reshape(b, b_shape)
    return reshape(out, tuple(p * q for p, q in zip(a.shape, b.shape)))


@autocast_op("tensordot")
def tensordot(a, b, dims=2, out=None):
    """Sum of products over ``dims``: an int (the last ``dims`` of ``a`` with the first of
    ``b``) or two lists of dims to contract pairwise."""
    if out is not None:
        raise TypeError("tensordot: out= is not supported; use the returned tensor")
    if isinstance(dims, int) or (hasattr(dims, "ndim") and dims.ndim == 0):
        n = int(dims)
        if n < 0:
            raise OpError(f"tensordot: expects dims >= 0, but got dims={n}")
        dims_a, dims_b = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        dims_a, dims_b = dims
        dims_a = [dims_a] if isinstance(dims_a, int) else [int(d) for d in dims_a]
        dims_b = [dims_b] if isinstance(dims_b, int) else [int(d) for d in dims_b]
    if len(dims_a) != len(dims_b):
        raise OpError(f"tensordot: both dimension lists should have same length, got {dims_a} and {dims_b}")
    dims_a = [normalize_dim("tensordot", d, a.ndim) for d in dims_a]
    dims_b = [normalize_dim("tensordot", d, b.ndim) for d in dims_b]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db] and 1 in (a.shape[da], b.shape[db]):  # a size-1 dim broadcasts
            if a.shape[da] == 1:
                a = a.expand(*[b.shape[db] if i == da else n for i, n in enumerate(a.shape)])
            else:
                b = b.expand(*[a.shape[da] if i == db else n for i, n in enumerate(b.shape)])
        if a.shape[da] != b.shape[db]:
            raise OpError(f"tensordot: contracted dimensions need to match, but first has size "
                          f"{a.shape[da]} in dim {da} and second has size {b.shape[db]} in dim {db}")
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = 1
    for d in dims_a:
        k *= a.shape[d]
    left = reshape(permute(a, *(free_a + dims_a)), (-1, k) if free_a else (1, k))
    right = reshape(permute(b, *(dims_b + free_b)), (k, -1) if free_b else (k, 1))
    if a.dtype.category != "float":  # matmul is float-only on some backends: sum products instead
        product = (left.unsqueeze(2) * right.unsqueeze(0)).sum(1, dtype=a.dtype)
    else:
        product = matmul(left, right)
    return reshape(product, tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))


@autocast_op("cross")
def cross(input, other, dim=None):  # noqa: A002
    """Cross product of 3-vectors along ``dim`` (default: the first dim of size 3), broadcasting."""
    shape = tuple(input.shape)
    if input.ndim != other.ndim:
        raise OpError(f"cross: inputs must have the same number of dimensions ({describe(input, other)})")
    if dim is None:
        sizes = [d for d in range(input.ndim) if input.shape[d] == 3 and other.shape[d] == 3]
        if not sizes:
            raise OpError(f"cross: no dimension of size 3 in input ({describe(input, other)})")
        dim = sizes[0]
    d = normalize_dim("cross", dim, input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise OpError(f"cross: inputs dimension {dim} must have length 3, got {shape} and {tuple(other.shape)}")
    a = [input.narrow(d, i, 1) for i in range(3)]
    b = [other.narrow(d, i, 1) for i in range(3)]
    return cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d)


@autocast_op("chain_matmul")
def chain_matmul(*matrices, out=None):
    """The product of 2-D matrices, left to right (``torch.chain_matmul``; prefer ``linalg.multi_dot``)."""
    if out is not None:
        raise TypeError("chain_matmul: out= is not supported; use the returned tensor")
    if not matrices:
        raise OpError("chain_matmul: expected one or more tensors")
    for m in matrices:
        _need("chain_matmul", m, 2)
    result = matrices[0]
    if len(matrices) == 1:
        return result.clone()
    for m in matrices[1:]:
        result = matmul(result, m)
    return result


__all__ = ["addbmm", "addmm", "addmv", "addr", "baddbmm", "chain_matmul", "cross", "dot", "inner", "kron",
           "mv", "tensordot", "vdot"]
