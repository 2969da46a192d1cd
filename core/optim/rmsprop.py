"""RMSprop, optionally centered and with momentum."""
from __future__ import annotations

from ..autograd import no_grad
from ..creation import zeros_like
from .updates import (
    RMSPROP_CENTERED_MOMENTUM_STEP, RMSPROP_CENTERED_STEP, RMSPROP_MOMENTUM_STEP, RMSPROP_STEP, Updates,
)
from .optimizer import Optimizer, check_real, evaluate_closure

# (centered, momentum > 0) -> the fused op whose buffers those options need.
_OPS = {
    (False, False): RMSPROP_STEP,
    (True, False): RMSPROP_CENTERED_STEP,
    (False, True): RMSPROP_MOMENTUM_STEP,
    (True, True): RMSPROP_CENTERED_MOMENTUM_STEP,
}


class RMSprop(Optimizer):
    """RMSprop: divide the gradient by a running root mean square of recent gradients.

    Per parameter: ``square_avg = alpha * square_avg + (1 - alpha) * g * g``; centered
    subtracts the square of the running mean ``grad_avg``; then
    ``param -= lr * g / (sqrt(square_avg) + eps)``, through a momentum buffer when
    ``momentum > 0``. Exactly PyTorch's rule.

    Args:
        params: parameters (or dicts of parameter groups) to optimize.
        lr: learning rate. alpha: smoothing constant. eps: added to the denominator.
        weight_decay: L2 penalty. momentum: momentum factor.
        centered: normalize by an estimate of the gradient's variance.
        maximize: ascend the objective.

    Example:
        >>> w = webgrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = webgrad.optim.RMSprop([w], lr=0.01)
        >>> (w * w).sum().backward()
        >>> opt.step()
        >>> w
        tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, *, maximize=False):
        defaults = {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                    "momentum": momentum, "centered": centered, "maximize": maximize}
        self._check_options(defaults)
        super().__init__(params, defaults)

    def _check_options(self, group: dict) -> None:
        for option in ("lr", "alpha", "eps", "weight_decay", "momentum"):
            check_real(option, group[option])
        if group["lr"] < 0.0:
            raise ValueError(f"Invalid learning rate: {group['lr']}")
        if group["eps"] < 0.0:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        if group["momentum"] < 0.0:
            raise ValueError(f"Invalid momentum value: {group['momentum']}")
        if group["weight_decay"] < 0.0:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")
        if group["alpha"] < 0.0:
            raise ValueError(f"Invalid alpha value: {group['alpha']}")

    def _required_state(self, group: dict) -> tuple[str, ...]:
        names: tuple[str, ...] = ("step", "square_avg")
        if group["momentum"] > 0:
            names += ("momentum_buffer",)
        if group["centered"]:
            names += ("grad_avg",)
        return names

    @no_grad()
    def step(self, closure=None):
        """One RMSprop update of every parameter that has a ``.grad``; returns ``closure()``'s loss."""
        loss = evaluate_closure(closure)
        with Updates() as updates:
            for group in self.param_groups:
                momentum = float(group["momentum"])
                centered = bool(group["centered"])
                op = _OPS[(centered, momentum > 0)]
                attrs = {"lr": float(group["lr"]), "alpha": float(group["alpha"]), "eps": float(group["eps"]),
                         "weight_decay": float(group["weight_decay"]), "momentum": momentum,
                         "centered": centered, "maximize": bool(group["maximize"])}
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["square_avg"] = zeros_like(p)
                    buffers = [state["square_avg"]]
                    if centered:
                        if "grad_avg" not in state:
                            state["grad_avg"] = zeros_like(p)
                        buffers.append(state["grad_avg"])
                    if momentum > 0:
                        if "momentum_buffer" not in state:
                            state["momentum_buffer"] = zeros_like(p)
                        buffers.append(state["momentum_buffer"])
                    updates.add(op, p, *buffers, grad, **attrs)
                    state["step"] += 1
        return loss
