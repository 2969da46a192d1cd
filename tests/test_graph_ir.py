"""The IR on hand-built graphs: the dataflow facts (graph/analysis.py), the verifier's rules
(graph/verify.py: each broken graph is refused) and each pass on a graph small enough to
read, without tracing."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad.optim  # noqa: F401  (declares the optimizer ops)
from webgrad import dtypes
from webgrad.graph import passes
from webgrad.graph.analysis import analyze
from webgrad.graph.ir import Graph, Node, Value
from webgrad.graph.passes.group import grouped_node
from webgrad.graph.verify import GraphError, verify
from webgrad.ops.registry import OPS, Op

F32 = dtypes.float32


class Build:
    """A graph written by hand: ``b.arg()``, ``b("exp", x)``, ``b.write("setitem", h, v)``."""

    def __init__(self, device="cpu"):
        self.g = Graph(device)

    def arg(self, shape=(3,), dtype=F32):
        return self.g.new_value(shape, dtype, "arg", index=len(self.g.inputs_of_kind("arg")))

    def capture(self, shape=(3,)):
        return self.g.new_value(shape, F32, "capture", data=np.ones(shape, np.float32))

    def const(self, data):
        data = np.asarray(data, np.float32)
        return self.g.new_value(data.shape, F32, "const", data=data)

    def __call__(self, name, *inputs, shape=None, dtype=None, **attrs):
        out = self.g.new_value(inputs[0].shape if shape is None else shape, dtype or inputs[0].dtype, "node")
        self.g.nodes.append(Node(OPS[name], list(inputs), attrs, out))
        return out

    def write(self, name, *inputs, **attrs):
        node = Node(OPS[name], list(inputs), attrs, None)
        self.g.nodes.append(node)
        return node


def _names(graph):
    return [n.op.name for n in graph.nodes]


# -- analysis ---------------------------------------------------------------------------------------
def test_analysis_uses_last_use_written_and_escaping():
    b = Build()
    a, c = b.arg(), b.capture()
    x = b("exp", a)
    y = b("mul", x, x)  # reads x twice
    b.write("copy_into", c, y)
    z = b("add", y, a)
    b.g.outputs, b.g.grads = [z], [(c, x)]
    df = analyze(b.g)
    assert df.uses == {a.id: [0, 3], x.id: [1, 1], c.id: [2], y.id: [2, 3]}
    assert df.last_use == {a.id: 3, x.id: 4, c.id: 2, y.id: 3, z.id: 4}  # x, z leave the call: len(nodes)
    assert df.written == {c.id}
    assert df.escaping == {c.id, y.id, z.id, x.id}  # read or written in place, returned, a gradient
    assert df.producer == {x.id: b.g.nodes[0], y.id: b.g.nodes[1], z.id: b.g.nodes[3]}
    assert df.position[id(b.g.nodes[2])] == 2
    assert not df.single_use(x.id) and not df.single_use(y.id) and not df.single_use(a.id)


def test_analysis_aliases_views_transitively_and_single_use():
    b = Build()
    a = b.arg((2, 3))
    r = b("reshape", a, shape=(3, 2))
    p = b("permute", r, dims=(1, 0))
    e = b("exp", p)
    n = b("neg", e)
    b.g.outputs = [n, r]
    df = analyze(b.g)
    assert df.views == {r.id, p.id}
    assert df.aliases == {a.id: {a.id, r.id, p.id}, r.id: {r.id, p.id}}
    assert df.aliases_of(p.id) == {p.id} and df.aliases_of(e.id) == {e.id}
    assert df.single_use(e.id) and not df.single_use(n.id) and not df.single_use(r.id)  # r is returned


def test_analysis_maps_grouped_members_to_their_group():
    b = Build()
    p1, g1, p2, g2 = b.capture(), b.arg(), b.capture(), b.arg()
    s1 = b.write("sgd_step", p1, g1, lr=0.1, weight_decay=0.0, maximize=False)
    s2 = b.write("sgd_step", p2, g2, lr=0.1, weight_decay=0.0, maximize=False)
    b.g.nodes = [grouped_node([s1, s2])]
    df = analyze(b.g)
    assert df.position[id(s1)] == df.position[id(s2)] == 0
    assert df.written == {p1.id, p2.id}


# -- the verifier: each rule refuses a graph that breaks it -----------------------------------------
def _chain():
    b = Build()
    a = b.arg()
    x = b("exp", a)
    y = b("neg", x)
    b.g.outputs = [y]
    return b, a, x, y


def test_verify_accepts_a_well_formed_graph():
    b, *_ = _chain()
    verify(b.g)


def _refused(graph, *words):
    with pytest.raises(GraphError) as info:
        verify(graph, after="the pass")
    message = str(info.value)
    assert "after pass 'the pass'" in message
    for w in words:
        assert w in message, message


def test_verify_refuses_a_read_before_the_value_is_made():
    b, a, x, y = _chain()
    b.g.nodes.reverse()
    _refused(b.g, "node 0", "neg", "reads %1 before any node makes it")


def test_verify_refuses_a_value_of_another_graph():
    b, a, x, y = _chain()
    b.g.nodes[1].inputs = [Value(x.id, x.shape, x.dtype, "node")]  # same id, not the graph's value
    _refused(b.g, "node 1", "not a value of this graph")


def test_verify_refuses_a_value_made_twice():
    b, a, x, y = _chain()
    b.g.nodes.append(Node(OPS["exp"], [a], {}, x))
    _refused(b.g, "node 2", "already made")
    b, a, x, y = _chain()
    b.g.nodes[0].output = a  # a node making a graph input
    _refused(b.g, "node 0", "already made")


def test_verify_refuses_inplace_nodes_with_outputs_and_functional_ones_without():
    b, a, x, y = _chain()
    b.g.nodes.append(Node(OPS["copy_into"], [x, y], {}, b.g.new_value((3,), F32, "node")))
    _refused(b.g, "node 2", "in-place op must make no value")
    b, a, x, y = _chain()
    b.g.nodes.append(Node(OPS["exp"], [y], {}, None))
    _refused(b.g, "node 2", "functional op must make one value")
    b, a, x, y = _chain()
    b.g.nodes.append(Node(Op("write", infer=lambda *a, **k: None, inplace=True), [x, y], {}))  # kind left "other"
    _refused(b.g, "node 2", "in-place but of kind 'other'")


def test_verify_refuses_a_write_into_inputs_the_node_lacks():
    b, a, x, y = _chain()
    b.write("sgd_step", a, lr=0.1, weight_decay=0.0, maximize=False)
    b.g.nodes[-1].op = OPS["adam_step"]  # mutates 3 leading inputs, given one
    _refused(b.g, "node 2", "writes 3 inputs but has 1")


def test_verify_checks_shapes_and_dtypes_against_infer():
    b, a, x, y = _chain()
    x.shape = (4,)
    _refused(b.g, "node 0", "makes float32[4] but its op infers float32[3]")
    b, a, x, y = _chain()
    y.dtype = dtypes.int32
    _refused(b.g, "node 1", "infers float32[3]")
    b = Build()
    b("add", b.arg((3,)), b.arg((4,)))
    _refused(b.g, "node 0", "refuses its inputs", "add")


def test_verify_refuses_results_that_no_node_makes():
    b, a, x, y = _chain()
    del b.g.nodes[1]
    _refused(b.g, "output 0", "returns %2, which no remaining node makes")
    b, a, x, y = _chain()
    b.g.grads = [(a, b.g.new_value((3,), F32, "node"))]
    _refused(b.g, "gradient", "no remaining node makes")
    b, a, x, y = _chain()
    b.g.grads = [(x, y)]
    _refused(b.g, "gradient", "not an argument or captured tensor")
    b, a, x, y = _chain()
    b.g.grads = [(b.arg((2,)), y)]
    _refused(b.g, "gradient", "shape (3,) for a tensor of shape (2,)")


def test_verify_refuses_an_input_check_on_a_foreign_value():
    b, a, x, y = _chain()
    b.g.checks = [(len, [Value(0, (3,), F32, "arg")])]
    _refused(b.g, "input check len", "not a value of this graph")


def _fused():
    b = Build()
    a, c = b.arg(), b.arg()
    x = b("exp", a)
    y = b("mul", x, c)
    chain = list(b.g.nodes)  # as passes/fuse.py stands a chain for its nodes
    op = Op("fused_exp_mul", infer=lambda *a, **k: None)
    b.g.nodes = [Node(op, [a, c], {}, y, fused=chain)]
    b.g.outputs = [y]
    return b, chain


def test_verify_checks_fused_nodes_member_by_member():
    b, chain = _fused()
    verify(b.g)
    b, chain = _fused()
    b.g.nodes[0].output = chain[0].output
    _refused(b.g, "fused[exp,mul]", "last member's value")
    b, chain = _fused()
    b.g.nodes[0].inputs = b.g.nodes[0].inputs[:1]
    _refused(b.g, "member 1", "neither an input of the fused node nor an earlier member's value")
    b, chain = _fused()
    chain[0].output.shape = (5,)
    _refused(b.g, "member 0", "infers float32[3]")


def _grouped():
    b = Build()
    attrs = {"lr": 0.1, "weight_decay": 0.0, "maximize": False}
    members = [b.write("sgd_step", b.capture(), b.arg(), **attrs) for _ in range(2)]
    b.g.nodes = [grouped_node(members)]
    return b, members


def test_verify_checks_grouped_nodes():
    b, members = _grouped()
    verify(b.g)
    b.g.nodes[0].inputs.reverse()
    _refused(b.g, "members' inputs, in order")
    b, members = _grouped()
    members[1].op = OPS["sgd_momentum_step"]
    _refused(b.g, "in-place nodes of one op")


# -- each pass on a hand-built graph ----------------------------------------------------------------
def test_dce_on_a_hand_built_graph():
    b = Build()
    a, c = b.arg(), b.capture()
    b("exp", a)  # dead
    b.write("copy_into", c, a)  # in-place: kept
    y = b("neg", a)
    b.g.outputs = [y]
    assert passes.eliminate_dead_code(b.g) == 1
    assert _names(b.g) == ["copy_into", "neg"]
    verify(b.g)


def test_cse_on_a_hand_built_graph():
    b = Build()
    a, c = b.arg(), b.capture()
    x1, x2 = b("exp", a), b("exp", a)
    b.write("copy_into", c, a)
    x3 = b("exp", a)  # after a write: kept
    b.g.outputs = [b("add", x1, x2), x3]
    assert passes.eliminate_common_subexpressions(b.g) == 1
    assert b.g.nodes[-1].inputs == [x1, x1]
    verify(b.g)


def test_fold_on_a_hand_built_graph():
    b = Build()
    a, k = b.arg(), b.const([0.0, 1.0, 2.0])
    e = b("exp", k)
    b.g.outputs = [b("mul", a, e)]
    assert passes.fold_constants(b.g) == 1
    assert _names(b.g) == ["mul"] and e.source == "const"
    np.testing.assert_allclose(np.asarray(e.data), np.exp([0.0, 1.0, 2.0]), rtol=1e-6)
    verify(b.g)


def test_functionalize_on_a_hand_built_graph():
    b = Build()
    a, v = b.arg((2, 3)), b.arg((2,))
    h = b("exp", a)
    r = b("neg", b("copy", h))
    b.write("copy_into", h, r)  # h.neg_()
    b.write("setitem", h, v, key=(slice(None), 0))  # h[:, 0] = v
    out = b("add", h, a)
    b.g.outputs = [out]
    assert passes.functionalize(b.g) == 2
    assert _names(b.g) == ["exp", "copy", "neg", "index_put", "add"]
    put = b.g.nodes[3]
    assert put.inputs == [r, v] and b.g.nodes[4].inputs == [put.output, a]
    verify(b.g)


def test_reinplace_on_a_hand_built_graph():
    for read_later in (False, True):
        b = Build()
        a, v = b.arg((2, 3)), b.arg((2,))
        h = b("exp", a)
        h2 = b("index_put", h, v, key=(slice(None), 0))
        out = b("add", h2, h if read_later else a)
        b.g.outputs = [out]
        assert passes.reinplace(b.g) == (0 if read_later else 1)
        if not read_later:
            assert _names(b.g) == ["exp", "setitem", "add"] and b.g.nodes[2].inputs == [h, a]
        verify(b.g)


def test_reinplace_renames_inside_fused_chains():
    b = Build()
    a, v = b.arg((2, 3)), b.arg((2,))
    h = b("exp", a)
    h2 = b("index_put", h, v, key=(slice(None), 0))
    m = b("mul", h2, a)
    s = b("neg", m)
    chain = b.g.nodes[2:]
    b.g.nodes[2:] = [Node(Op("fused_mul_neg", infer=lambda *a, **k: None), [h2, a], {}, s, fused=chain)]
    b.g.outputs = [s]
    assert passes.reinplace(b.g) == 1
    assert b.g.nodes[2].inputs == [h, a] and chain[0].inputs == [h, a]
    verify(b.g)


def test_copies_on_a_hand_built_graph():
    b = Build()
    x, w = b.arg((2, 3)), b.arg((3, 4))
    m = b("matmul", x, w, shape=(2, 4))
    t = b("permute", m, dims=(1, 0), shape=(4, 2))
    b.g.outputs = [b("copy", t)]
    assert passes.transpose_matmuls(b.g) == 1
    assert _names(b.g) == ["permute", "permute", "matmul", "copy"] and b.g.nodes[2].output is t
    verify(b.g)
    assert passes.elide_copies(b.g) == 1  # the product is made contiguous in the transposed layout
    assert _names(b.g) == ["permute", "permute", "matmul"] and b.g.outputs == [t]
    verify(b.g)
    b = Build()
    a = b.arg()
    b.g.outputs = [b("copy", b("cast", a, dtype=F32))]  # a cast to its own dtype may hand back a
    assert passes.elide_copies(b.g) == 0


def test_memory_plan_on_a_hand_built_graph():
    b = Build()
    a = b.arg((4,))
    x = b("exp", a)
    y = b("exp", x)
    z = b("reshape", y, shape=(2, 2))  # a view: allocates nothing
    b.g.outputs = [b("exp", z)]
    plan = passes.plan_memory(b.g)
    assert [n.op.name for n in plan["nodes_allocating"]] == ["exp", "exp", "exp"]
    assert plan["total_bytes"] == 48 and plan["peak_bytes"] == 32


def test_reciprocal_on_a_hand_built_graph():
    b = Build()
    a, d = b.arg(), b.arg()
    q = b("div", a, d)
    r = b("div", b.const(1.0), d, shape=(3,))
    b.g.outputs = [q, r]
    assert passes.reuse_reciprocals(b.g) == 1
    assert _names(b.g) == ["div", "mul"] and b.g.nodes[1].inputs == [a, r] and b.g.nodes[1].output is q
    verify(b.g)


def test_group_on_a_hand_built_graph():
    b = Build()
    attrs = {"lr": 0.1, "weight_decay": 0.0, "maximize": False}
    for lr in (0.1, 0.1, 0.1, 0.2):
        b.write("sgd_step", b.capture(), b.arg(), **{**attrs, "lr": lr})
    assert passes.group_optimizer_steps(b.g, lambda arity: 2) == 1
    assert [len(n.members or [n]) for n in b.g.nodes] == [2, 1, 1]  # capacity 2; other attrs apart
    verify(b.g)
