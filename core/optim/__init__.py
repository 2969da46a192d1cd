"""Optimizers and learning-rate schedules with PyTorch's names and update rules.

SGD, Adam, AdamW and RMSprop update a parameter with one fused in-place kernel
per step (``webgrad.optim.updates``); Adagrad, Adadelta, Adamax, NAdam, RAdam and
LBFGS are composed from Tensor ops, a few kernels per parameter, on every backend.

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
from .adaptive import Adadelta, Adagrad, Adamax, NAdam, RAdam
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "LBFGS",
           "lr_scheduler"]
