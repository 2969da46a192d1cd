"""``Parameter``: a Tensor that a Module registers as learnable."""
from __future__ import annotations

from ..tensor import Tensor
from ..creation import zeros


class Parameter(Tensor):
    """A tensor that is a module's learnable weight; shares ``data``'s memory.

    Assigning a Parameter as a module attribute registers it, so it shows up in
    ``module.parameters()`` and ``module.state_dict()``.

    Example:
        >>> w = nn.Parameter(webgrad.zeros(3))
        >>> w.requires_grad
        True
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: expected a Tensor as data, got {type(data).__name__}; "
                            f"wrap it first, e.g. nn.Parameter(webgrad.tensor(values))")
        param = cls._make(data._data, data.shape, data.dtype, data.device)
        param._version_counter = data._version_counter  # same memory, same version
        if requires_grad:
            param.requires_grad = True  # raises for integer tensors, as in PyTorch
        return param

    def __init__(self, data=None, requires_grad=True):
        pass  # everything happens in __new__ (Tensor.__init__ refuses direct construction)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        copied = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = copied
        return copied

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach().clone(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)
