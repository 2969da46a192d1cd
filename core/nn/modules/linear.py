"""Identity, Linear, Bilinear, LazyLinear, Flatten and Unflatten."""
from __future__ import annotations

import math

from ... import creation, ops
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


class Identity(Module):
    """Return the input unchanged (any constructor arguments are ignored).

    Example:
        >>> nn.Identity()(webgrad.ones(2)).shape
        webgrad.Size([2])
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x Aᵀ + b with weight A of shape (out_features, in_features).

    Initialised like PyTorch: weight kaiming_uniform_(a=sqrt(5)), bias U(-1/sqrt(in), 1/sqrt(in)).

    Example:
        >>> nn.Linear(64, 128)
        Linear(in_features=64, out_features=128, bias=True)
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(creation.empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(creation.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """y = x1ᵀ A x2 + b with weight A of shape (out_features, in1_features, in2_features).

    Initialised like PyTorch: weight and bias U(-1/sqrt(in1), 1/sqrt(in1)).

    Example:
        >>> nn.Bilinear(3, 4, 5)(webgrad.ones(2, 3), webgrad.ones(2, 4)).shape
        webgrad.Size([2, 5])
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(creation.empty(out_features, in1_features, in2_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(creation.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class LazyLinear(Linear):
    """A Linear whose ``in_features`` is read from the first input; it then becomes a plain ``Linear``.

    Until that first call the weight is an empty (out_features, 0) placeholder, so an
    optimizer should be built after one forward pass (PyTorch advises the same).

    Example:
        >>> layer = nn.LazyLinear(4)
        >>> layer(webgrad.ones(2, 3)).shape, layer
        (webgrad.Size([2, 4]), Linear(in_features=3, out_features=4, bias=True))
    """

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, out_features, bias, device, dtype)

    def reset_parameters(self) -> None:
        if self.in_features:
            super().reset_parameters()

    def forward(self, input):
        if input.ndim == 0:
            raise ValueError("LazyLinear: the input needs a last dimension to infer in_features from")
        self.in_features = input.shape[-1]
        weight = self.weight
        self.weight = Parameter(creation.empty(self.out_features, self.in_features, dtype=weight.dtype,
                                               device=weight.device), requires_grad=weight.requires_grad)
        if self.bias is not None:
            self.bias = Parameter(creation.empty(self.out_features, dtype=self.bias.dtype, device=self.bias.device),
                                  requires_grad=self.bias.requires_grad)
        self.__class__ = Linear  # as PyTorch's cls_to_become: from now on an ordinary Linear
        self.reset_parameters()
        return self.forward(input)


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear; the name only mirrors PyTorch's ``MultiheadAttention.out_proj``."""


class Flatten(Module):
    """Flatten dims ``start_dim`` .. ``end_dim`` into one (by default all but the batch dim).

    Example:
        >>> nn.Flatten()(webgrad.ones(2, 3, 4)).shape
        webgrad.Size([2, 12])
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return ops.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size``.

    Example:
        >>> nn.Unflatten(1, (3, 4))(webgrad.ones(2, 12)).shape
        webgrad.Size([2, 3, 4])
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        return ops.unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
