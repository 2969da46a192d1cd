"""``webgrad.autograd.Function`` (custom ops with a hand-written backward),
``autograd.grad``/``backward`` options and ``autograd.functional`` (jacobian,
hessian, vjp): against finite differences and, where installed, against torch."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import assert_close, gradcheck, gradgradcheck, need_module
from webgrad.autograd import Function
from webgrad.autograd.function import once_differentiable


def _leaf(*shape, seed=0, low=-1.5, high=1.5, device="cpu", dtype=webgrad.float64):
    rng = np.random.default_rng(seed)
    return webgrad.tensor(rng.uniform(low, high, shape), dtype=dtype, device=device, requires_grad=True)


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class Cube(Function):
    """Saves its input; a backward in Tensor ops, so it differentiates again."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x


class ScaledSinCos(Function):
    """Two outputs, a non-tensor argument and a second tensor."""

    @staticmethod
    def forward(ctx, x, scale, y):
        ctx.scale = scale
        ctx.save_for_backward(x, y)
        return (x * y).sin() * scale, x.cos()

    @staticmethod
    def backward(ctx, g_sin, g_cos):
        x, y = ctx.saved_tensors
        d = g_sin * (x * y).cos() * ctx.scale
        gx = d * y - g_cos * x.sin() if ctx.needs_input_grad[0] else None
        gy = d * x if ctx.needs_input_grad[2] else None
        return gx, None, gy


class MaxWithIndex(Function):
    @staticmethod
    def forward(ctx, x):
        values, indices = x.max(dim=-1)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(x, indices)
        return values, indices

    @staticmethod
    def backward(ctx, g_values, g_indices):
        x, indices = ctx.saved_tensors
        onehot = webgrad.arange(x.shape[-1], device=x.device) == indices.unsqueeze(-1)
        return onehot * g_values.unsqueeze(-1)


def test_custom_function_value_gradient_and_grad_fn(device):
    dtype = webgrad.float32 if device == "webgpu" else webgrad.float64
    x = _leaf(3, 4, device=device, dtype=dtype)
    y = Exp.apply(x)
    assert y.requires_grad and y.grad_fn.name() == "ExpBackward" and y.device == device
    y.sum().backward()
    assert x.grad.device == device
    assert_close(x.grad, np.exp(x.detach().numpy()), 1e-6, 1e-6)
    gradcheck(lambda t: Exp.apply(t) * t, [_leaf(3, 4)])


def test_two_outputs_non_tensor_argument_and_needs_input_grad():
    x, y = _leaf(2, 3, seed=1), _leaf(2, 3, seed=2)
    gradcheck(lambda a, b: ScaledSinCos.apply(a, 1.5, b), [x, y])
    # only one output used: the other's gradient arrives as zeros (materialized)
    gradcheck(lambda a: ScaledSinCos.apply(a, 2.0, y.detach())[1], [x])
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, a, k, b):
            seen["needs"] = ctx.needs_input_grad
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    Probe.apply(x, 3, y.detach())
    assert seen["needs"] == (True, False, False)


def test_non_differentiable_output():
    x = _leaf(3, 5, seed=3)
    values, indices = MaxWithIndex.apply(x)
    assert values.requires_grad and not indices.requires_grad and indices.dtype is webgrad.int64
    gradcheck(lambda t: MaxWithIndex.apply(t)[0], [x])


def test_double_backward_through_a_differentiable_backward_matches_torch(torch_ref):
    gradgradcheck(lambda t: Cube.apply(t), [_leaf(4, seed=4)])
    gradgradcheck(lambda t: Exp.apply(t).sum() * t, [_leaf(3, seed=5)])
    x = _leaf(4, seed=6)
    (g,) = webgrad.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    (gg,) = webgrad.autograd.grad(g.sum(), x)

    def torch_side(torch):
        class TorchCube(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                ctx.save_for_backward(t)
                return t ** 3

            @staticmethod
            def backward(ctx, grad):
                (t,) = ctx.saved_tensors
                return grad * 3 * t * t

        tx = torch.tensor(x.detach().numpy(), requires_grad=True)
        (tg,) = torch.autograd.grad(TorchCube.apply(tx).sum(), tx, create_graph=True)
        (tgg,) = torch.autograd.grad(tg.sum(), tx)
        return tg.detach().numpy(), tgg.numpy()
    tg, tgg = torch_ref(torch_side)
    assert_close(g, tg, 1e-12, 1e-12)
    assert_close(gg, tgg, 1e-12, 1e-12)


def test_once_differentiable_backward_records_nothing():
    class NumpyExp(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp()

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.exp()

    x = _leaf(3)
    (g,) = webgrad.autograd.grad(NumpyExp.apply(x).sum(), x, create_graph=True)
    assert not g.requires_grad
    assert_close(g, np.exp(x.detach().numpy()), 1e-12, 1e-12)


def test_torch2_style_setup_context():
    class Square(Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    gradcheck(lambda t: Square.apply(t), [_leaf(5, seed=7)])


def test_errors_name_the_function_and_the_fix():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    class WrongShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum(0)

    x = _leaf(2, 3)
    with pytest.raises(RuntimeError, match=r"TooFewBackward returned an incorrect number of gradients \(expected 2"):
        TooFew.apply(x, x).sum().backward()
    with pytest.raises(RuntimeError, match=r"WrongShapeBackward returned an invalid gradient at index 0.*\(2, 3\)"):
        WrongShape.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match="apply"):
        Exp()
    y = x.detach().clone().requires_grad_()
    h = y * 1
    out = Cube.apply(h)
    with webgrad.no_grad():
        h.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation: saved tensor 0"):
        out.sum().backward()
    with pytest.raises(TypeError, match="save tensors or None"):
        class SavesNumber(Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(3)
                return a

        SavesNumber.apply(x)


def test_no_graph_without_grad():
    x = _leaf(3)
    with webgrad.no_grad():
        assert not Exp.apply(x).requires_grad
    assert not Exp.apply(x.detach()).requires_grad


# -- grad / backward options --------------------------------------------------------------
def test_grad_allow_unused_and_materialize_grads():
    x, unused = _leaf(3), _leaf(2)
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        webgrad.autograd.grad((x * 2).sum(), [x, unused])
    gx, gu = webgrad.autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
    assert gu is None and gx.tolist() == [2.0, 2.0, 2.0]
    _, gu = webgrad.autograd.grad((x * 2).sum(), [x, unused], materialize_grads=True)
    assert gu.tolist() == [0.0, 0.0]


def test_backward_with_inputs_and_several_roots():
    x, y = _leaf(2, seed=1), _leaf(2, seed=2)
    (x * y).sum().backward(inputs=[x])
    assert y.grad is None and x.grad.tolist() == y.detach().tolist()
    x.grad = None
    webgrad.autograd.backward([(x * 2).sum(), (x * 3).sum()])
    assert x.grad.tolist() == [5.0, 5.0]


# -- functional: jacobian, hessian, vjp -----------------------------------------------------
def test_jacobian_and_hessian_match_torch(torch_ref):
    from webgrad.autograd.functional import hessian, jacobian, vjp

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(3), rng.standard_normal((2, 3))

    def f(x, y):
        return (x * y).tanh().sum(0), (x ** 2).sum()

    def g(x):
        return (x ** 3).sum() * x[0]

    def torch_side(torch):
        functional = torch.autograd.functional
        jac = functional.jacobian(f, (torch.tensor(a), torch.tensor(b)))
        single = functional.jacobian(lambda x: x.sin() * x.sum(), torch.tensor(a))
        hess = functional.hessian(g, torch.tensor(a))
        pair = functional.hessian(lambda x, y: (x * y).sum() ** 2, (torch.tensor(a), torch.tensor(b[0])))
        return (*[t.numpy() for row in jac for t in row], single.numpy(), hess.numpy(),
                *[t.numpy() for row in pair for t in row])
    theirs = torch_ref(torch_side)
    ours = jacobian(f, (webgrad.tensor(a), webgrad.tensor(b)))
    ours_h = hessian(lambda x, y: (x * y).sum() ** 2, (webgrad.tensor(a), webgrad.tensor(b[0])))
    got = [*[o for row in ours for o in row], jacobian(lambda x: x.sin() * x.sum(), webgrad.tensor(a)),
           hessian(g, webgrad.tensor(a)), *[h for row in ours_h for h in row]]
    assert len(got) == len(theirs) == 10
    for o, t in zip(got, theirs):
        assert_close(o, t, 1e-12, 1e-12)
    out, v = vjp(lambda x: x ** 2, webgrad.tensor(a), webgrad.ones(3, dtype=webgrad.float64))
    assert_close(v, 2 * a, 1e-12, 1e-12)
    assert_close(out, a ** 2, 1e-12, 1e-12)


def test_jacobian_of_a_custom_function_and_the_options():
    from webgrad.autograd.functional import jacobian

    x = webgrad.tensor([0.5, -1.0], dtype=webgrad.float64)
    assert_close(jacobian(Cube.apply, x), np.diag(3 * x.numpy() ** 2), 1e-12, 1e-12)
    zero = jacobian(lambda t, u: t * 2, (x, webgrad.ones(3, dtype=webgrad.float64)))
    assert zero[1].tolist() == [[0.0] * 3] * 2
    with pytest.raises(RuntimeError, match="strict=True"):
        jacobian(lambda t, u: t * 2, (x, webgrad.ones(3, dtype=webgrad.float64)), strict=True)
    leaf = x.clone().requires_grad_()
    j = jacobian(lambda t: t ** 3, leaf, create_graph=True)
    assert j.requires_grad  # differentiable again: d trace(J) / dx = 6x
    (d,) = webgrad.autograd.grad(webgrad.einsum("ii", j), leaf)
    assert_close(d, 6 * x.numpy(), 1e-12, 1e-12)


def _legendre_fit(lib, Function, device, steps=300):
    """The PyTorch tutorial's custom-Function example: fit a + b * P3(c + d * x) to sin(x)."""
    import math

    class LegendrePolynomial3(Function):
        @staticmethod
        def forward(ctx, input):  # noqa: A002  (the tutorial's name)
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors  # noqa: A001
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    x = lib.linspace(-math.pi, math.pi, 2000, device=device, dtype=lib.float32)
    y = lib.sin(x)
    a = lib.full((), 0.0, device=device, dtype=lib.float32, requires_grad=True)
    b = lib.full((), -1.0, device=device, dtype=lib.float32, requires_grad=True)
    c = lib.full((), 0.0, device=device, dtype=lib.float32, requires_grad=True)
    d = lib.full((), 0.3, device=device, dtype=lib.float32, requires_grad=True)
    losses = []
    for _ in range(steps):
        y_pred = a + b * LegendrePolynomial3.apply(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()
        with lib.no_grad():
            for p in (a, b, c, d):
                p -= 5e-6 * p.grad
                p.grad = None
    return np.array(losses)


def test_tutorial_custom_function_training_matches_torch(device, torch_ref):
    ours = _legendre_fit(webgrad, Function, webgrad.device(device))
    theirs = torch_ref(lambda torch: _legendre_fit(torch, torch.autograd.Function, torch.device("cpu")))
    assert ours[-1] < 0.5 * ours[0]  # it learns
    np.testing.assert_allclose(ours, theirs, rtol=2e-3)


def test_legacy_variable_matches_torch():
    torch = need_module("torch")
    from webgrad.autograd import Variable

    x = webgrad.ones(2)
    v = Variable(x, requires_grad=True)
    tv = torch.autograd.Variable(torch.ones(2), requires_grad=True)
    assert v is not x and v.requires_grad == tv.requires_grad and not x.requires_grad
    assert isinstance(x, Variable) and v.is_leaf
    (v * 3).sum().backward()
    assert v.grad.tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="must be a Tensor"):
        Variable([1.0])
