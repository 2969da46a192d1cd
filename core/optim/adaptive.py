"""Adagrad, Adadelta, Adamax, NAdam and RAdam, with PyTorch's update rules, options and state names.

Adadelta is one fused kernel per parameter (updates.py), as SGD/Adam/RMSprop;
the others are composed from in-place Tensor ops under ``no_grad``: a few kernels
per parameter per step, on any backend. Scalars that depend on the step count (bias corrections) are
computed in float64 on the host and passed in as numbers.
"""
from __future__ import annotations

import math

from ..autograd import no_grad
from ..creation import full_like, zeros_like
from .. import ops
from .optimizer import Optimizer, check_real, evaluate_closure
from .updates import ADADELTA_STEP, Updates

__all__ = ["Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"]


def _check(group: dict, name: str, *, betas=False, extra=()) -> None:
    for option in ("lr", "eps", "weight_decay", *extra):
        check_real(option, group[option])
        if group[option] < 0.0:
            raise ValueError(f"{name}: invalid {option} value: {group[option]} (must be >= 0)")
    if betas:
        b = group["betas"]
        if not isinstance(b, (tuple, list)) or len(b) != 2:
            raise TypeError(f"{name}: betas must be a pair of floats like (0.9, 0.999), got {b!r}")
        for i in (0, 1):
            check_real(f"betas[{i}]", b[i])
            if not 0.0 <= b[i] < 1.0:
                raise ValueError(f"{name}: invalid beta parameter at index {i}: {b[i]}")


def _gradient(p, group, *, decoupled=False):
    """The gradient the update uses: negated with ``maximize``, plus L2 weight decay unless it is decoupled."""
    grad = -p.grad if group.get("maximize") else p.grad
    weight_decay = float(group["weight_decay"])
    if weight_decay and not decoupled:
        grad = grad + weight_decay * p
    return grad


def _params_with_grad(optimizer):
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                yield group, p, optimizer.state[p]


class Adagrad(Optimizer):
    """Adagrad: each element's step shrinks with the sum of its squared gradients.

    ``sum += g * g``; ``param -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)``.

    Example:
        >>> opt = webgrad.optim.Adagrad(model.parameters(), lr=0.01)
    """

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value, "maximize": maximize}
        _check(defaults, "Adagrad", extra=("lr_decay", "initial_accumulator_value"))
        super().__init__(params, defaults)
        for group in self.param_groups:  # PyTorch makes the accumulators up front
            for p in group["params"]:
                self.state[p].update(step=0, sum=full_like(p, float(group["initial_accumulator_value"])))

    def _check_options(self, group: dict) -> None:
        _check(group, "Adagrad", extra=("lr_decay", "initial_accumulator_value"))

    def _required_state(self, group: dict) -> tuple[str, ...]:
        return ("step", "sum")

    @no_grad()
    def step(self, closure=None):
        """One Adagrad update of every parameter that has a ``.grad``; returns ``closure()``'s loss."""
        loss = evaluate_closure(closure)
        for group, p, state in _params_with_grad(self):
            grad = _gradient(p, group)
            state["step"] += 1
            clr = float(group["lr"]) / (1 + (state["step"] - 1) * float(group["lr_decay"]))
            state["sum"].add_(grad * grad)
            p.sub_(clr * grad / (ops.sqrt(state["sum"]) + float(group["eps"])))
        return loss


class Adadelta(Optimizer):
    """Adadelta: steps scaled by the ratio of running RMS of past updates to running RMS of gradients.

    Example:
        >>> opt = webgrad.optim.Adadelta(model.parameters(), lr=1.0, rho=0.9)
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay, "maximize": maximize}
        self._check_options(defaults)
        super().__init__(params, defaults)

    def _check_options(self, group: dict) -> None:
        _check(group, "Adadelta", extra=("rho",))
        if group["rho"] > 1.0:
            raise ValueError(f"Adadelta: invalid rho value: {group['rho']} (must be in [0, 1])")

    def _required_state(self, group: dict) -> tuple[str, ...]:
        return ("step", "square_avg", "acc_delta")

    @no_grad()
    def step(self, closure=None):
        """One Adadelta update of every parameter that has a ``.grad``; returns ``closure()``'s loss."""
        loss = evaluate_closure(closure)
        with Updates() as updates:
            for group, p, state in _params_with_grad(self):
                if not state:
                    state.update(step=0, square_avg=zeros_like(p), acc_delta=zeros_like(p))
                state["step"] += 1
                updates.add(ADADELTA_STEP, p, state["square_avg"], state["acc_delta"], p.grad,
                            lr=float(group["lr"]), rho=float(group["rho"]), eps=float(group["eps"]),
                            weight_decay=float(group["weight_decay"]), maximize=bool(group["maximize"]))
        return loss


class Adamax(Optimizer):
    """Adamax: Adam with the infinity norm, ``exp_inf = max(beta2 * exp_inf, |g| + eps)``.

    Example:
        >>> opt = webgrad.optim.Adamax(model.parameters(), lr=2e-3)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "maximize": maximize}
        self._check_options(defaults)
        super().__init__(params, defaults)

    def _check_options(self, group: dict) -> None:
        _check(group, "Adamax", betas=True)

    def _required_state(self, group: dict) -> tuple[str, ...]:
        return ("step", "exp_avg", "exp_inf")

    @no_grad()
    def step(self, closure=None):
        """One Adamax update of every parameter that has a ``.grad``; returns ``closure()``'s loss."""
        loss = evaluate_closure(closure)
        for group, p, state in _params_with_grad(self):
            if not state:
                state.update(step=0, exp_avg=zeros_like(p), exp_inf=zeros_like(p))
            grad = _gradient(p, group)
            beta1, beta2 = (float(b) for b in group["betas"])
            state["step"] += 1
            state["exp_avg"].mul_(beta1).add_(grad * (1 - beta1))
            state["exp_inf"].copy_(ops.maximum(state["exp_inf"] * beta2, ops.abs(grad) + float(group["eps"])))
            clr = float(group["lr"]) / (1 - beta1 ** state["step"])
            p.sub_(clr * state["exp_avg"] / state["exp_inf"])
        return loss


class NAdam(Optimizer):
    """Adam with Nesterov momentum and PyTorch's momentum-decay schedule (``momentum_decay``).

    Example:
        >>> opt = webgrad.optim.NAdam(model.parameters(), lr=2e-3)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay,
                    "maximize": maximize}
        self._check_options(defaults)
        super().__init__(params, defaults)

    def _check_options(self, group: dict) -> None:
        _check(group, "NAdam", betas=True, extra=("momentum_decay",))

    def _required_state(self, group: dict) -> tuple[str, ...]:
        return ("step", "mu_product", "exp_avg", "exp_avg_sq")

    @no_grad()
    def step(self, closure=None):
        """One NAdam update of every parameter that has a ``.grad``; returns ``closure()``'s loss."""
        loss = evaluate_closure(closure)
        for group, p, state in _params_with_grad(self):
            if not state:
                state.update(step=0, mu_product=1.0, exp_avg=zeros_like(p), exp_avg_sq=zeros_like(p))
            lr, eps = float(group["lr"]), float(group["eps"])
            beta1, beta2 = (float(b) for b in group["betas"])
            decoupled = bool(group["decoupled_weight_decay"])
            grad = _gradient(p, group, decoupled=decoupled)
            if decoupled and group["weight_decay"]:
                p.mul_(1 - lr * float(group["weight_decay"]))
            state["step"] += 1
            t, decay = state["step"], float(group["momentum_decay"])
            mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * decay))
            mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * decay))
            state["mu_product"] = mu_product = float(state["mu_product"]) * mu
            state["exp_avg"].mul_(beta1).add_(grad * (1 - beta1))
            state["exp_avg_sq"].mul_(beta2).add_(grad * grad * (1 - beta2))
            denom = ops.sqrt(state["exp_avg_sq"] / (1 - beta2 ** t)) + eps
            p.sub_(grad / denom * (lr * (1 - mu) / (1 - mu_product)))
            p.sub_(state["exp_avg"] / denom * (lr * mu_next / (1 - mu_product * mu_next)))
        return loss


class RAdam(Optimizer):
    """Rectified Adam: plain momentum SGD while the variance estimate is unreliable, then rectified Adam steps.

    Example:
        >>> opt = webgrad.optim.RAdam(model.parameters(), lr=1e-3)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize}
        self._check_options(defaults)
        super().__init__(params, defaults)

    def _check_options(self, group: dict) -> None:
        _check(group, "RAdam", betas=True)

    def _required_state(self, group: dict) -> tuple[str, ...]:
        return ("step", "exp_avg", "exp_avg_sq")

    @no_grad()
    def step(self, closure=None):
        """One RAdam update of every parameter that has a ``.grad``; returns ``closure()``'s loss."""
        loss = evaluate_closure(closure)
        for group, p, state in _params_with_grad(self):
            if not state:
                state.update(step=0, exp_avg=zeros_like(p), exp_avg_sq=zeros_like(p))
            lr, eps = float(group["lr"]), float(group["eps"])
            beta1, beta2 = (float(b) for b in group["betas"])
            decoupled = bool(group["decoupled_weight_decay"])
            grad = _gradient(p, group, decoupled=decoupled)
            if decoupled and group["weight_decay"]:
                p.mul_(1 - lr * float(group["weight_decay"]))
            state["step"] += 1
            t = state["step"]
            state["exp_avg"].mul_(beta1).add_(grad * (1 - beta1))
            state["exp_avg_sq"].mul_(beta2).add_(grad * grad * (1 - beta2))
            bias_correction1, bias_correction2 = 1 - beta1 ** t, 1 - beta2 ** t
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * t * beta2 ** t / bias_correction2
            if rho_t > 5.0:
                rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                adaptive = math.sqrt(bias_correction2) / (ops.sqrt(state["exp_avg_sq"]) + eps)
                p.sub_(state["exp_avg"] * adaptive * (lr * rect / bias_correction1))
            else:
                p.sub_(state["exp_avg"] * (lr / bias_correction1))
        return loss
