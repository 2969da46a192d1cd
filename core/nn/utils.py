"""``webgrad.nn.utils``: gradient clipping and flattening parameters into one vector.

Example:
    >>> loss.backward()
    >>> nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
"""
from __future__ import annotations

from .. import ops
from ..autograd import no_grad
from ..tensor import Tensor
from ..creation import tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]


def _as_list(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale all gradients together so their combined norm is at most ``max_norm``; return that norm.

    Example:
        >>> total = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    """
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return tensor(0.0)
    norm_type = float(norm_type)
    with no_grad():
        if norm_type == float("inf"):
            norms = [g.abs().amax() for g in grads]
            total = norms[0] if len(norms) == 1 else ops.stack(norms).amax()
        else:
            norms = [ops.norm(g.type(grads[0].dtype), norm_type) for g in grads]
            total = ops.norm(ops.stack(norms), norm_type)
        if error_if_nonfinite:
            value = total.item()
            if value != value or value in (float("inf"), float("-inf")):
                raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} for gradients is "
                                   f"non-finite ({value}), so it cannot be clipped; pass "
                                   f"error_if_nonfinite=False to clip anyway")
        # Multiply by min(1, max_norm / norm) without reading the norm back to the host.
        coef = ops.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.type(g.dtype))
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to [-clip_value, clip_value] in place.

    Example:
        >>> nn.utils.clip_grad_value_(model.parameters(), 0.5)
    """
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-D tensor."""
    return ops.cat([p.reshape(-1) for p in _as_list(parameters)])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters``, in place."""
    if not isinstance(vec, Tensor) or vec.ndim != 1:
        raise TypeError(f"vector_to_parameters: expected a 1-D Tensor, got "
                        f"{tuple(vec.shape) if isinstance(vec, Tensor) else type(vec).__name__}")
    params = _as_list(parameters)
    total = sum(p.numel() for p in params)
    if vec.numel() != total:
        raise ValueError(f"vector_to_parameters: vector has {vec.numel()} elements, parameters need {total}")
    start = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[start:start + n].reshape(p.shape))
            start += n
