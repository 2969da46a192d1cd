"""Channel-wise and alpha dropouts (re-exported by ``nn.functional``), with PyTorch's shape rules.

Masks are drawn from the global stream, so ``webgrad.manual_seed`` reproduces them. A
"feature" dropout draws one keep/drop per (batch, channel) and broadcasts it over
the remaining dims; the alpha dropouts keep SELU's mean and variance by setting
dropped units to SELU's negative saturation value and rescaling (PyTorch's a, b).
"""
from __future__ import annotations

import math
import warnings

from .. import creation
from .functional_activation import in_place

__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_SELU_SATURATION = 1.7580993408473766  # -SELU's limit at -inf: scale * alpha


def _check_p(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(input, p, feature):
    """A float mask of 1 (kept, probability 1 - p) and 0, per element or per (batch, channel)."""
    if feature:
        if input.ndim < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    else:
        shape = tuple(input.shape)
    return creation.scaled_bernoulli(shape, 1.0 - p, 1.0, input.dtype, input.device)


def _dropout(input, p, training, inplace, feature, alpha):
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return in_place("dropout", input, inplace, lambda x: x * 0.0)
    keep = _keep_mask(input, p, feature)
    if not alpha:
        return in_place("dropout", input, inplace, lambda x: x * (keep * (1.0 / (1.0 - p))))
    a = 1.0 / math.sqrt((_SELU_SATURATION ** 2 * p + 1) * (1 - p))
    shift = (keep - 1.0) * (_SELU_SATURATION * a) + _SELU_SATURATION * a * p
    return in_place("alpha_dropout", input, inplace, lambda x: x * (keep * a) + shift)


def _unbatched(input, fn):
    return fn(input.unsqueeze(0)).squeeze(0)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) input with probability ``p`` (scaling the rest by 1/(1-p)).

    Example:
        >>> F.dropout1d(webgrad.ones(2, 3, 4), 0.5)[0, :, 0]   # each channel all 2 or all 0
    """
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           f"dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, "
                           f"a channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.ndim == 2:
        return _unbatched(input, lambda x: _dropout(x, p, training, False, True, False)) if not inplace else \
            in_place("dropout1d", input, True,
                     lambda x: _unbatched(x, lambda y: _dropout(y, p, training, False, True, False)))
    return _dropout(input, p, training, inplace, True, False)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) input with probability ``p``.

    As PyTorch, other ranks warn and proceed: a 3-D input is read as (N, C, L), and
    one of other rank drops per (dim 0, dim 1) entry.

    Example:
        >>> F.dropout2d(webgrad.ones(8, 16, 5, 5), 0.25).shape
        webgrad.Size([8, 16, 5, 5])
    """
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will "
                      f"result in an error in a future release. To retain the behavior and silence this warning, "
                      f"please use dropout instead. Note that dropout2d exists to provide channel-wise dropout on "
                      f"inputs with 2 spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 3D or 4D inputs).", stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", stacklevel=2)
    return _dropout(input, p, training, inplace, True, False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability ``p``."""
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will "
                      f"result in an error in a future release. To retain the behavior and silence this warning, "
                      f"please use dropout instead. Note that dropout3d exists to provide channel-wise dropout on "
                      f"inputs with 3 spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 4D or 5D inputs).", stacklevel=2)
    if input.ndim == 4:
        if inplace:
            return in_place("dropout3d", input, True,
                            lambda x: _unbatched(x, lambda y: _dropout(y, p, training, False, True, False)))
        return _unbatched(input, lambda x: _dropout(x, p, training, False, True, False))
    return _dropout(input, p, training, inplace, True, False)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: keeps zero mean and unit variance (dropped units go to SELU's saturation).

    Example:
        >>> F.alpha_dropout(webgrad.randn(1000), 0.2, training=True).std()   # about 1
    """
    return _dropout(input, p, training, inplace, False, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels: one draw per (batch, channel)."""
    return _dropout(input, p, training, inplace, True, True)
