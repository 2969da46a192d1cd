"""``webgrad.autograd.Function``: user-defined ops with their own backward, as in PyTorch.

    class Exp(webgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)

``forward`` runs without recording; ``apply`` puts one node for the call in the
graph. ``backward`` gets one gradient per output and returns one per forward
argument (None for non-tensors or where no gradient flows). It runs in the
engine's grad mode, so a backward written in Tensor ops is itself differentiated
with ``create_graph=True`` (double backward), unless it is ``once_differentiable``.

How the engine sees it: the call's node hangs off a small "anchor" tensor; each
differentiable output gets its own node that hands its gradient, tagged with the
output's position, to the anchor. The engine adds those up (``_OutputGrads``)
and, once all outputs have reported, runs ``backward`` once with all of them.
"""
from __future__ import annotations

import functools

import numpy as np

from . import Node, is_grad_enabled, no_grad
from ..ops.registry import Op
from .. import dtypes
from ..creation import zeros_like
from ..tensor import Tensor


class FunctionCtx:
    """The ``ctx`` a Function's forward and backward share: save tensors for backward,
    read ``needs_input_grad``, mark outputs that have no gradient. Any other attribute
    may be set freely (``ctx.dim = dim``)."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._saved = ()
        self._saved_versions = ()
        self._non_differentiable = set()
        self._outputs = ()

    def save_for_backward(self, *tensors) -> None:
        """Keep tensors (inputs, outputs or None) for backward; changing them in place
        before backward is an error there, as in PyTorch."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward: can only save tensors or None, got {type(t).__name__}; "
                                f"store other values as ctx attributes (ctx.value = ...)")
        self._saved = tensors
        self._saved_versions = tuple(None if t is None else t._version for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:
            raise RuntimeError("saved_tensors: the saved tensors were freed after the first backward; pass "
                               "retain_graph=True to the first backward() to run it again")
        for i, (t, version) in enumerate(zip(self._saved, self._saved_versions)):
            if t is not None and t._version != version:
                raise RuntimeError(
                    f"one of the tensors needed for gradient computation has been modified by an in-place "
                    f"operation: saved tensor {i} (shape {tuple(t.shape)}, {t.dtype.name}) is at version "
                    f"{t._version}; expected version {version}. Use an out-of-place op instead.")
        return tuple(self._outputs_live(t) for t in self._saved)

    saved_variables = saved_tensors

    def _outputs_live(self, t):
        # An output saved in forward is handed back as the output the user holds,
        # so that, with create_graph, gradients through it reach this call's inputs.
        for raw, out in self._outputs:
            if t is raw:
                return out
        return t

    def mark_non_differentiable(self, *tensors) -> None:
        """These outputs get no gradient (indices, masks): they do not require grad."""
        self._non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, backward receives None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors) -> None:
        raise NotImplementedError("mark_dirty: in-place Functions are not supported in webgrad; return a new "
                                  "tensor from forward instead of changing an input")


class _OutputGrads:
    """The gradients of one call's outputs, by position, as the engine accumulates them.
    Shaped like the anchor (0-d) so the engine passes it through unchanged."""

    shape = ()

    def __init__(self, count, grads):
        self.count = count
        self.grads = grads  # position -> Tensor

    @property
    def device(self):  # the profiler files a backward range under its gradient's device
        return next(iter(self.grads.values())).device

    def __add__(self, other):
        merged = dict(self.grads)
        for k, g in other.grads.items():
            merged[k] = g if k not in merged else merged[k] + g
        return _OutputGrads(self.count, merged)


class _FunctionNode(Node):
    __slots__ = ("cls_name",)
    cls_name: str

    def name(self) -> str:
        return f"{self.cls_name}Backward"


def _select_vjp(g, anchor, *, out, index, count):
    return _OutputGrads(count, {index: g})


def _not_an_op(*args, **kwargs):
    raise RuntimeError("internal: a Function's graph node is not run as an op")


_SELECT = Op("function_output", infer=_not_an_op, vjp=_select_vjp, reads_inputs=False)


class Function:
    """Base class of a differentiable op with a hand-written backward; see the module doc.
    Subclasses define static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``
    (or torch 2's ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``) and
    are called with ``apply``."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function.forward: define a static forward(ctx, *args) in the subclass")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("Function.backward: define a static backward(ctx, *grad_outputs) in the "
                                  "subclass to differentiate this Function")

    setup_context = None  # torch 2 style: forward(*args) without ctx, then setup_context(ctx, inputs, output)

    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"{type(self).__name__}: call Functions with {type(self).__name__}.apply(...), "
                           f"not by making an instance")

    @classmethod
    def apply(cls, *args, **kwargs):
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with no_grad():
            if cls.setup_context is not None:
                result = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, result)
            else:
                result = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(result, tuple)
        raw = (result,) if single else result
        outputs = tuple(Tensor._make(o._data, o.shape, o.dtype, o.device) if isinstance(o, Tensor) else o
                        for o in raw)
        for o, r in zip(outputs, raw):
            if isinstance(o, Tensor):
                o._version_counter = r._version_counter  # same memory as what forward returned
        ctx._outputs = tuple((r, o) for r, o in zip(raw, outputs) if isinstance(o, Tensor))
        if is_grad_enabled() and any(needs):
            _record(cls, ctx, args, raw, outputs)
        return outputs[0] if single else outputs


def _record(cls, ctx, args, raw, outputs):
    inputs = tuple(a for a in args if isinstance(a, Tensor))
    positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
    attrs = {"ctx": ctx, "cls": cls, "positions": positions, "n_args": len(args), "outputs": outputs}
    op = Op(cls.__name__, infer=_not_an_op, vjp=_function_vjp, reads_inputs=False)
    anchor = Tensor._make(np.zeros((), np.float32), (), _float32(), inputs[0].device)
    node = _FunctionNode(op, inputs, attrs, anchor)
    node.cls_name = cls.__name__
    anchor._node, anchor._requires_grad = node, True
    differentiable = [i for i, (o, r) in enumerate(zip(outputs, raw)) if isinstance(o, Tensor)
                      and o.dtype.is_floating_point and id(r) not in ctx._non_differentiable]
    for i in differentiable:
        out = outputs[i]
        out._requires_grad = True
        out._node = _FunctionNode(_SELECT, (anchor,), {"index": i, "count": len(outputs)}, out)
        out._node.cls_name = cls.__name__  # grad_fn shows as <ExpBackward>, as in PyTorch


def _float32():
    return dtypes.float32


def _function_vjp(grads, *inputs, out, ctx, cls, positions, n_args, outputs):
    """Run the user's backward once with every output's gradient; map its results
    (one per forward argument) onto the tensor inputs and check their shapes."""
    grad_outputs = []
    for i, o in enumerate(outputs):
        g = grads.grads.get(i)
        if g is None and ctx.materialize_grads and isinstance(o, Tensor):
            g = zeros_like(o)
        grad_outputs.append(g)
    result = cls.backward(ctx, *grad_outputs)
    result = result if isinstance(result, tuple) else (result,)
    if len(result) < n_args or any(g is not None for g in result[n_args:]):
        raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect number of gradients "
                           f"(expected {n_args}, got {len(result)}): one per argument of forward (after ctx), "
                           f"None for arguments without a gradient")
    grads_in = []
    for pos, t in zip(positions, inputs):
        g = result[pos]
        if g is not None:
            if not isinstance(g, Tensor):
                raise TypeError(f"function {cls.__name__}Backward returned a {type(g).__name__} as gradient "
                                f"{pos}; expected a Tensor or None")
            if not _expandable(tuple(t.shape), tuple(g.shape)):
                raise RuntimeError(f"function {cls.__name__}Backward returned an invalid gradient at index {pos}: "
                                   f"got shape {tuple(g.shape)} but expected shape compatible with "
                                   f"{tuple(t.shape)}")
        grads_in.append(g)
    return tuple(grads_in)


def _expandable(shape, grad_shape) -> bool:
    """``shape`` broadcasts to ``grad_shape`` (the engine then sums the gradient back)."""
    if len(shape) > len(grad_shape):
        return False
    return all(a == b or a == 1 for a, b in zip(reversed(shape), reversed(grad_shape)))


def once_differentiable(backward):
    """Decorator for a backward that is not differentiable itself (e.g. it uses numpy):
    it runs without recording, so its gradients have no history."""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with no_grad():
            return backward(ctx, *grads)
    return wrapper

