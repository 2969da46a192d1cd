"""``webgrad.autograd.functional``: whole Jacobians and Hessians of small functions,
as ``torch.autograd.functional``. Each row of a Jacobian is one backward pass
(reverse mode), so keep the outputs small.

Example:
    >>> jacobian(lambda x: x ** 2, webgrad.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
"""
from __future__ import annotations

from . import enable_grad, grad
from ..creation import zeros, zeros_like
from ..ops import stack
from ..tensor import Tensor


def _as_tuple(value, what):
    if isinstance(value, Tensor):
        return (value,), False
    if isinstance(value, (tuple, list)) and all(isinstance(v, Tensor) for v in value):
        return tuple(value), True
    raise TypeError(f"{what}: expected a Tensor or a tuple of Tensors, got {type(value).__name__}")


def _prepare(inputs, create_graph):
    """Inputs that require grad: the caller's own (keeping their history) with
    create_graph, else detached copies, so nothing leaks into the caller's graph."""
    prepared = []
    for t in inputs:
        if not t.dtype.is_floating_point:
            raise TypeError(f"jacobian: inputs must be floating point, got {t.dtype.name}; convert with .float()")
        if create_graph and t.requires_grad:
            prepared.append(t.view_as(t))
        else:
            prepared.append(t.detach().requires_grad_())
    return prepared


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """d func(inputs) / d inputs: for an output of shape ``O`` and an input of shape
    ``I``, a tensor of shape ``O + I``. Tuples of inputs or outputs give tuples
    (outputs outer, inputs inner), as in PyTorch.

    Args:
        func: a function of the input tensors returning a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors.
        create_graph: keep the graph so the Jacobian can be differentiated again.
        strict: raise if an output does not depend on an input (else that block is zeros).
    """
    if strategy != "reverse-mode":
        raise NotImplementedError(f"jacobian: strategy={strategy!r} is not supported; use 'reverse-mode'")
    inputs, inputs_tuple = _as_tuple(inputs, "jacobian")
    xs = _prepare(inputs, create_graph)
    with enable_grad():
        outputs, outputs_tuple = _as_tuple(func(*xs), "jacobian: func's result")
        blocks = []
        for k, out in enumerate(outputs):
            rows = [[] for _ in xs]
            flat = out.reshape(-1)
            for i in range(flat.shape[0]):
                gs = (None,) * len(xs)
                if flat.requires_grad:
                    gs = grad(flat[i], xs, retain_graph=True, create_graph=create_graph, allow_unused=True)
                for j, (g, x) in enumerate(zip(gs, xs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"jacobian: output {k} does not depend on input {j} "
                                               f"(strict=True); pass strict=False to get zeros")
                        g = zeros(x.shape, dtype=x.dtype, device=x.device)
                    rows[j].append(g if create_graph else g.detach())
            blocks.append(tuple(
                (stack(r) if r else zeros((0,) + tuple(x.shape), dtype=x.dtype, device=x.device)).reshape(
                    tuple(out.shape) + tuple(x.shape))
                for r, x in zip(rows, xs)))
    result = tuple(b if inputs_tuple else b[0] for b in blocks)
    return result if outputs_tuple else result[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """Second derivatives of a scalar function: shape ``I + I`` for one input; for a
    tuple of inputs a tuple of tuples (block ij is d2f / dx_i dx_j), as in PyTorch."""
    inputs_t, inputs_tuple = _as_tuple(inputs, "hessian")

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            shown = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise RuntimeError(f"hessian: func must return a single-element tensor, got {shown}")
        gs = grad(out.reshape(()), xs, create_graph=True, allow_unused=True)
        return tuple(zeros_like(x) if g is None else g for g, x in zip(gs, xs))

    result = jacobian(gradient, inputs_t, create_graph=create_graph, strict=strict)
    return result if inputs_tuple else result[0][0]


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``: the outputs and the vector-Jacobian product."""
    inputs_t, inputs_tuple = _as_tuple(inputs, "vjp")
    xs = _prepare(inputs_t, create_graph)
    with enable_grad():
        out = func(*xs)
        gs = grad(out, xs, grad_outputs=v, create_graph=create_graph, allow_unused=True)
    gs = tuple(zeros_like(x) if g is None else (g if create_graph else g.detach()) for g, x in zip(gs, xs))
    out = out if create_graph else out.detach()
    return out, (gs if inputs_tuple else gs[0])
