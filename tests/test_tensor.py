"""The Tensor itself: random creation, dtype inference in tensor(), conversions,
leaving the device (item, tolist, numpy), views and copies, and repr."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import assert_close, supports_dtype


# -- random creation ---------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda d: webgrad.rand(3, 4, device=d), lambda d: webgrad.randn((3, 4), device=d),
    lambda d: webgrad.randint(0, 10, (3, 4), device=d), lambda d: webgrad.rand_like(webgrad.zeros(3, 4, device=d)),
    lambda d: webgrad.randn_like(webgrad.zeros(3, 4, device=d)), lambda d: webgrad.randperm(12, device=d).reshape(3, 4),
])
def test_random_shapes_and_reproducibility(make, device):
    webgrad.manual_seed(123)
    first = make(device)
    webgrad.manual_seed(123)
    second = make(device)
    third = make(device)
    assert tuple(first.shape) == (3, 4) and first.device == device
    np.testing.assert_array_equal(first.numpy(), second.numpy())
    assert not np.array_equal(second.numpy(), third.numpy())
    assert webgrad.initial_seed() == 123


def test_rand_range_and_dtype(device):
    r = webgrad.rand(10_000, device=device)
    assert r.dtype is webgrad.float32
    values = r.numpy()
    assert values.min() >= 0.0 and values.max() < 1.0
    assert abs(values.mean() - 0.5) < 0.02
    if supports_dtype(device, webgrad.float64):
        assert webgrad.rand(2, dtype=webgrad.float64, device=device).dtype is webgrad.float64


def test_randn_statistics(device):
    values = webgrad.randn(20_000, device=device).numpy()
    assert abs(values.mean()) < 0.03 and abs(values.std() - 1.0) < 0.03


def test_randint_ranges(device):
    values = webgrad.randint(3, 7, (1000,), device=device)
    assert values.dtype is webgrad.int64
    assert set(np.unique(values.numpy())) == {3, 4, 5, 6}
    values = webgrad.randint(5, (200,), device=device).numpy()  # randint(high, size)
    assert values.min() >= 0 and values.max() <= 4
    assert webgrad.randint(0, 3, (4,), dtype=webgrad.int32, device=device).dtype is webgrad.int32
    like = webgrad.randint_like(webgrad.zeros(50, device=device), 2, 4)
    assert like.dtype is webgrad.float32 and set(np.unique(like.numpy())) <= {2.0, 3.0}


def test_randperm_is_a_permutation():
    p = webgrad.randperm(20)
    assert p.dtype is webgrad.int64
    assert sorted(p.tolist()) == list(range(20))


def test_random_requires_grad():
    assert webgrad.randn(2, requires_grad=True).requires_grad
    assert webgrad.zeros(2, requires_grad=True).is_leaf


def test_inplace_random_fill():
    webgrad.manual_seed(1)
    x = webgrad.zeros(1000).uniform_(-2.0, 3.0)
    assert x.numpy().min() >= -2.0 and x.numpy().max() < 3.0
    y = webgrad.zeros(5000).normal_(1.0, 0.5)
    assert abs(y.numpy().mean() - 1.0) < 0.05 and abs(y.numpy().std() - 0.5) < 0.05


# -- dtype inference --------------------------------------------------------------------
@pytest.mark.parametrize("data, dtype", [
    (1.0, "float32"), ([1.0, 2.0], "float32"), (1, "int64"), ([[1, 2]], "int64"), (True, "bool"),
    ([True, False], "bool"), ([1, 2.5], "float32"), ([True, 2], "int64"), (np.array([1.0]), "float64"),
    (np.float64(1.0), "float64"), (np.array([1.0], dtype=np.float32), "float32"),
    (np.array([1], dtype=np.int32), "int32"),
    (np.array([1], dtype=np.int16), "int16"), (np.array([1], dtype=np.uint16), "int64"), (np.array([True]), "bool"),
    ([], "float32"),
])
def test_tensor_dtype_inference(data, dtype):
    assert webgrad.tensor(data).dtype is webgrad.dtypes.from_name(dtype)


def test_tensor_dtype_inference_matches_torch(torch_ref):
    samples = [1.0, 1, True, [1, 2.5], [True, 2], np.array([1.0]), np.array([1], dtype=np.int32), [[1.5]]]
    theirs = torch_ref(lambda torch: np.array([str(torch.tensor(data).dtype).split(".")[-1] for data in samples]))
    assert [webgrad.tensor(data).dtype.name for data in samples] == theirs.tolist()


def test_tensor_copies_its_data():
    array = np.array([1.0, 2.0])
    t = webgrad.tensor(array)
    array[0] = 100.0
    assert t.tolist() == [1.0, 2.0]
    shared = webgrad.from_numpy(array)
    array[1] = -1.0
    assert shared.tolist() == [100.0, -1.0]


def test_tensor_from_a_tensor_is_a_detached_copy():
    x = webgrad.tensor([1.0, 2.0], requires_grad=True)
    y = webgrad.tensor(x)
    assert not y.requires_grad and y.tolist() == [1.0, 2.0]
    assert webgrad.as_tensor(x) is x


def test_default_dtype_switch():
    webgrad.set_default_dtype(webgrad.float64)
    try:
        assert webgrad.tensor([1.0]).dtype is webgrad.float64
        assert webgrad.zeros(2).dtype is webgrad.float64
        assert webgrad.get_default_dtype() is webgrad.float64
    finally:
        webgrad.set_default_dtype(webgrad.float32)
    with pytest.raises(TypeError, match="float32 or float64"):
        webgrad.set_default_dtype(webgrad.int64)


# -- conversions and leaving the device ------------------------------------------------------
def test_to_and_type_conversions(device):
    x = webgrad.tensor([1.7, -1.7, 0.0], device=device)
    assert x.long().tolist() == [1, -1, 0] and x.long().dtype is webgrad.int64
    assert x.int().dtype is webgrad.int32
    assert x.bool().tolist() == [True, True, False]
    assert x.float() is x  # already float32: no copy, as in PyTorch
    assert x.to(device) is x
    assert x.to(webgrad.float32, copy=True) is not x
    assert x.to(dtype=webgrad.int64).dtype is webgrad.int64
    assert webgrad.tensor([1, 0]).double().tolist() == [1.0, 0.0]
    if supports_dtype(device, webgrad.float64):
        assert x.to(webgrad.float64).dtype is webgrad.float64
        assert x.to(device=device, dtype=webgrad.float64).dtype is webgrad.float64
    assert x.to("cpu", webgrad.float64).device == "cpu"  # float64 always works on the cpu


def test_cast_keeps_gradient_flowing():
    x = webgrad.tensor([1.0, 2.0], requires_grad=True)
    x.double().pow(2).sum().backward()
    assert x.grad.dtype is webgrad.float32
    assert_close(x.grad, [2.0, 4.0])


def test_item_and_python_numbers():
    assert webgrad.tensor([2.5]).item() == 2.5
    assert isinstance(webgrad.tensor(3).item(), int)
    assert isinstance(webgrad.tensor(True).item(), bool)
    assert isinstance(webgrad.tensor([[1.5]]).item(), float)
    assert float(webgrad.tensor(2.0)) == 2.0 and int(webgrad.tensor(7)) == 7
    assert bool(webgrad.tensor([1.0])) and not bool(webgrad.tensor(0))
    assert [1, 2, 3][webgrad.tensor(1)] == 2  # __index__
    with pytest.raises(TypeError):
        [1, 2][webgrad.tensor(1.0)]


def test_tolist():
    assert webgrad.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert webgrad.tensor(2.0).tolist() == 2.0
    assert webgrad.tensor([True]).tolist() == [True]
    assert webgrad.zeros(0).tolist() == []


def test_numpy_and_array_protocol():
    x = webgrad.tensor([[1.0, 2.0]])
    assert isinstance(x.numpy(), np.ndarray) and x.numpy().dtype == np.float32
    assert np.asarray(x).shape == (1, 2)
    assert np.asarray(webgrad.ones(2, requires_grad=True)).tolist() == [1.0, 1.0]  # detaches


def test_len_iter_and_size():
    x = webgrad.zeros(3, 2)
    assert len(x) == 3 and [tuple(r.shape) for r in x] == [(2,)] * 3
    assert x.size() == (3, 2) and x.size(-1) == 2 and x.shape == webgrad.Size([3, 2])
    assert repr(x.shape) == "webgrad.Size([3, 2])"
    assert x.numel() == 6 and x.dim() == 2 and x.ndim == 2
    assert x.element_size() == 4 and x.is_floating_point()
    with pytest.raises(TypeError):
        len(webgrad.tensor(1.0))


# -- views and copies ------------------------------------------------------------------------
def test_clone_is_a_copy_and_differentiable():
    x = webgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    assert y.grad_fn is not None
    with webgrad.no_grad():
        y.mul_(3.0)
    assert x.tolist() == [1.0, 2.0]


def test_views_share_memory_with_their_base():
    base = webgrad.zeros(3, 4)
    base[1][2] = 5.0
    base[:, 0].fill_(1.0)
    base.view(12)[11] = 7.0
    base.T[3, 0] = 2.0
    expected = np.zeros((3, 4))
    expected[1, 2], expected[:, 0], expected[2, 3], expected[0, 3] = 5.0, 1.0, 7.0, 2.0
    assert_close(base, expected)


def test_flip_gather_and_advanced_index_are_copies():
    x = webgrad.arange(4.0)
    copies = [x.flip(0), x[webgrad.tensor([0, 1])], x.gather(0, webgrad.tensor([0, 1])), x.clone()]
    x.fill_(-1.0)
    assert [c.tolist() for c in copies] == [[3.0, 2.0, 1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0, 2.0, 3.0]]


def test_contiguous_and_transpose():
    x = webgrad.arange(6.0).reshape(2, 3)
    t = x.T
    assert tuple(t.shape) == (3, 2)
    c = t.contiguous()
    assert c.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert c.contiguous() is c
    assert webgrad.arange(3.0).T.tolist() == [0.0, 1.0, 2.0]


# -- repr ----------------------------------------------------------------------------------
@pytest.mark.parametrize("data, expected", [
    ([1.0, 2.0], "tensor([1., 2.])"),
    ([1.5, -2.25], "tensor([ 1.5000, -2.2500])"),
    (3.5, "tensor(3.5000)"),
    ([1, 2], "tensor([1, 2])"),
    ([True, False], "tensor([ True, False])"),
    ([[1.0, 2.0], [3.0, 4.0]], "tensor([[1., 2.],\n        [3., 4.]])"),
    ([1e-5, 1.0], "tensor([1.0000e-05, 1.0000e+00])"),
    ([float("nan"), float("inf"), 1.0], "tensor([nan, inf, 1.])"),
    ([], "tensor([])"),
])
def test_repr(data, expected):
    assert repr(webgrad.tensor(data)) == expected


def test_repr_suffixes():
    assert repr(webgrad.tensor([1.0, 2.0], dtype=webgrad.float64)) == "tensor([1., 2.], dtype=webgrad.float64)"
    assert repr(webgrad.tensor([1, 2], dtype=webgrad.int32)) == "tensor([1, 2], dtype=webgrad.int32)"
    assert repr(webgrad.tensor([1.0, 2.0], requires_grad=True)) == "tensor([1., 2.], requires_grad=True)"
    assert repr(webgrad.tensor([1.0, 2.0], requires_grad=True) * 2) == "tensor([2., 4.], grad_fn=<MulBackward>)"
    assert repr(webgrad.tensor([1.0], requires_grad=True).sum()) == "tensor(1., grad_fn=<SumBackward>)"
    assert repr(webgrad.zeros(2, 0)) == "tensor([], size=(2, 0))"
    assert repr(webgrad.zeros(0, dtype=webgrad.int64)) == "tensor([], dtype=webgrad.int64)"
    assert str(webgrad.tensor([1.0])) == "tensor([1.])"


def test_repr_rows_wrap_at_80_columns_as_torch_does():
    """A wide tensor's rows continue on indented lines of at most 80 columns (torch's linewidth);
    the playground's output pane keeps these lines whole and scrolls sideways."""
    lines = repr(webgrad.arange(40.0).reshape(2, 20) * 1000.5).splitlines()
    assert len(lines) == 8 and max(len(line) for line in lines) <= 80, lines
    assert lines[0].startswith("tensor([[    0.0000,  1000.5000,") and lines[1].startswith(" " * 9)


def test_repr_matches_torch(torch_ref):
    rng = np.random.default_rng(0)
    samples = [
        # integers spelled int64: numpy's default int is int32 on wasm32 (Pyodide), torch's is int64
        [1.0, 2.0], [0.1, 0.2, 0.3], [-0.0, 1.0], [123456.7, 1.0], [1e10, 1.0],
        np.array([[1, -20], [300, 4]], np.int64), np.arange(2000, dtype=np.int64), np.arange(12.0).reshape(3, 4),
        np.linspace(-3, 3, 40),
        rng.standard_normal((20, 30)), rng.standard_normal((2, 30, 40)) * 1e5, np.arange(2000.0).reshape(2, 1000),
        [True], [[True, False]], np.array([1.5, 2.0], dtype=np.float64), np.array([1, 2], dtype=np.int32),
        np.int64(7), -0.5,
    ]
    arrays = []
    for data in samples:
        data = np.asarray(data)
        arrays.append(data.astype(np.float32) if data.dtype == np.float64 and data.ndim and data.size > 2 else data)
    reprs = torch_ref(lambda torch: np.array([repr(torch.tensor(a)).replace("torch.", "webgrad.") for a in arrays]))
    for data, theirs in zip(arrays, reprs.tolist()):
        ours = repr(webgrad.tensor(data))
        assert ours == theirs, f"\n{ours}\n{theirs}"


def test_signed_zero_and_nan_scalars_keep_their_bits(device):
    """Scalars inside ops are cached; -0.0 == 0.0 must not make them share a tensor."""
    x = webgrad.tensor([1.0, -2.0], device=device)
    assert np.signbit((x * -0.0).numpy()).tolist() == [True, False]
    assert np.signbit((x * 0.0).numpy()).tolist() == [False, True]
    assert (1 / (x * 0.0)).numpy().tolist() == [np.inf, -np.inf]
    assert np.isnan((x + float("nan")).numpy()).all()
    assert (x + 1.0).numpy().tolist() == [2.0, -1.0]
