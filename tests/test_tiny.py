"""A fast smoke test (well under 2 s): creation, a few ops, backward and dtype
promotion. Run it alone for a quick check: ``pytest tests/test_tiny.py``."""
from __future__ import annotations

import numpy as np

import webgrad


def test_create_and_read_back():
    x = webgrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.shape == (2, 2) and x.dtype is webgrad.float32
    assert webgrad.zeros(2, 3).sum().item() == 0.0
    assert webgrad.arange(4).tolist() == [0, 1, 2, 3]
    assert repr(webgrad.tensor([1.0, 2.0])) == "tensor([1., 2.])"


def test_a_few_ops_match_numpy():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = webgrad.tensor(a)
    np.testing.assert_allclose((x @ x.T).numpy(), a @ a.T)
    np.testing.assert_allclose((x * 2 + 1).exp().sum(1).numpy(), np.exp(a * 2 + 1).sum(1), rtol=1e-6)
    np.testing.assert_allclose(x.softmax(-1).numpy().sum(-1), [1.0, 1.0], rtol=1e-6)
    assert x[1, ::2].tolist() == [3.0, 5.0]
    assert x.max(1).indices.tolist() == [2, 2]


def test_backward():
    w = webgrad.tensor([1.0, -2.0], requires_grad=True)
    x = webgrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    loss = ((x @ w).tanh() ** 2).mean()
    loss.backward()
    h = np.tanh(np.array([[1.0, 2.0], [3.0, 4.0]]) @ np.array([1.0, -2.0]))
    expected = (2 * h * (1 - h ** 2)) @ np.array([[1.0, 2.0], [3.0, 4.0]]) / 2
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-4)
    assert abs(webgrad.grad(webgrad.tanh)(1.0).item() - 0.4199743) < 1e-6


def test_dtype_promotion():
    i, f = webgrad.tensor([1, 2]), webgrad.tensor([1.0, 2.0])
    assert (i + i).dtype is webgrad.int64
    assert (i + f).dtype is webgrad.float32
    assert (i / 2).dtype is webgrad.float32
    assert (i * 2.5).dtype is webgrad.float32
    assert (f + webgrad.tensor(1.0, dtype=webgrad.float64)).dtype is webgrad.float32  # 0-d does not widen
    assert (i + webgrad.tensor(1.0, dtype=webgrad.float64)).dtype is webgrad.float64  # but lifts the category
    assert (i > 1).dtype is webgrad.bool
    assert (webgrad.tensor([True]) + 1).dtype is webgrad.int64
