"""NaN and infinities through every reduction and norm, on every device.

The inputs put a NaN (or an infinity) first, in the middle and last in a row, and
in a long row that a GPU reduces in several workgroups. Each row's reference is
numpy's (NaN propagates, argmax points at the first NaN), and
``test_references_match_torch`` checks those references against torch itself.
``clip_grad_norm_`` must see a NaN norm, so ``error_if_nonfinite`` raises.
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import assert_close, need_module

nan, inf = np.nan, np.inf


def _with_nan():
    x = np.arange(20, dtype=np.float32).reshape(4, 5) * 0.25 - 2
    x[0, 0] = x[1, 2] = x[2, 4] = nan  # first, middle, last; row 3 has none
    return x


def _with_inf():
    return np.array([[inf, 1, 2, 3, 4], [1, -inf, 2, 3, 4], [inf, -inf, 0, 1, 2],
                     [-inf, -inf, -inf, -inf, -inf]], dtype=np.float32)


def _long_row():
    x = np.linspace(-1, 1, 2 * 1500, dtype=np.float32).reshape(2, 1500)
    x[0, 777] = nan
    return x


INPUTS = {"nan": _with_nan, "inf": _with_inf, "long_row": _long_row}


def _top2(x):
    """torch.topk(x, 2, 1).values: NaN counts as larger than everything."""
    order = np.argsort(-np.where(np.isnan(x), np.inf, x), axis=1, kind="stable")[:, :2]
    return np.take_along_axis(x, order, 1)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# name -> (webgrad fn, numpy reference, torch fn, inputs it runs on)
ROWS = {
    "sum": (lambda x: x.sum(1), lambda x: x.sum(1), lambda x: x.sum(1)),
    "sum_all": (lambda x: x.sum(), lambda x: x.sum(), lambda x: x.sum()),
    "mean": (lambda x: x.mean(1), lambda x: x.mean(1), lambda x: x.mean(1)),
    "amax": (lambda x: x.amax(1), lambda x: x.max(1), lambda x: x.amax(1)),
    "amin": (lambda x: x.amin(1), lambda x: x.min(1), lambda x: x.amin(1)),
    "amax_all": (lambda x: x.amax(), lambda x: x.max(), lambda x: x.amax()),
    "max_values": (lambda x: x.max(1).values, lambda x: x.max(1), lambda x: x.max(1).values),
    "max_indices": (lambda x: x.max(1).indices, lambda x: np.argmax(x, 1), lambda x: x.max(1).indices),
    "min_values": (lambda x: x.min(1).values, lambda x: x.min(1), lambda x: x.min(1).values),
    "min_indices": (lambda x: x.min(1).indices, lambda x: np.argmin(x, 1), lambda x: x.min(1).indices),
    "max_all": (lambda x: x.max(), lambda x: x.max(), lambda x: x.max()),
    "min_all": (lambda x: x.min(), lambda x: x.min(), lambda x: x.min()),
    "argmax": (lambda x: x.argmax(1), lambda x: np.argmax(x, 1), lambda x: x.argmax(1)),
    "argmin": (lambda x: x.argmin(1), lambda x: np.argmin(x, 1), lambda x: x.argmin(1)),
    "argmax_all": (lambda x: x.argmax(), lambda x: np.argmax(x), lambda x: x.argmax()),
    "var": (lambda x: x.var(1), lambda x: x.var(1, ddof=1), lambda x: x.var(1)),
    "std": (lambda x: x.std(1), lambda x: x.std(1, ddof=1), lambda x: x.std(1)),
    "prod": (lambda x: x.prod(1), lambda x: x.prod(1), lambda x: x.prod(1)),
    "logsumexp": (lambda x: x.logsumexp(1), lambda x: np.logaddexp.reduce(x, axis=1), lambda x: x.logsumexp(1)),
    "norm": (lambda x: x.norm(), lambda x: np.sqrt((x * x).sum()), lambda x: x.norm()),
    "norm_2": (lambda x: x.norm(dim=1), lambda x: np.sqrt((x * x).sum(1)), lambda x: x.norm(dim=1)),
    "norm_1": (lambda x: x.norm(p=1, dim=1), lambda x: np.abs(x).sum(1), lambda x: x.norm(p=1, dim=1)),
    "norm_inf": (lambda x: x.norm(p=float("inf"), dim=1), lambda x: np.abs(x).max(1),
                 lambda x: x.norm(p=float("inf"), dim=1)),
    "norm_3": (lambda x: x.norm(p=3, dim=1), lambda x: (np.abs(x) ** 3).sum(1) ** (1 / 3),
               lambda x: x.norm(p=3, dim=1)),
    "norm_fro_keepdim": (lambda x: webgrad.norm(x, "fro", dim=1, keepdim=True),
                         lambda x: np.sqrt((x * x).sum(1, keepdims=True)),
                         lambda x: x.norm("fro", dim=1, keepdim=True)),
    "softmax": (lambda x: x.softmax(1), _softmax, lambda x: x.softmax(1)),
    "cumsum": (lambda x: x.cumsum(1), lambda x: np.cumsum(x, 1), lambda x: x.cumsum(1)),
    "cumprod": (lambda x: webgrad.cumprod(x, 1), lambda x: np.cumprod(x, 1), lambda x: x.cumprod(1)),
    "sort": (lambda x: webgrad.sort(x, 1)[0], lambda x: np.sort(x, 1), lambda x: x.sort(1)[0]),  # NaN last
    "topk": (lambda x: webgrad.topk(x, 2, 1)[0], _top2, lambda x: x.topk(2, 1)[0]),
    "any": (lambda x: x.any(1), lambda x: x.any(1), lambda x: x.any(1)),
    "all": (lambda x: x.all(1), lambda x: x.all(1), lambda x: x.all(1)),
}
# inf - inf is NaN in softmax's shift, as in torch; its inf row is covered by torch's own rule.
CASES = [(name, kind) for name in ROWS for kind in INPUTS if not (name == "softmax" and kind == "inf")]


def _reference(name, kind):
    x = INPUTS[kind]().astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(ROWS[name][1](x))


@pytest.mark.parametrize("name, kind", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_reduction_with_nan_and_inf(name, kind, device):
    x = webgrad.tensor(INPUTS[kind](), device=device)
    expected = _reference(name, kind)
    out = ROWS[name][0](x)
    if expected.dtype.kind in "iub":
        assert_close(out, expected, 0, 0, msg=f"{name}-{kind}")
    else:
        assert_close(out, expected, 1e-5, 1e-5, msg=f"{name}-{kind}")


@pytest.mark.parametrize("name, kind", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_references_match_torch(name, kind):
    torch = need_module("torch")
    got = ROWS[name][2](torch.tensor(INPUTS[kind]()).double()).numpy()
    np.testing.assert_allclose(got, _reference(name, kind), rtol=1e-12, equal_nan=True, err_msg=f"{name}-{kind}")


@pytest.mark.parametrize("bad", [nan, inf, -inf])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
def test_clip_grad_norm_sees_non_finite_gradients(bad, norm_type, device):
    """A NaN or infinite gradient gives a non-finite total norm: error_if_nonfinite
    raises (and leaves the gradients alone), and without it the norm says so."""
    params = [webgrad.zeros(3, device=device, requires_grad=True) for _ in range(2)]
    params[0].grad = webgrad.tensor([1.0, 2.0, 2.0], device=device)
    params[1].grad = webgrad.tensor([bad, 1.0, 0.0], device=device)
    with pytest.raises(RuntimeError, match="non-finite"):
        webgrad.nn.utils.clip_grad_norm_(params, 1.0, norm_type=norm_type, error_if_nonfinite=True)
    np.testing.assert_array_equal(params[0].grad.numpy(), [1.0, 2.0, 2.0])
    total = webgrad.nn.utils.clip_grad_norm_(params, 1.0, norm_type=norm_type)
    assert not np.isfinite(total.item())


def test_norm_of_zeros_keeps_its_zero_gradient(device):
    """The NaN fix (total != 0) must not bring back 0 * inf at a zero vector."""
    x = webgrad.zeros(3, device=device, requires_grad=True)
    x.norm().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])


def test_ne_with_nan(device):
    """NaN != anything is True (WGSL may compile != as an ordered compare)."""
    a = webgrad.tensor([nan, nan, 1.0, inf, 0.0], device=device)
    b = webgrad.tensor([0.0, nan, nan, inf, -0.0], device=device)
    assert_close(a != b, [True, True, True, False, False])
    assert_close(a == b, [False, False, False, True, True])
