"""webgrad.compile: a traced and replayed train step gives the eager results, on cpu and webgpu."""
from __future__ import annotations

import functools
import gc
import warnings

import numpy as np
import pytest

import webgrad
import webgrad.nn as nn
import webgrad.nn.functional as F
from tests.conftest import assert_close


def _data(device, n_steps=4, batch=16, image=False, seed=0):
    rng = np.random.default_rng(seed)
    shape = (batch, 1, 8, 8) if image else (batch, 64)
    xs = [webgrad.tensor(rng.standard_normal(shape).astype(np.float32), device=device) for _ in range(n_steps)]
    ys = [webgrad.tensor(rng.integers(0, 10, batch), device=device) for _ in range(n_steps)]
    return xs, ys


def _mlp(device, dropout=0.0):
    webgrad.manual_seed(0)
    layers = [nn.Linear(64, 32), nn.ReLU()] + ([nn.Dropout(dropout)] if dropout else []) + [nn.Linear(32, 10)]
    return nn.Sequential(*layers).to(device)


def _cnn(device):
    webgrad.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(4 * 4 * 4, 10)).to(device)


def _train(make_model, make_opt, xs, ys, compiled, scheduler=False):
    """Losses, parameters and grads after one step per batch, eagerly or compiled."""
    model = make_model()
    opt = make_opt(model.parameters())
    sched = webgrad.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) if scheduler else None

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = webgrad.compile(step) if compiled else step
    losses = []
    for x, y in zip(xs, ys):
        losses.append(fn(x, y).item())
        if sched is not None:
            sched.step()
    return losses, [p.detach().numpy() for p in model.parameters()], [p.grad.numpy() for p in model.parameters()], fn


@pytest.mark.parametrize("kind, make_opt", [
    ("mlp", lambda ps: webgrad.optim.Adam(ps, lr=1e-2)),
    ("mlp", lambda ps: webgrad.optim.SGD(ps, lr=0.1, momentum=0.9)),
    ("cnn", lambda ps: webgrad.optim.Adam(ps, lr=1e-2)),
    ("cnn", lambda ps: webgrad.optim.SGD(ps, lr=0.1)),
])
def test_train_step_matches_eager(device, kind, make_opt):
    image = kind == "cnn"
    xs, ys = _data(device, image=image)
    make_model = (lambda: _cnn(device)) if image else (lambda: _mlp(device))
    eager = _train(make_model, make_opt, xs, ys, compiled=False)
    compiled = _train(make_model, make_opt, xs, ys, compiled=True)
    fn = compiled[3]
    assert fn.traces == 1 and fn.replays == len(xs) - 1, fn.explain()
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(compiled[1] + compiled[2], eager[1] + eager[2]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_changing_learning_rate_is_followed(device):
    """The optimizer's per-step scalars (lr from a scheduler, Adam's bias corrections) are
    re-read at every replay, not frozen at the traced values."""
    xs, ys = _data(device)
    make_opt = lambda ps: webgrad.optim.Adam(ps, lr=1e-2)  # noqa: E731
    eager = _train(lambda: _mlp(device), make_opt, xs, ys, compiled=False, scheduler=True)
    compiled = _train(lambda: _mlp(device), make_opt, xs, ys, compiled=True, scheduler=True)
    assert compiled[3].replays == len(xs) - 1
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_changed_shape_retraces_and_cache_is_bounded(device):
    model = _mlp(device)
    model.requires_grad_(False)
    fn = webgrad.compile(lambda x: model(x).relu().sum(), cache_size=2)
    for batch in (4, 4, 8, 8, 3, 4):
        x = webgrad.randn(batch, 64, device=device)
        assert_close(fn(x), model(x).relu().sum().detach().numpy(), rtol=1e-5, atol=1e-5)
    assert fn.traces == 4  # 4, 8, 3 (evicts 4, the least recently used), then 4 again
    assert len(fn.cache) == 2


def test_train_eval_and_replaced_parameter_retrace(device):
    model = _mlp(device, dropout=0.5)
    model.requires_grad_(False)
    fn = webgrad.compile(lambda x: model(x))
    x = webgrad.randn(4, 64, device=device)
    fn(x)
    fn(x)
    model.eval()
    out = fn(x)
    assert fn.traces == 2
    assert_close(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    model[0].weight.data = webgrad.zeros(32, 64, device=device)
    out = fn(x)
    assert fn.traces == 3
    assert_close(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_graph_break_falls_back_to_eager_with_one_warning(device):
    def branchy(x):
        if x.sum() > 0:  # data-dependent control flow: bool(tensor)
            return x * 2
        return x - 1

    fn = webgrad.compile(branchy)
    pos = webgrad.ones(3, device=device)
    neg = -webgrad.ones(3, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [fn(pos), fn(neg), fn(pos), fn(neg)]
    breaks = [w for w in caught if "graph break" in str(w.message)]
    assert len(breaks) == 1, [str(w.message) for w in caught]
    assert "test_compile.py:" in str(breaks[0].message) and "bool(tensor)" in str(breaks[0].message)
    for r, expected in zip(results, ([2.0] * 3, [-2.0] * 3, [2.0] * 3, [-2.0] * 3)):
        assert_close(r, expected)
    report = fn.explain()
    assert "graph breaks: 1" in report and "test_compile.py:" in report


@pytest.mark.parametrize("read", [lambda t: t.item(), lambda t: t.numpy(), lambda t: print(t)])
def test_host_reads_break_the_graph(device, read, capsys):
    def f(x):
        y = x.sum()
        read(y)
        return y * 2

    fn = webgrad.compile(f)
    with pytest.warns(UserWarning, match="graph break"):
        fn(webgrad.ones(3, device=device))
    assert_close(fn(webgrad.full((3,), 2.0, device=device)), 12.0)
    assert fn.replays == 0


def test_dropout_draws_fresh_numbers_at_every_replay(device):
    fn = webgrad.compile(lambda x: F.dropout(x, 0.5, training=True))
    x = webgrad.ones(256, device=device)
    masks = [fn(x).numpy() for _ in range(4)]
    assert fn.replays == 3
    for m in masks:
        assert set(np.unique(m)) <= {0.0, 2.0}
    for i in range(4):
        for j in range(i):
            assert not np.array_equal(masks[i], masks[j]), "a replay repeated earlier random numbers"


def test_graph_print_and_explain(device):
    xs, ys = _data(device, n_steps=2)
    *_, fn = _train(lambda: _mlp(device), lambda ps: webgrad.optim.Adam(ps, lr=1e-2), xs, ys, compiled=True)
    text = str(fn.graph)
    update = "adam_step[4 params](" if device == "webgpu" else "adam_step("
    for word in ("args:", "captures:", "matmul(", "cross_entropy(", update, "return %", "grads"):
        assert word in text, text
    report = fn.explain()
    assert "graph breaks: 0" in report and "1 replay(s)" in report
    assert "peak" in report
    if device == "webgpu":
        assert "dispatches per replay" in report and "not measured" not in report
        assert "grouped: 4 adam_step updates in one kernel" in report
    else:  # numpy runs no dispatches: the replay line counts its calls instead
        assert "dispatches" not in report and "replay: a flat list of" in report


def test_decorator_forms_and_bad_arguments():
    @webgrad.compile
    def double(x):
        return x * 2

    @webgrad.compile(cache_size=1)
    def triple(x):
        return x * 3

    assert_close(double(webgrad.ones(2)), [2.0, 2.0])
    assert_close(triple(webgrad.ones(2)), [3.0, 3.0])
    assert double.__name__ == "double"
    with pytest.raises(TypeError, match="webgrad.compile: expected a function"):
        webgrad.compile(3)
    with pytest.raises(ValueError, match="cache_size"):
        webgrad.compile(double, cache_size=0)


def test_input_checks_run_again_at_replay():
    """cross_entropy checks class targets on cpu; a replay runs that check too."""
    model = _mlp("cpu")
    model.requires_grad_(False)
    fn = webgrad.compile(lambda x, y: F.cross_entropy(model(x), y))
    x = webgrad.randn(2, 64)
    fn(x, webgrad.tensor([1, 2]))
    fn(x, webgrad.tensor([1, 2]))
    assert fn.replays == 1
    with pytest.raises(IndexError, match="out of bounds"):
        fn(x, webgrad.tensor([1, -5]))


def test_checks_of_computed_values_run_in_the_graph_before_any_write():
    """A sequence model's targets reach cross_entropy reshaped (a value the graph computes)
    and its positions come from arange: both checks replay where they ran, before the
    optimizer writes anything, so a bad target at a replay changes no state."""
    webgrad.manual_seed(0)
    embed, head = nn.Embedding(5, 8), nn.Linear(8, 5)
    params = list(embed.parameters()) + list(head.parameters())
    opt = webgrad.optim.Adam(params, lr=1e-2)

    def step(tokens, targets):
        h = embed(tokens) + embed(webgrad.arange(tokens.shape[1]))
        loss = F.cross_entropy(head(h).reshape(-1, 5), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    fn = webgrad.compile(step)
    tokens = webgrad.tensor([[0, 1, 2], [3, 4, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph break would warn
        for _ in range(3):
            fn(tokens, webgrad.tensor([[1, 2, 3], [4, 0, 1]]))
    assert fn.replays == 2 and "check[_class_targets]" in str(fn.graph)
    before = [p.detach().numpy().copy() for p in params]
    state = [dict(s) for s in opt.state.values()]
    with pytest.raises(IndexError, match="out of bounds"):
        fn(tokens, webgrad.tensor([[1, 2, 3], [4, 0, 9]]))
    assert all(np.array_equal(p.detach().numpy(), b) for p, b in zip(params, before))
    assert [s["step"] for s in opt.state.values()] == [s["step"] for s in state]


def test_non_tensor_results_and_arguments():
    fn = webgrad.compile(lambda x, scale, opts: {"y": x * scale, "n": opts["n"]})
    a = fn(webgrad.ones(2), 2.0, {"n": 1})
    b = fn(webgrad.ones(2), 2.0, {"n": 1})
    c = fn(webgrad.ones(2), 3.0, {"n": 1})
    assert fn.traces == 2 and fn.replays == 1
    assert_close(a["y"], [2.0, 2.0]) and a["n"] == 1
    assert_close(b["y"], [2.0, 2.0]) and b["n"] == 1
    assert_close(c["y"], [3.0, 3.0])


def test_differentiable_result_without_backward_runs_eagerly(device):
    """A replay records no autograd graph: a function whose result needs backward later
    runs eagerly (one warning saying to compile the whole step), so backward still works."""
    w = webgrad.ones(3, device=device, requires_grad=True)
    fn = webgrad.compile(lambda x: (x * w).sum())
    with pytest.warns(UserWarning, match="compile the whole step"):
        fn(webgrad.ones(3, device=device)).backward()
    fn(webgrad.ones(3, device=device)).backward()
    assert_close(w.grad, [2.0, 2.0, 2.0])
    assert fn.replays == 0


def test_gradients_of_arguments_are_set_at_replay(device):
    def grad_of_input(x):
        y = (x * x).sum()
        y.backward()
        return y

    fn = webgrad.compile(grad_of_input)
    for k in (1.0, 2.0, 3.0):
        x = webgrad.full((4,), k, device=device, requires_grad=True)
        fn(x)
        assert_close(x.grad, [2 * k] * 4)
    assert fn.replays == 2


# -- every op-table case through compile ----------------------------------------------
def _op_case_inputs(case, seed):
    """The case's inputs drawn with another seed: a replay must not reuse traced values."""
    from op_cases import OpCase  # noqa: F401  (tests/ is on the path, as for test_ops.py)

    rng = np.random.default_rng(seed)
    return [np.asarray(a) for a in case.gen(rng)] if case.gen is not None else [a.make(rng) for a in case.args]


def _op_table():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from op_cases import CASES

    return CASES


@pytest.mark.parametrize("case", _op_table(), ids=lambda c: c.name)
def test_op_case_through_compile(case, device):
    """Each op-table case traced on one set of inputs and replayed on two others gives the
    eager results (forward under no_grad; for differentiable cases also the gradients): the
    first replay records (WebGPU's dispatch list, numpy's list of calls into planned arrays),
    the second runs from what it recorded, and must leave the first's results as they were."""
    from tests.conftest import supports_dtype

    first, second, third = case.make_inputs(), _op_case_inputs(case, 12345), _op_case_inputs(case, 777)
    if any(not supports_dtype(device, webgrad.dtypes.from_numpy(a.dtype)) for a in first + second):
        device = "cpu"
    floats = [a.dtype.kind == "f" for a in first]
    grad = case.grad and any(floats)

    def forward(*xs):
        with webgrad.no_grad():
            return case.fn(*xs)

    def backward(*xs):
        result = case.fn(*xs)
        outs = [o for o in (result if isinstance(result, (tuple, list)) else [result])
                if isinstance(o, webgrad.Tensor) and o.requires_grad]
        if outs:
            sum(o.float().sum() for o in outs).backward()
        return [x.grad for x in xs]

    def call(f, arrays, needs_grad):
        xs = [webgrad.tensor(a, device=device, requires_grad=needs_grad and k) for a, k in zip(arrays, floats)]
        out = f(*xs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    for fn, needs_grad in [(forward, False)] + ([(backward, True)] if grad else []):
        compiled = webgrad.compile(fn)
        run = functools.partial(call, needs_grad=needs_grad)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # graph breaks (host reads) are fine: eager then
            try:
                run(fn, first)
            except Exception as err:  # eagerly an error (float64 on webgpu...): the same when compiled
                with pytest.raises(type(err)):
                    run(compiled, first)
                continue
            run(compiled, first)
            got = run(compiled, second)
            got_third = run(compiled, third)
        for inputs, results in ((second, got), (third, got_third)):
            expected = run(fn, inputs)
            assert len(results) == len(expected)
            for g, e in zip(results, expected):
                if e is None or not isinstance(e, webgrad.Tensor):
                    assert g is None or not isinstance(g, webgrad.Tensor) or e is None, case.name
                    continue
                assert g is not None, f"{case.name}: compiled gave no gradient"
                assert_close(g, e.detach().numpy(), rtol=1e-5, atol=1e-5, dtype=e.dtype, msg=case.name)


def test_dropout_train_step_matches_eager_draw_for_draw(device):
    """A replay draws from the global generator in the traced order, as eager does: with the
    same seed a compiled step with dropout gives eager's numbers, step after step."""
    xs, ys = _data(device)
    make_opt = lambda ps: webgrad.optim.SGD(ps, lr=0.1)  # noqa: E731
    runs = []
    for compiled in (False, True):
        model = _mlp(device, dropout=0.3)
        webgrad.manual_seed(7)
        runs.append(_train(functools.partial(lambda m: m, model), make_opt, xs, ys, compiled=compiled))
    (eager_losses, eager_params, _, _), (losses, params, _, fn) = runs
    assert fn.replays == len(xs) - 1
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(params, eager_params):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_arguments_sharing_data_are_part_of_the_signature():
    fn = webgrad.compile(lambda a, b: a * 2 + b)
    x = webgrad.ones(3)
    assert_close(fn(x, x), [3.0] * 3)
    assert_close(fn(webgrad.ones(3), webgrad.zeros(3)), [2.0] * 3)  # not the (x, x) graph
    assert fn.traces == 2


def test_cached_scalars_dropped_mid_trace_are_constants(monkeypatch):
    """The scalar cache starts over when full, so a cached 0-d constant made before the
    trace can die during it; it is a constant of the graph, not a lost capture."""
    from webgrad import creation

    x = webgrad.ones(3)
    _ = x * 0.5  # cached before the trace
    monkeypatch.setattr(creation.SCALARS, "_limit", 0)  # every new number starts the cache over
    fn = webgrad.compile(lambda x: x * 0.5 + x * 0.25 + x * 0.5)  # 0.5 twice, from two cached copies
    for _ in range(3):
        assert_close(fn(x), [1.25] * 3)
    assert fn.traces == 1 and fn.replays == 2
    # one constant per number, so the graph does not depend on the cache's state
    assert sorted(float(v.data) for v in fn.graph.inputs_of_kind("const")) == [0.25, 0.5]


def test_errors_inside_a_traced_function_leave_no_tracer_behind():
    from webgrad.ops import registry

    def bad(x):
        _ = x * 2
        raise KeyError("boom")

    fn = webgrad.compile(bad)
    with pytest.raises(KeyError):
        fn(webgrad.ones(2))
    assert registry.OBSERVERS == ()
    assert gc.get_freeze_count() == 0  # the objects frozen while tracing are given back
    assert_close(webgrad.ones(2) + 1, [2.0, 2.0])


def test_tracing_collects_only_what_the_trace_made():
    """A trace learns which temporaries died from one garbage collection; objects older
    than the trace are frozen meanwhile, so a large program does not pay a full collection
    per trace (it cost over half a second with a few million objects alive)."""
    calls = []
    original = gc.collect

    def counting_collect(*args):
        calls.append(gc.get_freeze_count())
        return original(*args)

    keep = [[i] for i in range(1000)]  # noqa: F841  (older than the trace)
    fn = webgrad.compile(lambda x: (x * 2).relu().sum())
    gc.collect = counting_collect
    try:
        fn(webgrad.ones(3))
        broken = webgrad.compile(lambda x: float(x.sum()))
        with pytest.warns(UserWarning, match="graph break"):
            broken(webgrad.ones(3))
    finally:
        gc.collect = original
    assert calls and all(frozen >= 1000 for frozen in calls)
    assert gc.get_freeze_count() == 0 and fn.traces == 1


def test_a_compiled_function_called_inside_another_is_inlined():
    inner = webgrad.compile(lambda x: x + 1)
    outer = webgrad.compile(lambda x: inner(x) * 2)
    for k in (1.0, 2.0):
        assert_close(outer(webgrad.full((2,), k)), [2 * (k + 1)] * 2)
    assert outer.replays == 1 and inner.traces == 0
    assert "add" in str(outer.graph)  # inner's op, in outer's graph (fused with the mul)


@pytest.mark.parametrize("make_opt", [
    lambda ps: webgrad.optim.SGD(ps, lr=0.1),
    lambda ps: webgrad.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda ps: webgrad.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5, maximize=True),
    lambda ps: webgrad.optim.Adam(ps, lr=1e-2, weight_decay=0.01),
    lambda ps: webgrad.optim.AdamW(ps, lr=1e-2),
    lambda ps: webgrad.optim.Adam(ps, lr=1e-2, amsgrad=True),
    lambda ps: webgrad.optim.RMSprop(ps, lr=1e-2),
    lambda ps: webgrad.optim.RMSprop(ps, lr=1e-2, centered=True),
    lambda ps: webgrad.optim.RMSprop(ps, lr=1e-2, momentum=0.5),
    lambda ps: webgrad.optim.RMSprop(ps, lr=1e-2, centered=True, momentum=0.5),
    # Two groups with their own lr: their updates never share a kernel.
    lambda ps: webgrad.optim.Adam([{"params": ps[:2]}, {"params": ps[2:], "lr": 1e-3}], lr=1e-2),
])
def test_grouped_optimizer_updates_match_eager(device, make_opt):
    """On WebGPU a compiled step updates a group of parameters in one generated kernel
    (passes/group.py); every optimizer op gives the eager parameters and state."""
    xs, ys = _data(device)
    as_list = lambda ps: make_opt(list(ps))  # noqa: E731
    eager = _train(lambda: _mlp(device), as_list, xs, ys, compiled=False)
    compiled = _train(lambda: _mlp(device), as_list, xs, ys, compiled=True)
    fn = compiled[3]
    assert fn.traces == 1 and fn.replays == len(xs) - 1, fn.explain()
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    updates = [n for n in fn.graph.nodes if n.inplace]
    grouped = [n for n in updates if n.members]
    assert sum(len(n.members or [n]) for n in updates) == 4  # every parameter updated once
    assert all(len({id(m.op) for m in n.members}) == 1 and all(m.attrs == n.attrs for m in n.members)
               for n in grouped)
    if device == "webgpu":
        from webgrad.backend.webgpu.optim_group import capacity
        backend = webgrad.backend.get_backend(device)
        assert bool(grouped) == (capacity(backend, len(updates[0].inputs) // len(updates[0].members or [0])) > 1)
    else:
        assert not grouped  # numpy gains nothing from it


@pytest.mark.parametrize("buffers, groups", [(4, 4), (8, 2), (16, 1)])
def test_group_size_follows_the_binding_limit(buffers, groups, monkeypatch):
    """Adam binds four buffers per parameter: a shader with 8 storage buffers updates two
    parameters at a time, one with 16 all four of the MLP."""
    from tests.conftest import DEVICES
    if "webgpu" not in DEVICES:
        pytest.skip("needs a WebGPU adapter")  # CI always has one (conftest fails the run otherwise)
    backend = webgrad.backend.get_backend("webgpu")
    monkeypatch.setitem(backend.limits, "max_storage_buffers_per_shader_stage", buffers)
    xs, ys = _data("webgpu")
    make_opt = lambda ps: webgrad.optim.Adam(ps, lr=1e-2)  # noqa: E731
    eager = _train(lambda: _mlp("webgpu"), make_opt, xs, ys, compiled=False)
    compiled = _train(lambda: _mlp("webgpu"), make_opt, xs, ys, compiled=True)
    steps = [n for n in compiled[3].graph.nodes if n.inplace]
    assert len(steps) == groups
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_autocast_state_selects_the_graph(device):
    """A function traced outside autocast must not replay that graph inside autocast (and back)."""
    half = webgrad.float16 if device == "webgpu" else webgrad.bfloat16
    w = webgrad.randn(8, 4, device=device)

    @webgrad.compile
    def f(x):
        return (x @ w).relu()

    x = webgrad.randn(3, 8, device=device)
    for _ in range(2):
        assert f(x).dtype == webgrad.float32
        with webgrad.autocast(device, dtype=half):
            out = f(x)
            want = (x @ w).relu()
        assert out.dtype == want.dtype == half
        np.testing.assert_allclose(out.float().numpy(), want.float().numpy(), rtol=1e-2, atol=1e-2)
