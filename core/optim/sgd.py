"""Stochastic gradient descent with momentum, Nesterov momentum and weight decay."""
from __future__ import annotations

from ..autograd import no_grad
from ..creation import zeros_like
from .updates import SGD_MOMENTUM_STEP, SGD_STEP, Updates
from .optimizer import Optimizer, check_real, evaluate_closure


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with (Nesterov) momentum and L2 weight decay.

    Per parameter, with ``g = grad + weight_decay * param``:
    ``buf = momentum * buf + (1 - dampening) * g`` (``buf = g`` on the first step),
    then ``param -= lr * (g + momentum * buf if nesterov else buf)``; exactly PyTorch's rule.

    Args:
        params: parameters (or dicts of parameter groups) to optimize.
        lr: learning rate. momentum: momentum factor. dampening: dampening for momentum.
        weight_decay: L2 penalty added to the gradient. nesterov: use Nesterov momentum.
        maximize: ascend the objective instead of descending.

    Example:
        >>> w = webgrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = webgrad.optim.SGD([w], lr=0.1, momentum=0.9)
        >>> (w * w).sum().backward()
        >>> opt.step()
        >>> w
        tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 *, maximize=False):
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize}
        self._check_options(defaults)
        super().__init__(params, defaults)

    def _check_options(self, group: dict) -> None:
        for option in ("lr", "momentum", "dampening", "weight_decay"):
            check_real(option, group[option])
        if group["lr"] < 0.0:
            raise ValueError(f"Invalid learning rate: {group['lr']}")
        if group["momentum"] < 0.0:
            raise ValueError(f"Invalid momentum value: {group['momentum']}")
        if group["weight_decay"] < 0.0:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    @no_grad()
    def step(self, closure=None):
        """One SGD update of every parameter that has a ``.grad``; returns ``closure()``'s loss."""
        loss = evaluate_closure(closure)
        with Updates() as updates:
            for group in self.param_groups:
                lr = float(group["lr"])
                momentum = float(group["momentum"])
                weight_decay = float(group["weight_decay"])
                maximize = bool(group["maximize"])
                if momentum == 0:
                    for p in group["params"]:
                        if p.grad is not None:
                            updates.add(SGD_STEP, p, p.grad, lr=lr, weight_decay=weight_decay, maximize=maximize)
                    continue
                dampening = float(group["dampening"])
                nesterov = bool(group["nesterov"])
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    momentum_buffer = state.get("momentum_buffer")
                    first_step = momentum_buffer is None
                    if first_step:
                        momentum_buffer = zeros_like(p)
                    updates.add(SGD_MOMENTUM_STEP, p, momentum_buffer, grad, lr=lr, momentum=momentum,
                                dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                                maximize=maximize, first_step=first_step)
                    state["momentum_buffer"] = momentum_buffer
        return loss
