"""Every differentiable case of the op table, in float64, against central finite
differences; then second derivatives (create_graph=True) for a few ops.

Gradients run on the cpu here: finite differences need float64, which WGSL lacks.
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import gradcheck, gradgradcheck
from op_cases import CASES

DIFFERENTIABLE = [c for c in CASES if c.grad]


def _float64_inputs(case):
    """The case's inputs with every float one in float64 and requiring grad."""
    inputs = []
    for a in case.make_inputs():
        if a.dtype.kind == "f":
            inputs.append(webgrad.tensor(a.astype(np.float64), requires_grad=True))
        else:
            inputs.append(webgrad.tensor(a))
    return inputs


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.name)
def test_gradient(case):
    inputs = _float64_inputs(case)
    assert any(t.requires_grad for t in inputs), f"{case.name} is marked differentiable but has no float input"
    gradcheck(case.fn, inputs)


def test_table_has_many_differentiable_cases():
    assert len(DIFFERENTIABLE) > 200


# -- second derivatives ---------------------------------------------------------------
def _leaf(*shape, seed=0, low=-1.5, high=1.5):
    rng = np.random.default_rng(seed)
    return webgrad.tensor(rng.uniform(low, high, shape), dtype=webgrad.float64, requires_grad=True)


DOUBLE_BACKWARD = {
    "tanh": (lambda x: x.tanh(), lambda: [_leaf(3, 4)]),
    "exp": (lambda x: x.exp(), lambda: [_leaf(3, 4)]),
    "mul": (lambda x, y: x * y * x, lambda: [_leaf(3, 4, seed=1), _leaf(4, seed=2)]),
    "matmul": (lambda x, y: (x @ y) * (x @ y), lambda: [_leaf(2, 3, seed=3), _leaf(3, 4, seed=4)]),
    "softmax": (lambda x: x.softmax(-1), lambda: [_leaf(3, 5, seed=5)]),
    "log_softmax": (lambda x: x.log_softmax(0), lambda: [_leaf(4, 3, seed=6)]),
    "sigmoid": (lambda x: x.sigmoid(), lambda: [_leaf(5, seed=7)]),
    "div_sqrt": (lambda x, y: x.sqrt() / y, lambda: [_leaf(4, seed=8, low=0.5, high=2), _leaf(4, seed=9, low=0.5)]),
    "pow": (lambda x, y: x ** y, lambda: [_leaf(4, seed=10, low=0.5, high=2), _leaf(4, seed=11)]),
    "sum_mean_broadcast": (lambda x, y: ((x + y) ** 2).mean(0), lambda: [_leaf(3, 1, seed=12), _leaf(4, seed=13)]),
    "prod": (lambda x: x.prod(1), lambda: [_leaf(3, 4, seed=14)]),
    "logsumexp": (lambda x: x.logsumexp(-1), lambda: [_leaf(2, 5, seed=15)]),
    "var": (lambda x: x.var(0), lambda: [_leaf(5, 2, seed=16)]),
    "cross_entropy": (lambda x: webgrad.nn.functional.cross_entropy(x, webgrad.tensor([2, 0, -100]), reduction="none",
                                                                     label_smoothing=0.2) ** 2,
                      lambda: [_leaf(3, 4, seed=18)]),
    "cross_entropy_spatial_mean": (lambda x: webgrad.nn.functional.cross_entropy(
        x, webgrad.tensor([[1, 0], [2, 2]]), ignore_index=0) * x.sum(), lambda: [_leaf(2, 3, 2, seed=19)]),
    "batch_norm": (lambda x, w, b: webgrad.nn.functional.batch_norm(x, None, None, w, b, training=True) ** 2,
                   lambda: [_leaf(4, 3, 2, seed=20), _leaf(3, seed=21), _leaf(3, seed=22)]),
    "getitem_gather": (lambda x: x[1:, ::2].gather(1, webgrad.tensor([[1, 0], [0, 0]])) ** 3,
                       lambda: [_leaf(3, 4, seed=17)]),
}


@pytest.mark.parametrize("name", sorted(DOUBLE_BACKWARD))
def test_second_derivative(name):
    fn, make = DOUBLE_BACKWARD[name]
    gradgradcheck(fn, make())


def test_second_derivative_of_tanh_matches_formula():
    x = _leaf(5)
    (g,) = webgrad.autograd.grad(x.tanh().sum(), x, create_graph=True)
    (gg,) = webgrad.autograd.grad(g.sum(), x)
    t = np.tanh(x.detach().numpy())
    np.testing.assert_allclose(g.detach().numpy(), 1 - t ** 2, rtol=1e-12)
    np.testing.assert_allclose(gg.numpy(), -2 * t * (1 - t ** 2), rtol=1e-12)


def test_third_derivative_of_exp():
    x = _leaf(3)
    (g,) = webgrad.autograd.grad(x.exp().sum(), x, create_graph=True)
    (gg,) = webgrad.autograd.grad(g.sum(), x, create_graph=True)
    (ggg,) = webgrad.autograd.grad(gg.sum(), x)
    np.testing.assert_allclose(ggg.numpy(), np.exp(x.detach().numpy()), rtol=1e-12)
