"""Tracing: run a function eagerly once and record every primitive op into a Graph.

The ``Tracer`` is an observer on the op registry's stack (``ops.registry.observing``):
``apply``/``apply_inplace`` report each op to it, which sees forward ops, autograd's
vjps (which are ops too) and the optimizers' fused in-place updates. Tensors are
matched to graph values by their backend data object (``detach()`` and ``.data``
make new Tensor objects over the same data). Data that no op made is a graph input:
an argument, a captured tensor (parameter, optimizer state), a constant (a cached
scalar, or data made during the trace), or a random draw (the registry's ``allocated`` event
says which, so replays draw anew). Module calls and optimizer steps reach it as
ranges (``enter``/``exit``): the modules' train/eval flags guard the graph, and the
in-place updates inside a step belong to that optimizer.

A read of tensor values on the host (``.item()``, ``.numpy()``, ``bool(t)``,
printing) stops the trace: a *graph break*, unless it happens inside a function
declared ``@registry.input_check``, which a replay runs again. The traced call
itself finishes eagerly, so its result is always right.
"""
from __future__ import annotations

import functools
import gc
import os
import sys
import weakref
from types import FrameType

from ..ops import registry
from ..tensor import Tensor
from ..ops.registry import Op
from .ir import Graph, Node, Value

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# How a graph break names the Tensor method the user called (messages only).
_USER_READS = {"__bool__": "bool(tensor)", "__repr__": "printing a tensor", "__str__": "printing a tensor",
               "tensor_repr": "printing a tensor", "__format__": "formatting a tensor",
               "__array__": "np.asarray(tensor)"}


def check_node(fn, args) -> Node:
    """An input check as a node: in-place with nothing written, so every pass keeps it, in
    order, and keeps the values it reads; ``op.check`` is the function and its arguments,
    Values standing for the tensors."""
    values = [a for a in args if isinstance(a, Value)]
    op = Op(f"check[{getattr(fn, '__name__', 'check')}]", infer=lambda *a, **k: None, inplace=True, mutates=0,
            kind="inplace", check=(fn, args))
    return Node(op, values, {})


class GraphBreak(Exception):
    """Why a function cannot be replayed as a graph (message names file and line)."""


def user_frame(depth: int = 2):
    """The innermost frame outside the webgrad package (the user's line)."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return frame


def where(frame) -> str:
    return "<unknown>" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _describe_read():
    """A graph break's message for a host read and the user's frame: the Tensor method the
    user called (item, numpy, bool...), or the webgrad function that reads values itself."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "_host":  # the read itself
        frame = frame.f_back
    reader = frame.f_back if frame is not None else None
    if reader is None:
        return "a host read of tensor values", user_frame(2)
    frame = reader
    call = f"{reader.f_code.co_name}() in webgrad/{os.path.relpath(reader.f_code.co_filename, _PACKAGE_DIR)}"
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        if os.path.basename(frame.f_code.co_filename) in ("tensor.py", "printing.py"):
            call = _USER_READS.get(frame.f_code.co_name, f"Tensor.{frame.f_code.co_name}()")
        frame = frame.f_back
    return f"{call} reads tensor values on the host", frame


def tracing():
    """The Tracer recording now, or None."""
    return registry.observer_of(Tracer)


class Tracer(registry.Observer):
    """Records ops while the traced function runs eagerly."""

    traces_graph = True

    def __init__(self, flat_args):
        self.graph: Graph | None = None
        self.by_data: dict[int, Value] = {}  # id(data) -> Value
        self.keep: list = []  # data objects kept alive so their ids stay unique
        self.owners: dict[int, list] = {}  # Value id -> weakrefs of Tensors seen holding it
        self.made_here: set[int] = set()  # ids of data the backend created during the trace
        self.random: dict[int, tuple] = {}  # id(data) -> (method, args)
        self.scalars: dict[tuple, Value] = {}  # Tensor._cached_scalar -> its constant
        self.snapshots: dict[int, object] = {}  # Value id -> data copy before the first write
        self.read_before_write: set[int] = set()
        self.written: set[int] = set()
        self.broken: str | None = None
        self.modules: dict[int, object] = {}  # nn.Modules whose forward ran (train/eval guard)
        self.optimizers: dict[int, tuple] = {}  # id -> (optimizer, [its in-place nodes])
        self.args = {id(t._data): i for i, t in enumerate(flat_args)}
        self.flat_args = flat_args
        self._steps: list = []  # the optimizers whose step() is running, innermost last

    # -- entering and leaving ------------------------------------------------------
    def __enter__(self):
        if tracing() is not None:
            raise RuntimeError("webgrad.compile: a compiled function was called while another is being traced; "
                               "compile the outer function only")
        registry.add_observer(self)
        # finish() collects garbage to learn which temporaries died. Objects older than the
        # trace stay frozen until then, so that collection walks only what the trace made (a
        # full collection in a large program took over half a second per trace).
        self._froze = gc.get_freeze_count() == 0
        if self._froze:
            gc.freeze()
        return self

    def thaw(self) -> None:
        """Give the objects frozen at the start back to the collector (idempotent)."""
        if self._froze:
            self._froze = False
            gc.unfreeze()

    def __exit__(self, exc_type, *exc):
        if exc_type is not None:
            self.thaw()
        registry.remove_observer(self)

    # -- the registry's events ------------------------------------------------------------
    def allocated(self, data, method, args, draw):
        """Data made during the trace is known (a constant, if nothing outside holds it);
        a random draw becomes a graph input drawn anew at each replay."""
        self.keep.append(data)
        self.made_here.add(id(data))
        if draw:
            self.random[id(data)] = (method, args)

    def op_end(self, token, op, inputs, attrs, out):
        if out is not None:  # in-place ops were recorded by claim_inplace, before they ran
            self.record(op, inputs, attrs, out)

    def claim_inplace(self, op, tensors, attrs) -> bool:
        self.record_inplace(op, tensors, attrs)
        return False  # run it

    def enter(self, kind, name, target, args):
        if kind == "module":  # its train/eval flag guards the graph
            self.modules.setdefault(id(target), target)
        elif kind == "optimizer":  # its in-place updates are re-read at every replay
            self._steps.append(target)
        return kind

    def exit(self, token, out):
        if token == "optimizer":
            self._steps.pop()

    # -- values ---------------------------------------------------------------------
    def value_of(self, t):
        key = id(t._data)
        value = self.by_data.get(key)
        if value is None:
            if key in self.args:
                value = self.graph.new_value(t.shape, t.dtype, "arg", index=self.args[key])
            elif key in self.random:
                value = self.graph.new_value(t.shape, t.dtype, "random", data=self.random[key])
            elif t._cached_scalar is not None:  # one constant per number, whichever cached copy
                value = self.scalars.get(t._cached_scalar)
                if value is None:
                    value = self.scalars[t._cached_scalar] = self.graph.new_value(t.shape, t.dtype, "const",
                                                                                  data=t._data)
            else:
                value = self.graph.new_value(t.shape, t.dtype, "capture", data=t._data)
            self.by_data[key] = value
            self.keep.append(t._data)
        if value.source == "capture":
            refs = self.owners.setdefault(value.id, [])
            if not any(r() is t for r in refs):
                refs.append(weakref.ref(t))
        return value

    def _start(self, device):
        if self.graph is None:
            self.graph = Graph(device)
            for t in self.flat_args:
                if t.device == device:
                    self.value_of(t)

    def record(self, op, inputs, attrs, out):
        if self.broken:
            return
        self._start(out.device)
        if out.device != self.graph.device:
            return self.stop(f"ops on two devices ({self.graph.device} and {out.device})")
        ins = [self.value_of(t) for t in inputs]
        for v in ins:
            if v.id not in self.written:
                self.read_before_write.add(v.id)
        output = self.graph.new_value(out.shape, out.dtype, "node")
        self.by_data[id(out._data)] = output
        self.keep.append(out._data)
        self._add(Node(op, ins, dict(attrs), output))

    def record_inplace(self, op, tensors, attrs) -> None:
        if self.broken:
            return
        self._start(tensors[0].device)
        ins = [self.value_of(t) for t in tensors]
        for v in ins[op.mutates:]:
            if v.id not in self.written:
                self.read_before_write.add(v.id)
        for t, v in zip(tensors[:op.mutates], ins[:op.mutates]):
            if v.source == "capture" and v.id not in self.written and id(v.data) in self.made_here:
                # A tensor made in the trace and then written: keep its first contents, a
                # replay starts from them again if the tensor turns out to be a temporary.
                import numpy as np

                from ..backend import get_backend

                backend = get_backend(t.device)
                self.snapshots[v.id] = backend.from_numpy(np.array(backend.to_numpy(t._data)), t.dtype)
            self.written.add(v.id)
        node = Node(op, ins, dict(attrs))
        self._add(node)
        if self._steps:  # an optimizer's update: its scalars (e.g. Adam's bias corrections) change per step
            optimizer = self._steps[-1]
            self.optimizers.setdefault(id(optimizer), (optimizer, []))[1].append(node)

    def _add(self, node):
        node.source = where(user_frame(3))  # for messages and the printed IR
        self.graph.nodes.append(node)

    def host_read(self, t, check) -> None:
        """A tensor's values went to the host inside the traced function: a graph break,
        unless inside an input check (``check``), which a replay runs again."""
        if self.broken:
            return
        if check is not None:
            known = self.by_data.get(id(t._data))
            if known is None or known.source != "node":  # a replay checks before running ops
                return self._record_check(check)
            if self.graph is not None and not any(n.inplace for n in self.graph.nodes):
                return self._record_check(check, in_graph=True)  # checked where it ran; nothing written yet
        self.stop(*_describe_read())

    def _record_check(self, check, in_graph=False):
        """Keep the check's function and arguments; tensors among them become graph values.
        A check of values the graph computes (``in_graph``) becomes a node that a replay runs
        where the check ran, before any in-place node (``check_node``)."""
        fn, args, kwargs = check
        if kwargs:
            fn = functools.partial(fn, **kwargs)
        tensors = [a for a in args if isinstance(a, Tensor)]
        if not tensors:
            return
        self._start(tensors[0].device)
        args = [self.value_of(a) if isinstance(a, Tensor) else a for a in args]
        if in_graph:
            self._add(check_node(fn, args))
        else:
            self.graph.checks.append((fn, args))

    def stop(self, reason, frame=None):
        if frame is None:
            frame = user_frame(3)
        self.broken = f"{where(frame)}: {reason}"

    # -- the end of the trace -------------------------------------------------------------
    def finish(self, flat_out):
        """Bind the returned tensors and parameter gradients, then sort captured inputs:
        data made during the trace that nothing outside holds becomes a constant."""
        graph = self.graph
        if graph is None:
            self.stop("the function ran no tensor op")
            return None
        for t in flat_out:
            graph.outputs.append(self.value_of(t))
        for v in graph.inputs_of_kind("capture"):
            for ref in self.owners.get(v.id, []):
                t = ref()
                if t is not None and t.grad is not None and id(t.grad._data) in self.by_data:
                    g = self.by_data[id(t.grad._data)]
                    if g.source == "node" and all(p is not v for p, _ in graph.grads):
                        graph.grads.append((v, g))
        for t in self.flat_args:  # x.grad of an argument that requires grad
            v, g = self.by_data.get(id(t._data)), None if t.grad is None else self.by_data.get(id(t.grad._data))
            if v is not None and g is not None and v.source == "arg" and g.source == "node":
                graph.grads.append((v, g))
        if not graph.grads and any(t._node is not None for t in flat_out):
            self.stop("the result requires grad but the function runs no backward, and a replay records no "
                      "autograd graph; compile the whole step (forward, backward, optimizer.step) or call it "
                      "under webgrad.no_grad()")
            return None
        # Drop what the trace holds, then see which tensors anything else still holds.
        self.keep.clear()
        gc.collect()
        self.thaw()
        guards = []  # (weakref to a tensor, the data it must still hold at a replay)
        returned = {id(t) for t in flat_out}
        for v in graph.inputs_of_kind("capture"):
            refs = [r for r in self.owners.get(v.id, []) if r() is not None]
            if id(v.data) in self.made_here and all(id(r()) in returned for r in refs):
                # Made here and held by nothing but the result (h = zeros(...); h[0] = ...; return h):
                # each call makes it afresh, so a replay must not hand back one buffer every call.
                v.source = "const"
                if v.id in self.snapshots:
                    v.data = self.snapshots[v.id]
            elif refs:
                guards.append((refs[0], v.data))
            elif v.id in self.read_before_write:
                self.stop("a tensor from outside the function was read and then replaced during the call "
                          "(e.g. .grad accumulated without zero_grad); it cannot be captured")
                return None
        return guards
