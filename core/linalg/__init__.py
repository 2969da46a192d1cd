"""``webgrad.linalg``: torch.linalg's functions, names, signatures and named-tuple results.

Decompositions (inv, solve, det, slogdet, cholesky, qr, svd, eigh) run numpy's LAPACK on the
host with one documented copy on WebGPU: read back once, compute, upload once (see
``decompositions.on_host``, the only place it happens). Everything else (norms, pinv,
lstsq, matrix_power, multi_dot, cross...) is composed from those and ordinary Tensor ops,
so it runs on the tensors' device. Gradients are torch's for real inputs; complex matrices
are not supported here.

Example:
    >>> A = webgrad.randn(3, 3, dtype=webgrad.float64)
    >>> Q, R = webgrad.linalg.qr(A)
    >>> webgrad.linalg.norm(Q @ R - A) < 1e-12
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..creation import ones, zeros
from ..ops import cat, matmul, stack, unbind, where
from ..ops.registry import OpError
from ..tensor import Tensor
from . import decompositions as _d
from .decompositions import (
    EigResult, EighResult, QRResult, SlogdetResult, SVDResult, require_matrix,
)
from ..ops.autocasting import autocast_op

__all__ = [
    "vector_norm", "matrix_norm", "norm", "inv", "inv_ex", "solve", "solve_ex", "det", "slogdet", "cholesky",
    "cholesky_ex", "qr", "svd", "svdvals", "eigh", "eigvalsh", "pinv", "lstsq", "matrix_power", "matrix_rank",
    "multi_dot", "cross", "vecdot", "solve_triangular", "cond", "tensorinv", "tensorsolve", "vander", "diagonal",
    "matmul", "eig", "eigvals", "cholesky_solve", "cholesky_inverse",
]

InvExResult = namedtuple("InvExResult", ["inverse", "info"])
CholeskyExResult = namedtuple("CholeskyExResult", ["L", "info"])
SolveExResult = namedtuple("SolveExResult", ["result", "info"])
LstsqResult = namedtuple("LstsqResult", ["solution", "residuals", "rank", "singular_values"])

_INF = float("inf")


# -- norms ------------------------------------------------------------------------------------
def _require_float(name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise OpError(f"{name}: Expected a floating point tensor as input. Got {x.dtype.name}")


def _dims(dim, ndim):
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(d % ndim if ndim else 0 for d in dims)


@autocast_op("linalg_vector_norm")
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002  (torch's name)
    """The vector ``ord``-norm of ``x`` over ``dim`` (all elements when None), like
    ``torch.linalg.vector_norm``: ``ord`` is any real, ``inf`` (max |x|), ``-inf`` (min |x|)
    or 0 (the count of nonzeros).

    Example:
        >>> webgrad.linalg.vector_norm(webgrad.tensor([3.0, 4.0]))   # tensor(5.)
    """
    _require_float("linalg.vector_norm", x)
    if dtype is not None:
        x = x.to(dtypes.to_dtype(dtype))
    dims = None if x.ndim == 0 else _dims(dim, x.ndim)
    if ord == _INF:
        return x.abs().amax(dims, keepdim)
    if ord == -_INF:
        return x.abs().amin(dims, keepdim)
    if ord == 0:
        return (x != 0).to(x.dtype).sum(dims, keepdim)
    if ord == 1:
        return x.abs().sum(dims, keepdim)
    if ord == 2:
        total = x * x
    else:  # |0| ** ord is 0 (inf for ord < 0) with no gradient: torch's subgradient at zero
        size = x.abs()
        zero = size == 0
        total = where(zero, 0.0 if ord > 0 else _INF, where(zero, 1.0, size) ** ord)
    total = total.sum(dims, keepdim)
    # The root's slope is infinite at 0: torch's gradient of a zero vector's norm is 0.
    nonzero = total != 0
    return where(nonzero, where(nonzero, total, 1.0) ** (1.0 / ord), 0.0)


def _to_last_two(x, dim):
    rows, cols = (d % x.ndim for d in dim)
    if rows == cols:
        raise OpError(f"linalg.matrix_norm: dims must be different, got dim={tuple(dim)}")
    return x.movedim((rows, cols), (-2, -1)), rows, cols


def _keep(result, rows, cols, keepdim):
    if keepdim:
        for d in sorted((rows, cols)):
            result = result.unsqueeze(d)
    return result


@autocast_op("linalg_matrix_norm")
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002,N803
    """The matrix norm over the two dims ``dim``, like ``torch.linalg.matrix_norm``:
    ``'fro'``, ``'nuc'`` (sum of singular values), ``inf``/``-inf`` (max/min row sum of |A|),
    ``1``/``-1`` (max/min column sum), ``2``/``-2`` (largest/smallest singular value)."""
    _require_float("linalg.matrix_norm", A)
    if A.ndim < 2:
        raise OpError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, "
                      f"got shape {tuple(A.shape)}")
    if dtype is not None:
        A = A.to(dtypes.to_dtype(dtype))
    if len(tuple(dim)) != 2:
        raise OpError(f"linalg.matrix_norm: dim must be a 2-tuple, got {dim}")
    if ord == "fro":
        return vector_norm(A, 2, dim, keepdim)
    x, rows, cols = _to_last_two(A, dim)
    if ord in ("nuc", 2, -2):
        s = svdvals(x)
        result = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
    elif ord in (1, -1):
        sums = x.abs().sum(-2)
        result = sums.amax(-1) if ord == 1 else sums.amin(-1)
    elif ord in (_INF, -_INF):
        sums = x.abs().sum(-1)
        result = sums.amax(-1) if ord == _INF else sums.amin(-1)
    else:
        raise OpError(f"linalg.matrix_norm: Order {ord} not supported; use 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2")
    return _keep(result, rows, cols, keepdim)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002,N803
    """``torch.linalg.norm``: a vector norm when ``dim`` is an int (or ``A`` is 1-D), a matrix
    norm when ``dim`` is a 2-tuple (or ``A`` is 2-D and ``ord`` given); with neither ``ord``
    nor ``dim``, the 2-norm of all elements."""
    _require_float("linalg.norm", A)
    if dim is not None and not isinstance(dim, int) and len(tuple(dim)) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, tuple(dim), keepdim, dtype=dtype)
    if dim is None and ord is not None:
        if A.ndim == 2:
            return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
        if A.ndim != 1:
            raise OpError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                          f"Got {A.ndim}D (shape {tuple(A.shape)})")
    if isinstance(ord, str):
        raise OpError(f"linalg.norm: ord={ord!r} is a matrix norm; pass a 2-tuple dim or a 2-D input")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


# -- inverses, solves and determinants ---------------------------------------------------------
def inv(A):  # noqa: N803
    """The inverse of each square matrix of ``A`` (..., n, n); a singular one raises."""
    require_matrix("linalg.inv", A, square=True)
    return _d.inv(A)


def inv_ex(A, *, check_errors=False):  # noqa: N803
    """``(inverse, info)``; info is 0 (a singular matrix raises, as with check_errors=True)."""
    out = inv(A)
    return InvExResult(out, zeros(A.shape[:-2], dtype=dtypes.int32, device=A.device))


def _is_vector_rhs(A, B):  # noqa: N803
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve(A, B, *, left=True):  # noqa: N803
    """X with ``A @ X = B`` (``left=False``: ``X @ A = B``), without forming the inverse.
    ``B`` may be a batch of vectors (..., n)."""
    require_matrix("linalg.solve", A, square=True)
    if not isinstance(B, Tensor):
        raise TypeError(f"linalg.solve: B must be a Tensor, got {type(B).__name__}")
    if B.dtype is not A.dtype:
        raise OpError(f"linalg.solve: Expected A and B to have the same dtype, got {A.dtype.name} and {B.dtype.name}")
    vector = _is_vector_rhs(A, B)
    b = B.unsqueeze(-1) if vector else B
    if not left:
        b = b.mT if not vector else b
    n = A.shape[-1]
    if b.shape[-2] != n:
        raise OpError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                      f"{'AX = B' if left else 'XA = B'} ({tuple(A.shape)} and {tuple(B.shape)})")
    x = _d.solve_matrix(A if left else A.mT, b)
    if vector:
        return x.squeeze(-1)
    return x if left else x.mT


def solve_ex(A, B, *, left=True, check_errors=False):  # noqa: N803
    out = solve(A, B, left=left)
    return SolveExResult(out, zeros(A.shape[:-2], dtype=dtypes.int32, device=A.device))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):  # noqa: N803
    """X with ``A @ X = B`` for triangular ``A`` (only its ``upper`` or lower triangle is read;
    with ``unitriangular`` its diagonal is taken as ones)."""
    require_matrix("linalg.solve_triangular", A, square=True)
    if B.ndim < 2:
        raise OpError(f"linalg.solve_triangular: B must have at least 2 dimensions, got shape {tuple(B.shape)}")
    triangle = A.triu(1 if unitriangular else 0) if upper else A.tril(-1 if unitriangular else 0)
    if unitriangular:
        triangle = triangle + _d._eye_like(A)
    return solve(triangle, B, left=left)


def det(A):  # noqa: N803
    """The determinant of each square matrix of ``A``."""
    require_matrix("linalg.det", A, square=True)
    return _d.Det.apply(A)


def slogdet(A):  # noqa: N803
    """``(sign, logabsdet)`` with det = sign * exp(logabsdet), stable for large determinants."""
    require_matrix("linalg.slogdet", A, square=True)
    return SlogdetResult(*_d.SlogDet.apply(A))


def logdet(A):  # noqa: N803
    """``torch.logdet``: log of the determinant (nan where it is negative, -inf where 0)."""
    sign, logabsdet = slogdet(A)
    return where(sign < 0, float("nan"), logabsdet)


# -- decompositions ------------------------------------------------------------------------------
def cholesky(A, *, upper=False):  # noqa: N803
    """L (lower triangular) with ``A = L @ L.mT`` for symmetric positive-definite ``A``
    (``upper=True``: U = L.mT). Only the lower triangle of ``A`` is read."""
    require_matrix("linalg.cholesky", A, square=True)
    return _d.Cholesky.apply(A, bool(upper))


def cholesky_ex(A, *, upper=False, check_errors=False):  # noqa: N803
    return CholeskyExResult(cholesky(A, upper=upper), zeros(A.shape[:-2], dtype=dtypes.int32, device=A.device))


def qr(A, mode="reduced"):  # noqa: N803
    """``(Q, R)`` with ``A = Q @ R``: mode 'reduced' (Q is (m, k)), 'complete' (Q is (m, m)) or
    'r' (Q is empty)."""
    require_matrix("linalg.qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise OpError(f"linalg.qr: qr received unrecognized mode '{mode}' but expected one of "
                      f"'reduced' (default), 'r', or 'complete'")
    return QRResult(*_d.QR.apply(A, mode))


def svd(A, full_matrices=True, *, driver=None):  # noqa: N803
    """``(U, S, Vh)`` with ``A = U @ diag(S) @ Vh``, singular values descending."""
    require_matrix("linalg.svd", A)
    return SVDResult(*_d.SVD.apply(A, bool(full_matrices)))


def svdvals(A, *, driver=None):  # noqa: N803
    """The singular values of ``A``, descending."""
    require_matrix("linalg.svdvals", A)
    return _d.SVD.apply(A, False)[1]


def _uplo(name, UPLO):  # noqa: N803
    if UPLO not in ("L", "U"):
        raise OpError(f"{name}: Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def eigh(A, UPLO="L"):  # noqa: N803
    """``(eigenvalues, eigenvectors)`` of symmetric ``A`` (ascending eigenvalues); only the
    ``UPLO`` triangle is read."""
    require_matrix("linalg.eigh", A, square=True)
    _uplo("linalg.eigh", UPLO)
    return EighResult(*_d.eigh_tuple(A, UPLO))


def eigvalsh(A, UPLO="L"):  # noqa: N803
    require_matrix("linalg.eigvalsh", A, square=True)
    _uplo("linalg.eigvalsh", UPLO)
    return _d.eigh_tuple(A, UPLO)[0]


def eig(A):  # noqa: N803
    """``(eigenvalues, eigenvectors)`` of a general square matrix, complex (cpu tensors), as
    LAPACK's geev gives them (unit-norm eigenvectors). No gradients here: the results do not
    require grad (use ``eigh`` where A is symmetric)."""
    require_matrix("linalg.eig", A, square=True)
    return EigResult(*_d.Eig.apply(A))


def eigvals(A):  # noqa: N803
    """The complex eigenvalues of a general square matrix."""
    return eig(A).eigenvalues


def cholesky_solve(B, L, upper=False):  # noqa: N803
    """``torch.cholesky_solve``: X with ``A @ X = B`` given A's Cholesky factor ``L`` (or U)."""
    lower = L.mT if upper else L
    # Through A = L L^T (not two triangular solves): every entry of L gets a gradient, as in torch.
    return solve(lower @ lower.mT, B)


def cholesky_inverse(L, upper=False):  # noqa: N803
    """``torch.cholesky_inverse``: the inverse of A from its Cholesky factor ``L`` (or U)."""
    lower = L.mT if upper else L
    return inv(lower @ lower.mT)


def _tolerance(A, s_max, atol, rtol):  # noqa: N803
    """torch's cutoff max(atol, rtol * s_max); rtol defaults to eps * max(m, n), or to 0 when a
    positive atol is given."""
    if rtol is None:
        given = atol is not None and (isinstance(atol, Tensor) or atol > 0)
        rtol = 0.0 if given else float(np.finfo(A.dtype.np).eps) * max(A.shape[-2], A.shape[-1])
    cutoff = s_max * rtol
    if isinstance(atol, Tensor):
        return cutoff.maximum(atol.unsqueeze(-1) if atol.ndim else atol)
    return cutoff if atol is None else cutoff.clamp(min=float(atol))


def pinv(A, *, atol=None, rtol=None, hermitian=False):  # noqa: N803
    """The Moore-Penrose pseudo-inverse: singular values at or below max(atol, rtol * s_max) count as 0.
    Its gradient is the pseudo-inverse's own (as torch's), not the SVD's: defined at repeated
    singular values too."""
    require_matrix("linalg.pinv", A)
    return _d.PseudoInverse.apply(A, lambda a: _pinv_values(a, atol, rtol, hermitian))


def _s_max(s):
    if s.shape[-1] == 0:
        return zeros(*s.shape[:-1], 1, dtype=s.dtype, device=s.device)
    return s.amax(-1, keepdim=True)


def _pinv_values(A, atol, rtol, hermitian):  # noqa: N803
    if A.numel() == 0:
        return zeros(*A.shape[:-2], A.shape[-1], A.shape[-2], dtype=A.dtype, device=A.device)
    if hermitian:
        w, q = eigh(A)
        magnitude = w.abs()
        cutoff = _tolerance(A, _s_max(magnitude), atol, rtol)
        keep = magnitude > cutoff
        w_inv = where(keep, 1.0 / where(keep, w, 1.0), 0.0)
        return (q * w_inv.unsqueeze(-2)) @ q.mT
    u, s, vh = svd(A, full_matrices=False)
    cutoff = _tolerance(A, s[..., :1], atol, rtol)
    keep = s > cutoff
    s_inv = where(keep, 1.0 / where(keep, s, 1.0), 0.0)
    return (vh.mT * s_inv.unsqueeze(-2)) @ u.mT


def lstsq(A, B, rcond=None, *, driver=None):  # noqa: N803
    """The least-squares solution of ``A @ X = B`` (via the pseudo-inverse), with torch's cpu
    outputs per ``driver``: 'gelsy' (the default) gives ``rank``; 'gels' the ``residuals``
    (when m > n); 'gelsd' and 'gelss' residuals, rank and ``singular_values``. What a driver
    does not compute is an empty tensor."""
    require_matrix("linalg.lstsq", A)
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise OpError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
                      f"got {driver!r}")
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    if b.shape[-2] != A.shape[-2]:
        raise OpError(f"linalg.lstsq: input.size(-2) should match other.size(-2) "
                      f"(A shape {tuple(A.shape)}, B shape {tuple(B.shape)})")
    solution = pinv(A, rtol=rcond) @ b
    empty = zeros(0, dtype=A.dtype, device=A.device)
    m, n = A.shape[-2], A.shape[-1]
    residuals = empty
    if driver != "gelsy" and m > n and bool((matrix_rank(A.detach()) == n).all()):
        residuals = ((A @ solution - b) ** 2).sum(-2)
    rank = zeros(0, dtype=dtypes.int64, device=A.device) if driver == "gels" else matrix_rank(A.detach(), rtol=rcond)
    singular_values = svdvals(A.detach()) if driver in ("gelsd", "gelss") else empty
    if vector:
        solution = solution.squeeze(-1)
        residuals = residuals.squeeze(-1) if residuals.ndim else residuals
    return LstsqResult(solution, residuals, rank, singular_values)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):  # noqa: N803
    """The number of singular values above max(atol, rtol * s_max), as int64."""
    require_matrix("linalg.matrix_rank", A)
    if A.numel() == 0:
        return zeros(*A.shape[:-2], dtype=dtypes.int64, device=A.device)
    s = eigvalsh(A).abs() if hermitian else svdvals(A)
    s = s.detach()
    cutoff = _tolerance(A, _s_max(s), atol, rtol)
    return (s > cutoff).sum(-1)


def matrix_power(A, n):  # noqa: N803
    """``A`` multiplied by itself ``n`` times (by squaring); n = 0 gives the identity, n < 0
    powers of the inverse."""
    require_matrix("linalg.matrix_power", A, square=True)
    if not isinstance(n, int):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if n == 0:
        return _d._eye_like(A).expand(*A.shape)
    base = inv(A) if n < 0 else A
    n = abs(n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def multi_dot(tensors):
    """The product of a chain of matrices (the first may be 1-D as a row, the last as a column)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise OpError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first, last = tensors[0].ndim == 1, tensors[-1].ndim == 1
    for i, t in enumerate(tensors):
        expected = 1 if (i == 0 and first) or (i == len(tensors) - 1 and last) else 2
        if t.ndim not in (expected, 2):
            raise OpError(f"multi_dot(): tensor {i} must be 2D (or 1D at the ends) but got {t.ndim}D")
    chain = [tensors[0].unsqueeze(0) if first else tensors[0], *tensors[1:-1],
             tensors[-1].unsqueeze(-1) if last else tensors[-1]]
    out = chain[0]
    for t in chain[1:]:
        out = matmul(out, t)
    if last:
        out = out.squeeze(-1)
    if first:
        out = out.squeeze(0)
    return out


def cross(input, other, *, dim=-1):  # noqa: A002
    """The cross product of 3-vectors along ``dim`` (inputs broadcast)."""
    if input.ndim == 0 or other.ndim == 0 or input.shape[dim] != 3 or other.shape[dim] != 3:
        raise OpError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {tuple(input.shape)} "
                      f"and {tuple(other.shape)}")
    a = unbind(input, dim)
    b = unbind(other, dim)
    parts = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    return stack(parts, dim if dim >= 0 else max(input.ndim, other.ndim) + dim)


def vecdot(x, y, *, dim=-1):
    """The dot product of vectors along ``dim`` (inputs broadcast)."""
    return (x * y).sum(dim)


def cond(A, p=None):  # noqa: N803
    """The condition number of ``A`` in the norm ``p`` (None: the 2-norm, s_max / s_min)."""
    require_matrix("linalg.cond", A)
    if p in (None, 2, -2):
        s = svdvals(A)
        ratio = s[..., 0] / s[..., -1]
        return ratio if p != -2 else 1.0 / ratio
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def tensorinv(A, ind=2):  # noqa: N803
    """The inverse of ``A`` as a map from its first ``ind`` dims to the rest."""
    rows, cols = A.shape[:ind], A.shape[ind:]
    if ind <= 0 or math.prod(rows) != math.prod(cols):
        raise OpError(f"linalg.tensorinv: Expected self to satisfy the requirement "
                      f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got shape {tuple(A.shape)} "
                      f"and ind={ind}")
    n = math.prod(rows)
    return inv(A.reshape(n, n)).reshape(*cols, *rows)


def tensorsolve(A, B, dims=None):  # noqa: N803
    """X with ``tensordot(A, X, X.ndim) = B``."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    result_shape = A.shape[B.ndim:]
    n = math.prod(B.shape)
    if math.prod(result_shape) != n:
        raise OpError(f"linalg.tensorsolve: Expected self to satisfy the requirement "
                      f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got shape "
                      f"{tuple(A.shape)} and other shape {tuple(B.shape)}")
    return solve(A.reshape(n, n), B.reshape(n)).reshape(*result_shape)


def vander(x, *, N=None):  # noqa: N803
    """Columns x^0, x^1, ..., x^(N-1) of each vector of ``x`` (..., n): shape (..., n, N)."""
    if x.ndim == 0:
        x = x.reshape(1)
    N = x.shape[-1] if N is None else N  # noqa: N806
    if N < 1:
        raise OpError(f"linalg.vander: N must be greater than 1, got {N}")
    first = ones(*x.shape, 1, dtype=x.dtype, device=x.device)
    if N == 1:
        return first
    powers = x.unsqueeze(-1).expand(*x.shape, N - 1).cumprod(-1)
    return cat([first, powers], -1)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):  # noqa: N803
    """The diagonal ``offset`` of the matrices over ``dim1``, ``dim2``, as the last dim."""
    x = A.movedim((dim1 % A.ndim, dim2 % A.ndim), (-2, -1))
    if offset > 0:
        x = x[..., :, offset:]
    elif offset < 0:
        x = x[..., -offset:, :]
    return _d.diagonal(x)


# -- the torch.X spellings (webgrad.det, webgrad.inverse...; core/__init__.py finds them here) ---
torch_det = det
torch_logdet = logdet
torch_slogdet = slogdet
torch_inverse = inv
torch_matrix_power = matrix_power
torch_cholesky_solve = cholesky_solve
torch_cholesky_inverse = cholesky_inverse


def torch_pinverse(input, rcond=1e-15):  # noqa: A002
    """``torch.pinverse``: ``linalg.pinv`` with a relative cutoff ``rcond``."""
    return pinv(input, rtol=rcond)


def torch_svd(input, some=True, compute_uv=True):  # noqa: A002
    """``torch.svd`` (the older spelling): ``(U, S, V)`` with V, not Vh; without ``compute_uv``
    U and V are zeros of shapes (m, m) and (n, n), as in torch."""
    if not compute_uv:
        m, n = input.shape[-2], input.shape[-1]
        zeros_u = zeros(*input.shape[:-2], m, m, dtype=input.dtype, device=input.device)
        zeros_v = zeros(*input.shape[:-2], n, n, dtype=input.dtype, device=input.device)
        return TorchSVDResult(zeros_u, svdvals(input), zeros_v)
    u, s, vh = svd(input, full_matrices=not some)
    return TorchSVDResult(u, s, vh.mT)


def torch_qr(input, some=True):  # noqa: A002
    """``torch.qr`` (the older spelling): ``linalg.qr`` with mode 'reduced' or, some=False, 'complete'."""
    return qr(input, "reduced" if some else "complete")


TorchSVDResult = namedtuple("TorchSVDResult", ["U", "S", "V"])


def torch_cholesky(input, upper=False):  # noqa: A002
    """``torch.cholesky`` (deprecated in torch in favour of ``linalg.cholesky``)."""
    return cholesky(input, upper=upper)
