"""Adam and AdamW (decoupled weight decay), with optional AMSGrad."""
from __future__ import annotations

from ..autograd import no_grad
from ..creation import zeros_like
from .updates import ADAM_AMSGRAD_STEP, ADAM_STEP, Updates
from .optimizer import Optimizer, check_real, evaluate_closure


class Adam(Optimizer):
    """Adam: per-parameter step sizes from running averages of the gradient and its square.

    Per parameter: ``exp_avg = beta1 * exp_avg + (1 - beta1) * g``,
    ``exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g``, then
    ``param -= lr / (1 - beta1**t) * exp_avg / (sqrt(exp_avg_sq / (1 - beta2**t)) + eps)``,
    exactly as PyTorch computes it. ``weight_decay`` adds ``weight_decay * param`` to
    the gradient (L2); use ``AdamW`` for decoupled weight decay.

    Args:
        params: parameters (or dicts of parameter groups) to optimize.
        lr: learning rate. betas: decay rates of the two running averages.
        eps: added to the denominator for stability. weight_decay: L2 penalty.
        amsgrad: use the maximum of all ``exp_avg_sq`` so far (AMSGrad).
        maximize: ascend the objective. decoupled_weight_decay: behave as AdamW.

    Example:
        >>> w = webgrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = webgrad.optim.Adam([w], lr=0.1)
        >>> (w * w).sum().backward()
        >>> opt.step()
        >>> w
        tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 *, maximize=False, decoupled_weight_decay=False):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize,
                    "decoupled_weight_decay": decoupled_weight_decay}
        self._check_options(defaults)
        super().__init__(params, defaults)

    def _check_options(self, group: dict) -> None:
        for option in ("lr", "eps", "weight_decay"):
            check_real(option, group[option])
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"betas must be a pair of floats like (0.9, 0.999), got {betas!r}")
        check_real("betas[0]", betas[0])
        check_real("betas[1]", betas[1])
        if group["lr"] < 0.0:
            raise ValueError(f"Invalid learning rate: {group['lr']}")
        if group["eps"] < 0.0:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if group["weight_decay"] < 0.0:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")

    def _required_state(self, group: dict) -> tuple[str, ...]:
        names = ("step", "exp_avg", "exp_avg_sq")
        return names + ("max_exp_avg_sq",) if group["amsgrad"] else names

    @no_grad()
    def step(self, closure=None):
        """One Adam update of every parameter that has a ``.grad``; returns ``closure()``'s loss."""
        loss = evaluate_closure(closure)
        with Updates() as updates:
            for group in self.param_groups:
                lr = float(group["lr"])
                beta1, beta2 = (float(beta) for beta in group["betas"])
                amsgrad = bool(group["amsgrad"])
                attrs = {"lr": lr, "beta1": beta1, "beta2": beta2, "eps": float(group["eps"]),
                         "weight_decay": float(group["weight_decay"]),
                         "decoupled_weight_decay": bool(group["decoupled_weight_decay"]),
                         "maximize": bool(group["maximize"])}
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["exp_avg"] = zeros_like(p)
                        state["exp_avg_sq"] = zeros_like(p)
                    step = state["step"] + 1
                    # Bias corrections are computed here in float64 and passed as scalars:
                    # beta2**step in a float32 GPU kernel would lose most of its digits.
                    step_size = lr / (1 - beta1 ** step)
                    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
                    if amsgrad:
                        if "max_exp_avg_sq" not in state:
                            state["max_exp_avg_sq"] = zeros_like(p)
                        updates.add(ADAM_AMSGRAD_STEP, p, state["exp_avg"], state["exp_avg_sq"],
                                    state["max_exp_avg_sq"], grad, step_size=step_size,
                                    bias_correction2_sqrt=bias_correction2_sqrt, **attrs)
                    else:
                        updates.add(ADAM_STEP, p, state["exp_avg"], state["exp_avg_sq"], grad,
                                    step_size=step_size, bias_correction2_sqrt=bias_correction2_sqrt, **attrs)
                    state["step"] = step
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay: ``param *= 1 - lr * weight_decay`` before the Adam update.

    Same arguments as ``Adam``; ``weight_decay`` defaults to 1e-2 as in PyTorch.

    Example:
        >>> opt = webgrad.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)
