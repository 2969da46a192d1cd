"""Autograd behaviour: accumulation, graph lifetime, grad modes, functional grad,
deep graphs, in-place changes of saved tensors, and differentiating through
in-place ops (PyTorch's rules, on every device)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import webgrad
from conftest import DEVICES, assert_close


def leaf(values, dtype=webgrad.float64):
    return webgrad.tensor(values, dtype=dtype, requires_grad=True)


# -- accumulation -----------------------------------------------------------------------
def test_grad_accumulates_across_backward_calls():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    assert_close(x.grad, [2.0, 4.0])
    (x * 3).sum().backward()
    assert_close(x.grad, [5.0, 7.0])


def test_existing_grad_accumulates_in_place_as_torch():
    """As torch's AccumulateGrad outside grad mode: the new gradient is added into the existing
    .grad (the same tensor, its memory reused); create_graph builds a new, differentiable one."""
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    kept = x.grad
    (x * 3).sum().backward()
    assert x.grad is kept
    assert_close(kept, [5.0, 7.0])
    (x * x).sum().backward(create_graph=True)
    assert x.grad is not kept and x.grad.requires_grad
    assert_close(x.grad, [7.0, 11.0])


def test_a_leafs_grad_is_set_once_its_last_user_has_run():
    """A weight used only near the output has its .grad while backward still works on the
    layers before it (torch's order): its gradient is not held to the end."""
    near_output, near_input = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    seen = []

    class Probe(webgrad.autograd.Function):  # notes, on the way back, whether near_output has its .grad
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            seen.append(near_output.grad is not None)
            return g

    h = Probe.apply(near_input * 2)
    (h * near_output).sum().backward()
    assert seen == [True]
    assert_close(near_output.grad, [6.0, 8.0])
    assert_close(near_input.grad, [2.0, 4.0])


def test_leaf_used_twice_accumulates():
    x = leaf([1.0, -2.0, 3.0])
    (x * x + x.exp() * x).sum().backward()
    v = np.array([1.0, -2.0, 3.0])
    assert_close(x.grad, 2 * v + np.exp(v) * (1 + v), rtol=1e-12)


def test_diamond_graph_accumulates_once_per_path():
    x = leaf([0.5])
    a = x * 2
    b = a.sin()
    c = a.cos()
    (b * c + a).sum().backward()
    # d/dx [sin(2x) cos(2x) + 2x] = 2 cos(4x) + 2
    assert_close(x.grad, [2 * math.cos(2.0) + 2], rtol=1e-12)


def test_broadcast_gradient_is_summed_to_input_shape():
    x = leaf(np.ones((3, 1)))
    y = leaf(np.ones(4))
    (x * y * 2).sum().backward()
    assert_close(x.grad, np.full((3, 1), 8.0))
    assert_close(y.grad, np.full(4, 6.0))


def test_grads_own_their_memory():
    """``x.grad`` and ``y.grad`` of ``x + y`` are separate, writable tensors."""
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (x + y).sum().backward()
    x.grad.mul_(10.0)  # e.g. gradient clipping, in place
    assert_close(x.grad, [10.0, 10.0])
    assert_close(y.grad, [1.0, 1.0])
    y.grad.zero_()
    assert_close(y.grad, [0.0, 0.0])


def test_backward_with_explicit_gradient():
    x = leaf([1.0, 2.0, 3.0])
    y = x * x
    y.backward(webgrad.tensor([1.0, 0.0, 0.5], dtype=webgrad.float64))
    assert_close(x.grad, [2.0, 0.0, 3.0])


def test_backward_on_a_leaf():
    x = leaf(2.0)
    x.backward()
    assert_close(x.grad, 1.0)


def test_gradient_dtype_and_shape_match_the_leaf():
    x = webgrad.randn(2, 3, requires_grad=True)
    (x.double() * 2).sum().backward()
    assert x.grad.dtype is webgrad.float32 and tuple(x.grad.shape) == (2, 3)
    assert not x.grad.requires_grad


# -- graph lifetime -----------------------------------------------------------------------
def test_second_backward_without_retain_graph_raises():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_close(x.grad, [4.0, 8.0])


def test_create_graph_gives_differentiable_gradients():
    x = leaf([1.0, 2.0])
    y = (x ** 3).sum()
    y.backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad
    x.grad = None
    g.sum().backward()
    assert_close(x.grad, [6.0, 12.0])  # d/dx sum(3 x^2) = 6 x


def test_autograd_grad_returns_gradients_without_touching_grad():
    x, y = leaf([1.0, 2.0]), leaf([3.0])
    out = (x * y).sum()
    gx, gy = webgrad.autograd.grad(out, [x, y])
    assert_close(gx, [3.0, 3.0])
    assert_close(gy, [3.0])
    assert x.grad is None and y.grad is None


def test_autograd_grad_several_outputs_and_grad_outputs():
    x = leaf([1.0, 2.0])
    a, b = x * 2, x * x
    (g,) = webgrad.autograd.grad([a, b], [x], grad_outputs=[webgrad.ones_like(a), webgrad.ones_like(b) * 0.5])
    assert_close(g, [3.0, 4.0])


def test_autograd_grad_unused_input():
    x, unused = leaf([1.0]), leaf([2.0])
    with pytest.raises(RuntimeError, match="allow_unused"):
        webgrad.autograd.grad((x * 2).sum(), [x, unused])
    gx, gu = webgrad.autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
    assert_close(gx, [2.0])
    assert gu is None


def test_autograd_grad_with_respect_to_an_intermediate():
    x = leaf([1.0, 2.0])
    h = x * 3
    (gh,) = webgrad.autograd.grad((h * h).sum(), h)
    assert_close(gh, [6.0, 12.0])


def test_retain_grad_on_a_non_leaf():
    x = leaf([1.0, 2.0])
    h = x * 2
    h.retain_grad()
    (h * h).sum().backward()
    assert_close(h.grad, [4.0, 8.0])
    assert_close(x.grad, [8.0, 16.0])


def test_non_leaf_grad_is_not_kept_without_retain_grad():
    x = leaf([1.0])
    h = x * 2
    (h * h).sum().backward()
    assert h.grad is None


def test_detach():
    x = leaf([1.0, 2.0])
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    y = (x * d).sum()  # d is a constant
    y.backward()
    assert_close(x.grad, [1.0, 2.0])
    assert np.shares_memory(d.numpy(), x.detach().numpy())


def test_is_leaf_grad_fn_and_requires_grad_propagation():
    x = leaf([1.0])
    c = webgrad.tensor([2.0], dtype=webgrad.float64)
    y = x * c
    assert x.is_leaf and not y.is_leaf
    assert y.requires_grad and y.grad_fn is not None and "Mul" in y.grad_fn.name()
    z = c * 2
    assert not z.requires_grad and z.grad_fn is None
    assert not x.argmax().requires_grad
    assert not (x > 0).requires_grad


def test_requires_grad_false_on_a_non_leaf_raises():
    y = leaf([1.0]) * 2
    with pytest.raises(RuntimeError, match="detach"):
        y.requires_grad = False


# -- grad modes -----------------------------------------------------------------------
def test_no_grad_context():
    x = leaf([1.0])
    with webgrad.no_grad():
        y = x * 2
        assert not webgrad.is_grad_enabled()
    assert webgrad.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None


def test_enable_grad_inside_no_grad():
    x = leaf([1.0])
    with webgrad.no_grad():
        with webgrad.enable_grad():
            y = x * 2
        z = x * 2
    assert y.requires_grad and not z.requires_grad


def test_no_grad_and_enable_grad_as_decorators():
    @webgrad.no_grad()
    def f(x):
        return x * 2

    @webgrad.enable_grad()
    def g(x):
        return x * 2

    x = leaf([1.0])
    assert not f(x).requires_grad
    assert webgrad.is_grad_enabled()
    with webgrad.no_grad():
        assert g(x).requires_grad
        assert not webgrad.is_grad_enabled()


def test_set_grad_enabled_context_decorator_and_call():
    x = leaf([1.0])
    with webgrad.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad

    @webgrad.set_grad_enabled(False)
    def f(x):
        return x * 2

    assert webgrad.is_grad_enabled()  # decorating changes nothing by itself
    assert not f(x).requires_grad
    webgrad.set_grad_enabled(False)  # a plain call switches at once, as in PyTorch
    try:
        assert not webgrad.is_grad_enabled()
        assert not (x * 2).requires_grad
    finally:
        webgrad.set_grad_enabled(True)
    assert webgrad.is_grad_enabled()


def test_grad_mode_restored_after_an_exception():
    with pytest.raises(ValueError):
        with webgrad.no_grad():
            raise ValueError
    assert webgrad.is_grad_enabled()


def test_requires_grad_on_int_tensor_raises():
    t = webgrad.tensor([1, 2])
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad_()
    with pytest.raises(RuntimeError, match="int64"):
        webgrad.zeros(2, dtype=webgrad.int64, requires_grad=True)


# -- functional grad --------------------------------------------------------------------
def test_functional_grad_of_tanh():
    g = webgrad.grad(webgrad.tanh)(1.0)
    assert abs(g.item() - 0.4199743) < 1e-6
    assert not g.requires_grad


def test_nested_functional_grad():
    t = math.tanh(1.0)
    second = webgrad.grad(webgrad.grad(webgrad.tanh))(1.0)
    assert abs(second.item() - (-2 * t * (1 - t * t))) < 1e-5
    third = webgrad.grad(webgrad.grad(webgrad.grad(webgrad.tanh)))(webgrad.tensor(0.3, dtype=webgrad.float64))
    t = math.tanh(0.3)
    assert abs(third.item() - (-2 * (1 - t * t) ** 2 + 4 * t * t * (1 - t * t))) < 1e-10


def test_functional_grad_argnums_and_tensor_input():
    def f(x, y):
        return (x * x * y).sum()

    x = webgrad.tensor([1.0, 2.0])
    gx = webgrad.grad(f)(x, webgrad.tensor(3.0))
    assert_close(gx, [6.0, 12.0])
    gx, gy = webgrad.grad(f, argnums=(0, 1))(x, webgrad.tensor(3.0))
    assert_close(gy, 5.0)
    assert not x.requires_grad  # the caller's tensor is untouched


def test_functional_grad_of_unused_argument_is_zero():
    g = webgrad.grad(lambda x, y: (x * 2).sum(), argnums=1)(webgrad.tensor(1.0), webgrad.tensor([1.0, 2.0]))
    assert_close(g, [0.0, 0.0])


# -- deep graphs --------------------------------------------------------------------------
def test_ten_thousand_op_chain_backward():
    x = leaf(1.0)
    y = x
    for _ in range(10_000):
        y = y * 1.0001 + 0.0
    y.backward()
    assert abs(x.grad.item() - 1.0001 ** 10_000) < 1e-9


def test_ten_thousand_tanh_chain_backward():
    x = leaf(0.5)
    y, values = x, []
    for _ in range(10_000):
        values.append(y.detach().item())
        y = y.tanh()
    y.backward()
    expected = np.prod(1 - np.tanh(np.array(values)) ** 2)
    assert abs(x.grad.item() - expected) < 1e-12 + 1e-9 * abs(expected)


def test_deep_chain_with_create_graph():
    x = leaf(0.1)
    y = x
    for _ in range(2_000):
        y = y * 1.0 + x * x * 0.001  # y = x + 2 x^2 in the end
    (g,) = webgrad.autograd.grad(y, x, create_graph=True)
    assert abs(g.item() - 1.4) < 1e-9
    (gg,) = webgrad.autograd.grad(g, x)
    assert abs(gg.item() - 4.0) < 1e-9


# -- in-place changes of saved tensors ------------------------------------------------------
def test_inplace_change_of_a_saved_output_raises():
    x = leaf([1.0, 2.0])
    y = x.exp()  # exp's backward reads its output
    with webgrad.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError) as err:
        y.sum().backward()
    message = str(err.value)
    assert "exp" in message and "(2,)" in message and "version 1" in message and "version 0" in message


def test_inplace_change_of_a_saved_input_raises():
    x = leaf([1.0, 2.0, 3.0])
    h = x * 1
    y = h.sin()
    with webgrad.no_grad():
        h[0] = 5.0
    with pytest.raises(RuntimeError) as err:
        y.sum().backward()
    message = str(err.value)
    assert "sin" in message and "(3,)" in message and "version 1" in message


def test_inplace_change_of_a_tensor_no_vjp_reads_is_fine():
    """As torch: a + b saves neither, so changing one before backward is allowed."""
    x = leaf([1.0, 2.0, 3.0])
    h = x * 2
    y = (h + 1).sum()
    with webgrad.no_grad():
        h.add_(10.0)
    y.backward()
    assert_close(x.grad, [2.0, 2.0, 2.0])


# -- what the graph keeps ---------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_graph_keeps_only_the_tensors_vjps_read(device):
    import gc

    memory = webgrad.webgpu if device == "webgpu" else webgrad.cpu
    x = webgrad.randn(64, 32, device=device, requires_grad=True)
    w = webgrad.randn(32, 32, device=device, requires_grad=True)
    gc.collect()
    before = memory.memory_allocated()
    product = x @ w  # read by nothing below: add reads no input, tanh its output only
    out = (product + 1.0).tanh()
    half = out.to(webgrad.float16)  # the cast reads its input's dtype, not its data
    loss = (half.float() * 3).sum()  # mul reads its inputs (the float copy), sum only a shape
    del product, out, half
    gc.collect()
    held = memory.memory_allocated() - before
    # tanh's output and the float copy (8 KiB each), the loss; not the product, the sum, the
    # float16 copy nor mul's output (each would add 4-8 KiB)
    assert held <= 2 * 64 * 32 * 4 + 1024, held  # (+ scalars: WebGPU buffers take 256 bytes at least)
    loss.backward()
    xs, ws = x.detach().cpu().numpy().astype(np.float64), w.detach().cpu().numpy().astype(np.float64)
    t = np.tanh(xs @ ws + 1)
    assert_close(w.grad, xs.T @ (3 * (1 - t ** 2)), rtol=2e-2, atol=2e-2)  # through float16


@pytest.mark.parametrize("device", DEVICES)
def test_a_weight_shared_by_a_batch_gets_its_gradient_from_one_product(device):
    """x (B, L, K) @ w (K, N): w's gradient is x's rows against g's rows in one product, as torch
    folds, never B products of w's size summed afterwards (a B-times-w-sized temporary)."""
    import gc

    memory = webgrad.webgpu if device == "webgpu" else webgrad.cpu
    x = webgrad.randn(32, 16, 64, device=device, requires_grad=True)
    w = webgrad.randn(64, 128, device=device, requires_grad=True)
    loss = (x @ w).sum()
    gc.collect()
    memory.reset_peak_memory_stats()
    before = memory.memory_allocated()
    loss.backward()
    # g (256 KiB), x.grad (128 KiB), w.grad (32 KiB) and small change; the per-batch products
    # would add 32 * 32 KiB = 1 MiB
    assert memory.max_memory_allocated() - before <= 512 * 1024, memory.max_memory_allocated() - before
    xs = x.detach().cpu().numpy().astype(np.float64)
    assert_close(w.grad, xs.reshape(-1, 64).T @ np.ones((512, 128)), rtol=1e-4, atol=1e-3)
    assert_close(x.grad, np.broadcast_to(w.detach().cpu().numpy().sum(1), (32, 16, 64)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch_dims", [(8,), (4, 6)])
def test_a_linears_weight_gradient_is_made_in_the_weights_layout_and_kept_without_a_copy(device, batch_dims,
                                                                                        monkeypatch):
    """As torch's mm backward: the gradient of weight.mT is computed as (g.T @ x).T, so the
    transposed view's vjp gives back a fresh (out, in) array and it becomes .grad as it is;
    a plain x @ w still gets x.T @ g."""
    from webgrad.ops import registry

    layer = webgrad.nn.Linear(5, 3).to(device)
    x = webgrad.randn(*batch_dims, 5, device=device)
    copied: list = []
    real = registry._apply

    def apply(op, *args, **kwargs):
        out = real(op, *args, **kwargs)
        if op.name == "copy" and tuple(out.shape) == (3, 5):
            copied.append(op.name)
        return out
    monkeypatch.setattr(registry, "_apply", apply)
    layer(x).sum().backward()
    rows = x.detach().cpu().numpy().reshape(-1, 5).astype(np.float64)
    assert_close(layer.weight.grad, np.ones((len(rows), 3)).T @ rows, rtol=1e-5, atol=1e-5)
    assert layer.weight.grad.is_contiguous() and copied == []
    w = webgrad.randn(5, 3, device=device, requires_grad=True)
    (x @ w).sum().backward()
    assert_close(w.grad, rows.T @ np.ones((len(rows), 3)), rtol=1e-5, atol=1e-5)
    assert w.grad.is_contiguous()


@pytest.mark.parametrize("device", DEVICES)
def test_layer_norm_keeps_only_its_input_for_backward(device):
    """As torch's: LayerNorm's backward computes the normalized rows again from the input, so
    the graph keeps one tensor of the input's size per layer norm, not two."""
    import gc

    memory = webgrad.webgpu if device == "webgpu" else webgrad.cpu
    norm = webgrad.nn.LayerNorm(128).to(device)
    x = webgrad.randn(64, 128, device=device, requires_grad=True)
    gc.collect()
    before = memory.memory_allocated()
    h = x * 2  # 32 KiB, the norm's input
    loss = norm(h).sum()  # sum keeps only a shape
    del h
    gc.collect()
    held = memory.memory_allocated() - before
    assert 64 * 128 * 4 <= held <= 64 * 128 * 4 + 2048, held  # (the normalized rows would be 32 KiB more)
    loss.backward()  # each normalized row sums to 0 whatever x is (gradients: tests/op_cases.py)
    assert_close(x.grad, np.zeros((64, 128)), rtol=0, atol=1e-4)
    assert_close(norm.bias.grad, np.full(128, 64.0), rtol=1e-6, atol=1e-6)


def test_reads_of_each_vjp_come_from_its_bytecode():
    from webgrad.autograd import _META, _VALUE, _uses
    from webgrad.ops.elementwise import ADD, CAST, MUL
    from webgrad.ops.registry import OPS

    assert _uses(ADD.vjp, 2) == ((None, None), None)
    assert _uses(CAST.vjp, 1) == ((_META,), None)
    assert _uses(MUL.vjp, 2) == ((_VALUE, _VALUE), None)
    assert _uses(OPS["tanh"].vjp, 1)[1] == _VALUE
    # not a plain function, or more inputs than named parameters: everything counts as read
    assert _uses(max, 2) == ((_VALUE, _VALUE), _VALUE)
    assert _uses(lambda g, *xs, out: g, 3) == ((_VALUE,) * 3, None)
    # a name a nested function captures, or passed on, is read
    assert _uses(lambda g, x, y, *, out: (lambda: x)(), 2) == ((_VALUE, None), None)
    assert _uses(lambda g, x, *, out: g * len(x.shape) + g.sum(out.ndim), 1) == ((_META,), _META)
    # a keyword's name in a call is no read (Python 3.13, as in Pyodide, loads the names as one constant)
    assert _uses(lambda g, x, *, out: dict(a=x, out=g), 1) == ((_VALUE,), None)


def test_retain_grad_after_the_tensor_was_used():
    x = leaf([1.0, 2.0])
    h = x * 3
    y = (h + 1).sum()  # add keeps only h's shape
    h.retain_grad()
    y.backward()
    assert_close(h.grad, [1.0, 1.0])


def test_inplace_change_through_a_view_is_noticed():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x.tanh()
    row = y[0]
    with webgrad.no_grad():
        row.fill_(0.0)
    with pytest.raises(RuntimeError, match="tanh"):
        y.sum().backward()


def test_inplace_change_of_a_leaf_that_requires_grad_raises_at_once():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="no_grad"):
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="setitem"):
        x[0] = 3.0
    with webgrad.no_grad():
        x.add_(1.0)  # fine: how optimizers update parameters
    assert_close(x.detach(), [2.0, 3.0])
    assert x.requires_grad


def test_inplace_after_backward_is_fine():
    x = leaf([1.0, 2.0])
    y = x.exp()
    y.sum().backward()
    with webgrad.no_grad():
        x.sub_(x.grad * 0.1)  # an SGD step
    assert_close(x.detach(), np.array([1.0, 2.0]) - 0.1 * np.exp([1.0, 2.0]), rtol=1e-12)


def test_version_counter_is_shared_by_views_and_detach():
    x = webgrad.zeros(2, 3)
    v, d = x[0], x.detach()
    before = x._version
    v.fill_(1.0)
    assert x._version == d._version == before + 1
    assert_close(x, [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])


# -- differentiating through in-place ops ------------------------------------------------------
@pytest.fixture(params=DEVICES)
def on(request):
    """A maker of float32 leaves on each device."""
    device = request.param
    return lambda values: webgrad.tensor(values, dtype=webgrad.float32, device=device, requires_grad=True)


def test_residual_iadd_differentiates_both_branches(on):
    x, w = on([[1.0, -2.0], [0.5, 3.0]]), on([[2.0, 0.0], [1.0, -1.0]])
    identity = x
    out = (x @ w).relu()
    out += identity  # ResNet's BasicBlock
    (out * out).sum().backward()
    xv, wv = np.array([[1.0, -2.0], [0.5, 3.0]]), np.array([[2.0, 0.0], [1.0, -1.0]])
    pre = xv @ wv
    g_out = 2 * (np.maximum(pre, 0) + xv)
    g_pre = g_out * (pre > 0)
    assert_close(x.grad, g_pre @ wv.T + g_out, rtol=1e-5)
    assert_close(w.grad, xv.T @ g_pre, rtol=1e-5)


def test_write_through_an_index_view_reaches_the_base_history(on):
    x = on([1.0, 2.0, 3.0])
    y = x * 1
    y += 1
    y[0].mul_(2)  # changes y through a view: y's gradient must see it
    y[1:] *= y[1:].clone()
    y[...].add_(1)  # x[...] is x itself
    y.sum().backward()
    assert_close(y.detach(), [5.0, 10.0, 17.0])
    assert_close(x.grad, [2.0, 6.0, 8.0])


def test_ops_recorded_before_an_inplace_change_keep_the_value_they_saw(on):
    x = on([1.0, 2.0])
    a = x * 2
    b = a + 1  # add does not save a: a later change of a is fine for it
    a.mul_(3)
    (b + a).sum().backward()
    assert_close(x.grad, [8.0, 8.0])  # 2 through b, 6 through a


def test_inplace_change_of_a_value_saved_for_backward_still_raises(on):
    x = on([1.0, 2.0])
    y = x.sin()
    z = y * y  # mul saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match="input 0 of mul"):
        z.sum().backward()


class _OpNames(webgrad.ops.registry.Observer):
    def __init__(self):
        self.names = []

    def op_begin(self, op, inputs):
        self.names.append(op.name)


def _ops_run(fn) -> list:
    with webgrad.ops.registry.observing(_OpNames()) as seen:
        fn()
    return seen.names


def test_inplace_change_copies_the_old_value_only_where_backward_reads_it(on):
    x, w = on([1.0, -2.0, 3.0]), on([2.0, 1.0, -1.0])
    # ReLU(inplace=True) after a product: no vjp reads the product, so nothing is copied.
    h = x * w
    assert _ops_run(lambda: webgrad.nn.functional.relu(h, inplace=True)) == ["relu", "copy_into"]
    # exp keeps its output for its vjp: that value is copied before relu_ overwrites it.
    e = x.exp()
    assert _ops_run(e.relu_) == ["copy", "relu", "copy_into"]
    # mul keeps the plain tensor it multiplies w by: copied once, after the product is recorded.
    plain = webgrad.tensor([0.5, 4.0, -1.0], device=x.device)
    assert _ops_run(lambda: plain.mul_(w)) == ["mul", "copy", "copy_into"]
    (h.sum() + e.sum() + (plain * plain).sum()).backward()
    xv, wv, pv = np.array([1.0, -2.0, 3.0]), np.array([2.0, 1.0, -1.0]), np.array([0.5, 4.0, -1.0])
    relu_mask = xv * wv > 0
    assert_close(x.grad, wv * relu_mask + np.exp(xv), rtol=1e-5)
    assert_close(w.grad, xv * relu_mask + 2 * pv * pv * wv, rtol=1e-5)
    assert_close(h.detach(), np.maximum(xv * wv, 0))


def test_inplace_methods_without_autograd_write_straight_into_the_tensor(on, monkeypatch):
    device = on([0.0]).device
    copies: list = []  # in-place kernels run on cpu: COPY_INTO is the copy of a result computed apart
    backend = type(webgrad.backend.get_backend("cpu"))
    run_inplace = backend.run_inplace
    monkeypatch.setattr(backend, "run_inplace", lambda self, op, *rest: (copies.append(op.name),
                                                                          run_inplace(self, op, *rest)))
    rng = np.random.default_rng(0)
    rows = (1 << 20) // 8  # the large case passes blas.ELEMENTWISE_SPLIT_FROM: split over the cpu threads
    cases = [  # name, method(target, other), numpy's result, the tensor's rows, other's shape
        ("add_", lambda t, o: t.add_(o), lambda a, b: a + b, 4, (8,)),
        ("sub_ alpha", lambda t, o: t.sub_(o, alpha=2), lambda a, b: a - 2 * b, 4, (4, 8)),
        ("mul_ scalar", lambda t, o: t.mul_(2.5), lambda a, b: a * 2.5, 4, ()),
        ("div_", lambda t, o: t.div_(o), lambda a, b: a / b, 4, (4, 1)),
        ("exp_", lambda t, o: t.exp_(), lambda a, b: np.exp(a), 4, ()),
        ("relu inplace", lambda t, o: webgrad.nn.functional.relu(t, inplace=True), lambda a, b: np.maximum(a, 0),
         4, ()),
        ("add_ itself", lambda t, o: t.add_(t), lambda a, b: 2 * a, 4, ()),
        ("add_ large", lambda t, o: t.add_(o), lambda a, b: a + b, rows, (8,)),
    ]
    for name, method, expected, n, other_shape in cases:
        a = rng.standard_normal((n, 8)).astype(np.float32)
        b = (rng.random(other_shape) + 0.5).astype(np.float32)
        for strided in (False, True):  # the tensor itself, or every other column of it
            x = webgrad.tensor(a, device=device)
            target = x[:, ::2] if strided else x
            bv = b[..., ::2] if strided and b.ndim and b.shape[-1] == 8 else b
            version, copies[:] = target._version, []
            with webgrad.no_grad():
                out = method(target, webgrad.tensor(bv, device=device))
            want = a.copy()
            (want[:, ::2] if strided else want)[...] = expected(a[:, ::2] if strided else a, bv)
            assert out is target and target._version == version + 1, name
            assert_close(x, want, rtol=1e-6, atol=1e-6)
            if device == "cpu":  # computed into the tensor's own memory, with no copy after
                assert copies == [], (name, copies)
    x = webgrad.ones(3, device=device)
    assert _ops_run(lambda: x.add_(1)) == ["add", "copy_into"]  # a trace sees the copy it replays


def test_setitem_of_values_that_require_grad_into_a_plain_buffer(on):
    x = on([1.0, 2.0, 3.0])
    buffer = webgrad.zeros(3, 2, device=x.device)
    for i in range(3):
        buffer[i] = x[i] * webgrad.tensor([1.0, 2.0], device=x.device)
    assert buffer.requires_grad and buffer.grad_fn is not None
    (buffer ** 2).sum().backward()
    assert_close(x.grad, [10.0, 20.0, 30.0])


def test_fill_keeps_the_tensor_in_the_graph_with_zero_gradient(on):
    x = on([1.0, 2.0])
    y = x * 3
    y[0].fill_(5.0)
    y.sum().backward()
    assert_close(x.grad, [0.0, 3.0])


def test_grad_and_retain_grad_follow_the_tensor_after_an_inplace_change(on):
    x = on([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    y.mul_(y.detach())  # y = 2x * c, with c = 2x a constant
    (g,) = webgrad.autograd.grad(y.sum(), [x], retain_graph=True)
    assert_close(g, [4.0, 8.0])
    (g,) = webgrad.autograd.grad((y * y).sum(), [y], retain_graph=True)  # d/dy at y's new value
    assert_close(g, [8.0, 32.0])
    y.sum().backward()
    assert_close(y.grad, [1.0, 1.0])
    assert_close(x.grad, [4.0, 8.0])


def test_writes_through_reshape_permute_and_slice_views_reach_the_base(on):
    x, w = on([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]]), on([2.0, -1.0])
    y = x * 1
    y.T.mul_(w)  # a permute view: column j of y.T is row j of y
    y.view(-1)[1:4].add_(3.0)  # a slice of a reshape view
    (y * y).sum().backward()
    xv, wv = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]]), np.array([2.0, -1.0])
    yv = xv * wv[:, None]
    yv.reshape(-1)[1:4] += 3.0
    assert_close(y.detach(), yv, rtol=1e-6)
    assert_close(x.grad, 2 * yv * wv[:, None], rtol=1e-5)
    assert_close(w.grad, (2 * yv * xv).sum(1), rtol=1e-5)


def test_write_of_a_value_that_requires_grad_through_a_view_of_a_plain_buffer(on):
    w = on([1.0, 2.0])
    buffer = webgrad.zeros(3, 2, device=w.device)
    buffer.T[:, 1].copy_(w * 3)  # column 1 of buffer.T is row 1 of buffer
    assert buffer.requires_grad
    (buffer * buffer).sum().backward()
    assert_close(w.grad, [18.0, 36.0])


def test_inplace_that_cannot_be_written_back_is_refused_with_a_clear_error(on):
    x = on([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(RuntimeError, match=r"add_: in-place change of a view made by expand"):
        (x * 1)[0].expand(3, 2).add_(1.0)
    with pytest.raises(RuntimeError, match="add_: in-place change of a leaf"):
        x[0].add_(1.0)  # a view of a leaf that requires grad, as in PyTorch
    with pytest.raises(RuntimeError, match="add_: in-place change of a leaf"):
        x.T.add_(1.0)


def test_a_reshape_that_copied_is_not_a_view(on):
    x = on([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    t = (x * 1).T  # not contiguous: reshaping it copies, as torch.reshape does
    flat = t.reshape(6)
    flat.add_(1.0)
    assert_close(t.detach(), [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
    flat.sum().backward()
    assert_close(x.grad, np.ones((2, 3)))


# -- gradients where the function has a kink: PyTorch's conventions ---------------------------
KINKS = {
    "relu_at_0": (lambda m, x: m.relu(x), [0.0, 1.0, -1.0]),
    "abs_at_0": (lambda m, x: x.abs(), [0.0, 2.0, -2.0]),
    "clamp_at_bounds": (lambda m, x: x.clamp(-1.0, 1.0), [-1.0, 1.0, 0.5, 2.0]),
    "amax_ties": (lambda m, x: x.amax(), [1.0, 3.0, 3.0]),
    "amin_ties_dim": (lambda m, x: x.reshape(2, 2).amin(1), [2.0, 2.0, 1.0, 5.0]),
    "maximum_ties": (lambda m, x: m.maximum(x, m.ones_like(x)), [1.0, 0.0, 2.0]),
    "norm_of_zero": (lambda m, x: x.norm(), [0.0, 0.0, 0.0]),
    "norm_dim_zero_row": (lambda m, x: x.reshape(2, 2).norm(dim=1), [0.0, 0.0, 3.0, 4.0]),
    "prod_one_zero": (lambda m, x: x.prod(), [0.0, 2.0, 3.0]),
    "prod_two_zeros": (lambda m, x: x.prod(), [0.0, 2.0, 0.0]),
    "sqrt_positive": (lambda m, x: x.sqrt(), [4.0]),
    "pow_zero_base": (lambda m, x: x ** 2, [0.0, 1.0]),
    "where_both_sides": (lambda m, x: m.where(x > 0, x * 2, x * 3), [0.0, 1.0, -1.0]),
    "max_dim_picks_one": (lambda m, x: x.reshape(1, 3).max(1).values, [1.0, 0.5, -1.0]),
}


@pytest.mark.parametrize("name", sorted(KINKS))
def test_gradient_at_kinks_matches_torch(name, torch_ref):
    fn, values = KINKS[name]
    ours = webgrad.tensor(values, dtype=webgrad.float64, requires_grad=True)
    fn(webgrad, ours).sum().backward()

    def torch_side(torch):
        theirs = torch.tensor(values, dtype=torch.float64, requires_grad=True)
        fn(torch, theirs).sum().backward()
        return theirs.grad.numpy()
    np.testing.assert_allclose(ours.grad.numpy(), torch_ref(torch_side), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("expr, ops", [
    (lambda w, c: w * c, {"mul": 1}),       # backward: g * c only, never g * w
    (lambda w, c: c * w, {"mul": 1}),
    (lambda w, c: w / c, {"div": 1}),       # g / c, not -g * out / c as well
    (lambda w, c: c @ w, {"matmul": 1}),    # c.mT @ g, not g @ w.mT
    (lambda w, c: c ** w, {"pow": 0}),      # no g * w * c ** (w - 1)
])
def test_vjps_compute_only_the_gradients_wanted(device, expr, ops):
    """A vjp gets a needs-gradient mask (as PyTorch's derivatives get output_mask):
    an input that wants no gradient costs no kernels in backward."""
    w = webgrad.rand(3, 3, device=device, requires_grad=True)
    c = webgrad.rand(3, 3, device=device) + 0.5
    out = expr(w, c).sum()
    with webgrad.profiler.profile() as prof:
        out.backward()
    counts = {a.key: a.count for a in prof.key_averages()}
    for name, count in ops.items():
        assert counts.get(name, 0) == count, counts
    expected = webgrad.autograd.grad(expr(w, c.clone().requires_grad_()).sum(), w)[0]
    assert np.allclose(w.grad.numpy(), expected.numpy(), rtol=1e-5)


def test_post_accumulate_grad_hook_runs_when_the_leaf_is_final(device):
    """DDP starts reducing a layer's gradients while backward still runs on the layers
    before it: the last layer's hook must fire before the first layer's .grad exists,
    and a leaf reached twice only once both contributions are in."""
    first = webgrad.randn(4, 3, device=device, requires_grad=True)
    last = webgrad.randn(2, 4, device=device, requires_grad=True)
    x = webgrad.randn(5, 3, device=device)
    seen = []
    last.register_post_accumulate_grad_hook(lambda t: seen.append(("last", first.grad is None, t.grad.numpy())))
    handle = first.register_post_accumulate_grad_hook(lambda t: seen.append(("first", t.grad is not None, None)))
    h = (x @ first.T).tanh()
    (h @ last.T).sum().backward()
    assert [s[:2] for s in seen] == [("last", True), ("first", True)]
    seen.clear()
    last.grad = None
    ((h.detach() @ last.T).sum() + (last * last).sum()).backward()  # two paths into `last`
    assert len(seen) == 1
    want = h.detach().sum(0, keepdim=True).expand(2, 4) + 2 * last.detach()
    np.testing.assert_allclose(seen[0][2], want.numpy(), rtol=1e-5, atol=1e-5)
    handle.remove()
    seen.clear()
    (x @ first.T).sum().backward()
    assert seen == []
    with pytest.raises(RuntimeError, match="leaf"):
        h.register_post_accumulate_grad_hook(print)


def test_grad_keeps_a_fresh_gradient_without_copying_it(device, monkeypatch):
    """As torch's AccumulateGrad: a gradient nothing else holds becomes .grad as it is (an
    embedding's table-sized gradient is not copied); one that something else holds is copied,
    so no two .grads, nor a .grad and another tensor, share memory."""
    import webgrad.autograd as engine

    copies = []
    real_owned = engine._owned
    monkeypatch.setattr(engine, "_owned", lambda g: copies.append(tuple(g.shape)) or real_owned(g))
    table = webgrad.nn.Embedding(50, 4).to(device)
    table(webgrad.tensor([[1, 2, 2]], device=device)).sum().backward()
    assert copies == []  # index_add's fresh result, kept
    assert table.weight.grad.numpy()[2].tolist() == [2.0] * 4

    linear = webgrad.nn.Linear(3, 2).to(device)
    linear(webgrad.ones(4, 5, 3, device=device)).sum().backward()
    assert copies == []  # the bias's gradient: a sum over the leading dims, of that shape, kept
    assert linear.bias.grad.tolist() == [20.0, 20.0]
    scale = webgrad.ones(1, 3, device=device, requires_grad=True)
    (webgrad.ones(4, 2, 3, device=device) * scale).sum().backward()
    assert scale.grad.tolist() == [[8.0] * 3]  # summed over a leading and a broadcast dim

    a = webgrad.ones(3, device=device, requires_grad=True)
    b = webgrad.ones(3, device=device, requires_grad=True)
    (a + b).sum().backward()  # add hands one tensor to both inputs: at least one copy
    a.grad.mul_(5)
    assert b.grad.tolist() == [1.0] * 3 and a.grad.tolist() == [5.0] * 3

    given = webgrad.tensor([1.0, 2.0, 3.0], device=device)
    leaf = webgrad.zeros(3, device=device, requires_grad=True)
    leaf.backward(given)  # the caller's own tensor: copied
    leaf.grad.mul_(10)
    assert given.tolist() == [1.0, 2.0, 3.0]

    class Passthrough(webgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(y)
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return y, None  # a forward tensor as the gradient: copied

    x = webgrad.zeros(2, device=device, requires_grad=True)
    y = webgrad.tensor([4.0, 5.0], device=device)
    Passthrough.apply(x, y).sum().backward()
    x.grad.zero_()
    assert y.tolist() == [4.0, 5.0]
