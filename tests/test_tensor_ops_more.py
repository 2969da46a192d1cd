"""PyTorch's tensor ops beyond the core table (issue 22): products, indexing, movement,
reductions, scans and sampling, each compared with torch itself on every device,
values, dtypes and gradients.

A case is ``(id, fn, inputs)``: ``fn(lib, *tensors)`` is written once and runs with
``lib = webgrad`` and ``lib = torch`` (the names and signatures are the same, which is
the point). Inputs are numpy arrays: float ones become float64 tensors that require grad
(float32 on webgpu, which has no float64), others keep their dtype.
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import assert_close

RNG = np.random.default_rng(22)


def F(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def I(*shape, high=3, low=0):  # noqa: E743  (an int input, like the op table's IDX)
    return RNG.integers(low, high, size=shape).astype(np.int64)


def B(*shape):
    return RNG.random(shape) > 0.5


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _flat(x)]
    return [out]


def _webgrad_run(fn, arrays, device, grad):
    dtype = webgrad.float32 if device == "webgpu" else webgrad.float64
    tensors = [webgrad.tensor(a, dtype=dtype if a.dtype.kind == "f" else None, device=device,
                              requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    return tensors, fn(webgrad, *tensors)


def _torch_run(torch, fn, arrays, grad):
    tensors = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    outs = _flat(fn(torch, *tensors))
    values = [o.detach().numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in outs]
    kinds = [str(o.dtype).removeprefix("torch.") if isinstance(o, torch.Tensor) else "py" for o in outs]
    grads = []
    floats = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    leaves = [t for t in tensors if t.requires_grad]
    if grad and floats and leaves:
        weights = [torch.tensor(np.cos(np.arange(o.numel())).reshape(o.shape)) for o in floats]
        found = torch.autograd.grad(floats, leaves, weights, allow_unused=True)
        grads = [np.zeros(t.shape) if g is None else g.numpy() for t, g in zip(leaves, found)]
    return tuple(values) + (np.asarray(kinds),) + tuple(grads)


NO_GRAD = {"grad": False}  # a case's last item: torch has no derivative there


def check(device, torch_ref, fn, *arrays, grad=True, rtol=None):
    """fn(webgrad, ...) matches fn(torch, ...): values, dtypes (on cpu) and gradients."""
    if arrays and isinstance(arrays[-1], dict):
        grad, arrays = arrays[-1].get("grad", grad), arrays[:-1]
    expected = torch_ref(lambda torch: _torch_run(torch, fn, arrays, grad))
    tensors, out = _webgrad_run(fn, arrays, device, grad)
    outs = _flat(out)
    kinds = list(expected[len(outs)])
    assert len(kinds) == len(outs), f"{len(outs)} outputs, torch gives {len(kinds)}"
    tol = rtol or (1e-4 if device == "webgpu" else 1e-7)
    for got, want, kind in zip(outs, expected, kinds):
        if kind == "py":
            assert not isinstance(got, webgrad.Tensor) and got == want.item()
            continue
        if device == "webgpu" and kind == "float64":
            kind = "float32"
        assert_close(got.detach(), want, rtol=tol, atol=tol, dtype=kind)
    leaves = [t for t in tensors if t.requires_grad]
    floats = [o for o in outs if isinstance(o, webgrad.Tensor) and o.requires_grad]
    want_grads = expected[len(outs) + 1:]
    if want_grads and floats:
        total = sum((o * webgrad.tensor(np.cos(np.arange(o.numel())).reshape(tuple(o.shape)),
                                        dtype=o.dtype, device=device)).sum() for o in floats)
        total.backward()
        for leaf, want in zip(leaves, want_grads):
            got = leaf.grad if leaf.grad is not None else webgrad.zeros(*leaf.shape, dtype=leaf.dtype)
            assert_close(got, want, rtol=tol * 10, atol=tol * 10, msg="gradient")


PRODUCTS = [
    ("addmm", lambda t, i, a, b: t.addmm(i, a, b), F(2, 4), F(2, 3), F(3, 4)),
    ("addmm_scaled", lambda t, i, a, b: t.addmm(i, a, b, beta=0.5, alpha=-2), F(4), F(2, 3), F(3, 4)),
    ("addmm_beta0_ignores_nan", lambda t, i, a, b: t.addmm(i.log(), a, b, beta=0), F(2, 4), F(2, 3), F(3, 4)),
    ("addmm_method", lambda t, i, a, b: i.addmm(a, b, alpha=3), F(2, 4), F(2, 3), F(3, 4)),
    ("baddbmm", lambda t, i, a, b: t.baddbmm(i, a, b, beta=2), F(2, 1, 4), F(2, 2, 3), F(2, 3, 4)),
    ("addbmm", lambda t, i, a, b: t.addbmm(i, a, b, alpha=0.5), F(2, 4), F(3, 2, 5), F(3, 5, 4)),
    ("addmv", lambda t, i, a, b: t.addmv(i, a, b), F(2), F(2, 3), F(3)),
    ("addr", lambda t, i, a, b: t.addr(i, a, b, beta=-1), F(2, 3), F(2), F(3)),
    ("dot", lambda t, a, b: t.dot(a, b), F(5), F(5)),
    ("dot_int", lambda t, a, b: a.dot(b), I(5), I(5)),
    ("vdot", lambda t, a, b: t.vdot(a, b), F(3), F(3)),
    ("mv", lambda t, a, b: a.mv(b), F(2, 3), F(3)),
    ("inner", lambda t, a, b: t.inner(a, b), F(2, 3), F(4, 3)),
    ("inner_scalar", lambda t, a, b: t.inner(a, b), F(), F(2, 2)),
    ("kron", lambda t, a, b: t.kron(a, b), F(2, 3), F(2, 2)),
    ("kron_ranks", lambda t, a, b: a.kron(b), F(2), F(2, 3, 2)),
    ("tensordot_int", lambda t, a, b: t.tensordot(a, b, 2), F(2, 3, 4), F(3, 4, 5)),
    ("tensordot_lists", lambda t, a, b: t.tensordot(a, b, dims=([1, 0], [0, 2])), F(3, 2, 4), F(2, 5, 3)),
    ("tensordot_zero", lambda t, a, b: t.tensordot(a, b, dims=0), F(2), F(3)),
    ("cross_dim", lambda t, a, b: t.cross(a, b, dim=1), F(2, 3), F(2, 3)),
    ("cross_default", lambda t, a, b: a.cross(b), F(3, 4), F(3, 4)),
    ("cross_broadcast", lambda t, a, b: t.cross(a, b, dim=-1), F(2, 3), F(1, 3)),
    ("chain_matmul", lambda t, a, b, c: t.chain_matmul(a, b, c), F(2, 3), F(3, 4), F(4, 2)),
]


@pytest.mark.parametrize("case", PRODUCTS, ids=[c[0] for c in PRODUCTS])
def test_products(device, torch_ref, case):
    _, fn, *arrays = case
    check(device, torch_ref, fn, *arrays)


def test_product_errors_name_the_op():
    with pytest.raises(webgrad.OpError, match="dot: 1D tensors expected"):
        webgrad.dot(webgrad.ones(2, 2), webgrad.ones(2))
    with pytest.raises(webgrad.OpError, match="cross: .*length 3"):
        webgrad.cross(webgrad.ones(2, 2), webgrad.ones(2, 2), dim=1)
    with pytest.raises(webgrad.OpError, match="tensordot: contracted dimensions"):
        webgrad.tensordot(webgrad.ones(2, 3), webgrad.ones(4, 2), dims=([1], [0]))


INDEXING = [
    ("getitem_range", lambda t, x, y: x[range(4), y], F(4, 3), I(4)),
    ("getitem_int_list", lambda t, x: x[[2, 0, -1]], F(4, 3)),
    ("setitem_range", lambda t, x: x.clone().index_put_((t.tensor([0, 2]),), t.tensor(1.0, dtype=x.dtype)), F(4, 3)),
    ("masked_select", lambda t, x, m: t.masked_select(x, m), F(3, 4), B(4)),
    ("masked_scatter", lambda t, x, m, s: x.masked_scatter(m, s), F(3, 4), B(3, 4), F(12)),
    ("scatter_src", lambda t, x, i, s: t.scatter(x, 1, i, s), F(3, 5), I(3, 2, high=5), F(3, 2)),
    ("scatter_value", lambda t, x, i: x.scatter(0, i, 2.5), F(3, 5), I(2, 5)),
    ("scatter_reduce_add", lambda t, x, i, s: t.scatter(x, 0, i, s, reduce="add"), F(3, 2), I(4, 2), F(4, 2), NO_GRAD),
    ("scatter_reduce_multiply", lambda t, x, i, s: x.scatter(0, i, s, reduce="multiply"), F(3, 2), I(4, 2),
     F(4, 2), NO_GRAD),
    ("scatter_reduce_sum", lambda t, x, i, s: x.scatter_reduce(0, i, s, "sum", include_self=False), F(3, 2), I(4, 2),
     F(4, 2)),
    ("scatter_reduce_prod", lambda t, x, i, s: t.scatter_reduce(x, 1, i, s, "prod"), F(2, 4), I(2, 6, high=4), F(2, 6)),
    ("scatter_reduce_mean", lambda t, x, i, s: t.scatter_reduce(x, 0, i, s, "mean", include_self=False), F(3, 2),
     I(4, 2), F(4, 2)),
    ("scatter_reduce_amax", lambda t, x, i, s: t.scatter_reduce(x, 0, i, s, "amax"), F(3, 2), I(5, 2), F(5, 2)),
    ("scatter_reduce_amin_noself", lambda t, x, i, s: t.scatter_reduce(x, 0, i, s, "amin", include_self=False),
     F(4, 2), I(5, 2), F(5, 2)),
    ("scatter_reduce_amax_int", lambda t, x, i, s: t.scatter_reduce(x, 0, i, s, "amax"), I(3, 2, high=9),
     I(5, 2), I(5, 2, high=9)),
    ("index_add", lambda t, x, i, s: t.index_add(x, 1, i, s, alpha=2), F(2, 4), I(5, high=4), F(2, 5)),
    ("index_add_method", lambda t, x, i, s: x.index_add(0, i, s), F(4), I(3, high=4), F(3)),
    ("index_copy", lambda t, x, i, s: t.index_copy(x, 0, i, s), F(4, 2), np.array([3, 0]), F(2, 2)),
    ("index_fill", lambda t, x, i: x.index_fill(1, i, -1.5), F(2, 4), np.array([0, 2, 2, -1])),
    ("index_fill_tensor_value", lambda t, x, i, v: t.index_fill(x, 0, i, v), F(3, 2), np.array([1]), F()),
    ("index_put_accumulate", lambda t, x, i, v: t.index_put(x, (i,), v, accumulate=True), F(4, 2), I(5, high=4),
     F(5, 2)),
    ("index_put_accumulate_2d", lambda t, x, i, j, v: x.index_put((i, j), v, accumulate=True), F(3, 3),
     I(4), np.array([0, -1, 0, 0]), F(4)),
    ("take", lambda t, x, i: t.take(x, i), F(3, 4), np.array([[0, -1], [5, 11]])),
    ("take_along_dim", lambda t, x, i: t.take_along_dim(x, i, dim=1), F(3, 4), I(1, 2, high=4)),
    ("take_along_dim_flat", lambda t, x, i: x.take_along_dim(i), F(3, 4), np.array([0, 11, 5])),
    ("select", lambda t, x: t.select(x, 1, -1), F(2, 3, 2)),
    ("select_scatter", lambda t, x, s: t.select_scatter(x, s, 0, 1), F(3, 2), F(2)),
    ("slice_scatter", lambda t, x, s: t.slice_scatter(x, s, dim=1, start=0, end=4, step=2), F(3, 4), F(3, 2)),
    ("diagonal_scatter", lambda t, x, s: t.diagonal_scatter(x, s, 1), F(3, 3), F(2)),
    ("diagonal_scatter_apart", lambda t, x, s: t.diagonal_scatter(x, s, 0, 0, 2), F(2, 3, 2), F(3, 2)),
    ("gather_0d", lambda t, x, i: t.gather(x, 0, i), F(), np.array(0)),
    ("index_select_0d", lambda t, x, i: t.index_select(x, 0, i), F(), np.array([0])),
    ("scatter_add_0d", lambda t, x, i, s: t.scatter_add(x, 0, i, s), F(), np.array(0), F()),
    ("nonzero_0d", lambda t, x: (t.nonzero(x), t.nonzero(x * 0)), F()),
]


@pytest.mark.parametrize("case", INDEXING, ids=[c[0] for c in INDEXING])
def test_indexing(device, torch_ref, case):
    _, fn, *arrays = case
    check(device, torch_ref, fn, *arrays)


MOVEMENT = [
    ("roll", lambda t, x: t.roll(x, (1, -2), (0, 1)), F(3, 4)),
    ("roll_flat", lambda t, x: x.roll(5), F(2, 3)),
    ("meshgrid_ij", lambda t, a, b: t.meshgrid(a, b, indexing="ij"), F(3), F(2)),
    ("meshgrid_xy", lambda t, a, b, c: t.meshgrid([a, b, c], indexing="xy"), F(3), F(2), F(4)),
    ("broadcast_tensors", lambda t, a, b: t.broadcast_tensors(a, b), F(3, 1), F(4)),
    ("broadcast_to", lambda t, a: t.broadcast_to(a, (2, 3)), F(3)),
    ("tile", lambda t, a: t.tile(a, (2,)), F(2, 3)),
    ("tile_more_dims", lambda t, a: a.tile((2, 1, 2)), F(2, 3)),
    ("hstack", lambda t, a, b: t.hstack([a, b]), F(2, 3), F(2, 1)),
    ("hstack_1d", lambda t, a, b: t.hstack((a, b)), F(2), F(3)),
    ("vstack", lambda t, a, b: t.vstack([a, b]), F(3), F(2, 3)),
    ("row_stack", lambda t, a, b: t.row_stack([a, b]), F(3), F(3)),
    ("dstack", lambda t, a, b: t.dstack([a, b]), F(2, 3), F(2, 3)),
    ("column_stack", lambda t, a, b: t.column_stack([a, b]), F(3), F(3, 2)),
    ("tensor_split_sections", lambda t, a: t.tensor_split(a, 3, dim=1), F(2, 7)),
    ("tensor_split_indices", lambda t, a: a.tensor_split([1, 4, 9]), F(6)),
    ("split_with_sizes", lambda t, a: a.split_with_sizes([1, 3], 1), F(2, 4)),
    ("swapaxes", lambda t, a: (t.swapaxes(a, 0, 2), a.swapdims(0, 1), t.moveaxis(a, 0, -1)), F(2, 3, 4)),
    ("rot90", lambda t, a: (t.rot90(a), a.rot90(2, [1, 2]), t.rot90(a, -1, [2, 0])), F(2, 3, 4)),
    ("flipud_fliplr", lambda t, a: (t.flipud(a), a.fliplr()), F(2, 3)),
    ("diagonal", lambda t, a: (t.diagonal(a, 1), a.diagonal(-1, 2, 0)), F(3, 4, 3)),
    ("diag", lambda t, a, b: (t.diag(a, 1), b.diag(), t.diag(b, -1)), F(3), F(3, 4)),
    ("diagflat", lambda t, a: t.diagflat(a, -1), F(2, 2)),
    ("trace", lambda t, a: (t.trace(a), a.trace()), F(3, 4)),
    ("diag_embed", lambda t, a: (t.diag_embed(a), a.diag_embed(1, 0, 2)), F(2, 3)),
    ("tril_triu_indices", lambda t: (t.tril_indices(3, 4), t.triu_indices(4, 3, 1), t.tril_indices(3, 3, -1))),
    ("unfold", lambda t, a: (a.unfold(1, 2, 1), a.unfold(0, 2, 2)), F(5, 4)),
    ("unfold_0d", lambda t, a: a.unfold(0, 1, 1), F()),
    ("atleast", lambda t, a, b, c: (t.atleast_1d(a), t.atleast_2d(a, b), t.atleast_3d([a, b, c])), F(), F(3), F(2, 2)),
    ("ravel_view_as", lambda t, a, b: (a.ravel(), t.ravel(a), a.view_as(b), a.expand_as(a.repeat(2, 1, 1)),
                                       a.reshape_as(b)), F(3, 2), F(2, 3)),
]


@pytest.mark.parametrize("case", MOVEMENT, ids=[c[0] for c in MOVEMENT])
def test_movement(device, torch_ref, case):
    _, fn, *arrays = case
    check(device, torch_ref, fn, *arrays)


def test_broadcast_shapes_and_nelement():
    assert webgrad.broadcast_shapes((2, 1), (3,), 1) == webgrad.Size([2, 3])
    assert webgrad.ones(2, 3).nelement() == 6


def _with_nan(a, every=3):
    a = a.copy()
    a.reshape(-1)[::every] = np.nan
    return a


REDUCTIONS = [
    ("median_all", lambda t, x: (t.median(x), x.median()), F(3, 4)),
    ("median_dim", lambda t, x: t.median(x, 1, keepdim=True), F(3, 4)),
    ("median_nan", lambda t, x: (x.median(0), x.median()), _with_nan(F(4, 3), 5)),
    ("nanmedian", lambda t, x: (t.nanmedian(x, 1), x.nanmedian()), _with_nan(F(3, 5), 4)),
    ("quantile", lambda t, x, q: (t.quantile(x, q, dim=1), x.quantile(0.3)), F(3, 5), np.array([0.0, 0.25, 0.9])),
    ("quantile_modes", lambda t, x: tuple(t.quantile(x, 0.4, dim=0, keepdim=True, interpolation=m)
                                          for m in ("linear", "lower", "higher", "midpoint", "nearest")), F(6, 2)),
    ("nanquantile", lambda t, x: (t.nanquantile(x, 0.5, dim=1), x.nanquantile(0.7)), _with_nan(F(3, 4), 3)),
    ("kthvalue", lambda t, x: (t.kthvalue(x, 2, 0), x.kthvalue(3, keepdim=True)), F(4, 5)),
    ("mode", lambda t, x: (t.mode(x, 1), x.mode(0, True)), I(4, 6, high=3)),
    ("mode_float", lambda t, x: t.mode(x.round(), 1), F(3, 6)),
    ("nansum_nanmean", lambda t, x: (t.nansum(x), x.nansum(1), t.nanmean(x, 0), x.nanmean()), _with_nan(F(3, 4), 5)),
    ("cummax", lambda t, x: (t.cummax(x, 1), x.cummin(0)), F(3, 5)),
    ("cummax_ties_int", lambda t, x: (t.cummax(x, 0), x.cummin(0)), np.array([1, 3, 3, 2, 3, 0, 0])),
    ("cummax_nan", lambda t, x: (t.cummax(x, 0), t.cummin(x, 0)), np.array([1.0, np.nan, 2.0, 5.0])),
    ("logcumsumexp", lambda t, x: t.logcumsumexp(x, 1), F(2, 5, high=3)),
    ("count_nonzero", lambda t, x: (t.count_nonzero(x), x.count_nonzero(1), t.count_nonzero(x, (0, 1))),
     I(3, 4, high=2)),
    ("aminmax", lambda t, x: (t.aminmax(x), x.aminmax(dim=1, keepdim=True)), F(3, 4)),
    ("var_mean", lambda t, x: (t.var_mean(x, 1), t.std_mean(x, 0, keepdim=True), t.var_mean(x, True),
                               t.std_mean(x, dim=1, correction=0)), F(3, 4)),
    ("bincount", lambda t, x, w: (t.bincount(x), x.bincount(w, minlength=7)), I(8, high=5), F(8), NO_GRAD),
    ("histc", lambda t, x: (t.histc(x, bins=4, min=-1, max=1), x.histc(5)), F(20)),
    ("keepdims_spelling", lambda t, x: (t.sum(x, 1, keepdims=True), x.mean(0, keepdims=True),
                                        t.amax(x, 1, keepdims=True), x.std(1, keepdims=True)),
     F(3, 4)),
    ("prod_dtype", lambda t, x: (t.prod(x, dtype=t.float32), x.prod(0, dtype=t.int32), x.sum(1, dtype=t.int32)),
     I(3, 2, high=4, low=1)),
    ("std_var_positional_unbiased", lambda t, x: (t.std(x, True), t.var(x, False), x.std(False),
                                                  t.var(x, 1, correction=2)), F(3, 4)),
    ("norm_p", lambda t, x: tuple(t.norm(x, p) for p in (float("inf"), float("-inf"), 0, 1, 3, "fro")), F(3, 4)),
    ("norm_dim", lambda t, x: (t.norm(x, float("-inf"), 1), x.norm(0, dim=0), x.norm(p="fro", dim=1)), F(3, 4)),
    ("norm_nuc", lambda t, x: (t.norm(x, "nuc"), x.norm("nuc", keepdim=True)), F(3, 4)),
    ("logsumexp_empty", lambda t, x: (t.logsumexp(x, 1), x.logsumexp(0)), np.zeros((2, 0))),
    ("empty_reductions", lambda t, x: (x.sum(1), x.prod(1), x.mean(1), x.sum(), x.prod(), x.nansum(1)),
     np.zeros((2, 0))),
]


@pytest.mark.parametrize("case", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
def test_reductions(device, torch_ref, case):
    _, fn, *arrays = case
    check(device, torch_ref, fn, *arrays)


# -- random draws: moments of large samples, reproducibility, shapes and dtypes -------------
N = 20000


def _moments(t):
    a = t.detach().numpy().astype(np.float64)
    return a.mean(), a.std()


@pytest.mark.parametrize("name, fill, mean, std", [
    ("uniform_", lambda x, g: x.uniform_(-1, 3, generator=g), 1.0, 4 / 12 ** 0.5),
    ("uniform_from_to", lambda x, g: x.uniform_(**{"from": 2, "to": 4}, generator=g), 3.0, 2 / 12 ** 0.5),
    ("normal_", lambda x, g: x.normal_(2.0, 0.5, generator=g), 2.0, 0.5),
    ("bernoulli_", lambda x, g: x.bernoulli_(0.25, generator=g), 0.25, (0.25 * 0.75) ** 0.5),
    ("exponential_", lambda x, g: x.exponential_(2.0, generator=g), 0.5, 0.5),
    ("geometric_", lambda x, g: x.geometric_(0.5, generator=g), 2.0, 2 ** 0.5),
    ("log_normal_", lambda x, g: x.log_normal_(0.0, 0.25, generator=g), np.exp(0.25 ** 2 / 2),
     ((np.exp(0.0625) - 1) * np.exp(0.0625)) ** 0.5),
    ("random_", lambda x, g: x.random_(0, 10, generator=g), 4.5, (99 / 12) ** 0.5),
])
def test_inplace_random_fills_match_their_distribution_and_reproduce(device, name, fill, mean, std):
    g = webgrad.Generator().manual_seed(5)
    x = fill(webgrad.empty(N, device=device), g)
    got_mean, got_std = _moments(x)
    assert abs(got_mean - mean) < 4 * std / N ** 0.5 + 1e-3, (name, got_mean, mean)
    assert abs(got_std - std) < 0.05 * std, (name, got_std, std)
    again = fill(webgrad.empty(N, device=device), g.manual_seed(5))
    np.testing.assert_array_equal(again.numpy(), x.numpy())
    webgrad.manual_seed(3)
    a = fill(webgrad.empty(8, device=device), None)
    webgrad.manual_seed(3)
    np.testing.assert_array_equal(fill(webgrad.empty(8, device=device), None).numpy(), a.numpy())


def test_cauchy_median_and_quartiles(device):
    x = webgrad.empty(N, device=device).cauchy_(1.0, 2.0, generator=webgrad.Generator().manual_seed(1)).numpy()
    q1, q2, q3 = np.quantile(x, [0.25, 0.5, 0.75])  # a Cauchy's quartiles are median -+ sigma
    assert abs(q2 - 1.0) < 0.1 and abs(q1 + 1.0) < 0.15 and abs(q3 - 3.0) < 0.15


def test_random_int_and_bounds(device):
    x = webgrad.zeros(N, dtype=webgrad.int64, device=device).random_(3, 7)
    assert x.dtype is webgrad.int64 and set(np.unique(x.numpy())) == {3, 4, 5, 6}
    y = webgrad.zeros(1000, device=device).random_(5)
    assert set(np.unique(y.numpy())) <= set(range(5))


def test_bernoulli_normal_poisson(device):
    webgrad.manual_seed(0)
    p = webgrad.tensor(np.linspace(0, 1, 5).repeat(4000), dtype=webgrad.float32, device=device)
    draws = webgrad.bernoulli(p)
    assert draws.dtype is p.dtype and set(np.unique(draws.numpy())) <= {0.0, 1.0}
    np.testing.assert_allclose(draws.numpy().reshape(5, -1).mean(1), np.linspace(0, 1, 5), atol=0.03)
    assert abs(webgrad.ones(N, device=device).bernoulli(0.3).numpy().mean() - 0.3) < 0.02
    mean = webgrad.zeros(N, 2, device=device, requires_grad=True)
    std = webgrad.tensor([1.0, 3.0], device=device, requires_grad=True)
    out = webgrad.normal(mean, std)
    assert tuple(out.shape) == (N, 2)
    np.testing.assert_allclose(out.detach().numpy().std(0), [1.0, 3.0], rtol=0.05)
    out.sum().backward()  # d/dmean = 1, d/dstd = the standard draws (reparameterized, as torch)
    np.testing.assert_allclose(mean.grad.numpy(), 1.0)
    np.testing.assert_allclose(std.grad.numpy(), (out.detach().numpy() / [1.0, 3.0]).sum(0), rtol=1e-4)
    assert tuple(webgrad.normal(1.0, webgrad.ones(3, device=device)).shape) == (3,)
    assert tuple(webgrad.normal(webgrad.ones(2, 3, device=device)).shape) == (2, 3)
    fixed = webgrad.normal(5.0, 2.0, (N,), generator=webgrad.Generator().manual_seed(2))
    np.testing.assert_allclose(_moments(fixed), (5.0, 2.0), rtol=0.05)
    rates = webgrad.tensor([0.5, 4.0], device=device).repeat(N // 2)
    counts = webgrad.poisson(rates, webgrad.Generator().manual_seed(4)).numpy().reshape(-1, 2)
    np.testing.assert_allclose(counts.mean(0), [0.5, 4.0], rtol=0.05)
    with pytest.raises(webgrad.OpError, match="std >= 0"):
        webgrad.normal(webgrad.zeros(2), webgrad.tensor([1.0, -1.0]))


EMPTY = [
    ("max_min_over_a_full_dim", lambda t, x: (t.max(x, 0), x.min(0), x.argmax(0), x.amax(0)), np.zeros((2, 0))),
    ("var_std_norm", lambda t, x: (x.var(), x.var(1), x.std(0), t.norm(x), x.norm(dim=1), t.var_mean(x, 0)),
     np.zeros((2, 0))),
    ("scans", lambda t, x: (x.cumsum(1), x.cumprod(1), x.logcumsumexp(1), x.cummax(1)), np.zeros((2, 0))),
    ("counts", lambda t, x: (t.count_nonzero(x), x.all(), x.any(1), t.nansum(x), t.nanmean(x)), np.zeros((2, 0))),
]


@pytest.mark.parametrize("case", EMPTY, ids=[c[0] for c in EMPTY])
def test_empty_tensors(device, torch_ref, case):
    _, fn, *arrays = case
    check(device, torch_ref, fn, *arrays)


MORE = [
    ("put", lambda t, x, i, s: (t.put(x, i, s), x.put(i, s, accumulate=True)), F(3, 4), np.array([0, -1, 5, 5]), F(4)),
    ("put_", lambda t, x, i, s: x.clone().put_(i, s), F(2, 3), np.array([1, 4]), F(2)),
    ("diff", lambda t, x, p: (t.diff(x), x.diff(2, 0), t.diff(x, dim=0, prepend=p), x.diff(0)), F(4, 3), F(1, 3)),
    ("diff_bool", lambda t, x: t.diff(x), B(6)),
]


@pytest.mark.parametrize("case", MORE, ids=[c[0] for c in MORE])
def test_more_ops(device, torch_ref, case):
    _, fn, *arrays = case
    check(device, torch_ref, fn, *arrays)
