"""webgrad.compile on WebGPU: from the second replay on, a step is re-issued from its recorded
dispatch list (backend/webgpu/replay.py). These check what that list must keep from the Python path:
fresh results, the arguments of each call, random draws, index errors, memory."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import webgrad
import webgrad.nn as nn
import webgrad.nn.functional as F
from tests.conftest import requires_webgpu
from webgrad.backend.webgpu.recorder import Tape

pytestmark = requires_webgpu
DEV = "webgpu"


def _listing(fn):
    return fn._latest.listing


def _step_of(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _model_and_step(dropout=0.0):
    webgrad.manual_seed(0)
    layers = [nn.Linear(16, 32), nn.ReLU()] + ([nn.Dropout(dropout)] if dropout else []) + [nn.Linear(32, 4)]
    model = nn.Sequential(*layers).to(DEV)
    return model, _step_of(model, webgrad.optim.Adam(model.parameters(), lr=1e-2))


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((8, 16)).astype(np.float32), rng.integers(0, 4, 8)) for _ in range(n)]


def test_replays_from_the_recorded_list_match_eager_step_after_step():
    batches = _batches(6)
    runs = []
    for compiled in (False, True):
        model, step = _model_and_step()
        fn = webgrad.compile(step) if compiled else step
        losses = [fn(webgrad.tensor(x, device=DEV), webgrad.tensor(y, device=DEV)).item() for x, y in batches]
        runs.append((losses, [p.detach().numpy() for p in model.parameters()],
                     [p.grad.numpy() for p in model.parameters()]))
    (eager_losses, eager_params, eager_grads), (losses, params, grads) = runs
    listing = _listing(fn)
    assert listing is not None, fn.explain()
    assert "replay: a recorded list of" in fn.explain()
    # the optimizer's dispatch is known by its kernel record and re-issued with this step's lr
    assert "update(s) re-issued with each call's scalars; 0 step(s) in Python" in fn.explain(), fn.explain()
    # the list re-issues every dispatch but the optimizer's, which is re-packed per call
    assert listing.count == fn._latest.dispatches - 1
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(params + grads, eager_params + eager_grads):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_results_and_grads_of_a_replay_are_not_overwritten_by_the_next():
    model, step = _model_and_step()
    fn = webgrad.compile(step)
    batches = [(webgrad.tensor(x, device=DEV), webgrad.tensor(y, device=DEV)) for x, y in _batches(5)]
    for x, y in batches[:3]:
        fn(x, y)
    assert _listing(fn) is not None
    loss = fn(*batches[3])
    grads = [p.grad for p in model.parameters()]
    kept = [loss.numpy()] + [g.numpy() for g in grads]
    fn(*batches[4])
    for held, before in zip([loss] + grads, kept):
        np.testing.assert_array_equal(held.numpy(), before)
    assert all(p.grad is not g for p, g in zip(model.parameters(), grads))


def test_each_call_reads_its_own_arguments_in_any_layout():
    w = webgrad.randn(6, 5, device=DEV)
    fn = webgrad.compile(lambda a, b: (a @ w).relu() + b)
    rng = np.random.default_rng(1)

    def case(a, b):
        got = fn(a, b).numpy()
        np.testing.assert_allclose(got, np.maximum(a.numpy() @ w.numpy(), 0) + b.numpy(), rtol=1e-5, atol=1e-5)

    arrays = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(4)]
    for a in arrays:
        case(webgrad.tensor(a, device=DEV), webgrad.ones(4, 5, device=DEV))
    assert _listing(fn) is not None
    # a transposed view of the same shape, and two arguments cut from one buffer: not as recorded
    case(webgrad.tensor(arrays[0].T.copy(), device=DEV).T.contiguous().T.T, webgrad.ones(4, 5, device=DEV))
    case(webgrad.tensor(rng.standard_normal((6, 4)).astype(np.float32), device=DEV).T, webgrad.zeros(4, 5, device=DEV))
    both = webgrad.tensor(rng.standard_normal((8, 6)).astype(np.float32), device=DEV)
    case(both[:4], both[4:, :5])
    case(webgrad.tensor(arrays[1], device=DEV), webgrad.ones(4, 5, device=DEV))


def test_dropout_in_a_replayed_step_draws_fresh_numbers():
    fn = webgrad.compile(lambda x: F.dropout(x, 0.5, training=True) * 3)
    x = webgrad.ones(512, device=DEV)
    masks = [fn(x).numpy() for _ in range(5)]
    assert _listing(fn) is not None
    for m in masks:
        assert set(np.unique(m)) <= {0.0, 6.0}
    assert len({m.tobytes() for m in masks}) == 5, "a replay repeated earlier random numbers"


def test_an_index_out_of_range_in_a_replayed_step_is_raised_at_the_next_read():
    fn = webgrad.compile(lambda x, i: x[i] * 2)
    x = webgrad.arange(10, device=DEV).float()
    for _ in range(3):
        np.testing.assert_array_equal(fn(x, webgrad.tensor([1, 2], device=DEV)).numpy(), [2.0, 4.0])
    assert _listing(fn) is not None
    out = fn(x, webgrad.tensor([1, 50], device=DEV))
    with pytest.raises(IndexError, match="out of bounds"):
        out.numpy()
    np.testing.assert_array_equal(fn(x, webgrad.tensor([3, 0], device=DEV)).numpy(), [6.0, 0.0])


def test_the_buffers_a_recorded_list_owns_go_back_to_the_pool_with_it():
    backend = webgrad.backend.get_backend(DEV)
    x = webgrad.randn(8, 16, device=DEV)
    y = webgrad.tensor(np.arange(8) % 4, device=DEV)
    model, step = _model_and_step()
    step(x, y)  # the optimizer's state and the grads exist before, as after
    gc.collect()
    before = backend.pool.in_use
    fn = webgrad.compile(step)
    for _ in range(4):
        fn(x, y).item()
    assert _listing(fn) is not None
    assert backend.pool.in_use > before
    del fn
    gc.collect()
    assert backend.pool.in_use == before


def test_a_tape_is_broken_by_an_upload_or_a_read_in_the_middle():
    device = webgrad.backend.get_backend(DEV).device
    device.tape = Tape()
    try:
        t = webgrad.tensor([1.0, 2.0], device=DEV)
        assert "upload of 8 bytes" in device.tape.broken
        device.tape = Tape()
        (t * 2).numpy()
        assert device.tape.broken == "a read of 8 bytes"
        assert len(device.tape.entries) == 1
    finally:
        device.tape = None


def test_in_place_writes_replay_from_the_list_and_match_eager():
    """Writes into views of values the step made and into captured buffers (BatchNorm's running
    statistics) are re-issued from the list like any other dispatch."""
    w = webgrad.randn(4, 6, device=DEV)

    def f(x):
        h = x @ w
        h[:, :2] = 0
        h.T[1].mul_(3)
        return (h * 2).sum(), h

    compiled = webgrad.compile(f)
    xs = [webgrad.randn(3, 4, device=DEV) for _ in range(4)]
    for x in xs:
        (got, got_h), (want, want_h) = compiled(x), f(x)
        np.testing.assert_allclose(got_h.numpy(), want_h.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5, atol=1e-5)
    assert _listing(compiled) is not None and "0 step(s) in Python" in compiled.explain()

    runs = []
    for compile_it in (False, True):
        webgrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4)).to(DEV)
        step = _step_of(model, webgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        fn = webgrad.compile(step) if compile_it else step
        losses = [fn(webgrad.tensor(x, device=DEV), webgrad.tensor(y, device=DEV)).item() for x, y in _batches(5)]
        runs.append((losses, [b.numpy() for b in model.buffers()] + [p.detach().numpy() for p in model.parameters()]))
    assert _listing(fn) is not None
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-5, atol=1e-6)
    for a, b in zip(runs[1][1], runs[0][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op_name", ["sgd_step", "sgd_momentum_step", "adam_step", "rmsprop_centered_momentum_step"])
def test_replayed_update_uniform_is_a_fresh_pack(op_name):
    """A replay re-issues a recorded optimizer update with this call's scalars (optim.repack):
    byte for byte what the launcher would pack, sizes and offsets kept, for any attrs, a
    value past float32's range included (inf, as numpy rounds it)."""
    from webgrad.backend.webgpu import optim

    rng = np.random.default_rng(0)
    recorded = optim._pack(1000, 0, 8, [4, 12, 16, 20], {})
    for trial in range(50):
        attrs = {"maximize": bool(rng.random() < 0.5), "weight_decay": float(rng.random()) * (trial % 2),
                 "lr": float(rng.lognormal(-5, 3)), "momentum": float(rng.random()),
                 "dampening": float(rng.random()) * (trial % 3 == 0), "nesterov": trial % 4 == 0,
                 "first_step": trial % 5 == 0, "step_size": 1e39 if trial == 1 else float(rng.lognormal(-5, 3)),
                 "beta1": 0.9, "beta2": float(rng.random()), "bias_correction2_sqrt": float(rng.random()),
                 "eps": float(rng.lognormal(-15, 5)), "decoupled_weight_decay": trial % 2 == 0,
                 "alpha": float(rng.random())}
        flags, values = optim._scalars(op_name, attrs)
        with np.errstate(over="ignore"):
            assert optim.repack(recorded, op_name, attrs) == optim._pack(1000, flags, 8, [4, 12, 16, 20], values)
