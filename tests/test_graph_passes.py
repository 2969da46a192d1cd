"""Graph passes one by one, on graphs traced from small functions (optimize=False, then
the pass by hand): what each removes, and that the replay still gives eager results."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import webgrad
from tests.conftest import DEVICES, assert_close
from webgrad.graph import passes
from webgrad.graph.verify import GraphError


def _traced(fn, *args):
    compiled = webgrad.compile(fn, optimize=False)
    compiled(*args)
    return compiled.graph


def _ops(graph):
    return [n.op.name for n in graph.nodes]


def test_run_verifies_the_graph_after_each_pass(monkeypatch):
    graph = _traced(lambda x: x.exp().neg(), webgrad.ones(3))
    monkeypatch.setitem(passes.PASSES, "dce", (lambda graph, backend: graph.nodes.reverse() or 0, "{}"))  # broken
    with pytest.raises(GraphError, match="after pass 'dce': node 0 .*neg.* before any node makes it"):
        passes.run(graph)


def test_dce_drops_unused_nodes_and_keeps_inplace_writes():
    state = webgrad.zeros(3)

    def f(x):
        unused = x.exp() * 2  # noqa: F841  (dead)
        state.add_(x)  # an in-place write to captured state: kept
        return x + 1

    graph = _traced(f, webgrad.ones(3))
    assert "exp" in _ops(graph) and "mul" in _ops(graph)
    removed = passes.eliminate_dead_code(graph)
    assert removed == 2
    assert "exp" not in _ops(graph) and "mul" not in _ops(graph)
    assert any(n.inplace for n in graph.nodes)


def test_cse_merges_repeats_but_not_across_a_write():
    def f(x, buf):
        a = x.exp()
        b = x.exp()  # same op, same input: merged
        buf.mul_(2)  # a write: later repeats are not merged with earlier ones
        c = buf.exp()
        d = buf.exp()
        return a + b, c + d

    graph = _traced(f, webgrad.ones(3), webgrad.ones(3))
    before = _ops(graph).count("exp")
    assert before == 4
    assert passes.eliminate_common_subexpressions(graph) == 2
    assert _ops(graph).count("exp") == 2
    graph2 = _traced(lambda x, buf: (x.exp(), buf.mul_(2), x.exp()), webgrad.ones(3), webgrad.ones(3))
    assert passes.eliminate_common_subexpressions(graph2) == 0  # x may alias buf: the write splits them


def test_constant_folding_computes_constant_only_nodes_once():
    def f(x):
        c = webgrad.arange(3.0).exp() * webgrad.full((3,), 2.0)  # made in the trace, held by nobody after
        # (a Python scalar would be a cached tensor that outlives the call: captured, not folded)
        return x * c

    graph = _traced(f, webgrad.ones(3))
    assert passes.fold_constants(graph) == 2
    assert _ops(graph) == ["mul"]
    folded = [v for v in graph.values if v.source == "const"]
    assert any(np.allclose(np.asarray(v.data), np.exp(np.arange(3.0)) * 2) for v in folded if v.shape == (3,))


def test_captured_tensors_are_never_folded():
    weight = webgrad.ones(3)
    graph = _traced(lambda x: x * weight.exp(), webgrad.ones(3))
    assert passes.fold_constants(graph) == 0


def test_memory_plan_reuses_by_lifetime():
    def chain(x):
        for _ in range(6):
            x = x * 2
        return x

    graph = _traced(chain, webgrad.ones(1000))
    plan = passes.plan_memory(graph)
    assert plan["total_bytes"] == 6 * 4000
    assert plan["peak_bytes"] == 2 * 4000  # one live input and one output at a time


def test_optimized_replay_matches_eager(device):
    w = webgrad.randn(8, 8, device=device)

    def f(x):
        h = (x @ w).relu()
        dead = h.exp()  # noqa: F841
        return (h + h.relu() * 0 + (x @ w).relu()).sum(), (x @ w).relu()

    fn = webgrad.compile(f)
    x = webgrad.randn(4, 8, device=device)
    fn(x)
    got = fn(x)
    assert fn.replays == 1
    assert fn.graph.stats["cse"] >= 2 and fn.graph.stats["dce"] >= 1
    expected = f(x)
    for g, e in zip(got, expected):
        assert_close(g, e.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_fusion_makes_one_node_per_elementwise_chain(device):
    """add -> relu and gt -> cast -> mul (a ReLU's backward) fuse; a value read twice ends
    a chain; numpy runs the fused steps in turn (from the second replay into one planned
    array), WebGPU one generated kernel."""
    def f(x, bias, g):
        h = (x + bias).relu()
        return g * (h > 0).float() + h.exp(), h * 2

    x, bias, g = (webgrad.randn(*s, device=device) for s in ((4, 8), (8,), (4, 8)))
    graph = _traced(f, x, bias, g)
    assert passes.fuse_elementwise(graph) >= 3
    chains = [[m.op.name for m in n.fused] for n in graph.nodes if n.fused]
    assert ["add", "relu"] in chains, chains
    assert any(c[:3] == ["gt", "cast", "mul"] for c in chains), chains
    assert "fused[" in str(graph)
    fn = webgrad.compile(f)
    fn(x, bias, g)
    got = [fn(x, bias, g) for _ in range(2)]
    assert fn.replays == 2
    assert "fused: add -> relu" in fn.explain()
    for results in got:
        for a, e in zip(results, f(x, bias, g)):
            assert_close(a, e.numpy(), rtol=1e-5, atol=1e-5)


def test_fusion_stops_at_a_write_and_at_three_inputs():
    def f(x, y, z, w, buf):
        a = x + y
        buf.add_(1)  # a write between producer and consumer ends the chain
        return (a * buf), (x + y + z + w)

    args = [webgrad.ones(3) for _ in range(5)]
    graph = _traced(f, *args)
    passes.fuse_elementwise(graph)
    for n in graph.nodes:
        if n.fused:
            assert len(n.inputs) <= 3
            assert "buf" not in n.source and not (n.fused[0].op.name == "add" and n.fused[-1].op.name == "mul")


def test_a_transposed_weights_gradient_is_traced_without_a_copy_and_stays_owned(device):
    w = webgrad.randn(4, 8, device=device, requires_grad=True)

    def step(x):
        w.grad = None
        (x @ w.T).sum().backward()  # as in Linear
        return w.grad

    x = webgrad.randn(5, 8, device=device)
    graph = _traced(step, x)
    # matmul's vjp already makes the gradient in w's layout (ops/linalg.py): nothing for
    # transpose_matmuls to turn, and the copy that gives .grad its own memory copies a fresh
    # product, which elide_copies drops once dce has removed the transposed view nothing reads
    assert passes.transpose_matmuls(graph) == 0
    assert passes.eliminate_dead_code(graph) >= 1
    assert passes.elide_copies(graph) == 1
    assert "copy" not in _ops(graph)
    fn = webgrad.compile(step)
    fn(x)
    g1 = fn(x)
    g2 = fn(2 * x)
    assert fn.replays == 2
    assert_close(g1, (webgrad.ones(4, 5, device=device) @ x).numpy(), rtol=1e-5, atol=1e-5)
    assert_close(g2, 2 * g1.numpy(), rtol=1e-5, atol=1e-5)  # g1 kept its own memory


def test_optimizer_updates_group_by_op_and_attrs_up_to_the_capacity():
    params = [webgrad.randn(3, requires_grad=True) for _ in range(5)]
    opt = webgrad.optim.SGD([{"params": params[:3]}, {"params": params[3:], "lr": 0.5}], lr=0.1, momentum=0.9)
    marker = webgrad.zeros(1)

    def f(x):
        opt.zero_grad()
        sum((p * x).sum() for p in params).backward()
        opt.step()
        marker.add_(1)  # not an optimizer update: never grouped
        return x

    graph = _traced(f, webgrad.ones(3))
    steps = [n.op.name for n in graph.nodes if n.inplace]
    assert steps.count("sgd_momentum_step") == 5
    assert passes.group_optimizer_steps(graph, lambda arity: 2) == 2  # lr 0.1: 2 + 1, lr 0.5: 2
    updates = [n for n in graph.nodes if n.inplace and n.op.name.startswith("sgd")]
    assert [len(n.members or [n]) for n in updates] == [2, 1, 2]
    assert [n.attrs["lr"] for n in updates] == [0.1, 0.1, 0.5]
    assert updates[0].inputs == updates[0].members[0].inputs + updates[0].members[1].inputs
    assert "sgd_momentum_step[2 params](" in str(graph)
    assert not [n for n in graph.nodes if n.inplace][-1].op.name.startswith("sgd")  # the marker's add_


@pytest.mark.parametrize("device", DEVICES)
def test_a_replayed_step_bumps_every_parameter_version_as_eager(device):
    """A grouped update writes each member's parameter (analysis.written), so each gets its
    version bump, as eager's in-place steps give it."""
    model = webgrad.nn.Linear(3, 2).to(device)
    opt = webgrad.optim.SGD(model.parameters(), lr=0.1)
    x = webgrad.ones(4, 3, device=device)

    def step(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        return x

    compiled = webgrad.compile(step)
    for _ in range(3):  # trace, record, replay
        compiled(x)
    before = [p._version for p in model.parameters()]
    compiled(x)
    assert [p._version - b for p, b in zip(model.parameters(), before)] == [1, 1]


def _epilogues(graph):
    return [n for n in graph.nodes if n.fused and n.fused[0].op.name == "matmul"]


def test_matmul_epilogue_takes_the_chain_that_consumes_the_product():
    x, w, bias = webgrad.randn(5, 7), webgrad.randn(7, 6), webgrad.randn(6)
    graph = _traced(lambda x: (x @ w + bias).relu(), x)
    passes.fuse_elementwise(graph)
    assert passes.fuse_matmul_epilogues(graph) == 1
    (node,) = _epilogues(graph)
    assert [n.op.name for n in node.fused] == ["matmul", "add", "relu"]
    assert "matmul" not in _ops(graph)


def test_matmul_epilogue_leaves_products_that_are_needed_elsewhere():
    x, w, bias = webgrad.randn(5, 7), webgrad.randn(7, 6), webgrad.randn(6)
    buf = webgrad.zeros(7, 6)
    cases = [
        lambda x: (lambda p: (p, p + bias))(x @ w),         # the product is returned too
        lambda x: (lambda p: (p + bias) * p.sum())(x @ w),  # read by a second node
        lambda x: (lambda p: (buf.add_(1), p + bias)[1])(x @ buf),  # a write between the two
        lambda x: (x @ w)[0] + bias,                         # the chain reads a part of it
    ]
    for fn in cases:
        graph = _traced(fn, x)
        passes.fuse_elementwise(graph)
        assert passes.fuse_matmul_epilogues(graph) == 0, graph


@pytest.mark.parametrize("extra", ["bias", "row", "column", "scalar", "transposed", "batched", "uneven batch"])
def test_matmul_epilogue_replays_like_eager_on_webgpu(extra):
    """Every way an extra input can be laid out: broadcast, strided, batched; a layout the
    kernel cannot address (batch dims that do not step evenly) takes the two-dispatch path."""
    if "webgpu" not in DEVICES:
        pytest.skip("needs a WebGPU adapter")  # CI always has one (conftest fails the run otherwise)
    dev = "webgpu"
    batched = extra in ("batched", "uneven batch")
    x = webgrad.randn(*((2, 3) if batched else ()), 5, 7, device=dev)
    w = webgrad.randn(7, 6, device=dev)
    other = {"bias": webgrad.randn(6, device=dev), "row": webgrad.randn(1, 6, device=dev),
             "column": webgrad.randn(5, 1, device=dev), "scalar": webgrad.tensor(0.5, device=dev),
             "transposed": webgrad.randn(6, 5, device=dev).T,
             "batched": webgrad.randn(2, 3, 5, 6, device=dev),
             "uneven batch": webgrad.randn(3, 2, 5, 6, device=dev).permute(1, 0, 2, 3)}[extra]
    fn = webgrad.compile(lambda x: webgrad.tanh(x @ w * other) - other)
    expected = np.tanh(x.numpy() @ w.numpy() * other.numpy()) - other.numpy()
    device = webgrad.backend.get_backend(dev).device
    for _ in range(2):
        before = device.dispatches
        assert_close(fn(x), expected, rtol=1e-5, atol=1e-5)
    assert len(_epilogues(fn.graph)) == 1
    assert device.dispatches - before == (2 if extra == "uneven batch" else 1)


def _reductions(graph):
    from webgrad.kernels import Reduction

    return [n for n in graph.nodes if isinstance(n.op.impls.get("wgsl"), Reduction)]


def test_reduction_takes_the_chains_that_make_its_input_and_use_its_result():
    x = webgrad.randn(4, 6)
    graph = _traced(lambda x: ((x * 2).exp().sum(1) + 1).sqrt(), x)
    passes.fuse_elementwise(graph)
    assert passes.fuse_reductions(graph) == 2
    (node,) = _reductions(graph)
    assert [n.op.name for n in node.fused] == ["mul", "exp", "sum", "add", "sqrt"]
    assert _ops(graph) == [node.op.name]
    arrays = [x.numpy() if v.source == "arg" else webgrad.backend.get_backend("cpu").to_numpy(v.data)
              for v in node.inputs]  # its numpy kernel, as a cpu replay would run it
    assert_close(webgrad.tensor(node.op.impls["numpy"](*arrays, **node.attrs)),
                 ((x * 2).exp().sum(1) + 1).sqrt().numpy())
    # chains the elementwise pass left apart (their inputs' dtypes differ) join one after another
    graph = _traced(lambda x: 2.0 / (x > 0).sum().float(), x)
    passes.fuse_elementwise(graph)
    passes.fuse_reductions(graph)
    assert [n.op.name for n in _reductions(graph)[0].fused] == ["gt", "cast", "sum", "cast", "div"]
    assert len(graph.nodes) == 1
    # a one-element input that two chains of the epilogue read is bound once
    a, b, c = webgrad.tensor(3.0), webgrad.tensor(1.0), webgrad.tensor(2.0)
    graph = _traced(lambda x: (x.sum() / a + b) * c / a, x)
    passes.fuse_elementwise(graph)
    assert len(graph.nodes) == 3  # the chain takes three inputs at most: two chains
    passes.fuse_reductions(graph)
    (node,) = _reductions(graph)
    assert len(node.inputs) == len({v.id for v in node.inputs}) == 4


def test_reduction_leaves_chains_that_are_needed_elsewhere():
    x = webgrad.randn(4, 6)
    buf = webgrad.zeros(4)
    cases = [
        lambda x: (lambda e: e.sum() + e)(x.exp()),               # the input is read again (and is no scalar)
        lambda x: (lambda s: (s, s.exp()))(x.sum()),              # the result is returned too
        lambda x: x.sum(1) + x[:, 0],                             # the epilogue reads a tensor
        lambda x: (lambda s: (buf.add_(1), s * 2)[1])(x.sum(1)),  # a write between the two
        lambda x: (lambda e: (buf.add_(1), e.sum())[1])(x.exp()),
        lambda x: x.exp().argmax(1) + 1,                          # arg reductions keep their layout
    ]
    for fn in cases:
        graph = _traced(fn, x)
        passes.fuse_elementwise(graph)
        assert passes.fuse_reductions(graph) == 0, graph


@pytest.mark.parametrize("case", ["count", "mean of squares", "long rows", "permuted", "prod keepdim", "amin int",
                                  "shared scalar"])
def test_fused_reduction_replays_like_eager_on_webgpu(case):
    """Prologue and epilogue chains over every layout reduce.wgsl walks: strided views,
    kept dims, two passes for long rows (prologue in the first, epilogue in the second)."""
    if "webgpu" not in DEVICES:
        pytest.skip("needs a WebGPU adapter")  # CI always has one (conftest fails the run otherwise)
    fn, shape = {
        "count": (lambda x: (x > 0).sum(), (5, 7)),
        "mean of squares": (lambda x: (x * x).sum(1) / 7, (5, 7)),
        "long rows": (lambda x: (x.abs() + 1).log().sum(1).sqrt(), (2, 20000)),
        "permuted": (lambda x: x.T.exp().amax(0) * 2, (5, 7)),
        "prod keepdim": (lambda x: (x * 0.1 + 1).prod(1, keepdim=True) - 1, (5, 7)),
        "amin int": (lambda x: (x * 10).int().amin(0) + 3, (5, 7)),
        "shared scalar": (lambda x: (x.sum() / shared[0] + shared[1]) * shared[2] / shared[0], (5, 7)),
    }[case]
    shared = [webgrad.tensor(v, device="webgpu") for v in (3.0, 1.0, 2.0)]
    x = webgrad.randn(*shape, device="webgpu")
    expected = fn(x).numpy()
    compiled = webgrad.compile(fn)
    device = webgrad.backend.get_backend("webgpu").device
    for _ in range(2):
        before = device.dispatches
        got = compiled(x)
        assert got.dtype == webgrad.tensor(expected).dtype and got.shape == expected.shape
        assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert len(_reductions(compiled.graph)) == 1
    assert device.dispatches - before == (2 if case == "long rows" else 1)


def test_division_reuses_a_reciprocal_the_graph_computes():
    """As in a mean's backward: the constant one (made in the trace, like the backward seed)
    divided by the denominator; the reciprocal moves up to serve the division."""
    x, b = webgrad.randn(3, 4), webgrad.rand(4) + 1
    graph = _traced(lambda x: (x / b, webgrad.ones(()) / b), x)
    assert passes.reuse_reciprocals(graph) == 1
    assert _ops(graph) == ["div", "mul"] and graph.nodes[1].inputs[1] is graph.nodes[0].output
    one = webgrad.tensor(1.0)
    cases = [
        lambda x: (x / b, webgrad.full((), 2.0) / b),    # not a reciprocal
        lambda x: (x / b, one / b),                      # a captured one may change before a replay
        lambda x: (x // b, webgrad.ones(()) / b),        # not a true division
        lambda x: (x / (b * 2), webgrad.ones(()) / b),   # another denominator
    ]
    for fn in cases:
        assert passes.reuse_reciprocals(_traced(fn, x)) == 0


def _train_on_webgpu(make_model, make_opt, x, y, compiled, steps=3):
    """(losses, parameters, step function, dispatches of the last step) after ``steps``
    cross-entropy training steps on WebGPU, eagerly or through webgrad.compile."""
    webgrad.manual_seed(0)
    model = make_model().to("webgpu")
    opt = make_opt(model.parameters())

    def step(x, y):
        opt.zero_grad()
        loss = webgrad.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    fn = webgrad.compile(step) if compiled else step
    device = webgrad.backend.get_backend("webgpu").device
    losses = []
    for _ in range(steps):
        before = device.dispatches
        losses.append(fn(x, y).item())
    return losses, [p.detach().numpy() for p in model.parameters()], fn, device.dispatches - before


def test_mean_loss_train_step_replays_in_twelve_dispatches_on_webgpu():
    """The digits MLP step (64 -> 128 -> 10, batch 64, Adam, mean cross-entropy) on WebGPU:
    the loss's count, reciprocal and mean run inside two reductions."""
    if "webgpu" not in DEVICES:
        pytest.skip("needs a WebGPU adapter")  # CI always has one (conftest fails the run otherwise)
    rng = np.random.default_rng(0)
    x = webgrad.tensor(rng.standard_normal((64, 64)).astype(np.float32), device="webgpu")
    y = webgrad.tensor(rng.integers(0, 10, 64), device="webgpu")

    def mlp():
        return webgrad.nn.Sequential(webgrad.nn.Linear(64, 128), webgrad.nn.ReLU(), webgrad.nn.Linear(128, 10))
    adam = functools.partial(webgrad.optim.Adam, lr=1e-3)
    eager, compiled = (_train_on_webgpu(mlp, adam, x, y, compiled=c) for c in (False, True))
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5, atol=1e-6)
    fn, dispatches = compiled[2], compiled[3]
    assert dispatches <= 12, fn.explain()
    assert "ne -> cast -> sum -> div" in fn.explain()


def test_functionalize_turns_writes_into_made_values_into_new_values():
    w = webgrad.randn(4, 4)

    def f(x):
        h = x @ w
        h.relu_()
        h.mul_(2)
        h += 1
        return h.sum()
    graph = _traced(f, webgrad.randn(3, 4))
    assert _ops(graph).count("copy_into") == 3
    assert passes.functionalize(graph) == 3
    assert "copy_into" not in _ops(graph) and not any(n.inplace for n in graph.nodes)
    passes.elide_copies(graph)
    assert "copy" not in _ops(graph)


def test_functionalize_keeps_writes_that_must_reach_memory():
    buf, w = webgrad.zeros(3, 4), webgrad.randn(4, 4)
    cases = [
        lambda x: (buf.add_(x), buf.sum())[1],                      # a captured tensor
        lambda x: (x.mul_(2), x.sum())[1],                          # an argument
        lambda x: (lambda h: (h[0].mul_(2), h.sum())[1])(x @ w),    # a view of a made value
        lambda x: (lambda h: (h.view(12).mul_(2), h.sum())[1])(x @ w),
        lambda x: (lambda h: (h.copy_(webgrad.tensor(1.0)), h.sum())[1])(x @ w),     # a broadcast write
    ]
    for fn in cases:
        graph = _traced(fn, webgrad.randn(3, 4))
        assert passes.functionalize(graph) == 0, graph
    # h takes r's value, then r is doubled: h must keep the value r had, so that write stays
    graph = _traced(lambda x: (lambda h, r: (h.copy_(r), r.mul_(2), h.sum())[2])(x @ w, x * 3), webgrad.randn(3, 4))
    assert passes.functionalize(graph) == 1  # r's own write becomes a new value
    assert [n.inputs[0].id for n in graph.nodes if n.inplace] == [graph.nodes[0].output.id]


def test_functionalized_train_step_replays_like_eager_on_webgpu():
    """In-place ops in a model's forward (as ReLU(inplace=True)-style code writes): the
    compiled step has no in-place node but the optimizer's and gives eager's losses and
    parameters (the backward reads the written values through views taken after the writes)."""
    if "webgpu" not in DEVICES:
        pytest.skip("needs a WebGPU adapter")  # CI always has one (conftest fails the run otherwise)

    class Net(webgrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = webgrad.nn.Linear(8, 16), webgrad.nn.Linear(16, 3)
            self.act = webgrad.nn.ReLU(inplace=True)

        def forward(self, x):
            h = self.act(self.fc1(x))
            h.clamp_(max=2.0)
            h *= 0.5
            return self.fc2(h)

    x = webgrad.randn(5, 8, device="webgpu")
    y = webgrad.tensor([0, 1, 2, 0, 1], device="webgpu")
    sgd = functools.partial(webgrad.optim.SGD, lr=0.1, momentum=0.9)
    eager, compiled = (_train_on_webgpu(Net, sgd, x, y, compiled=c) for c in (False, True))
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5, atol=1e-6)
    for got, expected in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    fn = compiled[2]
    assert fn.graph.stats["functionalized"] == 3  # ReLU(inplace=True), clamp_, *=
    assert all("sgd" in n.op.name for n in fn.graph.nodes if n.inplace), fn.graph


def test_functionalize_turns_view_writes_into_index_put():
    """``h[key] = v`` into a value the graph made, or into a tensor made in the function,
    becomes index_put (setitem's out-of-place form); later readers read its value."""
    w = webgrad.randn(4, 4)

    def f(x):
        h = x @ w
        h[0] = 1.0
        h[:, 1] = x[:, 0]
        out = webgrad.zeros(3, 4)
        out[1:] = h[1:]
        return h.sum() + out.sum()
    graph = _traced(f, webgrad.randn(3, 4))
    assert _ops(graph).count("setitem") == 3
    passes.eliminate_dead_code(graph)  # as passes.run does first: setitem's own unread views
    assert passes.functionalize(graph) == 3
    assert "setitem" not in _ops(graph) and not any(n.inplace for n in graph.nodes), graph
    assert _ops(graph).count("index_put") == 3
    # a write nobody reads afterwards is now dead code
    graph = _traced(lambda x: (lambda s: (s.__setitem__(0, x.sum()), x * 2)[1])(webgrad.zeros(5)), webgrad.ones(3))
    passes.functionalize(graph)
    passes.eliminate_dead_code(graph)
    assert _ops(graph) == ["mul"], graph


def test_functionalize_keeps_view_writes_that_must_reach_memory():
    buf, w = webgrad.zeros(3, 4), webgrad.randn(4, 4)
    cases = [
        lambda x: (buf.__setitem__(0, 1.0), buf.sum())[1],                         # a captured tensor
        lambda x: (x.__setitem__(0, 1.0), x.sum())[1],                             # an argument
        lambda x: (lambda h: (h[0].__setitem__(1, 2.0), h.sum())[1])(x @ w),       # a view of a made value
        lambda x: (lambda h, r: (h.__setitem__(0, 2.0), r.sum())[1])(*(lambda h: (h, h[1:]))(x @ w)),  # viewed before
    ]
    for fn in cases:
        graph = _traced(fn, webgrad.randn(3, 4))
        passes.eliminate_dead_code(graph)
        assert passes.functionalize(graph) == 0, graph


def _reinplaced(fn, *args):
    graph = _traced(fn, *args)
    passes.eliminate_dead_code(graph)
    passes.functionalize(graph)
    return passes.reinplace(graph), graph


def test_reinplace_writes_in_place_where_the_old_value_is_dead():
    w = webgrad.randn(4, 4)

    def fill(x):
        out = webgrad.zeros(3, 5, 4)  # a constant: its first write copies it, the rest write in place
        h = x
        for t in range(5):
            h = (h @ w).tanh()
            out[:, t] = h
        return out
    changed, graph = _reinplaced(fill, webgrad.randn(3, 4))
    assert changed == 4 and _ops(graph).count("index_put") == 1 and _ops(graph).count("setitem") == 4, graph
    written = {n.inputs[0].id for n in graph.nodes if n.inplace}
    assert written == {graph.outputs[0].id}, graph  # every write lands in the returned value

    def old_read_later(x):
        h = x @ w
        return h.index_put(0, webgrad.tensor(1.0)).sum() + h.sum()

    def old_viewed_later(x):
        h = x @ w
        row = h[1]
        return h.index_put(1, webgrad.tensor(1.0)).sum() + row.sum()

    def old_returned(x):
        h = x @ w
        return h.index_put(1, webgrad.tensor(1.0)), h

    def argument(x):
        return x.index_put(1, webgrad.tensor(1.0))

    for fn in (old_read_later, old_viewed_later, old_returned, argument):
        changed, graph = _reinplaced(fn, webgrad.randn(3, 4))
        assert changed == 0 and "setitem" not in _ops(graph), graph


@pytest.mark.parametrize("tracked", [False, True])
def test_view_writes_in_a_loop_replay_like_eager_on_webgpu(tracked):
    """An RNN-style loop that fills ``out[:, t]`` step by step (plain indexing and an index
    tensor): compiled on WebGPU it writes in place, gives eager's values and gradients,
    and each call returns a tensor of its own."""
    if "webgpu" not in DEVICES:
        pytest.skip("needs a WebGPU adapter")  # CI always has one (conftest fails the run otherwise)
    webgrad.manual_seed(0)
    w = (webgrad.randn(6, 6) * 0.4).to("webgpu").requires_grad_(tracked)
    rows = webgrad.tensor([2, 0], device="webgpu")

    def step(x):
        out = webgrad.zeros(x.shape[0], x.shape[1], 6, device="webgpu")
        h = x[:, 0]
        for t in range(x.shape[1]):
            h = (h @ w + x[:, t]).tanh()
            out[:, t] = h
        out[rows, 0] = -1.0
        if tracked:
            (out * out).sum().backward()
        return out

    fn = webgrad.compile(step)
    xs = [webgrad.randn(3, 5, 6, device="webgpu") for _ in range(3)]
    kept = []
    for x in xs:
        if tracked:
            w.grad = None
        got = fn(x)
        got_grad = w.grad.numpy().copy() if tracked else None
        if tracked:
            w.grad = None
        expected = step(x)
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-5)
        if tracked:
            np.testing.assert_allclose(got_grad, w.grad.numpy(), rtol=1e-5, atol=1e-5)
        kept.append((got, expected.detach().numpy()))
    for got, expected in kept:  # a later call wrote into none of the earlier results
        np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-5, atol=1e-5)
    assert fn.graph.stats["reinplaced"] >= 5, fn.graph
    assert "written back in place" in fn.explain()
