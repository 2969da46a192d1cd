"""Sampling from weights: ``multinomial`` (``torch.multinomial``), built from ops."""
from __future__ import annotations

import numpy as np

from ..creation import rand, tensor
from ..random import numpy_generator_for
from ..tensor import Tensor
from .elementwise import log, where
from .registry import OpError
from .scan import cumsum
from .sorting import searchsorted, topk


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002  (torch's name)
    """Draw ``num_samples`` category indices from each row of non-negative weights ``input``
    (1-D or 2-D; rows need not sum to 1), as ``torch.multinomial``.

    With replacement: invert the cumulative weights at uniform draws (cumsum and
    searchsorted). Without: the exponential race, ``topk`` of log(u) / w, which draws
    a weighted sample without replacement in one pass (Efraimidis and Spirakis).
    Both run on the input's device; draws come from ``generator`` when given,
    else from the global state (``webgrad.manual_seed``).

    Example:
        >>> probs = webgrad.softmax(logits[:, -1, :], dim=-1)
        >>> next_token = webgrad.multinomial(probs, num_samples=1)
    """
    if not isinstance(input, Tensor) or input.ndim not in (1, 2) or not input.dtype.is_floating_point:
        shown = f"shape {tuple(input.shape)} {input.dtype.name}" if isinstance(input, Tensor) else type(input).__name__
        raise OpError(f"multinomial: expected a 1-D or 2-D float tensor of weights, got {shown}")
    weights = input.detach() if input.ndim == 2 else input.detach().unsqueeze(0)
    rows, n = weights.shape
    if not isinstance(num_samples, (int, np.integer)) or num_samples <= 0:
        raise OpError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    if not replacement and num_samples > n:
        raise OpError(f"multinomial: cannot draw {num_samples} samples without replacement from {n} "
                          f"categories; pass replacement=True or fewer samples")
    # One readback to refuse bad weights, as PyTorch does (a sample is usually read right after).
    bad = ((weights < 0) | (weights != weights) | (weights == float("inf"))).any(-1) | (weights.sum(-1) <= 0)
    if bool(bad.any()):
        raise OpError("multinomial: invalid weights: every row needs finite, non-negative weights with a "
                          "positive sum")
    shape = (rows, int(num_samples) if replacement else n)
    if generator is None:
        u = rand(*shape, dtype=weights.dtype, device=weights.device)
    else:
        u = tensor(numpy_generator_for(generator).random(shape), dtype=weights.dtype, device=weights.device)
    if replacement:
        cdf = cumsum(weights, -1)
        picked = searchsorted(cdf, u * cdf[:, -1:], right=True).clamp(max=n - 1)
    else:
        # The race's keys log(u) / w, ordered the same as log(w) - log(-log(u)), which stays
        # finite for tiny weights (a low sampling temperature) where the quotient overflows.
        # Zero weights get -inf keys: never chosen while any positive weight is left.
        positive = weights > 0
        keys = where(positive, log(where(positive, weights, 1.0)) - log(-log(u)), float("-inf"))
        picked = topk(keys, int(num_samples), dim=-1).indices
    return picked if input.ndim == 2 else picked.squeeze(0)
