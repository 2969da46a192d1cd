"""The op registry: every primitive op is declared once with ``defop``.

A declaration carries the shape/dtype rule (``infer``, which raises the
user-facing error), one implementation per backend, and the vector-Jacobian
product written in Tensor ops (so it runs on any backend and can itself be
differentiated). ``apply`` is the single path from a Tensor call to a backend
kernel and, when gradients are wanted, to a node in the autograd graph.

Observers: the one instrumentation hook
---------------------------------------
Whatever watches the program (webgrad.compile's tracer, the optimizer capture of a
replay, webgrad.profiler, ONNX export) is an ``Observer`` on the registry's stack,
pushed and popped by ``with observing(obs):`` (or ``add_observer``/``remove_observer``
where a context does not fit, as a profile's ``start``/``stop``). While the stack is
empty every hook costs one check. Nothing patches modules, classes or backends, and
nothing reads stack frames to decide what to do. The events (all optional, the base
class ignores them; outer observers hear of an event first, its end last):

- ``op_begin(op, inputs) -> token`` / ``op_end(token, op, inputs, attrs, out)`` around
  every ``apply`` and ``apply_inplace`` (``out`` is None for in-place ops);
  ``op_failed(token)`` instead of ``op_end`` when the op raised.
- ``claim_inplace(op, tensors, attrs) -> bool``: before an in-place op (innermost observer
  first). True claims it: nothing runs and no ``op_begin`` follows (the optimizer capture
  of a replay records the update this way instead of running it).
- ``host_read(tensor, check)``: tensor values are about to go to the host (``.item()``,
  ``.numpy()``, printing, ``bool``...). ``check`` is ``(fn, args, kwargs)`` when the read
  happens inside a function declared ``@input_check`` (innermost), else None.
- ``allocated(data, method, args, draw)``: a backend made new data that no op computed
  (``allocate``: creation functions, ``.to(device)``); ``draw`` for random draws, which a
  replay must draw anew with ``getattr(backend, method)(*args)``.
- ``enter(kind, name, target, args) -> token`` / ``exit(token, out)`` around a range:
  kind "composite" (a function declared ``@composite(name)``; target the function),
  "optimizer" (an optimizer's ``step``; target the optimizer), "module" (an ``nn.Module``
  call; target the module), "backward" (one autograd node's vjp; target the node).
  ``begin``/``end`` (or ``call``) open and close one for every observer.
- ``kernel_begin(op, inputs, device, attrs) -> token`` / ``kernel_end(token, out)``: a compiled
  replay calling a backend kernel directly (``replay_kernels``), with no ``apply`` around it.

Declarations where things are defined, not name lists elsewhere: ``@input_check`` marks a
function that only validates its arguments (a tracer replays it instead of breaking the
graph at its host reads); ``@composite("F.linear")`` marks a function profiled as one range.
"""
from __future__ import annotations

import functools
import inspect
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import autograd
from ..kernels import Elementwise, Epilogue, Fused, Reduction, View

OPS: dict[str, "Op"] = {}

# What an op does to memory, for passes and backends to classify it without reading its
# kernels (tinygrad's op groups): set by ``defop`` (given, or derived from the kernels).
# elementwise: each output element from the same position of the inputs; view: no data
# moves; reduce: an output element from whole rows or windows (sum, softmax, layer norm,
# scans); index: reads or writes at positions other than its own (gather, scatter, cat);
# matmul: contractions (matmul, convolutions); inplace: writes its leading inputs.
KINDS = ("elementwise", "view", "reduce", "index", "matmul", "inplace", "other")


@dataclass(eq=False)
class Op:
    name: str
    infer: Callable
    vjp: Callable | None = None
    impls: dict[str, Any] = field(default_factory=dict)
    inplace: bool = False  # writes into its inputs; never recorded for autograd
    mutates: int = 1  # for in-place ops: how many leading inputs it writes
    # Whether the vjp reads its inputs' values (not just shapes): only then is an
    # in-place change of an input before backward an error (views, add, copy... are free).
    reads_inputs: bool = True
    # Whether the vjp takes ``needs``: one bool per input, True where a gradient is wanted
    # (PyTorch's output_mask). Such a vjp computes nothing for the others (returns None).
    vjp_takes_needs: bool = False
    # Whether each input's value is read only for the other inputs' gradients (x * y, x @ y):
    # then autograd keeps it only where another input wants a gradient (``x * 2`` keeps no x).
    reads_for_others: bool = False
    kind: str = "other"  # one of KINDS
    # Floating-point operations of one call, from the input shapes and the output shape (a
    # profile's FLOPs column); None where the op is cheap next to products.
    flops: Callable | None = None
    # For an input check kept in a traced graph (graph/trace.py ``check_node``): its function
    # and arguments, graph Values standing for the tensors. None for every real op.
    check: tuple | None = None

    def __repr__(self) -> str:
        return f"Op({self.name})"


def defop(name: str, *, infer: Callable, vjp: Callable | None = None,
          inplace: bool = False, mutates: int = 1, reads_inputs: bool | None = None,
          reads_for_others: bool = False, kind: str | None = None, flops: Callable | None = None, wgsl=None,
          **impls) -> Op:
    """Declare a primitive. ``impls`` maps a backend name to its kernel, e.g.
    ``numpy=np.add``. Backends added later attach theirs with ``bind``.
    ``reads_inputs`` defaults to True, and to False for views; ``reads_for_others``: see Op. ``kind`` (one of ``KINDS``)
    defaults to what the kernels say: a view, an elementwise expression, a reduction...
    ``flops(input_shapes, output_shape, **attrs)`` counts a call's floating-point operations."""
    if name in OPS:
        raise ValueError(f"op {name!r} declared twice")
    if wgsl is not None:  # the WebGPU kernel record (the backend binds ``impls`` by name)
        impls = {**impls, "wgsl": wgsl}
    kind = kind or _derived_kind(name, inplace, wgsl)
    if kind not in KINDS:
        raise ValueError(f"op {name!r}: kind must be one of {KINDS}, got {kind!r}")
    if reads_inputs is None:
        reads_inputs = kind != "view"
    takes_needs = vjp is not None and "needs" in inspect.signature(vjp).parameters
    op = Op(name, infer, vjp, dict(impls), inplace, mutates, reads_inputs, takes_needs, reads_for_others, kind, flops)
    OPS[name] = op
    return op


def _derived_kind(name: str, inplace: bool, wgsl) -> str:
    if inplace:
        return "inplace"
    if isinstance(wgsl, View):
        return "view"
    if isinstance(wgsl, (Elementwise, Fused)):
        return "elementwise"
    if isinstance(wgsl, Epilogue) or name == "matmul":
        return "matmul"
    if isinstance(wgsl, Reduction):
        return "reduce"
    return "other"


def bind(backend: str, **kernels) -> None:
    """Attach kernels for one backend to already-declared ops, by op name."""
    for name, kernel in kernels.items():
        OPS[name].impls[backend] = kernel


class OpError(ValueError):
    """Bad input to an op: names the op, the shapes and dtypes involved."""


def common_device(op_name: str, tensors) -> str:
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device != device:
            desc = ", ".join(f"{tuple(x.shape)} on {x.device}" for x in tensors)
            raise RuntimeError(f"{op_name}: expected all tensors on the same device, got {desc}; "
                               f"move them with .to({device!r})")
    return device


class Observer:
    """Base of everything on the observer stack: every event does nothing (see the module
    docstring for when each is called)."""

    # Whether it records a graph (webgrad.compile's and the exporters' trace): then composites
    # that eager mode runs as one op of their own (F.linear's linear, a mean or sum cross entropy)
    # run as the ops they are made of, the vocabulary the graph passes and exporters know.
    traces_graph = False

    def op_begin(self, op: Op, inputs) -> Any:
        return None

    def op_end(self, token, op: Op, inputs, attrs, out) -> None:
        pass

    def op_failed(self, token) -> None:
        pass

    def claim_inplace(self, op: Op, tensors, attrs) -> bool:
        return False

    def host_read(self, tensor, check) -> None:
        pass

    def allocated(self, data, method: str, args: tuple, draw: bool) -> None:
        pass

    def enter(self, kind: str, name: str, target, args) -> Any:
        return None

    def exit(self, token, out) -> None:
        pass

    def kernel_begin(self, op: Op, inputs, device: str, attrs: dict) -> Any:
        return None

    def kernel_end(self, token, out) -> None:
        pass


# The observer stack, outermost first. A tuple, replaced on every change, so a hook can
# loop over it while an observer removes itself. While empty, each hook pays one check.
OBSERVERS: tuple = ()


def add_observer(observer: Observer) -> None:
    global OBSERVERS
    OBSERVERS = OBSERVERS + (observer,)


def remove_observer(observer: Observer) -> None:
    global OBSERVERS
    OBSERVERS = tuple(o for o in OBSERVERS if o is not observer)


class observing:  # noqa: N801  (a context manager, read as a phrase)
    """``with observing(obs):`` pushes ``obs`` on the observer stack for the block."""

    def __init__(self, observer: Observer):
        self.observer = observer

    def __enter__(self):
        add_observer(self.observer)
        return self.observer

    def __exit__(self, *exc):
        remove_observer(self.observer)
        return False


def tracing_graph() -> bool:
    """Whether an observer records a graph (``Observer.traces_graph``): eager-only fused ops
    (F.linear's linear, a reduced cross entropy) then run as the ops they are made of."""
    return bool(OBSERVERS) and any(o.traces_graph for o in OBSERVERS)


def observer_of(cls):
    """The innermost observer that is a ``cls``, or None."""
    for o in reversed(OBSERVERS):
        if isinstance(o, cls):
            return o
    return None


def apply(op: Op, *inputs, **attrs):
    """Run ``op`` on Tensors ``inputs`` and record it for autograd when needed.
    This is the hot path of every op: keep it lean."""
    if OBSERVERS:
        return _observed(op, inputs, attrs, _apply)
    return _apply(op, inputs, attrs)


def _apply(op: Op, inputs, attrs):
    device = inputs[0].device
    for t in inputs:
        if t.device != device:
            common_device(op.name, inputs)
    shape, dtype = op.infer(*inputs, **attrs)
    if _INTO_BLOCKS and _INTO.tensor is not None:
        written = _write_into(op, inputs, attrs, shape, dtype)
        if written is not None:
            return written
    data = get_backend(device).run(op, inputs, attrs, shape, dtype)
    out = Tensor._make(data, shape, dtype, device)
    if op.vjp is not None and autograd.is_grad_enabled():
        for t in inputs:
            if t._requires_grad:
                autograd.record(op, inputs, attrs, out)
                break
    return out


class _Into(threading.local):
    tensor: Any = None  # the tensor an in-place method's one op may write its result into, on this thread


_INTO = _Into()
_INTO_BLOCKS = 0  # writing_into blocks open on any thread: _apply looks at _INTO only while there are some
_INTO_LOCK = threading.Lock()


class writing_into:  # noqa: N801  (a context manager, read as a phrase)
    """``with writing_into(x):`` lets the first op of the block (on this thread) that reads ``x``
    and gives a result of x's shape, dtype and device write that result straight into x's memory,
    where its backend can (``run_into``), and return x: ``x.add_(y)`` without a temporary and a
    copy. Only for a block whose later ops never read x's old value again (one op, or a chain on
    its result), outside autograd and with no observer (a trace must see the copy it replays)."""

    def __init__(self, x):
        self.x, self.outer = x, None

    def __enter__(self):
        global _INTO_BLOCKS
        with _INTO_LOCK:
            _INTO_BLOCKS += 1
        self.outer, _INTO.tensor = _INTO.tensor, None if OBSERVERS else self.x
        return self

    def __exit__(self, *exc):
        global _INTO_BLOCKS
        _INTO.tensor = self.outer
        with _INTO_LOCK:
            _INTO_BLOCKS -= 1
        return False


def _write_into(op: Op, inputs, attrs, shape, dtype):
    """``writing_into``'s tensor, now holding ``op``'s result, where this op may and can write
    it there; else None (the op then runs as usual)."""
    x = _INTO.tensor
    if dtype is not x.dtype or tuple(shape) != tuple(x.shape) or not any(t is x for t in inputs):
        return None
    _INTO.tensor = None  # one op at most: the ones after it read x's new value
    if not get_backend(x.device).run_into(op, inputs, attrs, x):
        return None
    x._bump_version()
    return x


def apply_inplace(op: Op, *tensors, **attrs):
    """Run an in-place op that overwrites the data of its first ``op.mutates``
    tensors (an optimizer step, ``fill_``, ``__setitem__``) and bump their
    version counters so autograd notices stale saved values."""
    if OBSERVERS:
        for o in reversed(OBSERVERS):
            if o.claim_inplace(op, tensors, attrs):
                return tensors[0]  # e.g. a replay collecting an optimizer's per-step scalars
        return _observed(op, tensors, attrs, _apply_inplace)
    return _apply_inplace(op, tensors, attrs)


def _apply_inplace(op: Op, tensors, attrs):
    device = common_device(op.name, tensors) if len(tensors) > 1 else tensors[0].device
    written = tensors[:op.mutates]
    for t in written:
        autograd.check_inplace_allowed(op.name, t)
    op.infer(*tensors, **attrs)
    get_backend(device).run_inplace(op, tensors, attrs)
    for t in written:
        t._bump_version()
    return tensors[0]


def _observed(op: Op, inputs, attrs, run):
    observers = OBSERVERS
    tokens = [o.op_begin(op, inputs) for o in observers]
    try:
        out = run(op, inputs, attrs)
    except BaseException:
        for o, token in zip(reversed(observers), reversed(tokens)):
            o.op_failed(token)
        raise
    made = None if run is _apply_inplace else out
    for o, token in zip(reversed(observers), reversed(tokens)):
        o.op_end(token, op, inputs, attrs, made)
    return out


# -- the other hooks -------------------------------------------------------------------
def host_read(tensor) -> None:
    """Tell the observers that ``tensor``'s values go to the host (``Tensor._host`` calls it)."""
    for o in OBSERVERS:
        o.host_read(tensor, _CHECKING)


_CHECKING = None  # (fn, args, kwargs) of the innermost running @input_check, while observed


def input_check(fn):
    """Declare ``fn`` an input check: it only validates its arguments (raising a clear error)
    and may read tensor values on the host to do so. Its host reads reach observers with
    ``check=(fn, args, kwargs)``; webgrad.compile runs it again at each replay instead of
    breaking the graph."""
    @functools.wraps(fn)
    def check(*args, **kwargs):
        global _CHECKING
        if not OBSERVERS:
            return fn(*args, **kwargs)
        outer, _CHECKING = _CHECKING, (check, args, kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            _CHECKING = outer
    return check


def allocate(backend, method: str, *args, draw: bool = False):
    """New data from a backend's creation method (``full``, ``from_numpy``, ``arange``) or, with
    ``draw``, a random draw (``uniform``, ``normal``, ``randint``): the one path for data that no
    op computes, so observers see where it came from."""
    data = getattr(backend, method)(*args)
    for o in OBSERVERS:
        o.allocated(data, method, args, draw)
    return data


def begin(kind: str, name: str, target, args) -> list:
    """Open a range (``Observer.enter``); pass what it returns to ``end``."""
    observers = OBSERVERS
    return [(o, o.enter(kind, name, target, args)) for o in observers]


def end(tokens: list, out=None) -> None:
    for o, token in reversed(tokens):
        o.exit(token, out)


def call(kind: str, name: str, target, fn, args, kwargs):
    """``fn(*args, **kwargs)`` as one range the observers see."""
    tokens = begin(kind, name, target, args)
    out = None
    try:
        out = fn(*args, **kwargs)
    finally:
        end(tokens, out)
    return out


# The FLOPs of declared functions (``composite(name, flops=...)``), by function.
FLOPS: dict = {}


def observed(kind: str, name: str, flops: Callable | None = None):
    """Decorator: calls of the function are ``kind`` ranges named ``name`` (target: the
    function, or for kind "optimizer" the optimizer, its first argument). ``flops``, as
    ``defop``'s, counts a call's floating-point operations (``FLOPS[function]``)."""
    def declare(fn):
        if flops is not None:
            FLOPS[fn] = flops
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not OBSERVERS:
                return fn(*args, **kwargs)
            return call(kind, name, args[0] if kind == "optimizer" else fn, fn, args, kwargs)
        return wrapper
    return declare


def composite(name: str, flops: Callable | None = None):
    """Declare a function built from other ops (``F.linear``...): a profile times it as one
    range around its primitives (and counts ``flops(input_shapes, output_shape)``), and
    autocast treats it as torch's op of that name (``F.conv2d``: conv2d), its primitives not
    cast again (autocasting.py)."""
    return lambda fn: observed("composite", name, flops)(autocast_op(name.removeprefix("F."))(fn))


def replay_kernels(backend, device: str):
    """``(run, run_inplace)`` for a compiled replay that calls ``backend``'s kernels directly:
    the backend's own while nothing observes, else ones that report each call."""
    if not OBSERVERS:
        return backend.run, backend.run_inplace

    def reported(kernel):
        def run(op, inputs, *rest):
            tokens = [(o, o.kernel_begin(op, inputs, device, rest[0])) for o in OBSERVERS]  # rest: attrs, ...
            out = None
            try:
                out = kernel(op, inputs, *rest)
            finally:
                for o, token in reversed(tokens):
                    o.kernel_end(token, out)
            return out
        return run
    return reported(backend.run), reported(backend.run_inplace)


from ..backend import get_backend  # noqa: E402  (imported last: backends import ops)
from .autocasting import autocast_op  # noqa: E402
from ..tensor import Tensor  # noqa: E402
