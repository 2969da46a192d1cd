"""``webgrad.utils.checkpoint``: activation checkpointing, as ``torch.utils.checkpoint``.

    y = checkpoint(block, x, use_reentrant=False)

runs ``block(x)`` without keeping its intermediate activations and recomputes it
during backward: memory for compute. How it fits the engine:

- Forward runs under ``no_grad`` with a small observer on the op registry that notes
  every tensor requiring grad that enters an op: the explicit arguments and whatever
  the function closes over (module parameters, outer activations).
- One graph node (an ``autograd.Function``) takes all of those as inputs, so
  ``backward()`` and ``autograd.grad`` both route gradients to them.
- Its backward puts the forward's RNG and autocast state back, reruns the function
  with grad on and differentiates the rerun. During the rerun each of the node's
  inputs that is not a leaf stands in as one (its graph node is set aside), so the
  inner backward stops at the inputs and never walks into the outer graph.

``use_reentrant=True`` takes the same path and refuses what torch's reentrant variant
refuses (kwargs, ``context_fn``, ``debug``); unlike torch's, it also serves
``autograd.grad`` and gives parameters gradients when no argument requires grad.

Under ``webgrad.compile`` the forward and the recomputation are both traced and
replayed. Random ops inside a checkpoint (with ``preserve_rng_state``) break the
graph instead: a replay would draw the recomputation's numbers afresh.
"""
from __future__ import annotations

import contextlib
import warnings

from .. import autograd
from ..autograd.function import Function
from ..ops import autocasting, registry
from ..random import numpy_generator
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn"]


class CheckpointError(RuntimeError):
    """The recomputation did not produce what the forward did (torch's name)."""


def noop_context_fn():
    """The default ``context_fn``: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


_REENTRANT_WARNING = (
    "{name}: the use_reentrant parameter should be passed explicitly. use_reentrant=False is recommended; "
    "pass use_reentrant=True to keep the current default (as torch 2.x warns)")


def checkpoint(function, *args, use_reentrant: bool | None = None, context_fn=noop_context_fn,
               determinism_check: str = "default", debug: bool = False, early_stop: bool = True, **kwargs):
    """Run ``function(*args, **kwargs)`` without keeping its activations; backward
    recomputes them. ``preserve_rng_state=True`` (a keyword) replays the forward's
    random numbers (dropout) in the recomputation. ``early_stop`` is accepted and
    ignored: the recomputation always runs the whole function.

    Example:
        >>> h = checkpoint(block, x, use_reentrant=False)
        >>> h.sum().backward()          # block's parameters and x get their .grad
    """
    if use_reentrant is None:
        warnings.warn(_REENTRANT_WARNING.format(name="webgrad.utils.checkpoint"), stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable (a module or a function), "
                        f"got {type(function).__name__}")
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs)
                         + " (checkpoint passes keyword arguments to the function only with use_reentrant=False)")
    if use_reentrant and (context_fn is not noop_context_fn or debug):
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check should be 'default' or 'none', got {determinism_check!r}")
    forward_ctx, recompute_ctx = context_fn()
    if not autograd.is_grad_enabled():  # nothing will be differentiated: nothing to save
        with forward_ctx:
            return function(*args, **kwargs)

    state = _State(function, args, kwargs, preserve, recompute_ctx, determinism_check, debug)
    watch = _Watch(debug)
    with autograd.no_grad(), registry.observing(watch), forward_ctx:
        out = function(*args, **kwargs)
    flat: list = []
    spec = _flatten(out, flat)
    state.outputs = [(tuple(t.shape), t.dtype, t.device) for t in flat]
    state.forward_ops = watch.ops
    inputs = _unique([t for t in _tensors((args, kwargs)) if t.requires_grad] + list(watch.seen.values()))
    if not inputs or not flat:
        return out
    if preserve and watch.draws:
        _no_replay_of_draws()
    state.inputs, state.made = inputs, flat
    state.versions = [(t, t._version) for t in _unique(_tensors((args, kwargs)) + inputs)]
    results = CheckpointFunction.apply(state, *inputs)
    return _unflatten(spec, list(results))


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None, **kwargs):
    """Run ``functions`` (an ``nn.Sequential`` or a list of modules/functions) one after
    another on ``input``, cut into ``segments`` chunks; every chunk but the last is
    checkpointed (torch's ``checkpoint_sequential``)."""
    if use_reentrant is None:
        warnings.warn(_REENTRANT_WARNING.format(name="webgrad.utils.checkpoint.checkpoint_sequential"), stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    from ..nn import Sequential

    functions = list(functions.children()) if isinstance(functions, Sequential) else list(functions)
    if not isinstance(segments, int) or isinstance(segments, bool) or not 1 <= segments <= max(len(functions), 1):
        raise ValueError(f"checkpoint_sequential: segments must be an int from 1 to the number of functions "
                         f"({len(functions)}), got {segments!r}")
    for i, f in enumerate(functions):
        if not callable(f):
            raise TypeError(f"checkpoint_sequential: functions[{i}] is a {type(f).__name__}, not callable")

    def run(chunk):
        def forward(x):
            for f in chunk:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(run(functions[start:end]), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(functions[end:])(input)


# -- the forward's record ----------------------------------------------------------------
class _State:
    """What the recomputation needs: the call, and the forward's RNG and autocast state."""

    def __init__(self, function, args, kwargs, preserve, recompute_ctx, determinism_check, debug):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.rng = numpy_generator().bit_generator.state if preserve else None
        self.autocast = [dict(block) for block in autocasting.stack()]
        self.recompute_ctx, self.determinism_check, self.debug = recompute_ctx, determinism_check, debug
        self.inputs: list = []
        self.versions: list = []
        self.outputs: list = []
        self.forward_ops: list = []
        self.made: list | None = None  # the forward's outputs, until the node takes them


class _Watch(registry.Observer):
    """Notes the tensors requiring grad that enter ops (in first-use order) and random draws."""

    def __init__(self, debug):
        self.seen: dict = {}  # id -> Tensor
        self.draws = 0
        self.ops: list = []
        self.debug = debug

    def op_begin(self, op, inputs):
        for t in inputs:
            if t._requires_grad and id(t) not in self.seen:
                self.seen[id(t)] = t
        if self.debug:
            self.ops.append(op.name)

    def allocated(self, data, method, args, draw):
        self.draws += bool(draw)


def _no_replay_of_draws():
    """Under webgrad.compile a replay draws fresh numbers for the forward and for the
    recomputation, which would then differ: such a signature runs eagerly instead."""
    from ..graph.trace import tracing

    tracer = tracing()
    if tracer is not None:
        tracer.stop("checkpoint(preserve_rng_state=True) around random ops: a replay cannot repeat the "
                    "forward's numbers in the recomputation")


class CheckpointFunction(Function):
    """The graph node: forward hands back what the no_grad run made, backward recomputes."""

    @staticmethod
    def forward(ctx, state, *inputs):
        ctx.state = state
        ctx.set_materialize_grads(False)
        made, state.made = state.made, None
        return tuple(made)

    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        _check_versions(state)
        found: tuple = (None,) * len(state.inputs)
        with _as_leaves(state.inputs):
            flat = _recompute(state)
            pairs = [(o, g) for o, g in zip(flat, grads) if g is not None and o.requires_grad]
            if pairs:
                found = autograd.grad([o for o, _ in pairs], state.inputs, [g for _, g in pairs], allow_unused=True)
        return (None,) + tuple(found)


def _recompute(state) -> list:
    """Run the function again, recording, as the forward ran it (the inputs act as leaves)."""
    watch = _Watch(state.debug)
    with autograd.enable_grad(), _rng_as(state.rng), _autocast_as(state.autocast), state.recompute_ctx:
        with registry.observing(watch):
            out = state.function(*state.args, **state.kwargs)
    flat: list = []
    _flatten(out, flat)
    if state.determinism_check == "default":
        now = [(tuple(t.shape), t.dtype, t.device) for t in flat]
        if now != state.outputs:
            trace = ""
            if state.debug:
                trace = f"\nforward ran: {', '.join(state.forward_ops)}\nrecomputation ran: {', '.join(watch.ops)}"
            raise CheckpointError(
                f"checkpoint: the recomputation returned different tensors than the forward "
                f"(forward: {_describe(state.outputs)}; recomputation: {_describe(now)}); the function must do "
                f"the same work both times (pass determinism_check='none' to skip this check){trace}")
    return flat


def _check_versions(state) -> None:
    for t, v in state.versions:
        if t._version != v:
            raise RuntimeError(
                f"checkpoint: one of the tensors the checkpointed function used (shape "
                f"{tuple(t.shape)}, {t.dtype.name}) was modified by an in-place operation after the forward: "
                f"it is at version {t._version}; expected version {v}. The recomputation would use the new "
                f"values; change it out of place instead.")


@contextlib.contextmanager
def _as_leaves(inputs):
    """Inside: every input that is not a leaf acts as one (its node is set aside), so a
    graph recorded here ends at the inputs."""
    moved = [(t, t._node) for t in inputs if t._node is not None]
    for t, _ in moved:
        t._node = None
    try:
        yield
    finally:
        for t, node in moved:
            t._node = node


@contextlib.contextmanager
def _rng_as(saved):
    """Run with the global generator at ``saved`` (None: as it is), then put it back."""
    if saved is None:
        yield
        return
    generator = numpy_generator()
    now = generator.bit_generator.state
    generator.bit_generator.state = saved
    try:
        yield
    finally:
        numpy_generator().bit_generator.state = now


@contextlib.contextmanager
def _autocast_as(blocks):
    """Run inside the forward's autocast blocks (backward runs with autocast suspended)."""
    if not any(b["enabled"] for b in blocks):
        yield
        return
    inside = getattr(autocasting._state, "inside_op", False)
    autocasting._state.inside_op = False
    for b in blocks:
        autocasting.push(b["device_type"], b["dtype"], b["enabled"])
    try:
        yield
    finally:
        for _ in blocks:
            autocasting.pop()
        autocasting._state.inside_op = inside


# -- structures ----------------------------------------------------------------------------
def _flatten(obj, flat: list):
    """``obj`` with its tensors (in tuples, lists, dicts) moved to ``flat``."""
    if isinstance(obj, Tensor):
        flat.append(obj)
        return ("T", len(flat) - 1)
    if isinstance(obj, (tuple, list)) and type(obj) in (tuple, list):
        return (type(obj), [_flatten(x, flat) for x in obj])
    if type(obj) is dict:
        return (dict, [(k, _flatten(v, flat)) for k, v in obj.items()])
    return ("C", obj)


def _unflatten(spec, flat: list):
    tag, body = spec
    if tag == "T":
        return flat[body]
    if tag == "C":
        return body
    if tag is dict:
        return {k: _unflatten(v, flat) for k, v in body}
    return tag(_unflatten(x, flat) for x in body)


def _tensors(obj) -> list:
    flat: list = []
    _flatten(obj, flat)
    return flat


def _unique(tensors) -> list:
    seen: dict = {}
    for t in tensors:
        seen.setdefault(id(t), t)
    return list(seen.values())


def _describe(metas) -> str:
    return ", ".join(f"{shape} {dtype.name} on {device}" for shape, dtype, device in metas) or "no tensors"
