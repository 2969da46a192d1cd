"""Reductions on WebGPU (reduce.wgsl) against the numpy backend.

Covers sum, prod, amax, amin, argmax, argmin over full, single, several and
negative dims, keepdim, size-1 dims, prime sizes, rows longer than a workgroup,
empty tensors, strided views (transposed, stepped slices, broadcast, flipped),
int and bool inputs, both thread layouts (one thread per row, a team per row),
a folded grid, and the composed ops and gradients built on top.
"""

import numpy as np
import pytest

import webgrad
from conftest import requires_webgpu
from webgrad.backend.webgpu import reduce as gpu_reduce

pytestmark = requires_webgpu

RTOL, ATOL = 1e-5, 1e-5
REDUCTIONS = ("sum", "prod", "amax", "amin")
ARG_REDUCTIONS = ("argmax", "argmin")
rng = np.random.default_rng(0)


def sample(shape, op="sum", dtype=np.float32):
    """Data that keeps each reduction exact enough in float32: products of values
    near 1, small integers (so argmax/argmin see ties)."""
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-2, 3, size=shape).astype(dtype)
    if op == "prod":
        return rng.uniform(0.9, 1.1, size=shape).astype(np.float32)
    if op in ARG_REDUCTIONS:
        return rng.integers(-3, 4, size=shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def both(array):
    return webgrad.tensor(array, device="cpu"), webgrad.tensor(array, device="webgpu")


def check(fn, array, rtol=RTOL, atol=ATOL):
    """Run ``fn`` on a cpu and a webgpu tensor made from ``array`` and compare."""
    cpu, gpu = both(array)
    expected, got = fn(cpu), fn(gpu)
    assert got.device == "webgpu"
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got, expected)
    if expected.numel() == 0:
        return  # reading back an empty webgpu tensor is the backend's concern, not the reduction's
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=rtol, atol=atol)


def method(name, *args, view=None, **kwargs):
    """``t -> t.name(*args, **kwargs)``, on ``view(t)`` when given."""
    return lambda t: getattr(t if view is None else view(t), name)(*args, **kwargs)


# -- every reduction over many dim choices ------------------------------------------
DIM_CASES = [
    ((7, 13, 5), None), ((7, 13, 5), 0), ((7, 13, 5), 1), ((7, 13, 5), 2), ((7, 13, 5), -1),
    ((7, 13, 5), (0, 2)), ((7, 13, 5), (-1, -3)), ((7, 13, 5), (1, 2)), ((7, 13, 5), (0, 1, 2)),
    ((1,), 0), ((1, 1, 1), (0, 2)), ((5, 1, 3), 1), ((1, 9), None), ((), None),
    ((3, 5000), 1), ((3, 5000), 0), ((3, 5000), None), ((2, 3, 4, 5, 6), (1, 3)),
]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dim", DIM_CASES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_match_numpy(name, shape, dim, keepdim):
    rtol = 1e-4 if np.prod(shape) > 1000 else RTOL  # long float32 sums round differently
    if shape == () and dim is None:
        check(method(name), sample(shape, name), rtol=rtol)
    else:
        check(method(name, dim, keepdim), sample(shape, name), rtol=rtol, atol=1e-4)


ARG_CASES = [((7, 13, 5), None), ((7, 13, 5), 0), ((7, 13, 5), 1), ((7, 13, 5), -1), ((1,), 0),
             ((5, 1, 3), 1), ((3, 5000), 1), ((3, 5000), 0), ((3, 5000), None), ((), None)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dim", ARG_CASES)
@pytest.mark.parametrize("name", ARG_REDUCTIONS)
def test_arg_reductions_match_numpy(name, shape, dim, keepdim):
    check(method(name, dim, keepdim), sample(shape, name))


@pytest.mark.parametrize("name", ARG_REDUCTIONS)
def test_arg_reductions_return_the_first_tie(name):
    rows = np.zeros((4, 300), dtype=np.float32)
    rows[1, [7, 100, 299]] = 5.0 if name == "argmax" else -5.0
    rows[2, 250:] = 5.0 if name == "argmax" else -5.0
    rows[3] = np.tile([0.0, 1.0, -1.0], 100)
    for dim in (1, None):
        check(method(name, dim), rows)
    gpu = webgrad.tensor(rows, device="webgpu")
    assert getattr(gpu, name)(1).tolist() == [0, 7, 250, 1 if name == "argmax" else 2]


# -- thread layouts: force one thread per row, small teams, a workgroup per row ----
@pytest.fixture(params=[1, 4, 128], ids=["thread-per-row", "team-of-4", "workgroup-per-row"])
def lanes(request, monkeypatch):
    chosen = request.param
    monkeypatch.setattr(gpu_reduce, "choose_lanes",
                        lambda outer, inner, kept, red, workgroup, *rest: max(1, min(chosen, _pow2_below(inner),
                                                                                     workgroup)))
    return chosen


def _pow2_below(n):
    k = 1
    while k * 2 <= n:
        k *= 2
    return k


@pytest.mark.parametrize("name", REDUCTIONS + ARG_REDUCTIONS)
def test_every_thread_layout(name, lanes):
    for shape, dim in (((7, 13, 5), 1), ((3, 517), 1), ((517, 3), 0), ((6, 200), None), ((9, 4), (0, 1))):
        if name in ARG_REDUCTIONS and isinstance(dim, tuple):
            continue
        check(method(name, dim), sample(shape, name), rtol=1e-4, atol=1e-4)


def test_choose_lanes_picks_both_layouts():
    team = gpu_reduce.choose_lanes(3, 5000, [(3, 5000)], [(5000, 1)], 128)
    short = gpu_reduce.choose_lanes(5000, 3, [(5000, 3)], [(3, 1)], 128)
    columns = gpu_reduce.choose_lanes(1024, 1024, [(1024, 1)], [(1024, 1024)], 128)
    on_cpu = gpu_reduce.choose_lanes(3, 5000, [(3, 5000)], [(5000, 1)], 128, cpu_adapter=True)
    assert (team, short, columns, on_cpu) == (128, 1, 1, 1)


def test_choose_chunks_splits_only_few_long_rows():
    assert gpu_reduce.choose_chunks(1, 1 << 20, "sum") == gpu_reduce.TARGET_PIECES
    assert gpu_reduce.choose_chunks(3, 5000, "amax") == 2
    assert gpu_reduce.choose_chunks(1024, 1024, "sum") == 1
    assert gpu_reduce.choose_chunks(1024, 300000, "sum") == 5  # only to respect MAX_LANE_ELEMENTS
    assert gpu_reduce.choose_chunks(1, 1 << 20, "argmax") == 1


@pytest.mark.parametrize("name", REDUCTIONS)
def test_split_rows_with_short_last_pieces(name, lanes, monkeypatch):
    """Rows cut into pieces of 3 (MIN_CHUNK lowered), some shorter than the
    lanes sharing them: those lanes must not change the result."""
    monkeypatch.setattr(gpu_reduce, "MIN_CHUNK", 3)
    for shape, dim in (((23,), None), ((4, 23), 1), ((23, 4), 0), ((2, 7, 11), (0, 2))):
        check(method(name, dim), sample(shape, name))
    nan_row = sample((3, 40))
    nan_row[1, 38] = np.nan
    check(method(name, 1), nan_row)


def test_long_rows_past_the_cpu_loop_limit():
    """llvmpipe stops an invocation after ~65535 loop trips: rows far longer than
    that must still be reduced whole (split, or more threads per row for arg*)."""
    data = sample((1 << 20,))
    data[[5, 700000]] = 9.0
    cpu, gpu = both(data)
    np.testing.assert_allclose(gpu.sum().item(), cpu.sum().item(), rtol=1e-5, atol=1e-2)
    assert gpu.amax().item() == 9.0 and gpu.amin().item() == cpu.amin().item()
    assert (gpu.argmax().item(), (-gpu).argmin().item()) == (5, 5)
    ones = webgrad.ones(2, 300000, device="webgpu")
    assert ones.sum(1).tolist() == [300000, 300000]
    assert webgrad.arange(300000, device="webgpu").float().argmax().item() == 299999


# -- empty tensors ----------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", [((0,), None), ((0,), 0), ((3, 0), 1), ((3, 0), 0), ((0, 4), 1),
                                       ((2, 0, 3), (0, 1)), ((2, 0, 3), 2)])
@pytest.mark.parametrize("name", ("sum", "prod"))
def test_empty_reductions(name, shape, dim):
    check(method(name, dim), np.zeros(shape, dtype=np.float32))
    check(method(name, dim, True), np.zeros(shape, dtype=np.int32))


def test_amax_over_a_nonempty_dim_of_an_empty_tensor():
    check(lambda t: t.amax(1), np.zeros((0, 3), dtype=np.float32))


def test_amax_of_an_empty_dim_is_refused_on_both_backends():
    for device in ("cpu", "webgpu"):
        with pytest.raises(ValueError, match="amax"):
            webgrad.zeros(3, 0, device=device).amax(1)


# -- strided inputs, never copied ---------------------------------------------------
VIEWS = {
    "transposed": lambda t: t.transpose(0, 1),
    "permuted": lambda t: t.permute(2, 0, 1),
    "stepped-slice": lambda t: t[1::2, ::3],
    "negative-step": lambda t: t.flip(1),
    "broadcast": lambda t: t[:, :1].expand(7, 6, 5),
    "broadcast-new-dim": lambda t: t[None].expand(4, 7, 13, 5),
}


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("name", REDUCTIONS + ARG_REDUCTIONS)
def test_strided_views(name, view):
    base = sample((7, 13, 5), name)
    dims = (None, 0, 1, -1) if name in ARG_REDUCTIONS else (None, 0, 1, (0, 2), -1)
    for dim in dims:
        check(method(name, dim, view=VIEWS[view]), base, rtol=1e-4, atol=1e-4)


def test_strided_view_is_read_in_place(monkeypatch):
    from webgrad.backend.webgpu.backend import WebGPUBackend

    copies = []
    original = WebGPUBackend.contiguous
    monkeypatch.setattr(WebGPUBackend, "contiguous", lambda self, data: copies.append(data) or original(self, data))
    view = webgrad.tensor(sample((64, 64)), device="webgpu")[::2, 1::3].transpose(0, 1)
    view.sum(0)
    view.amax(1)
    view.argmax(0)
    view.expand(3, 21, 32).sum((0, 2))
    webgrad.webgpu.synchronize()
    assert copies == []


def test_many_dims_merge_and_too_many_are_refused():
    base = sample((2,) * 12)
    check(method("sum", tuple(range(6, 12))), base)           # 6 kept, 6 reduced, each merged to one
    check(method("amax", (0, 2, 4, 6, 8, 10)), base)          # 6 + 6 unmergeable dims: within the limit
    check(method("sum", (0, 2, 4, 6, 8, 10), view=lambda t: t.transpose(0, 11)), base)
    many = webgrad.tensor(sample((2,) * 18), device="webgpu")
    with pytest.raises(ValueError, match="sum: webgpu reductions handle at most 8"):
        many.sum(tuple(range(0, 18, 2)))


# -- element types -----------------------------------------------------------------
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
def test_int_inputs(dim):
    data = sample((7, 13), dtype=np.int64)
    for name in REDUCTIONS:
        check(method(name, dim), data)
    if not isinstance(dim, tuple):
        check(lambda t: t.argmax(dim), data)
        check(lambda t: t.argmin(dim), data)


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), -1])
def test_bool_inputs(dim):
    data = sample((7, 130), dtype=np.bool_)
    data[3] = True
    data[4] = False
    check(lambda t: t.sum(dim), data)
    check(lambda t: t.prod(dim), data)
    check(method("all", dim), data)
    check(method("any", dim), data)
    check(lambda t: t.amax(dim), data)
    check(lambda t: t.amin(dim), data)
    if not isinstance(dim, tuple):
        check(lambda t: t.argmax(dim), data)


def test_all_any_on_float_and_empty():
    data = sample((5, 6)).round()
    for dim in (None, 0, 1):
        check(method("all", dim), data)
        check(method("any", dim), data)
    check(lambda t: t.all(1), np.zeros((3, 0), dtype=np.float32))
    check(lambda t: t.any(1), np.zeros((3, 0), dtype=np.float32))


def test_nan_propagates_like_numpy():
    data = sample((4, 300))
    data[1, 17] = np.nan
    data[2, [5, 250]] = np.nan
    for name in ("amax", "amin", "sum", "argmax", "argmin"):
        for dim in (1, None):
            check(method(name, dim), data)
    check(lambda t: t.amax(0), data)
    gpu = webgrad.tensor(data, device="webgpu")
    assert gpu.argmax(1).tolist()[1:3] == [17, 5]


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_infinities():
    data = np.array([[1.0, np.inf, -np.inf], [-np.inf, -np.inf, -np.inf]], dtype=np.float32)
    for name in REDUCTIONS + ARG_REDUCTIONS:
        check(method(name, 1), data)


# -- folded grid --------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", [
    ((40, 300), 1),      # 40 rows, a workgroup each: folded into (16, 3)
    ((600, 130), 1),     # 600 rows > 16 * 16 workgroups: each workgroup loops
    ((40000, 3), 1),     # one thread per row, 313 groups of 128 rows: folded and looping
    ((3, 300, 20), 1),   # columns, one thread per output
])
def test_folded_grid(shape, dim):
    with webgrad.webgpu.override_limits(max_compute_workgroups_per_dimension=16):
        for name in REDUCTIONS + ARG_REDUCTIONS:
            check(method(name, dim), sample(shape, name), rtol=1e-4, atol=1e-4)


def test_small_workgroups(lanes):
    with webgrad.webgpu.override_limits(max_compute_invocations_per_workgroup=32):
        for name in REDUCTIONS + ARG_REDUCTIONS:
            check(method(name, 1), sample((5, 300), name), rtol=1e-4, atol=1e-4)
            check(method(name, 0), sample((300, 5), name), rtol=1e-4, atol=1e-4)


def test_folded_grid_per_layout(lanes):
    with webgrad.webgpu.override_limits(max_compute_workgroups_per_dimension=16):
        check(lambda t: t.sum(1), sample((3000, 40)), atol=1e-4)
        check(lambda t: t.argmax(0), sample((40, 3000), "argmax"))


# -- composed ops ------------------------------------------------------------------
COMPOSED = {
    "mean": lambda t: t.mean(1),
    "mean-all": lambda t: t.mean(),
    "mean-dims": lambda t: t.mean((0, 2), keepdim=True),
    "var": lambda t: t.var(1),
    "var-biased": lambda t: t.var((0, 2), unbiased=False),
    "std": lambda t: t.std(-1),
    "std-all": lambda t: t.std(),
    "logsumexp": lambda t: t.logsumexp(1),
    "logsumexp-dims": lambda t: t.logsumexp((0, 2), keepdim=True),
    "softmax": lambda t: t.softmax(1),
    "softmax-last": lambda t: t.softmax(-1),
    "log_softmax": lambda t: t.log_softmax(1),
    "norm": lambda t: t.norm(dim=1),
    "max-all": lambda t: t.max(),
    "min-all": lambda t: t.min(),
}


@pytest.mark.parametrize("name", COMPOSED)
def test_composed_ops(name):
    check(COMPOSED[name], sample((7, 13, 5)), rtol=1e-4, atol=1e-5)


def test_logsumexp_and_softmax_with_large_values():
    data = (sample((6, 50)) * 100).astype(np.float32)
    check(lambda t: t.logsumexp(1), data, rtol=1e-5)
    check(lambda t: t.softmax(1), data, atol=1e-6)


@pytest.mark.parametrize("name", ("max", "min"))
def test_max_min_with_dim_give_values_and_indices(name):
    data = sample((7, 13, 5), "argmax")
    cpu, gpu = both(data)
    for dim, keepdim in ((1, False), (-1, True), (0, False)):
        got, expected = getattr(gpu, name)(dim, keepdim), getattr(cpu, name)(dim, keepdim)
        np.testing.assert_array_equal(got.indices.numpy(), expected.indices.numpy())
        np.testing.assert_array_equal(got.values.numpy(), expected.values.numpy())


@pytest.mark.parametrize("name", ("max", "min"))
def test_max_min_values_and_indices_parts(name):
    """The two reductions max(dim)/min(dim) are built from, without gather."""
    data = sample((7, 13, 5), "argmax")
    for dim, keepdim in ((1, False), (-1, True), (0, False)):
        check(method("a" + name, dim, keepdim), data)
        check(method("arg" + name, dim, keepdim), data)


# -- gradients computed on webgpu equal those on cpu ------------------------------
GRADS = {
    "sum": lambda t: (t.sum(1) * webgrad.arange(7, device=t.device).float()).sum(),
    "sum-all": lambda t: t.sum() * 3.0,
    "mean": lambda t: (t.mean(0) ** 2).sum() + t.mean(),
    "amax": lambda t: (t.amax(1) * t.amax(1)).sum(),
    "amax-ties": lambda t: (t.amax(-1) * webgrad.arange(7, device=t.device).float()).sum(),
    "softmax": lambda t: (t.softmax(1) * webgrad.arange(5, device=t.device).float()).sum(),
    "log_softmax": lambda t: t.log_softmax(-1)[:, 0].sum(),
}


@pytest.mark.parametrize("name", GRADS)
def test_gradients_match_cpu(name):
    data = sample((7, 5))
    if name == "amax-ties":
        data = sample((7, 5), "argmax")
    cpu = webgrad.tensor(data, device="cpu", requires_grad=True)
    gpu = webgrad.tensor(data, device="webgpu", requires_grad=True)
    GRADS[name](cpu).backward()
    GRADS[name](gpu).backward()
    assert gpu.grad.device == "webgpu"
    np.testing.assert_allclose(gpu.grad.numpy(), cpu.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_errors_name_the_op():
    gpu = webgrad.tensor(sample((3, 4)), device="webgpu")
    with pytest.raises(IndexError, match="sum"):
        gpu.sum(2)
    with pytest.raises(ValueError, match="argmax"):
        webgrad.zeros(0, device="webgpu").argmax()
