"""``webgrad.optim.lr_scheduler``: learning-rate schedules that set each parameter group's ``lr``
once per epoch, with the classes, arguments and lr sequences of ``torch.optim.lr_scheduler``
(including its recursive, chainable formulas). Call ``scheduler.step()`` after
``optimizer.step()``, once per epoch.
"""
from .schedulers import (  # noqa: F401
    CosineAnnealingLR, ExponentialLR, LambdaLR, LRScheduler, MultiStepLR, StepLR, _LRScheduler,
)
from .schedulers_more import (  # noqa: F401
    ChainedScheduler, ConstantLR, CosineAnnealingWarmRestarts, LinearLR, MultiplicativeLR, OneCycleLR,
    PolynomialLR, ReduceLROnPlateau, SequentialLR,
)

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
           "ChainedScheduler", "ConstantLR", "CosineAnnealingWarmRestarts", "LinearLR", "MultiplicativeLR",
           "OneCycleLR", "PolynomialLR", "ReduceLROnPlateau", "SequentialLR"]
