"""webgrad.utils.checkpoint: gradients through a recomputation equal the plain ones (params and
inputs, dropout replayed, kwargs, tuple outputs, autograd.grad, checkpoint_sequential, compile),
the activations are really dropped, and bad input gets a clear error."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import webgrad
import webgrad.nn as nn
import webgrad.nn.functional as F
from tests.conftest import requires_webgpu
from webgrad.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential


def _blocks(device, n=2, width=8, dropout=0.0):
    webgrad.manual_seed(0)
    layers = []
    for _ in range(n):
        layers += [nn.Linear(width, width), nn.Tanh()] + ([nn.Dropout(dropout)] if dropout else [])
    return nn.Sequential(*layers).to(device)


def _block_list(model, n):
    per = len(model) // n
    return [nn.Sequential(*list(model)[i * per:(i + 1) * per]) for i in range(n)]


def _input(device, shape=(4, 8), requires_grad=True):
    data = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return webgrad.tensor(data, device=device, requires_grad=requires_grad)


def _grads(model, x, forward, seed=3):
    """(output, param grads, input grad) of ``sum(forward(x) ** 2)`` from a clean start."""
    model.zero_grad(set_to_none=True)
    if x.requires_grad:
        x.grad = None
    webgrad.manual_seed(seed)
    y = forward(x)
    (y * y).sum().backward()
    return (y.detach().numpy(), [p.grad.numpy() for p in model.parameters()],
            None if x.grad is None else x.grad.numpy())


def _assert_same(a, b, atol=1e-6):
    np.testing.assert_allclose(a[0], b[0], rtol=0, atol=atol)
    assert len(a[1]) == len(b[1])
    for ga, gb in zip(a[1], b[1]):
        np.testing.assert_allclose(ga, gb, rtol=0, atol=atol)
    if a[2] is None or b[2] is None:
        assert a[2] is None and b[2] is None
    else:
        np.testing.assert_allclose(a[2], b[2], rtol=0, atol=atol)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_mlp_blocks_give_the_plain_gradients(device, use_reentrant):
    model = _blocks(device, n=3)
    blocks = _block_list(model, 3)
    x = _input(device)

    def checked(h):
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=use_reentrant)
        return h

    plain = _grads(model, x, model)
    ours = _grads(model, x, checked)
    _assert_same(ours, plain)
    assert checked(x).grad_fn.name() == "CheckpointFunctionBackward"


def test_dropout_is_replayed_in_the_recomputation(device):
    model = _blocks(device, n=2, width=32, dropout=0.5)
    blocks = _block_list(model, 2)
    x = _input(device, (8, 32))

    def checked(h, preserve=True):
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=False, preserve_rng_state=preserve)
        return h

    plain = _grads(model, x, model)
    after_plain = webgrad.rand(4, device=device).numpy()  # the stream goes on as without checkpoint
    ours = _grads(model, x, checked)
    after_ours = webgrad.rand(4, device=device).numpy()
    _assert_same(ours, plain)
    np.testing.assert_array_equal(after_ours, after_plain)
    # Without preserving the RNG state the recomputation draws other masks: other gradients.
    other = _grads(model, x, lambda h: checked(h, preserve=False))
    np.testing.assert_allclose(other[0], plain[0], rtol=0, atol=1e-6)  # the forward is the same
    assert max(np.abs(a - b).max() for a, b in zip(other[1], plain[1])) > 1e-3


def test_inputs_without_grad_still_give_parameter_gradients(device):
    model = _blocks(device, n=2)
    x = _input(device, requires_grad=False)
    plain = _grads(model, x, model)
    ours = _grads(model, x, lambda h: checkpoint(model, h, use_reentrant=False))
    _assert_same(ours, plain)


def test_kwargs_tuple_list_and_non_tensor_outputs(device):
    webgrad.manual_seed(0)
    lin = nn.Linear(8, 8).to(device)
    x = _input(device)

    def fn(h, *, scale, shift=None):
        a = lin(h) * scale
        return a, [a.tanh(), "tag"], {"b": (a + shift).relu(), "n": 3}

    def loss(out):
        a, (t, tag), d = out
        assert tag == "tag" and d["n"] == 3
        return (a * a).sum() + t.sum() + (d["b"] * 2).sum()

    shift = _input(device, (8,))
    results = []
    for ck in (False, True):
        for t in (x, shift, *lin.parameters()):
            t.grad = None
        out = checkpoint(fn, x, scale=0.5, shift=shift, use_reentrant=False) if ck else fn(x, scale=0.5, shift=shift)
        assert isinstance(out, tuple) and isinstance(out[1], list) and isinstance(out[2], dict)
        loss(out).backward()
        results.append([t.grad.numpy() for t in (x, shift, *lin.parameters())])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_autograd_grad_reaches_params_not_passed_as_arguments(device):
    model = _blocks(device, n=2)
    x = _input(device)
    params = list(model.parameters())
    y_plain = model(x)
    want = webgrad.autograd.grad((y_plain ** 2).sum(), [x] + params)
    y = checkpoint(model, x, use_reentrant=False)
    got = webgrad.autograd.grad((y ** 2).sum(), [x] + params)
    assert all(p.grad is None for p in params) and x.grad is None  # grad() touches no .grad
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6)


def test_closed_over_activation_keeps_the_outer_graph_intact(device):
    """The function uses an outer non-leaf tensor (not an argument): its gradient goes on
    through the outer graph, which the recomputation's backward must not walk or free."""
    webgrad.manual_seed(0)
    lin = nn.Linear(8, 8).to(device)
    x = _input(device)
    results = []
    for ck in (False, True):
        x.grad = None
        lin.zero_grad(set_to_none=True)
        outer = (x * 3).exp()
        fn = lambda h, outer=outer: lin(h) * outer  # noqa: E731
        y = checkpoint(fn, x.sin(), use_reentrant=False) if ck else fn(x.sin())
        (y.sum() + outer.sum()).backward()
        results.append([x.grad.numpy()] + [p.grad.numpy() for p in lin.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_output_that_is_an_input_and_unused_output_gradients(device):
    x = _input(device)
    a, b = checkpoint(lambda t: (t, t * 2), x, use_reentrant=False)
    a.sum().backward()  # b gets no gradient
    np.testing.assert_allclose(x.grad.numpy(), np.ones((4, 8), np.float32))


@pytest.mark.parametrize("segments", [1, 2, 3, 6])
def test_checkpoint_sequential_matches_the_plain_sequential(device, segments):
    model = _blocks(device, n=3, dropout=0.2)
    x = _input(device)
    plain = _grads(model, x, model)
    ours = _grads(model, x, lambda h: checkpoint_sequential(model, segments, h, use_reentrant=False))
    _assert_same(ours, plain)
    listed = _grads(model, x, lambda h: checkpoint_sequential(list(model), segments, h, use_reentrant=True))
    _assert_same(listed, plain)


def _graph_bytes(root) -> int:
    """Bytes of distinct tensor data the autograd graph behind ``root`` holds."""
    held, seen, stack = {}, set(), [root.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node == "leaf" or id(node) in seen:
            continue
        seen.add(id(node))
        for t in tuple(node.inputs or ()) + ((node.out,) if node.out is not None else ()):
            if not isinstance(t, webgrad.Tensor):  # only its shape kept (a vjp that needs no more)
                continue
            if not t.requires_grad or t._node is not None:  # activations, not parameters
                held[id(t._data)] = t.numel() * t.element_size()
        stack.extend(node.edges)
    return sum(held.values())


def test_activations_are_not_kept(device):
    """16 blocks of two Linear+Tanh layers each: the plain graph holds every block's activations
    (its input and the inner Tanh's output; F.linear keeps no product of its own), the
    checkpointed one only each block's input and output."""
    model = _blocks(device, n=32, width=64)
    blocks = _block_list(model, 16)
    x = _input(device, (32, 64))
    plain = _graph_bytes(model(x))
    h = x
    for b in blocks:
        h = checkpoint(b, h, use_reentrant=False)
    checked = _graph_bytes(h)
    assert checked <= 0.6 * plain, (checked, plain)


@requires_webgpu
def test_peak_device_memory_is_lower_on_webgpu():
    model = _blocks("webgpu", n=16, width=128, dropout=0.1)
    blocks = _block_list(model, 16)
    x = _input("webgpu", (256, 128))

    def peak(forward):
        model.zero_grad(set_to_none=True)
        gc.collect()  # earlier tests' cycles freed now, not during this step, below its baseline
        webgrad.webgpu.synchronize()
        webgrad.webgpu.reset_peak_memory_stats()
        base = webgrad.webgpu.memory_allocated()
        forward(x).sum().backward()
        return webgrad.webgpu.max_memory_allocated() - base

    def checked(h):
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=False)
        return h

    plain, ours = peak(model), peak(checked)
    # The plain graph keeps 3 of each block's tensors (tanh's output, dropout's mask and output:
    # what their vjps read), the checkpointed one its input, and both the weights' gradients.
    assert ours <= 0.65 * plain, (ours, plain)


def _train(device, compiled, dropout=0.0):
    """Losses and parameters after three SGD steps through two checkpointed blocks."""
    model = _blocks(device, n=2, width=16, dropout=dropout)
    blocks = _block_list(model, 2)
    opt = webgrad.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        h = x
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=False)
        loss = F.mse_loss(h, y)
        loss.backward()
        opt.step()
        return loss

    fn = webgrad.compile(step) if compiled else step
    rng = np.random.default_rng(0)
    webgrad.manual_seed(5)
    losses = [fn(webgrad.tensor(rng.standard_normal((4, 16)).astype(np.float32), device=device),
                 webgrad.tensor(rng.standard_normal((4, 16)).astype(np.float32), device=device)).item()
              for _ in range(3)]
    return losses, [p.detach().numpy() for p in model.parameters()], fn


def _assert_trained_alike(ours, eager):
    np.testing.assert_allclose(ours[0], eager[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(ours[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_compiled_step_with_checkpoint_matches_eager(device):
    eager, compiled = _train(device, False), _train(device, True)
    fn = compiled[2]
    assert fn.traces == 1 and fn.replays == 2 and not fn.breaks, fn.explain()
    _assert_trained_alike(compiled, eager)


def test_compile_with_dropout_in_a_checkpoint_runs_eagerly(device):
    """A replay would draw the recomputation's dropout mask afresh: that signature breaks the
    graph (one warning) and runs eagerly, with eager's results."""
    eager = _train(device, False, dropout=0.5)
    with pytest.warns(UserWarning, match="graph break"):
        compiled = _train(device, True, dropout=0.5)
    fn = compiled[2]
    assert fn.replays == 0 and any("preserve_rng_state" in b for b in fn.breaks), fn.explain()
    _assert_trained_alike(compiled, eager)


def test_autocast_is_replayed():
    model = _blocks("cpu", n=2, width=16)
    x = _input("cpu", (4, 16))

    def run(ck):
        with webgrad.autocast("cpu", dtype=webgrad.bfloat16):
            y = checkpoint(model, x, use_reentrant=False) if ck else model(x)
        return y

    assert run(True).dtype is run(False).dtype
    plain = _grads(model, x, lambda h: run(False).float())
    ours = _grads(model, x, lambda h: run(True).float())
    _assert_same(ours, plain)


def test_context_fn_wraps_forward_and_recomputation():
    import contextlib

    entered = []

    @contextlib.contextmanager
    def note(name):
        entered.append(name)
        yield

    x = _input("cpu")
    y = checkpoint(lambda t: t.exp(), x, use_reentrant=False, context_fn=lambda: (note("fwd"), note("re")))
    assert entered == ["fwd"]
    y.sum().backward()
    assert entered == ["fwd", "re"]


def test_under_no_grad_it_just_runs():
    x = _input("cpu")
    with webgrad.no_grad():
        y = checkpoint(lambda t: t * 2, x, use_reentrant=False)
    assert not y.requires_grad


def test_use_reentrant_must_be_passed_explicitly_or_it_warns():
    x = _input("cpu")
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint(lambda t: t * 2, x)
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint_sequential([nn.Tanh(), nn.Tanh()], 2, x)


def test_bad_input_gets_a_clear_error():
    x = _input("cpu")
    with pytest.raises(TypeError, match="callable"):
        checkpoint(x, x, use_reentrant=False)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(lambda t, scale: t * scale, x, scale=2, use_reentrant=True)
    with pytest.raises(ValueError, match="context_fn"):
        checkpoint(lambda t: t, x, use_reentrant=True, debug=True)
    with pytest.raises(ValueError, match="determinism_check"):
        checkpoint(lambda t: t, x, use_reentrant=False, determinism_check="strict")
    for segments in (0, 3, 1.5):
        with pytest.raises(ValueError, match="segments"):
            checkpoint_sequential([nn.Tanh(), nn.Tanh()], segments, x, use_reentrant=False)
    with pytest.raises(TypeError, match=r"functions\[1\]"):
        checkpoint_sequential([nn.Tanh(), 3], 1, x, use_reentrant=False)
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        checkpoint_sequential([nn.Tanh()], 1, x, use_reentrant=False, scale=2)


def test_recomputation_that_differs_is_an_error():
    calls = []

    def changing(t):
        calls.append(1)
        return t[: len(calls) + 1] * 2

    x = _input("cpu")
    y = checkpoint(changing, x, use_reentrant=False, debug=True)
    with pytest.raises(CheckpointError, match="recomputation returned different tensors"):
        y.sum().backward()
    y = checkpoint(lambda t: t * len(calls), x, use_reentrant=False, determinism_check="none")
    calls.append(1)
    y.sum().backward()  # unchecked (same shapes): the gradient is the recomputation's
    np.testing.assert_allclose(x.grad.numpy(), np.full((4, 8), len(calls), np.float32))


def test_input_changed_in_place_before_backward_is_an_error():
    w = _input("cpu", (8,))
    x = _input("cpu", requires_grad=False)
    y = checkpoint(lambda t: t * w, x, use_reentrant=False)
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_profiler_sees_the_recomputation(device):
    """A Function's node in backward is one profiler range like any op's (its gradient
    record names the device), and the recomputed ops show inside it."""
    model = _blocks(device, n=2)
    x = _input(device)
    with webgrad.profiler.profile(profile_memory=True) as prof:
        checkpoint(model, x, use_reentrant=False).sum().backward()
    names = {e.key for e in prof.key_averages()}
    assert {"CheckpointFunctionBackward", "TanhBackward"} <= names, names
