"""webgrad.linalg against torch.linalg: values, dtypes, named-tuple results, batched inputs,
gradients (vs finite differences in float64 and vs torch) and errors.

Each case is one function of the library (``webgrad.linalg`` or ``torch.linalg``: the
same names and signatures), so the same lambda runs on both sides."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import assert_close, gradcheck

INF = float("inf")


def _spd(rng, *shape):
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _inputs(name):
    rng = np.random.default_rng(sum(map(ord, name)))  # the same inputs every run
    g = rng.standard_normal
    return {
        "square": [g((2, 4, 4))],
        "square2": [g((2, 4, 4)), g((2, 4, 3))],
        "vec_rhs": [g((3, 3)), g((3,))],
        "tall": [g((2, 5, 3))],
        "wide": [g((3, 5))],
        "spd": [_spd(rng, 2, 4, 4)],
        "vec": [g((3, 4, 5))],
        "three": [g((2, 3)), g((2, 3))],
        "chain": [g((4,)), g((4, 3)), g((3, 5)), g((5,))],
        "lstsq": [g((6, 3)), g((6, 2))],
        "tensor4": [g((4, 6, 8, 3))],
        "scalar": [g(())],
    }[name.split(":")[0]]


# (id: input kind, function of (library, *tensors)); the id's prefix before ":" picks the inputs.
CASES = [
    ("square:inv", lambda L, a: L.inv(a)),
    ("square:det", lambda L, a: L.det(a)),
    ("square:slogdet", lambda L, a: L.slogdet(a)),
    ("square2:solve", lambda L, a, b: L.solve(a, b)),
    ("square2:solve_right", lambda L, a, b: L.solve(a, b.mT, left=False)),
    ("vec_rhs:solve_vector", lambda L, a, b: L.solve(a, b)),
    ("square2:solve_triangular", lambda L, a, b: L.solve_triangular(a, b, upper=True)),
    ("square2:solve_triangular_unit_right",
     lambda L, a, b: L.solve_triangular(a, b.mT, upper=False, left=False, unitriangular=True)),
    ("spd:cholesky", lambda L, a: L.cholesky(a)),
    ("spd:cholesky_upper", lambda L, a: L.cholesky(a, upper=True)),
    ("tall:qr", lambda L, a: L.qr(a)),
    ("tall:qr_complete", lambda L, a: L.qr(a, mode="complete")),
    ("tall:qr_r", lambda L, a: L.qr(a, mode="r").R),
    ("wide:qr_wide", lambda L, a: L.qr(a)),
    ("tall:svdvals", lambda L, a: L.svdvals(a)),
    ("tall:svd_product", lambda L, a: _svd_invariant(L.svd(a, full_matrices=False))),
    ("wide:svd_full", lambda L, a: _svd_invariant(L.svd(a))),
    ("spd:eigvalsh", lambda L, a: L.eigvalsh(a)),
    ("square:eig", lambda L, a: (L.eig(a).eigenvalues, L.eig(a).eigenvectors.abs())),  # phases are LAPACK's
    ("square:eigvals", lambda L, a: L.eigvals(a)),
    ("spd:eigh", lambda L, a: _eigh_invariant(L.eigh(a))),
    ("spd:eigh_upper", lambda L, a: _eigh_invariant(L.eigh(a, UPLO="U"))),
    ("tall:pinv", lambda L, a: L.pinv(a)),
    ("spd:pinv_hermitian", lambda L, a: L.pinv(a, hermitian=True)),
    ("lstsq:lstsq", lambda L, a, b: L.lstsq(a, b).solution),
    ("lstsq:lstsq_gels", lambda L, a, b: tuple(L.lstsq(a, b, driver="gels"))),
    ("lstsq:lstsq_gelsd", lambda L, a, b: tuple(L.lstsq(a, b, driver="gelsd"))),
    ("wide:pinv_rank_deficient", lambda L, a: L.pinv(a[:, :2] @ a[:, :2].mT)),
    ("scalar:vander_0d", lambda L, a: L.vander(a, N=3)),
    ("square:matrix_power_3", lambda L, a: L.matrix_power(a, 3)),
    ("square:matrix_power_-2", lambda L, a: L.matrix_power(a, -2)),
    ("square:matrix_power_0", lambda L, a: L.matrix_power(a, 0)),
    ("chain:multi_dot", lambda L, *t: L.multi_dot(t)),
    ("three:cross", lambda L, a, b: L.cross(a, b)),
    ("vec:vecdot", lambda L, a: L.vecdot(a, a.flip(-1), dim=1)),
    ("square:cond", lambda L, a: L.cond(a)),
    ("square:cond_fro", lambda L, a: L.cond(a, "fro")),
    ("square:cond_inf", lambda L, a: L.cond(a, INF)),
    ("tensor4:tensorinv", lambda L, a: L.tensorinv(a, ind=2)),
    ("tensor4:tensorsolve", lambda L, a: L.tensorsolve(a, a[..., 0, 0] * 1.0)),
    ("wide:vander", lambda L, a: L.vander(a, N=4)),
    ("vec:diagonal", lambda L, a: L.diagonal(a, offset=1, dim1=0, dim2=2)),
    ("vec:diagonal_below", lambda L, a: L.diagonal(a, offset=-1)),
    ("vec:norm_all", lambda L, a: L.norm(a)),
    ("vec:norm_dim", lambda L, a: L.norm(a, 3, dim=1, keepdim=True)),
    ("wide:norm_matrix_ord", lambda L, a: L.norm(a, "nuc")),
] + [
    (f"vec:vector_norm_{o}", lambda L, a, o=o: L.vector_norm(a, o, dim=(0, 2)))
    for o in (2, 1, 3.5, -1, INF, -INF, 0)
] + [
    (f"vec:matrix_norm_{o}", lambda L, a, o=o: L.matrix_norm(a, o, dim=(2, 0), keepdim=True))
    for o in ("fro", "nuc", 1, -1, 2, -2, INF, -INF)
]

# Not differentiable here (vector_norm_0, matrix_power_0: constant; the qr ones raise, as in torch;
# lstsq_gelsd: its singular values; eig: no gradients in webgrad).
NO_GRAD = {"vector_norm_0", "matrix_power_0", "qr_complete", "qr_r", "lstsq_gelsd", "eig", "eigvals"}
COMPLEX = {"eig", "eigvals"}  # complex results: cpu tensors whatever the input's device


def _svd_invariant(usv):
    """Functions of an SVD that do not depend on the signs of singular vectors."""
    u, s, vh = usv
    k = s.shape[-1]
    return u[..., :k] @ vh[..., :k, :], s, (u[..., :k] * u[..., :k]).sum(-2)


def _eigh_invariant(wq):
    w, q = wq
    return w, q * q, (q * w.unsqueeze(-2)) @ q.mT


def _flat(out):
    return list(out) if isinstance(out, tuple) else [out]


def _symmetric(name, a):
    """Symmetric-matrix cases see A + A^T: only a symmetric perturbation is meaningful there."""
    return 0.5 * (a + a.mT) if name.split(":")[0] == "spd" else a


@pytest.mark.parametrize("name, fn", CASES, ids=[c[0].split(":")[1] for c in CASES])
def test_matches_torch_in_float64(name, fn, torch_ref):
    arrays = _inputs(name)
    outputs = _flat(fn(webgrad.linalg, *[webgrad.tensor(a) for a in arrays]))
    expected = torch_ref(lambda torch: tuple(
        o.numpy() for o in _flat(fn(torch.linalg, *[torch.tensor(a) for a in arrays]))))
    assert len(outputs) == len(expected)
    for out, ref in zip(outputs, expected):
        dtype = {"i": "int64", "c": "complex128"}.get(ref.dtype.kind, "float64")
        assert_close(out, ref, 1e-8, 1e-9, dtype=dtype, msg=name)


@pytest.mark.parametrize("name, fn", CASES, ids=[c[0].split(":")[1] for c in CASES])
def test_float32_on_every_device(name, fn, device):
    """float32 results on each device (WebGPU: decompositions take the one documented copy)."""
    arrays = _inputs(name)
    outputs = _flat(fn(webgrad.linalg, *[webgrad.tensor(a, dtype=webgrad.float32, device=device) for a in arrays]))
    expected = _flat(fn(webgrad.linalg, *[webgrad.tensor(a) for a in arrays]))
    for out, ref in zip(outputs, expected):
        assert out.device == ("cpu" if name.split(":")[1] in COMPLEX else device)
        want = {webgrad.float64: webgrad.float32, webgrad.complex128: webgrad.complex64}.get(ref.dtype, ref.dtype)
        assert_close(out, ref.numpy().astype(want.np), 2e-4, 2e-4, dtype=want, msg=name)


GRAD_CASES = [c for c in CASES if c[0].split(":")[1] not in NO_GRAD]
# torch's own backward of cond with these norms fails (an in-place write it then reads).
TORCH_GRAD_CASES = [c for c in GRAD_CASES if c[0].split(":")[1] not in ("cond_fro", "cond_inf")]


@pytest.mark.parametrize("name, fn", GRAD_CASES, ids=[c[0].split(":")[1] for c in GRAD_CASES])
def test_gradients_match_finite_differences(name, fn):
    inputs = [webgrad.tensor(a, requires_grad=True) for a in _inputs(name)]
    gradcheck(lambda *t: fn(webgrad.linalg, *[_symmetric(name, x) for x in t]), inputs, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name, fn", TORCH_GRAD_CASES, ids=[c[0].split(":")[1] for c in TORCH_GRAD_CASES])
def test_gradients_match_torch(name, fn, torch_ref):
    arrays = _inputs(name)
    rng = np.random.default_rng(1)

    def grads(lib, make):
        inputs = [make(a) for a in arrays]
        outs = [o for o in _flat(fn(lib.linalg, *[_symmetric(name, x) for x in inputs])) if o.dtype.is_floating_point]
        weights = [rng_weights[i] for i in range(len(outs))]
        total = sum((o * lib.tensor(w)).sum() for o, w in zip(outs, weights))
        return lib.autograd.grad(total, inputs, allow_unused=True)

    probe = [o for o in _flat(fn(webgrad.linalg, *[webgrad.tensor(a) for a in arrays])) if o.dtype.is_floating_point]
    rng_weights = [rng.standard_normal(tuple(o.shape)) for o in probe]
    ours = grads(webgrad, lambda a: webgrad.tensor(a, requires_grad=True))
    theirs = torch_ref(lambda torch: tuple(
        np.zeros(a.shape) if g is None else g.numpy()
        for g, a in zip(grads(torch, lambda a: torch.tensor(a, requires_grad=True)), arrays)))
    for g, ref, a in zip(ours, theirs, arrays):
        assert_close(webgrad.zeros(a.shape, dtype=webgrad.float64) if g is None else g, ref, 1e-6, 1e-8, msg=name)


def test_named_tuple_results():
    a = webgrad.tensor(_inputs("tall")[0])
    q, r = webgrad.linalg.qr(a)
    assert webgrad.linalg.qr(a).Q.shape == q.shape == (2, 5, 3) and r.shape == (2, 3, 3)
    assert webgrad.linalg.qr(a, mode="complete").Q.shape == (2, 5, 5)
    assert webgrad.linalg.qr(a, mode="r").Q.shape == (0,)
    u, s, vh = webgrad.linalg.svd(a)
    assert (u.shape, s.shape, vh.shape) == ((2, 5, 5), (2, 3), (2, 3, 3))
    assert webgrad.linalg.svd(a, full_matrices=False).U.shape == (2, 5, 3)
    result = webgrad.linalg.eigh(webgrad.tensor(_inputs("spd")[0]))
    assert result.eigenvalues.shape == (2, 4) and result.eigenvectors.shape == (2, 4, 4)
    sign, logabsdet = webgrad.linalg.slogdet(webgrad.tensor(_inputs("square")[0]))
    assert sign.shape == logabsdet.shape == (2,)
    assert not sign.requires_grad
    inverse, info = webgrad.linalg.inv_ex(webgrad.eye(3))
    assert info.dtype is webgrad.int32 and inverse.shape == (3, 3)
    lstsq = webgrad.linalg.lstsq(*[webgrad.tensor(x) for x in _inputs("lstsq")])
    assert lstsq.rank.item() == 3 and lstsq.residuals.shape == (0,) and lstsq.solution.shape == (3, 2)
    assert webgrad.linalg.matrix_rank(webgrad.ones(4, 3)).item() == 1


def test_torch_level_spellings(torch_ref):
    a = _inputs("square")[0]
    spd = _inputs("spd")[0]
    x, p = webgrad.tensor(a), webgrad.tensor(spd)
    ours = [webgrad.det(x), webgrad.logdet(p), webgrad.slogdet(x).logabsdet, webgrad.inverse(x),
            webgrad.pinverse(x), webgrad.matrix_power(x, 2), webgrad.cholesky(p), x.det(), p.logdet(),
            x.slogdet()[1], x.inverse(), x.pinverse(), x.matrix_power(2), p.cholesky()]
    expected = torch_ref(lambda torch: tuple(t.numpy() for t in (
        torch.det(torch.tensor(a)), torch.logdet(torch.tensor(spd)), torch.slogdet(torch.tensor(a)).logabsdet,
        torch.inverse(torch.tensor(a)), torch.pinverse(torch.tensor(a)), torch.matrix_power(torch.tensor(a), 2),
        torch.cholesky(torch.tensor(spd)))))
    for out, ref in zip(ours, list(expected) * 2):
        assert_close(out, ref, 1e-8, 1e-9)


@pytest.mark.parametrize("some, compute_uv", [(True, True), (False, True), (True, False)])
def test_torch_svd_and_qr(some, compute_uv, torch_ref):
    a = _inputs("tall")[0]
    u, s, v = webgrad.svd(webgrad.tensor(a), some=some, compute_uv=compute_uv)
    q, r = webgrad.tensor(a).qr(some=some)
    expected = torch_ref(lambda torch: tuple(t.numpy() for t in (*torch.svd(torch.tensor(a), some=some,
                                                                             compute_uv=compute_uv),
                                                                  *torch.tensor(a).qr(some=some))))
    k = s.shape[-1]
    eu, es, ev, eq, er = expected
    assert (tuple(u.shape), tuple(v.shape)) == (eu.shape, ev.shape)
    assert_close(s, es, 1e-10, 1e-10)
    assert_close(q, eq, 1e-10, 1e-10)
    assert_close(r, er, 1e-10, 1e-10)
    if compute_uv:  # singular vectors up to sign: compare U diag(S) V^T
        assert_close((u[..., :k] * s.unsqueeze(-2)) @ v[..., :k].mT, a, 1e-10, 1e-10)
    else:
        assert_close(u, eu)
        assert_close(v, ev)


@pytest.mark.parametrize("ord", [2, 1, 0.5, -0.5, 3.5, INF])
def test_norm_of_a_zero_vector_and_its_gradient(ord, torch_ref):
    x = webgrad.zeros(3, dtype=webgrad.float64, requires_grad=True)
    norm = webgrad.linalg.vector_norm(x, ord)
    norm.backward()
    assert_close(norm, torch_ref(lambda torch: torch.linalg.vector_norm(torch.zeros(3, dtype=torch.float64), ord)))
    assert_close(x.grad, np.zeros(3))  # torch's subgradient


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse_match_torch(upper, torch_ref):
    spd, rhs = _inputs("spd")[0], _inputs("square2")[1]

    def run(lib, make):
        factor = make(np.linalg.cholesky(spd).swapaxes(-1, -2) if upper else np.linalg.cholesky(spd))
        b = make(rhs[:, :, :2])
        outs = (lib.cholesky_solve(b, factor, upper=upper), lib.cholesky_inverse(factor[0], upper=upper))
        (outs[0].sum() + (outs[1] ** 2).sum()).backward()
        return outs + (factor.grad, b.grad)
    ours = run(webgrad, lambda a: webgrad.tensor(a, requires_grad=True))
    expected = torch_ref(lambda torch: tuple(t.detach().numpy() for t in run(torch, lambda a: torch.tensor(
        a, requires_grad=True))))
    for out, ref in zip(ours, expected):
        assert_close(out, ref, 1e-8, 1e-9)


def test_gradient_of_det_at_a_singular_matrix_is_the_cofactor_matrix():
    singular = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], [[2.0, 1.0, 0.0], [0.0, 1.0, 0.0],
                                                                              [0.0, 0.0, 3.0]]])
    a = webgrad.tensor(singular, requires_grad=True)
    webgrad.linalg.det(a).sum().backward()
    cofactors = np.array([[[4.0, 4.0, -4.0], [-2.0, -2.0, 2.0], [0.0, 0.0, 0.0]],
                          [[3.0, 0.0, 0.0], [-3.0, 6.0, 0.0], [0.0, 0.0, 2.0]]])
    assert_close(a.grad, cofactors, 1e-10, 1e-10)  # (torch gives 0 for the singular one)


def test_double_backward_of_inv():
    a = webgrad.tensor(_inputs("square")[0][0], requires_grad=True)

    def first_derivative(t):
        t = t if t.requires_grad else t.detach().requires_grad_()
        with webgrad.enable_grad():  # the finite differences run under no_grad
            return webgrad.autograd.grad((webgrad.linalg.inv(t) ** 2).sum(), [t], create_graph=True)[0]
    gradcheck(first_derivative, [a])


@pytest.mark.parametrize("call, message", [
    (lambda L: L.inv(webgrad.zeros(3, 2)), r"linalg.inv: A must be batches of square matrices, but they are 3 by 2"),
    (lambda L: L.inv(webgrad.zeros(3, 3)), r"linalg.inv: .*singular"),
    (lambda L: L.inv(webgrad.zeros(3, 3, dtype=webgrad.int64)), r"linalg.inv: Expected a floating point"),
    (lambda L: L.det(webgrad.zeros(3)), r"linalg.det: .*at least 2 dimensions"),
    (lambda L: L.cholesky(-webgrad.eye(3)), r"linalg.cholesky: .*not positive-definite"),
    (lambda L: L.qr(webgrad.eye(3), mode="economic"), r"linalg.qr: .*unrecognized mode 'economic'"),
    (lambda L: L.solve(webgrad.eye(3), webgrad.ones(4, 1)), r"linalg.solve: Incompatible shapes .*\(3, 3\).*\(4, 1\)"),
    (lambda L: L.solve(webgrad.zeros(3, 3), webgrad.ones(3, 1)), r"linalg.solve: .*singular"),
    (lambda L: L.eigh(webgrad.eye(3), UPLO="X"), r"linalg.eigh: Expected UPLO argument to be 'L' or 'U'"),
    (lambda L: L.matrix_norm(webgrad.eye(3), 3), r"linalg.matrix_norm: Order 3 not supported"),
    (lambda L: L.norm(webgrad.ones(2, 2, 2), 2), r"linalg.norm: .*1D or 2D"),
    (lambda L: L.cross(webgrad.ones(4), webgrad.ones(4)), r"linalg.cross: .*length 3"),
    (lambda L: L.tensorinv(webgrad.ones(2, 3), 1), r"linalg.tensorinv: .*prod"),
    (lambda L: L.multi_dot([webgrad.ones(2, 2)]), r"multi_dot\(\): expected at least 2 tensors"),
])
def test_errors_name_the_op_and_shapes(call, message):
    with pytest.raises(webgrad.OpError, match=message):
        call(webgrad.linalg)


def test_decomposition_on_webgpu_copies_once_and_stays_there(device):
    a = webgrad.tensor(_inputs("spd")[0], dtype=webgrad.float32, device=device, requires_grad=True)
    lower = webgrad.linalg.cholesky(a)
    assert lower.device == device and lower.dtype is webgrad.float32
    lower.sum().backward()
    assert a.grad.device == device
    assert_close(lower.detach().cpu() @ lower.detach().cpu().mT, _inputs("spd")[0].astype(np.float32), 1e-4, 1e-4)
