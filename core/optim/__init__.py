"""Optimizers and learning-rate schedules with PyTorch's names and update rules.

Each optimizer updates a parameter with one fused in-place kernel per step
(``webgrad.optim.kernels``), so a step costs one kernel call per parameter on
every backend.

Example:
    >>> import webgrad
    >>> w = webgrad.tensor([3.0, -1.0], requires_grad=True)
    >>> optimizer = webgrad.optim.Adam([w], lr=0.1)
    >>> for _ in range(200):
    ...     optimizer.zero_grad()
    ...     loss = (w * w).sum()
    ...     loss.backward()
    ...     optimizer.step()
    >>> loss.item() < 1e-3
    True
"""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
