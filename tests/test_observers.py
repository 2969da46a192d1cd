"""The op registry's observer stack: the one instrumentation hook of webgrad.compile's tracer,
a replay's optimizer capture, the profiler and ONNX export.

Checked here: the instrumenting modules patch nothing they do not own (parsed with ``ast``),
the events reach observers, observers nest (a profile inside a trace and a trace inside a
profile), and an input check is known by its ``@input_check`` declaration, not by its name.
"""
from __future__ import annotations

import ast
import pathlib
import threading
import warnings

import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as F
from webgrad import nn
from webgrad.ops import registry
from conftest import assert_close
from webgrad.profiler import profile

CORE = pathlib.Path(webgrad.__file__).parent


# -- no patching in trace, profiler, onnx ---------------------------------------------------------
def _own_fields(package: pathlib.Path) -> set[str]:
    """Attribute names the classes of ``package`` give their own objects (``self.x = ...`` and
    class-level annotations): a file may set these on the objects it builds (IR nodes, events)."""
    fields = set()
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _is_self(node.value):
                fields.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                fields |= {s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
                           and isinstance(s.target, ast.Name)}
    return fields


def _is_self(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def patch_sites(source: str, own_fields: set[str]) -> list[str]:
    """Where ``source`` sets or deletes attributes on something it does not own: ``setattr``/
    ``delattr`` on anything but ``self``; writes into an object's ``__dict__`` or ``vars()``;
    ``name.attr = ...`` where ``name`` is imported (a module, a class), or where ``attr`` is
    not a field of the file's own package's classes (``backend.run = ...``, ``cls.step = ...``)."""
    tree = ast.parse(source)
    imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            if not (node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"):
                sites.append(f"line {node.lineno}: {node.func.id}(...)")
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in [t for tt in targets for t in (tt.elts if isinstance(tt, ast.Tuple) else [tt])]:
            if isinstance(target, ast.Subscript):
                holder = target.value
                is_vars = isinstance(holder, ast.Call) and getattr(holder.func, "id", None) == "vars"
                if is_vars or (isinstance(holder, ast.Attribute) and holder.attr == "__dict__"):
                    sites.append(f"line {node.lineno}: writes into an object's __dict__")
            if not isinstance(target, ast.Attribute):
                continue
            base = target.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if _is_self(target.value):
                continue  # the object's own attribute
            if isinstance(base, ast.Name) and base.id in imported:
                sites.append(f"line {node.lineno}: {ast.unparse(target)} = ... on the imported {base.id!r}")
            elif target.attr not in own_fields:
                sites.append(f"line {node.lineno}: {ast.unparse(target)} = ... ({target.attr!r} is no field of "
                             f"this package's classes)")
    return sites


def _instrumenting_files():
    files = [CORE / "graph" / "trace.py", *sorted((CORE / "profiler").glob("*.py")),
             *sorted((CORE / "onnx").glob("*.py"))]
    return [pytest.param(f, id=str(f.relative_to(CORE))) for f in files]


@pytest.mark.parametrize("path", _instrumenting_files())
def test_instrumentation_patches_nothing_it_does_not_own(path):
    """Tracer, profiler and ONNX export observe through ``ops.registry`` (its observer stack and
    declarations) instead of replacing other modules' functions, classes' methods or backends'."""
    sites = patch_sites(path.read_text(), _own_fields(path.parent))
    assert not sites, f"{path.relative_to(CORE)} patches what it does not own: " + "; ".join(sites)


@pytest.mark.parametrize("line", [
    "registry.TRACER = self",
    "setattr(backend, 'run', wrapped)",
    "delattr(backend, name)",
    "cls.step = _wrapped(fn)",
    "device.timer = device.make_timer()",
    "module.__dict__['forward'] = forward",
    "vars(module)['forward'] = forward",
    "functional.relu = traced",
])
def test_the_patch_finder_finds_each_kind_of_patch(line):
    source = (f"from ..ops import registry\nfrom ..nn import functional\n\n"
              f"def f(self, backend, cls, device, module):\n    {line}\n")
    assert patch_sites(source, {"flops", "source"}), line


@pytest.mark.parametrize("line", ["self.graph = None", "setattr(self, name, 0)", "event.flops = 3",
                                  "node.source = where", "x = registry.OBSERVERS"])
def test_the_patch_finder_allows_own_objects(line):
    source = f"from ..ops import registry\n\ndef f(self, event, node, name, where):\n    {line}\n"
    assert patch_sites(source, {"flops", "source"}) == []


def test_no_name_tables_or_frame_decisions_in_the_tracer():
    """Input checks are declared (``@input_check``) and composites too (``@composite``): the tracer
    and the profiler hold no table of file or function names."""
    trace = (CORE / "graph" / "trace.py").read_text()
    profiler = (CORE / "profiler" / "__init__.py").read_text()
    assert "_CHECKS" not in trace and "f_locals" not in trace
    assert "_COMPOSITES" not in profiler and "_getframe" not in profiler


# -- the events ----------------------------------------------------------------------------------
class Log(registry.Observer):
    def __init__(self, claim=False):
        self.events, self.claim = [], claim

    def op_begin(self, op, inputs):
        self.events.append(("begin", op.name))
        return op.name

    def op_end(self, token, op, inputs, attrs, out):
        self.events.append(("end", token, out is None))

    def op_failed(self, token):
        self.events.append(("failed", token))

    def claim_inplace(self, op, tensors, attrs):
        self.events.append(("claim?", op.name))
        return self.claim

    def host_read(self, tensor, check):
        self.events.append(("read", None if check is None else check[0].__name__))

    def allocated(self, data, method, args, draw):
        self.events.append(("allocated", method, draw))

    def enter(self, kind, name, target, args):
        self.events.append(("enter", kind, name))
        return name

    def exit(self, token, out):
        self.events.append(("exit", token))


def test_events_reach_an_observer_only_while_it_is_on_the_stack():
    x = webgrad.ones(2, 3)
    log = Log()
    with registry.observing(log):
        y = x * 2.0
        y.add_(1.0)
        y.sum().item()
        webgrad.randn(2)
        F.relu(y)
        with pytest.raises(Exception, match="mul"):
            y * webgrad.ones(4)
    x * 2.0
    assert registry.OBSERVERS == ()
    e = log.events
    assert ("begin", "mul") in e and ("end", "mul", False) in e
    # add_ is add, then copy_into (in-place): claimable first, then run
    assert e.index(("claim?", "copy_into")) < e.index(("begin", "copy_into")) and ("end", "copy_into", True) in e
    assert ("read", None) in e
    assert ("allocated", "normal", True) in e
    assert e.index(("enter", "composite", "F.relu")) < e.index(("begin", "relu")) < e.index(("exit", "F.relu"))
    assert e[-2:] == [("begin", "mul"), ("failed", "mul")]


def test_a_claimed_inplace_op_does_not_run():
    x = webgrad.ones(3)
    with registry.observing(Log(claim=True)) as log:
        x.add_(1.0)
    assert ("claim?", "copy_into") in log.events and ("begin", "copy_into") not in log.events
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0, 1.0])
    x.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), [2.0, 2.0, 2.0])


def test_modules_optimizer_steps_and_backward_nodes_are_ranges():
    model = nn.Linear(3, 2)
    opt = webgrad.optim.SGD(model.parameters(), lr=0.1)
    with registry.observing(Log()) as log:
        model(webgrad.ones(4, 3)).sum().backward()
        opt.step()
    entered = [ev[1:] for ev in log.events if ev[0] == "enter"]
    assert ("module", "Linear") in entered and ("composite", "F.linear") in entered
    assert ("optimizer", "Optimizer.step#SGD.step") in entered
    assert ("backward", "SumBackward") in entered


# -- nesting ---------------------------------------------------------------------------------------
def test_a_profile_around_a_trace_and_its_replays():
    w = webgrad.randn(3, 4)
    stacks = []

    @webgrad.compile
    def f(x):
        stacks.append(registry.OBSERVERS)
        return (x @ w).relu()
    x = webgrad.randn(5, 3)
    with profile() as prof:
        f(x)  # traces under the profile
        f(x)  # replays under the profile
    assert [type(o).__name__ for o in stacks[0]] == ["profile", "Tracer"] and len(stacks) == 1
    assert f.traces == 1 and f.replays == 1 and f.graph is not None and not f.breaks
    assert [e.name for e in prof.events() if e.kind == "op"].count("matmul") == 2  # the traced and the replayed
    assert registry.OBSERVERS == ()


def test_a_profile_inside_a_traced_function():
    profiles = []

    @webgrad.compile(optimize=False)
    def f(x):
        with profile() as prof:
            y = x * 2.0 + 1.0
        profiles.append(prof)
        return y
    x = webgrad.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no graph break
        f(x)
        out = f(x + 1.0)
    assert f.traces == 1 and f.replays == 1
    np.testing.assert_allclose(out.numpy(), [5.0, 5.0, 5.0])
    assert {"mul", "add"} <= {e.name for e in profiles[0].events()}
    assert [n.op.name for n in f.graph.nodes] == ["mul", "add"]
    assert registry.OBSERVERS == ()


# -- input checks are declared, not named ----------------------------------------------------------
@registry.input_check
def all_positive_renamed_anything(x):
    if (x._host() <= 0).any():
        raise ValueError("all_positive: expected positive values")


def all_positive_undeclared(x):
    if (x._host() <= 0).any():
        raise ValueError("all_positive: expected positive values")


def test_a_declared_input_check_replays_whatever_its_name():
    @webgrad.compile
    def f(x):
        all_positive_renamed_anything(x)
        return x * 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph break would warn
        f(webgrad.ones(3))
        np.testing.assert_allclose(f(webgrad.full((3,), 2.0)).numpy(), [4.0, 4.0, 4.0])
    assert f.traces == 1 and f.replays == 1 and not f.breaks
    with pytest.raises(ValueError, match="all_positive"):
        f(-webgrad.ones(3))  # the replay runs the check again


def test_an_undeclared_host_read_breaks_the_graph():
    @webgrad.compile
    def f(x):
        all_positive_undeclared(x)
        return x * 2.0
    with pytest.warns(UserWarning, match="graph break"):
        f(webgrad.ones(3))
    assert f.breaks and "all_positive_undeclared" in f.breaks[0]


def test_writing_into_a_tensor_is_for_the_thread_that_opened_the_block():
    """(Natively only: Pyodide, which runs test_autograd.py and test_ops.py, has no threads.)"""
    x = webgrad.ones(4)
    opened, done = threading.Event(), threading.Event()
    sums: list = []

    def other_thread():  # reads x while the main thread's block is open: its op computes apart
        opened.wait()
        sums.append(x + 1)
        done.set()
    worker = threading.Thread(target=other_thread)
    worker.start()
    with webgrad.ops.registry.writing_into(x):
        opened.set()
        done.wait()
    worker.join()
    assert not np.shares_memory(sums[0]._data, x._data)
    assert_close(x, np.ones(4))
    assert_close(sums[0], np.full(4, 2.0))
