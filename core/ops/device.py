"""Moving a tensor between devices: differentiable, the gradient moves back."""
from __future__ import annotations

from .. import autograd
from ..backend import get_backend
from .registry import Op, allocate

# Not in the op registry: it runs no kernel on any backend, it moves data between them.
TO_DEVICE = Op("to_device", infer=lambda x, *, device: (x.shape, x.dtype),
               vjp=lambda g, x, *, out, device: to_device(g, x.device))


def to_device(x, device):
    from ..tensor import Tensor

    data = allocate(get_backend(device), "from_numpy", x._host(), x.dtype)
    out = Tensor._make(data, x.shape, x.dtype, device)
    if x.requires_grad and autograd.is_grad_enabled():
        autograd.record(TO_DEVICE, (x,), {"device": device}, out)
    return out
