"""The decompositions of ``webgrad.linalg``: one differentiable function each, whose forward
runs numpy's LAPACK (``np.linalg``) and whose backward is written in Tensor ops.

The one copy
------------
WGSL has no LAPACK, and a decomposition is a sequence of small dependent steps that a GPU
runs badly at the sizes people use here. So every decomposition runs on the host, in
``on_host`` below and nowhere else: the inputs are read back once (``Tensor._host``, a
no-op on the cpu), numpy computes, and each result is uploaded once to the inputs'
device. The backward passes are Tensor ops (matmuls, elementwise), so on WebGPU they run
there, except for the decompositions they call (``inv``, ``solve``), which take the same
one-copy path. float64 stays cpu-only, as everywhere on WebGPU.

Gradients follow PyTorch's formulas (torch/csrc/autograd/FunctionsManual.cpp, restated
in matrix calculus, not copied): real inputs only.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..autograd.function import Function
from .. import dtypes
from ..backend import get_backend
from ..creation import eye
from ..ops import cat
from ..ops.registry import OpError, allocate
from ..tensor import Tensor


def on_host(fn, *tensors):
    """Run numpy function ``fn`` on the tensors' values and give its array results as
    tensors on the first tensor's device: THE one readback and upload of webgrad.linalg."""
    device = tensors[0].device
    results = fn(*[t._host() for t in tensors])
    single = not isinstance(results, tuple)
    out = []
    for array in (results,) if single else results:
        array = np.asarray(array)
        dtype = tensors[0].dtype if array.dtype.kind == "f" else _int_dtype(array)
        where = device
        if array.dtype.kind == "c":  # complex results are cpu tensors (core/complex_ops.py)
            dtype, where = (dtypes.complex128 if tensors[0].dtype is dtypes.float64 else dtypes.complex64), "cpu"
        data = allocate(get_backend(where), "from_numpy", array.astype(dtype.np, copy=False), dtype)
        out.append(Tensor._make(data, array.shape, dtype, where))
    return out[0] if single else tuple(out)


def _int_dtype(array):
    return dtypes.int64 if array.dtype.kind in "iu" else dtypes.bool_


def require_matrix(name: str, x, square: bool = False) -> None:
    """Errors as torch words them: a floating point batch of (square) matrices."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise OpError(f"{name}: The input tensor A must have at least 2 dimensions, got shape {tuple(x.shape)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise OpError(f"{name}: A must be batches of square matrices, but they are "
                      f"{x.shape[-2]} by {x.shape[-1]} matrices (shape {tuple(x.shape)})")
    if not x.dtype.is_floating_point:
        raise OpError(f"{name}: Expected a floating point tensor as input, got {x.dtype.name}; "
                      f"convert it with .float() or .double()")


def _eye_like(x, n=None):
    n = x.shape[-1] if n is None else n
    return eye(n, dtype=x.dtype, device=x.device)


def diag_embed(v):
    """(..., n) -> (..., n, n) with v on the diagonal."""
    return v.unsqueeze(-1) * _eye_like(v)


def diagonal(x):
    """The main diagonal of the last two dims: (..., m, n) -> (..., min(m, n))."""
    m, n = x.shape[-2], x.shape[-1]
    k = min(m, n)
    if k == 0:
        return x.sum(-1)[..., :0]
    return x.flatten(-2)[..., 0:(k - 1) * (n + 1) + 1:n + 1]


def _skew(x):
    return x - x.mT


def _singular_error(name, array):
    return OpError(f"{name}: The diagonal element is zero, the inversion could not be completed because "
                   f"the input matrix is singular (shape {tuple(array.shape)})")


def _np_inv(name):
    def run(a):
        try:
            return np.linalg.inv(a)
        except np.linalg.LinAlgError:
            raise _singular_error(name, a) from None
    return run


class Inv(Function):
    @staticmethod
    def forward(ctx, a):
        x = on_host(_np_inv("linalg.inv"), a)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -(x.mT @ g @ x.mT)


def inv(a):
    return Inv.apply(a)


class Solve(Function):
    """X = A^-1 B for B (..., n, k)."""

    @staticmethod
    def forward(ctx, a, b):
        def run(a_, b_):
            try:
                return np.linalg.solve(a_, b_)
            except np.linalg.LinAlgError:
                raise OpError(f"linalg.solve: The solver failed because the input matrix is singular "
                              f"(A shape {tuple(a_.shape)})") from None
        x = on_host(run, a, b)
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        gb = solve_matrix(a.mT, g)
        ga = -(gb @ x.mT) if ctx.needs_input_grad[0] else None
        return ga, gb


def solve_matrix(a, b):
    return Solve.apply(a, b)


class Det(Function):
    @staticmethod
    def forward(ctx, a):
        d = on_host(np.linalg.det, a)
        ctx.save_for_backward(a, d)
        return d

    @staticmethod
    def backward(ctx, g):
        a, d = ctx.saved_tensors
        if bool((d == 0).any()):
            # A singular matrix has no inverse, but det's derivative is still its cofactor
            # matrix (torch gives 0 there); from an SVD on the host, not differentiable again.
            return g.unsqueeze(-1).unsqueeze(-1) * on_host(_cofactors, a.detach())
        return (g * d).unsqueeze(-1).unsqueeze(-1) * inv(a).mT


def _cofactors(a):
    """The cofactor matrix adj(A)^T = det(U) det(Vh) U diag(prod_{j != i} s_j) Vh."""
    u, s, vh = np.linalg.svd(a)
    n = s.shape[-1]
    others = np.prod(np.where(np.eye(n, dtype=bool), 1.0, s[..., None, :]), axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return sign[..., None, None] * (u * others[..., None, :]) @ vh


class SlogDet(Function):
    @staticmethod
    def forward(ctx, a):
        sign, logabsdet = on_host(lambda x: tuple(np.linalg.slogdet(x)), a)
        ctx.save_for_backward(a)
        ctx.mark_non_differentiable(sign)
        return sign, logabsdet

    @staticmethod
    def backward(ctx, g_sign, g_logabsdet):
        (a,) = ctx.saved_tensors
        return g_logabsdet.unsqueeze(-1).unsqueeze(-1) * inv(a).mT


class Cholesky(Function):
    @staticmethod
    def forward(ctx, a, upper):
        def run(x):
            try:
                return np.linalg.cholesky(x)
            except np.linalg.LinAlgError:
                raise OpError(f"linalg.cholesky: The factorization could not be completed because the input "
                              f"is not positive-definite (shape {tuple(x.shape)})") from None
        lower = on_host(run, a)
        ctx.save_for_backward(lower)
        ctx.upper = upper
        return lower.mT if upper else lower

    @staticmethod
    def backward(ctx, g):
        (lower,) = ctx.saved_tensors
        if ctx.upper:
            g = g.mT
        # gA = sym(L^-T Phi(L^T gL) L^-1), Phi: the lower triangle with a halved diagonal.
        inverse = inv(lower)
        phi = (lower.mT @ g).tril()
        phi = phi - 0.5 * diag_embed(diagonal(phi))
        ga = inverse.mT @ phi @ inverse
        return 0.5 * (ga + ga.mT), None


class QR(Function):
    @staticmethod
    def forward(ctx, a, mode):
        if mode == "r":
            r = on_host(lambda x: np.linalg.qr(x, mode="r"), a)
            q = a.new_zeros(0)
        else:
            q, r = on_host(lambda x: tuple(np.linalg.qr(x, mode=mode)), a)
        ctx.save_for_backward(a, q, r)
        ctx.mode = mode
        return q, r

    @staticmethod
    def backward(ctx, gq, gr):
        a, q, r = ctx.saved_tensors
        m, n = a.shape[-2], a.shape[-1]
        if ctx.mode == "r":
            raise RuntimeError("linalg.qr: The derivative of linalg.qr depends on Q, which is not computed "
                               "when mode='r'; use mode='reduced'")
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("linalg.qr: The QR decomposition is not differentiable when mode='complete' "
                               "and nrows > ncols")
        return _qr_backward(gq, gr, q, r, a), None


def _copyltu(m):
    """The symmetric matrix whose lower triangle is m's."""
    low = m.tril(-1)
    return low + low.mT + diag_embed(diagonal(m))


def _qr_backward(gq, gr, q, r, a):
    m, n = a.shape[-2], a.shape[-1]
    if m >= n:
        # gA = (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q (a square, invertible R).
        mm = r @ gr.mT - gq.mT @ q
        return solve_matrix(r, (gq + q @ _copyltu(mm)).mT).mT
    # Wide: A = [X | Y], R = [U | V]; X = Q U is a square QR and Y = Q V.
    y, u, gu, gv = a[..., m:], r[..., :m], gr[..., :m], gr[..., m:]
    gy = q @ gv
    gx = _qr_backward(gq + y @ gv.mT, gu, q, u, a[..., :m])
    return cat([gx, gy], -1)


class SVD(Function):
    @staticmethod
    def forward(ctx, a, full_matrices):
        u, s, vh = on_host(lambda x: tuple(np.linalg.svd(x, full_matrices=full_matrices)), a)
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        u, s, vh = ctx.saved_tensors
        k = s.shape[-1]
        u, vh = u[..., :k], vh[..., :k, :]
        gu = gu[..., :k] if gu is not None and gu.numel() else None
        gvh = gvh[..., :k, :] if gvh is not None and gvh.numel() else None
        return _svd_backward(gu, gs, gvh, u, s, vh), None


def _svd_backward(gu, gs, gvh, u, s, vh):
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    v = vh.mT
    gv = gvh.mT if gvh is not None else None
    s2 = s * s
    # E_ij = s_j^2 - s_i^2, with 1 on the diagonal (where the numerator is 0 anyway).
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1) + _eye_like(s)
    inner = diag_embed(gs) if gs is not None else 0.0
    if gu is not None:
        inner = inner + (_skew(u.mT @ gu) / e) * s.unsqueeze(-2)
    if gv is not None:
        inner = inner + s.unsqueeze(-1) * (_skew(v.mT @ gv) / e)
    if isinstance(inner, float):
        inner = diag_embed(s * 0.0)
    if m > k and gu is not None:
        gus = gu / s.unsqueeze(-2)
        return (u @ inner + gus - u @ (u.mT @ gus)) @ vh
    if n > k and gv is not None:
        sgv = gv.mT / s.unsqueeze(-1)
        return u @ (inner @ vh + sgv - (sgv @ v) @ vh)
    return u @ inner @ vh


class Eigh(Function):
    @staticmethod
    def forward(ctx, a, uplo):
        w, q = on_host(lambda x: tuple(np.linalg.eigh(x, UPLO=uplo)), a)
        ctx.save_for_backward(w, q)
        return w, q

    @staticmethod
    def backward(ctx, gw, gq):
        w, q = ctx.saved_tensors
        # gA = Q (diag(gL) + skew(Q^T gQ) / 2 / E) Q^T with E_ij = L_j - L_i.
        inner = diag_embed(gw) if gw is not None else diag_embed(w * 0.0)
        if gq is not None:
            e = w.unsqueeze(-2) - w.unsqueeze(-1) + _eye_like(w)
            inner = inner + 0.5 * _skew(q.mT @ gq) / e
        return q @ inner @ q.mT, None


def eigh_tuple(a, uplo):
    return Eigh.apply(a, uplo)


class PseudoInverse(Function):
    """pinv, with the derivative of the pseudo-inverse itself (Golub and Pereyra):
    dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P, so
    gA = -P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A)."""

    @staticmethod
    def forward(ctx, a, compute):
        p = compute(a)
        ctx.save_for_backward(a, p)
        return p

    @staticmethod
    def backward(ctx, g):
        a, p = ctx.saved_tensors
        gt = g.mT
        first = -(p.mT @ g @ p.mT)
        x = gt @ p @ p.mT
        second = x - a @ (p @ x)
        y = p.mT @ p @ gt
        third = y - (y @ p) @ a
        return first + second + third, None


class Eig(Function):
    """The eigen-decomposition of a general square matrix: complex eigenvalues and vectors."""

    @staticmethod
    def forward(ctx, a):
        return on_host(lambda x: tuple(np.asarray(v, dtype=np.complex128) for v in np.linalg.eig(x)), a)

    @staticmethod
    def backward(ctx, gw, gv):
        raise RuntimeError("linalg.eig: gradients are not implemented in webgrad; for symmetric matrices "
                           "use linalg.eigh, whose gradients are")


QRResult = namedtuple("QRResult", ["Q", "R"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
