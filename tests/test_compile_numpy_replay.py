"""webgrad.compile on numpy (device "cpu"): from the second replay on, a step runs as a flat
list of calls, writing into arrays planned once per plan (backend/numpy/replay.py). These check
what planning must never do: hand a caller an array a later call overwrites, or reuse an
array while a value (or a view of it) is still read."""
from __future__ import annotations

import numpy as np

import webgrad
from tests.test_compile import _data, _mlp, _train

DEV = "cpu"


def _calls(fn, inputs):
    return [fn(*[webgrad.tensor(a) for a in args]) for args in inputs]


def _inputs(n, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(n)]


def test_a_training_step_runs_from_the_list_into_planned_arrays_and_matches_eager():
    xs, ys = _data(DEV, n_steps=6)
    adam = lambda ps: webgrad.optim.Adam(ps, lr=1e-2)  # noqa: E731
    eager_losses, eager_params, eager_grads, _ = _train(lambda: _mlp(DEV), adam, xs, ys, compiled=False)
    losses, params, grads, fn = _train(lambda: _mlp(DEV), adam, xs, ys, compiled=True)
    listing = fn._latest.listing
    assert listing is not None and listing.planned >= 4, fn.explain()  # the matmuls, the bias add, relu
    assert "replay: a flat list of" in fn.explain()
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)
    for got, want in zip(params + grads, eager_params + eager_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_results_and_views_of_intermediates_are_never_planned():
    """A returned view of an intermediate shares its memory: that intermediate stays fresh per
    call, so a kept result is not overwritten by the next call."""
    def fn(x, w):
        h = (x @ w + 1.0).relu()
        return h.t(), (h * 2.0).sum(1)

    inputs = _inputs(4, (5, 3), (3, 4))
    compiled = webgrad.compile(fn)
    got = _calls(compiled, inputs)
    for (x, w), (t, s) in zip(inputs, got):
        h = np.maximum(x @ w + 1.0, 0)
        np.testing.assert_allclose(t.numpy(), h.T, rtol=1e-6)
        np.testing.assert_allclose(s.numpy(), (h * 2).sum(1), rtol=1e-5)
    assert compiled._latest.listing is not None


def test_a_planned_array_is_reused_only_after_its_last_reader():
    """Two products of one shape, the first read again after the second is made: they must
    not share a planned array; a third, made after both were last read, may."""
    def fn(x, w):
        a = x @ w
        b = x @ w.t()
        c = a * b + a  # reads a after b was made (one fused chain)
        d = c @ w
        return d.sum()

    inputs = _inputs(4, (5, 6), (6, 6), seed=1)
    compiled = webgrad.compile(fn)
    got = [r.item() for r in _calls(compiled, inputs)]
    want = []
    for x, w in inputs:
        a, b = x @ w, x @ w.T
        want.append(float(((a * b + a) @ w).sum()))
    np.testing.assert_allclose(got, want, rtol=1e-4)
    listing = compiled._latest.listing
    assert listing.planned == 4, compiled.explain()
    arrays = {id(cell.cell_contents) for call in listing.calls for cell in (call.__closure__ or ())
              if isinstance(cell.cell_contents, np.ndarray)}
    assert len(arrays) == 3  # d took a's or b's array


def test_an_intermediate_written_in_place_or_read_by_an_update_is_not_planned():
    def fn(x):
        h = x * 2.0
        h.add_(1.0)  # an in-place write into a value the function made
        return h.sum()

    inputs = _inputs(4, (3, 3), seed=2)
    compiled = webgrad.compile(fn)
    got = [r.item() for r in _calls(compiled, inputs)]
    np.testing.assert_allclose(got, [float((x * 2 + 1).sum()) for (x,) in inputs], rtol=1e-5)


def test_a_tensor_made_in_the_function_and_returned_is_new_each_call(device):
    """h = zeros(...); h[i] = ...; return h: each call makes its own h, compiled or not (the
    trace must not take h for a captured tensor that every replay writes and returns)."""
    def fn(x):
        h = webgrad.zeros((2, 3), device=x.device)
        h[0] = x.exp()
        h[1] = x * 2.0
        return h

    inputs = _inputs(4, (3,), seed=3)
    compiled = webgrad.compile(fn)
    got = [compiled(webgrad.tensor(x, device=device)) for (x,) in inputs]
    for (x,), h in zip(inputs, got):
        np.testing.assert_allclose(h.numpy(), np.stack([np.exp(x), x * 2]), rtol=1e-5)


def test_a_fused_chain_whose_steps_branch_runs_in_its_planned_array_correctly():
    """A chain's steps write into the node's planned array only while what it holds is read by
    the writing step alone: (x*2) is held there while (x+1) is made elsewhere."""
    def fn(x):
        y = ((x * 2.0) * (x + 1.0)).exp() - (x * x).sigmoid()
        return (y @ y.t()).sum()

    inputs = _inputs(4, (3, 5), seed=4)
    compiled = webgrad.compile(fn)
    got = [r.item() for r in _calls(compiled, inputs)]
    want = []
    for (x,) in inputs:
        y = np.exp((x * 2) * (x + 1)) - 1 / (1 + np.exp(-(x * x)))
        want.append(float((y @ y.T).sum()))
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert "fused: mul -> add -> mul -> exp" in compiled.explain() and compiled._latest.listing.planned >= 1
