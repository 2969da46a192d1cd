"""Reverse-mode autograd: the graph, grad modes, and the backward walk.

Every differentiable op call records a ``Node`` on its output. ``backward`` sorts
the graph with an explicit stack (never recursion, so 10,000-op chains are fine)
and feeds each node's gradient through its op's vjp, which is written in Tensor
ops: with ``create_graph=True`` the backward pass is itself recorded.
Broadcasting is undone in one place, ``_sum_to``, never inside a vjp.
"""
from __future__ import annotations

import dis
import heapq
import itertools
import sys
import threading
import weakref

import numpy as np

_mode = threading.local()


_mode.enabled = True


def is_grad_enabled() -> bool:
    try:
        return _mode.enabled
    except AttributeError:  # a thread that has not set a mode yet
        _mode.enabled = True
        return True


class set_grad_enabled:
    """Turn gradient recording on or off: as a context manager, a decorator, or (as
    in PyTorch) a plain call, ``webgrad.set_grad_enabled(False)``, which switches now."""

    _switch_now = True  # no_grad/enable_grad switch only when entered

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self.prev = is_grad_enabled()
        if self._switch_now:
            _mode.enabled = self.mode

    def __enter__(self):
        if not self._switch_now:
            self.prev = is_grad_enabled()
        _mode.enabled = self.mode

    def __exit__(self, *exc):
        _mode.enabled = self.prev
        return False

    def __call__(self, fn):
        import functools

        if self._switch_now:  # used as a decorator: nothing changes until fn runs
            _mode.enabled = self.prev
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper


class no_grad(set_grad_enabled):
    """Disable gradient recording, e.g. ``with webgrad.no_grad(): y = model(x)``."""

    _switch_now = False

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """Re-enable gradient recording inside a ``no_grad`` block."""

    _switch_now = False

    def __init__(self):
        super().__init__(True)


class inference_mode(set_grad_enabled):  # noqa: N801  (torch's name)
    """``with webgrad.inference_mode():`` (or as a decorator): run without recording
    gradients, like ``no_grad`` (webgrad has no separate inference tensors).
    ``inference_mode(False)`` leaves the current mode as it is."""

    _switch_now = False
    _depth = threading.local()

    def __new__(cls, mode=True):
        if callable(mode):  # bare @webgrad.inference_mode on a function
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self.inference = bool(mode)
        super().__init__(False)

    def __enter__(self):
        if self.inference:
            inference_mode._depth.n = getattr(inference_mode._depth, "n", 0) + 1
        else:
            self.mode = is_grad_enabled()  # inference_mode(False) changes nothing
        return super().__enter__()

    def __exit__(self, *exc):
        if self.inference:
            inference_mode._depth.n -= 1
        return super().__exit__(*exc)

    def __call__(self, fn):
        import functools

        inference = self.inference

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(inference):
                return fn(*args, **kwargs)
        return wrapper


def is_inference_mode_enabled() -> bool:
    return getattr(inference_mode._depth, "n", 0) > 0


def grad_modes() -> tuple:
    """This thread's grad and inference modes: what ``with`` blocks switch and switch back. A
    KeyboardInterrupt can land between the two (as a block's ``__enter__`` or ``__exit__``
    starts), so the page's runtime puts them back after an interrupted run (web/worker.py)."""
    return is_grad_enabled(), getattr(inference_mode._depth, "n", 0)


def restore_grad_modes(modes: tuple) -> None:
    _mode.enabled, inference_mode._depth.n = modes


class Node:
    """One recorded op application: enough to run its vjp later.

    ``edges`` says where each input's gradient goes, fixed when the op ran: the
    input's node then, ``LEAF`` for a leaf that requires grad, None for no gradient.
    An in-place op later gives a tensor a new node; this op still differentiates
    the value it saw. Only the tensors the vjp reads are kept (see ``_uses``); of the
    others a ``_Meta`` stands in."""

    __slots__ = ("op", "inputs", "edges", "attrs", "out", "versions", "out_counter", "out_version",
                 "out_ref", "seq", "__weakref__")
    _sequence = itertools.count()

    def __init__(self, op, inputs, attrs, out):
        self.seq = next(Node._sequence)  # creation order: backward runs later nodes first
        self.op = op
        self.edges = edges = tuple([(t._node or LEAF) if t._requires_grad else None for t in inputs])
        input_uses, out_use = _uses(op.vjp, len(inputs))
        if op.reads_for_others:
            input_uses = tuple([use if any(e is not None for j, e in enumerate(edges) if j != i) else None
                                for i, use in enumerate(input_uses)])
        # A leaf stays itself: its gradient is delivered to it.
        self.inputs = tuple([t if use is _VALUE or edge is LEAF else _Meta(t)
                             for t, use, edge in zip(inputs, input_uses, edges)])
        self.attrs = attrs
        # the data without a back-edge to this node (no cycle)
        self.out = out.detach() if out_use is _VALUE else _Meta(out)
        self.versions = tuple([t._version_counter[0] for t in inputs])
        # vjps may read the output (exp, tanh, sqrt...), so an in-place change of it
        # must be caught too. Keep the counter list itself: views of ``out`` share it.
        self.out_counter = out._version_counter
        self.out_version = out._version_counter[0]
        self.out_ref = weakref.ref(out)

    def name(self) -> str:
        return "".join(part.capitalize() for part in self.op.name.split("_")) + "Backward"


class _Meta:
    """A tensor's shape, dtype and device, kept for a vjp that reads no more of it, so that
    the tensor's memory is freed when nothing else holds it: torch likewise saves for backward
    only the tensors a derivative formula needs (``b`` of ``a + b`` is never saved)."""

    __slots__ = ("shape", "dtype", "device", "_is_mT_view")
    _node = None  # the engine reaches a non-leaf's owner through its node (Node.out_ref)

    def __init__(self, t):
        self.shape, self.dtype, self.device, self._is_mT_view = t.shape, t.dtype, t.device, t._is_mT_view

    @property
    def ndim(self) -> int:
        return len(self.shape)


_VALUE, _META = "value", "meta"
_META_ATTRS = frozenset(("shape", "dtype", "device", "ndim", "_is_mT_view"))
_USES: dict = {}  # (vjp, input count) -> _uses' answer


def _uses(vjp, count: int) -> tuple:
    """What ``vjp(g, *inputs, out=out, ...)`` reads of each input and of ``out``: ``_VALUE``,
    ``_META`` (only the attributes in _META_ATTRS) or None (nothing), found in its bytecode.
    Anything unclear counts as the value: a vjp that is not a plain function, a name a nested
    function captures, ``*inputs``, a name passed on to another function."""
    key = (vjp, count)
    if key not in _USES:
        _USES[key] = _read_bytecode(vjp, count)
    return _USES[key]


# Instructions that name local or closure variables (LOAD_FAST_LOAD_FAST names two, from 3.13).
_NAME_OPS = frozenset(dis.haslocal) | frozenset(dis.hasfree)


def _read_bytecode(vjp, count: int) -> tuple:
    code = getattr(vjp, "__code__", None)
    if code is None or not hasattr(vjp, "__defaults__"):  # not a plain function
        return (_VALUE,) * count, _VALUE
    positional = code.co_varnames[1:code.co_argcount]  # after the gradient
    keywords = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    read = (*positional[:count], *(("out",) if "out" in keywords else ()))
    names: dict[str, str | None] = dict.fromkeys(read)
    instructions = list(dis.get_instructions(code))
    for i, instruction in enumerate(instructions):
        if instruction.opcode not in _NAME_OPS:  # a keyword's name in a call is a constant, not a read
            continue
        argvals = instruction.argval if isinstance(instruction.argval, tuple) else (instruction.argval,)
        after = instructions[i + 1] if i + 1 < len(instructions) else None
        meta_read = (instruction.opname in ("LOAD_FAST", "LOAD_FAST_LOAD_FAST") and after is not None
                     and after.opname == "LOAD_ATTR" and after.argval in _META_ATTRS)
        for k, name in enumerate(argvals):
            if name not in names:
                continue
            if meta_read and k == len(argvals) - 1:  # the attribute is read of the last name loaded
                names[name] = names[name] or _META
            else:
                names[name] = _VALUE
    for name in code.co_cellvars:
        if name in names:
            names[name] = _VALUE
    inputs = tuple(names[positional[i]] if i < len(positional) else _VALUE for i in range(count))
    return inputs, names.get("out", _VALUE)


LEAF = "leaf"  # an edge to a leaf tensor (the tensor itself collects the gradient)


def record(op, inputs, attrs, out) -> None:
    out.requires_grad = True
    out._node = Node(op, inputs, attrs, out)


def check_inplace_allowed(op_name: str, t) -> None:
    """The low-level in-place path (optimizer steps, ``update_``'s writes) records
    nothing, so it may not touch a tensor whose gradient is being tracked."""
    if t.requires_grad and is_grad_enabled():
        kind = "a leaf tensor" if t._node is None else "a tensor"
        raise RuntimeError(
            f"{op_name}: in-place change of {kind} that requires grad "
            f"(shape {tuple(t.shape)}, {t.dtype.name}); do it inside `with webgrad.no_grad():` "
            f"or use the out-of-place form (x = x + y)")


def snapshot(x):
    """For an in-place op about to overwrite ``x``: a copy of x's value that takes
    over x's place in the graph (and the saved output of x's node, when that is x),
    so the history before the write keeps the values it was recorded with."""
    from ..ops import clone

    with set_grad_enabled(False):
        old = clone(x)
    old._node, old._requires_grad = x._node, x._requires_grad
    node = x._node
    if node is not None and node.out_ref() is x:
        if not isinstance(node.out, _Meta):
            node.out, node.out_counter, node.out_version = old.detach(), old._version_counter, old._version
        node.out_ref = weakref.ref(old)
    return old


def output_is_saved(x) -> bool:
    """Whether x's own node keeps x's value for its vjp (exp, tanh, sqrt...): an in-place
    change of x then needs ``snapshot``."""
    node = x._node
    return node is not None and not isinstance(node.out, _Meta) and node.out_ref() is x


def recording_mark() -> int:
    """A mark before recording some ops: the nodes they make come at or after it (``Node.seq``)."""
    return next(Node._sequence)


def keep_saved_values(x, result, since: int) -> None:
    """Before an in-place write of ``result`` into ``x`` computed from x itself (no
    ``snapshot``): the nodes recorded since ``since`` that keep x's value for their vjp get
    a copy of it instead, the value they were recorded with."""
    old = None
    nodes, seen = [result._node], set()
    while nodes:
        node = nodes.pop()
        if not isinstance(node, Node) or node.seq < since or id(node) in seen:
            continue
        seen.add(id(node))
        if any(t is x for t in node.inputs):
            if old is None:
                with set_grad_enabled(False):
                    old = x.clone()
            node.versions = tuple([old._version_counter[0] if t is x else version
                                   for t, version in zip(node.inputs, node.versions)])
            node.inputs = tuple([old if t is x else t for t in node.inputs])
        nodes.extend(node.edges)


def take_place(x, result) -> None:
    """After ``result`` was written into x's memory: x stands for result in the graph
    (PyTorch's rebase of an in-place op's output onto its new node)."""
    x._node, x._requires_grad = result._node, result._requires_grad
    if result._node is not None and result._node.out_ref() is result:
        result._node.out_ref = weakref.ref(x)


def _sum_to(grad, shape):
    """Sum a broadcast gradient back down to ``shape``."""
    if tuple(grad.shape) == tuple(shape):
        return grad
    lead = grad.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and grad.shape[i + lead] != 1)
    if lead and len(dims) == lead:  # only leading dims (a bias's gradient): the sum has the shape itself, and
        return grad.sum(dim=dims)  # no view of it keeps .grad from taking it as is (_unshared)
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    if lead:
        grad = grad.reshape(shape)
    return grad


def _topological_order(roots):
    """Nodes reachable from ``roots``, each after every node that consumes it; among the
    nodes ready to run, the latest created first (as torch's engine), so that a layer's
    parameter gradients are final before backward moves on to the layers before it."""
    consumers: dict[int, int] = {}
    nodes, stack = {}, [node for node in roots if node is not None]
    while stack:
        node = stack.pop()
        if id(node) in nodes:
            continue
        nodes[id(node)] = node
        for edge in node.edges:
            if edge is not None and edge is not LEAF:
                consumers[id(edge)] = consumers.get(id(edge), 0) + 1
                stack.append(edge)
    ready = [(-node.seq, id(node)) for node in nodes.values() if id(node) not in consumers]
    heapq.heapify(ready)
    order = []
    while ready:
        node = nodes[heapq.heappop(ready)[1]]
        order.append(node)
        for edge in node.edges:
            if edge is not None and edge is not LEAF:
                consumers[id(edge)] -= 1
                if consumers[id(edge)] == 0:
                    heapq.heappush(ready, (-edge.seq, id(edge)))
    return order


def _check_versions(node) -> None:
    for i, (t, saved) in enumerate(zip(node.inputs, node.versions)):
        if not isinstance(t, _Meta) and t._version_counter[0] != saved and node.op.reads_inputs:
            raise RuntimeError(
                f"one of the tensors needed for gradient computation has been modified by an "
                f"in-place operation: input {i} of {node.op.name} (shape {tuple(t.shape)}, "
                f"{t.dtype.name}) is at version {t._version_counter[0]}; expected version {saved}. "
                f"Use an out-of-place op (x = x * 2) instead of changing it in place.")
    if not isinstance(node.out, _Meta) and node.out_counter[0] != node.out_version:
        out = node.out
        raise RuntimeError(
            f"one of the tensors needed for gradient computation has been modified by an "
            f"in-place operation: output 0 of {node.op.name} (shape {tuple(out.shape)}, "
            f"{out.dtype.name}) is at version {node.out_counter[0]}; expected version "
            f"{node.out_version}. Use an out-of-place op (y = y * 2) instead of changing it in place.")


def _saved_output(node, create_graph):
    """The op's output for its vjp. With ``create_graph`` it must lead back to this
    node (so d(out)/d(x) is seen); it is rebuilt here rather than stored, which
    would make a reference cycle between a tensor and its node (PyTorch does the same)."""
    if not create_graph or isinstance(node.out, _Meta):
        return node.out
    out = node.out.detach()
    out._node = node
    out._requires_grad = True
    return out


def _owned(g):
    """A gradient stored in ``.grad`` gets its own memory: vjps hand out read-only
    broadcast views (sum -> expand) and the same tensor to several inputs (add), and
    in-place updates of one ``.grad`` (zero_, clipping) must not reach another."""
    from ..ops import clone

    return clone(g)


# References to a leaf's gradient that only the engine holds, as _unshared counts them: the
# caller's local (or its popped leaf_grads entry), _accumulate's and _unshared's parameters, and
# getrefcount's argument. A Python that counts differently never matches, so it copies.
_ENGINE_REFS = 4


def _unshared(g) -> bool:
    """Whether ``g`` may become ``.grad`` as it is, as torch's AccumulateGrad steals a gradient
    nothing else holds: no other reference to the tensor (a root gradient, a saved tensor, the
    same tensor handed to two inputs), no other tensor on its memory (views and detached
    copies share the version counter), and memory of its own, contiguous and writable.
    (Counts below include getrefcount's argument and, for ``data``/``storage``, the local.)"""
    if sys.getrefcount(g) != _ENGINE_REFS or sys.getrefcount(g._version_counter) != 2:
        return False
    data = g._data
    if isinstance(data, np.ndarray):  # not a view of an array, nor an array another tensor wraps
        return data.flags.c_contiguous and data.flags.writeable and sys.getrefcount(data) == 3 and \
            _whole_private_memory(data.base, data.nbytes)
    storage = getattr(data, "storage", None)  # a device array: its own buffer, from the start
    return storage is not None and data.offset == 0 and data.is_contiguous() and \
        sys.getrefcount(data) == 3 and sys.getrefcount(storage) == 3


def _whole_private_memory(base, nbytes) -> bool:
    """Whether an array with this ``base`` owns its memory: no base, or a base that only the
    array refers to and that it covers whole (a kernel's reshape of its fresh result)."""
    return base is None or (isinstance(base, np.ndarray) and base.base is None and base.nbytes == nbytes
                            and sys.getrefcount(base) == 3)  # the array's .base, the parameter, the argument


def run_backward(roots, root_grads, *, retain_graph=False, create_graph=False, inputs=None):
    """Propagate ``root_grads`` from ``roots`` back through the graph.

    With ``inputs`` given, return their gradients (``webgrad.autograd.grad``);
    otherwise accumulate into the ``.grad`` of every leaf that requires grad.
    """
    wanted = None if inputs is None else {id(t): None for t in inputs}
    # A wanted non-leaf is reached through its node; a wanted leaf by itself.
    wanted_nodes = {} if inputs is None else {id(t._node): id(t) for t in inputs if t._node is not None}
    node_grads = {}   # id(node) -> gradient of that node's output
    leaf_grads = {}   # id(leaf) -> (leaf, gradient)

    def deliver(t, edge, g):
        """Hand ``g``, the gradient of input ``t``, along ``edge`` (see Node)."""
        if edge is LEAF:
            if wanted is None:
                prev = leaf_grads.get(id(t))
                leaf_grads[id(t)] = (t, g if prev is None else prev[1] + g)
            elif id(t) in wanted:
                wanted[id(t)] = g if wanted[id(t)] is None else wanted[id(t)] + g
            return
        key = id(edge)
        if key in wanted_nodes:
            owner = wanted_nodes[key]
            wanted[owner] = g if wanted[owner] is None else wanted[owner] + g
        node_grads[key] = g if key not in node_grads else node_grads[key] + g
        owner = edge.out_ref() if isinstance(t, _Meta) else t  # (None once the tensor is gone)
        if wanted is None and owner is not None and owner._retains_grad and owner._node is edge:
            owner.grad = _owned(g.detach()) if owner.grad is None else owner.grad + g.detach()

    from ..ops import autocasting, registry

    observed = bool(registry.OBSERVERS)  # e.g. webgrad.profiler: each node's vjp is one range ("MulBackward")
    # Gradients keep the forward's dtypes: backward runs outside autocast, as in torch.
    with set_grad_enabled(create_graph), autocasting.suspended():
        for t, g in zip(roots, root_grads):
            deliver(t, t._node or LEAF, g)
        order = _topological_order([t._node for t in roots])
        # A leaf gets its .grad as soon as the last node feeding it has run, as torch's
        # AccumulateGrad: its gradient is not held to the end beside an existing .grad, and a
        # post-accumulate hook (DDP's) starts its work while backward goes on.
        pending = {} if wanted is not None else _leaf_uses(order)
        def run(node, g) -> None:
            """``node``'s vjp on its output's gradient ``g``, the results delivered to its inputs.
            (A function, so no local outlives it: leftover references would keep _unshared false.)"""
            if node.inputs is None:
                raise RuntimeError(
                    "Trying to backward through the graph a second time; its saved values were "
                    "freed. Pass retain_graph=True to the first backward() to keep them.")
            _check_versions(node)
            if observed:
                ranges = registry.begin("backward", node.name(), node, (g,))
            mask = {"needs": tuple(edge is not None for edge in node.edges)} if node.op.vjp_takes_needs else {}
            grads = node.op.vjp(g, *node.inputs, out=_saved_output(node, create_graph), **mask, **node.attrs)
            if observed:
                registry.end(ranges)
            if not isinstance(grads, tuple):
                grads = (grads,)
            for t, edge, gi in zip(node.inputs, node.edges, grads):
                if gi is not None and edge is not None:
                    deliver(t, edge, _sum_to(gi, t.shape))

        for node in order:
            ran = id(node) in node_grads
            if ran:
                run(node, node_grads.pop(id(node)))
            _release(node, pending, leaf_grads, create_graph)
            if ran and not retain_graph:
                node.inputs = None
                node.out = None
                node.edges = ()

    for key in list(leaf_grads):
        t, g = leaf_grads.pop(key)  # the engine's last reference to g is this local (_unshared)
        _accumulate(t, g, create_graph)
    if wanted is not None:
        return [wanted[id(t)] for t in inputs]
    return None


def _accumulate(t, g, create_graph) -> None:
    """Add ``g`` into leaf ``t``'s ``.grad``, then run its post-accumulate hooks."""
    if t.grad is None and not create_graph and _unshared(g):
        t.grad = g.detach()  # the vjp's fresh result: no copy (a table-sized one for an embedding)
    elif t.grad is None:
        g = g if create_graph else g.detach()
        with set_grad_enabled(create_graph):
            t.grad = _owned(g)
    elif create_graph or t.grad.requires_grad or t.grad.shape != g.shape or t.grad.dtype is not g.dtype:
        t.grad = t.grad + (g if create_graph else g.detach())
    else:  # in place, as torch's AccumulateGrad outside grad mode: no second .grad-sized buffer
        t.grad.add_(g.detach())
    for hook in list(t.__dict__.get("_post_accumulate_grad_hooks", {}).values()):
        hook(t)


def _leaf_uses(order) -> dict:
    """id(leaf) -> how many edges of ``order``'s nodes lead to it."""
    uses: dict = {}
    for node in order:
        for t, edge in zip(node.inputs or (), node.edges):
            if edge is LEAF:
                uses[id(t)] = uses.get(id(t), 0) + 1
    return uses


def _release(node, pending, leaf_grads, create_graph) -> None:
    """``node`` has run (or was skipped): a leaf fed by no later node has its final gradient."""
    if not pending:
        return
    for t, edge in zip(node.inputs or (), node.edges):
        if edge is LEAF and id(t) in pending:
            pending[id(t)] -= 1
            if pending[id(t)] == 0:
                del pending[id(t)]
                entry = leaf_grads.pop(id(t), None)
                if entry is not None:
                    _accumulate(t, entry[1], create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of ``outputs`` with respect to ``inputs`` (like ``torch.autograd.grad``),
    returned as a tuple without touching any ``.grad``. An input the outputs do not
    depend on is an error, or None with ``allow_unused=True``, or zeros with
    ``materialize_grads=True``."""
    if is_grads_batched:
        raise NotImplementedError("grad: is_grads_batched=True is not supported; loop over the grad_outputs")
    if allow_unused is None:
        allow_unused = materialize_grads
    from ..tensor import Tensor

    single = isinstance(outputs, Tensor)
    outputs = [outputs] if single else list(outputs)
    inputs_list = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    root_grads = [_initial_grad(o, g, "grad") for o, g in zip(outputs, grad_outputs)]
    result = run_backward(outputs, root_grads, inputs=inputs_list, create_graph=create_graph,
                          retain_graph=create_graph if retain_graph is None else retain_graph)
    for t, g in zip(inputs_list, result):
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: an input of shape {tuple(t.shape)} was not used to compute "
                               f"the outputs; pass allow_unused=True to get None for it")
    if materialize_grads:
        from .. import creation

        result = [creation.zeros_like(t) if g is None else g for t, g in zip(inputs_list, result)]
    return tuple(result)


def _initial_grad(out, gradient, caller):
    from ..tensor import Tensor
    from .. import creation

    if not out.requires_grad:
        raise RuntimeError(f"{caller}: tensor of shape {tuple(out.shape)} does not require grad "
                           f"and has no grad_fn; did you create it under no_grad or forget "
                           f"requires_grad=True on the inputs?")
    if gradient is None:
        if out.numel() != 1:
            raise RuntimeError(
                f"{caller}: grad can be implicitly created only for scalar outputs, but the output "
                f"has shape {tuple(out.shape)}; pass gradient= (e.g. webgrad.ones_like(out)) "
                f"or reduce it first (out.sum())")
        return creation.ones_like(out)
    if not isinstance(gradient, Tensor):
        gradient = creation.tensor(gradient, dtype=out.dtype, device=out.device)
    if tuple(gradient.shape) != tuple(out.shape):
        raise RuntimeError(f"{caller}: gradient has shape {tuple(gradient.shape)} but the output "
                           f"has shape {tuple(out.shape)}")
    return gradient


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None) -> None:
    """Accumulate the gradients of ``tensors`` (one or a sequence) into the ``.grad`` of
    the leaves, like ``torch.autograd.backward``; with ``inputs``, only into those."""
    from ..tensor import Tensor

    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    grads = grad_tensors if grad_tensors is not None else grad_variables
    grads = [None] * len(tensors) if grads is None else ([grads] if isinstance(grads, Tensor) else list(grads))
    if len(grads) != len(tensors):
        raise RuntimeError(f"backward: got {len(grads)} gradients for {len(tensors)} tensors")
    roots = [_initial_grad(t, g, "backward") for t, g in zip(tensors, grads)]
    retain = create_graph if retain_graph is None else retain_graph
    if inputs is None:
        run_backward(tensors, roots, retain_graph=retain, create_graph=create_graph)
        return
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    found = run_backward(tensors, roots, retain_graph=retain, create_graph=create_graph, inputs=inputs)
    for t, g in zip(inputs, found):
        if g is not None:
            g = g if create_graph else g.detach()
            t.grad = _owned(g) if t.grad is None else t.grad + g


def functional_grad(fn, argnums=0):
    """JAX-style ``webgrad.grad(f)``: a function returning d f / d args[argnums].

    ``f`` must return a scalar tensor. Nesting works (``grad(grad(f))``).

    Example:
        >>> webgrad.grad(webgrad.tanh)(1.0).item()   # 1 - tanh(1)**2
        0.41997434...
    """
    from ..tensor import Tensor
    from .. import creation

    def wrapped(*args):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        args = list(args)
        outer_graph = False
        for i in nums:
            a = args[i]
            if isinstance(a, Tensor) and a.requires_grad:
                outer_graph = True
            else:
                a = a.detach() if isinstance(a, Tensor) else creation.tensor(a)
                if not a.dtype.is_floating_point:
                    a = a.float()
                args[i] = a.requires_grad_()
        with enable_grad():
            out = fn(*args)
            if out.requires_grad:
                grads = grad(out, [args[i] for i in nums], create_graph=True, allow_unused=True)
            else:  # f does not depend on any differentiated argument: zero gradients
                grads = (None,) * len(nums)
        grads = tuple(creation.zeros_like(args[i]) if g is None else g for g, i in zip(grads, nums))
        if not outer_graph:
            grads = tuple(g.detach() for g in grads)
        return grads[0] if isinstance(argnums, int) else grads

    return wrapped


class _VariableMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        from ..tensor import Tensor

        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """The pre-0.4 PyTorch wrapper, kept for old scripts: ``Variable(t, requires_grad=True)``
    is a tensor sharing t's data (a new leaf), and every tensor is a Variable."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        from ..tensor import Tensor

        if not isinstance(data, Tensor):
            raise TypeError(f"Variable: data must be a Tensor, got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_()
        return out


def __getattr__(name):
    # Function needs the op registry, which needs this module: load it on first use.
    if name in ("Function", "FunctionCtx", "once_differentiable", "function"):
        import importlib

        function = importlib.import_module(f"{__name__}.function")
        return function if name == "function" else getattr(function, name)
    raise AttributeError(f"module 'webgrad.autograd' has no attribute {name!r}")
