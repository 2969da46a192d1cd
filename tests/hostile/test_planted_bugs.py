"""Tests for bugs that were planted in the source and slipped through the rest of the suite.

Each test names the planted bug it catches (issue 7, "Tests that let bugs through");
each one was checked to fail with that bug in place. They run on every device.
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
import webgrad.nn as nn
import webgrad.nn.functional as F
from conftest import assert_close, need_module, requires_webgpu


def test_pow_gradient_for_the_exponent_at_a_zero_base(device):
    """Bug: pow's vjp used log(where(x >= 0, x, 1)), giving log(0) * 0 = nan for dy at
    x = 0. torch: d(x ** y)/dy = x ** y * log(x) is 0 there."""
    x = webgrad.tensor([0.0, 2.0, 0.0], device=device)
    y = webgrad.tensor([1.5, 1.5, 2.0], device=device, requires_grad=True)
    (x ** y).sum().backward()
    expected = np.array([0.0, 2.0 ** 1.5 * np.log(2.0), 0.0])
    assert_close(y.grad, expected, 1e-5, 1e-6)


def test_broadcast_gradient_over_a_leading_batch_of_one(device):
    """Bug: _sum_to read grad.shape[i] instead of grad.shape[i + lead], so a (1, 3)
    operand broadcast against (1, 2, 3) got the wrong dims summed."""
    a = webgrad.tensor([[1.0, 2.0, 3.0]], device=device, requires_grad=True)
    b = webgrad.tensor(np.arange(6.0, dtype=np.float32).reshape(1, 2, 3), device=device, requires_grad=True)
    weights = webgrad.tensor(np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]], dtype=np.float32), device=device)
    ((a + b) * weights).sum().backward()
    assert_close(a.grad, [[5.0, 7.0, 9.0]])
    assert_close(b.grad, weights.numpy())
    c = webgrad.tensor([[2.0], [3.0]], device=device, requires_grad=True)  # (2, 1) against (1, 2, 3)
    (b * c).sum().backward()
    assert_close(c.grad, [[3.0], [12.0]])


@pytest.mark.parametrize("p", [float("inf"), 1, 2, 3])
def test_norm_keepdim_shape(p, device):
    """Bug: norm(p=inf, dim=1, keepdim=True) ignored keepdim ((3,) instead of (3, 1))."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    x = webgrad.tensor(data, device=device)
    out = x.norm(p=p, dim=1, keepdim=True)
    expected = np.abs(data).max(1, keepdims=True) if p == float("inf") else \
        (np.abs(data) ** p).sum(1, keepdims=True) ** (1 / p)
    assert_close(out, expected, 1e-5, 1e-5)
    assert tuple(x.norm(p=p, dim=0, keepdim=True).shape) == (1, 4)


def test_layer_norm_uses_its_eps(device):
    """Bug: nn.LayerNorm dropped its eps. On low-variance input eps dominates: with
    eps=0.1 the output differs from eps=1e-5 by more than 1."""
    torch = need_module("torch")
    data = (np.array([[0.0, 0.01, -0.01, 0.02], [1.0, 1.0, 1.01, 0.99]], dtype=np.float32))
    layer = nn.LayerNorm(4, eps=0.1).to(device)
    expected = torch.nn.LayerNorm(4, eps=0.1)(torch.tensor(data)).detach().numpy()
    assert_close(layer(webgrad.tensor(data, device=device)), expected, 1e-4, 1e-5)
    assert_close(F.layer_norm(webgrad.tensor(data, device=device), (4,), eps=0.1), expected, 1e-4, 1e-5)


@pytest.mark.parametrize("dilation, padding, stride", [((2, 1), 0, 1), ((1, 2), 1, 1), ((2, 3), 1, 2)])
def test_max_pool_indices_with_asymmetric_dilation(dilation, padding, stride, device):
    """Bug: max_pool2d(return_indices=True) used the column dilation for the row offset."""
    torch = need_module("torch")
    data = np.random.default_rng(3).standard_normal((2, 3, 7, 8)).astype(np.float32)
    values, indices = F.max_pool2d(webgrad.tensor(data, device=device), 3, stride=stride, padding=padding,
                                   dilation=dilation, return_indices=True)
    t_values, t_indices = torch.nn.functional.max_pool2d(torch.tensor(data), 3, stride=stride, padding=padding,
                                                         dilation=dilation, return_indices=True)
    assert_close(values, t_values.numpy(), 0, 0)
    assert_close(indices, t_indices.numpy(), dtype="int64")


@requires_webgpu
@pytest.mark.parametrize("dim", [0, 1])
def test_webgpu_gather_rejects_an_index_equal_to_the_size(dim):
    """Bug: the WebGPU gather bounds check used <= instead of <, so index == size
    silently read the next row."""
    x = webgrad.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="webgpu")
    shape = (1, 4) if dim == 0 else (3, 1)
    index = webgrad.zeros(*shape, dtype=webgrad.int64, device="webgpu") + x.shape[dim]
    with pytest.raises(IndexError, match="out of bounds in gather"):
        x.gather(dim, index).numpy()
    last = index - 1  # size - 1 is fine
    assert_close(x.gather(dim, last), np.take_along_axis(x.numpy(), last.numpy(), dim), 0, 0)


def test_no_grad_decorator_restores_grad_mode_when_the_function_raises():
    """Bug: @no_grad() as a decorator left gradients off after an exception. Checked
    right here, not left to the fixture that resets grad mode after each test."""
    @webgrad.no_grad()
    def fails():
        assert not webgrad.is_grad_enabled()
        raise ValueError("inside")

    @webgrad.no_grad()
    def works(x):
        return x * 2

    assert webgrad.is_grad_enabled()
    with pytest.raises(ValueError, match="inside"):
        fails()
    assert webgrad.is_grad_enabled()
    x = webgrad.ones(2, requires_grad=True)
    assert not works(x).requires_grad
    assert webgrad.is_grad_enabled() and (x * 2).requires_grad
    with webgrad.no_grad():  # nested: the decorator restores the outer mode (off), also on error
        with pytest.raises(ValueError):
            fails()
        assert not webgrad.is_grad_enabled()
    assert webgrad.is_grad_enabled()


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_leaves_small_gradients_unchanged(norm_type, device):
    """Bug: clip_grad_norm_ did not cap its coefficient max_norm / norm at 1, so gradients
    whose norm is below max_norm were scaled up."""
    p = webgrad.zeros(3, device=device, requires_grad=True)
    grad = np.array([0.3, -0.4, 0.0], dtype=np.float32)
    p.grad = webgrad.tensor(grad, device=device)
    total = nn.utils.clip_grad_norm_([p], max_norm=10.0, norm_type=norm_type)
    assert_close(p.grad, grad, 0, 0)
    assert total.item() == pytest.approx(np.linalg.norm(grad, ord=norm_type), rel=1e-6)
    nn.utils.clip_grad_norm_([p], max_norm=0.1, norm_type=norm_type)  # above max_norm: scaled down to it
    assert np.linalg.norm(p.grad.numpy(), ord=norm_type) == pytest.approx(0.1, rel=1e-4)
