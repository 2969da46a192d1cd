"""L-BFGS: a quasi-Newton optimizer that calls a closure several times per ``step``, as ``torch.optim.LBFGS``.

The parameters are handled as one flat vector; the two-loop recursion over the
last ``history_size`` (s, y) pairs gives the direction. Dot products are read
back as host floats (they steer the loop). ``line_search_fn="strong_wolfe"`` is
not implemented: a fixed step ``lr`` is taken, as PyTorch does without one.
"""
from __future__ import annotations

from .. import ops
from ..autograd import enable_grad, no_grad
from ..creation import zeros
from .optimizer import Optimizer, check_real

__all__ = ["LBFGS"]


def _dot(a, b) -> float:
    return float((a * b).sum().item())


class LBFGS(Optimizer):
    """Limited-memory BFGS over all parameters of its single group; ``step(closure)`` needs the closure.

    Args:
        lr: step length. max_iter: iterations per ``step``. max_eval: closure calls
        per ``step`` (default max_iter * 5 / 4). tolerance_grad / tolerance_change:
        stop when the gradient or the change in loss/parameters is this small.
        history_size: how many update pairs to remember.

    Example:
        >>> opt = webgrad.optim.LBFGS(model.parameters(), lr=1, max_iter=20)
        >>> def closure():
        ...     opt.zero_grad()
        ...     loss = loss_fn(model(x), y)
        ...     loss.backward()
        ...     return loss
        >>> opt.step(closure)
    """

    def __init__(self, params, lr=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn is not None:
            raise NotImplementedError(f"LBFGS: line_search_fn={line_search_fn!r} is not implemented in webgrad; "
                                      f"use line_search_fn=None (a fixed step of size lr)")
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval, "tolerance_grad": tolerance_grad,
                    "tolerance_change": tolerance_change, "history_size": history_size,
                    "line_search_fn": line_search_fn}
        self._check_options(defaults)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups); pass one list")
        self._params = self.param_groups[0]["params"]

    def _check_options(self, group: dict) -> None:
        for option in ("lr", "tolerance_grad", "tolerance_change"):
            check_real(option, group[option])
        if group["lr"] <= 0:
            raise ValueError(f"LBFGS: invalid learning rate: {group['lr']}")

    def load_state_dict(self, state_dict: dict) -> None:
        """As the base class, keeping the flat (all-parameter) history vectors LBFGS stores under parameter 0."""
        flat_keys = ("d", "old_dirs", "old_stps", "prev_flat_grad")
        saved = state_dict.get("state", {}) if isinstance(state_dict, dict) else {}
        first = next((k for k in saved if k in (0, "0")), None)
        flat = {k: v for k, v in (saved[first] if first is not None else {}).items() if k in flat_keys}
        if first is not None:
            stripped = dict(saved)
            stripped[first] = {k: v for k, v in saved[first].items() if k not in flat_keys}
            state_dict = {**state_dict, "state": stripped}
        super().load_state_dict(state_dict)
        p = self._params[0]

        def copy(t):
            return None if t is None else t.detach().to(device=p.device, dtype=p.dtype).clone()
        for key, value in flat.items():
            self.state[p][key] = [copy(t) for t in value] if isinstance(value, (list, tuple)) else copy(value)

    def _flat_grad(self):
        return ops.cat([(p.grad if p.grad is not None else zeros(*p.shape, dtype=p.dtype, device=p.device))
                        .reshape(-1) for p in self._params])

    def _add_to_params(self, step_size, direction):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].reshape(p.shape) * step_size)
            offset += n

    @no_grad()
    def step(self, closure=None):
        """Run up to ``max_iter`` L-BFGS iterations; returns the loss of the first closure call."""
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that zeroes the gradients, computes the loss, calls "
                               "backward() and returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(flat_grad.abs().amax().item()) <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs", []), state.get("old_stps", []), state.get("ro", [])
        h_diag = state.get("H_diag", 1.0)
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:  # keep the pair only where the curvature condition holds
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / _dot(y, y)
                alphas = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    alphas[i] = _dot(old_stps[i], q) * ro[i]
                    q = q - old_dirs[i] * alphas[i]
                r = q * h_diag
                for i in range(len(old_dirs)):
                    beta = _dot(old_dirs[i], r) * ro[i]
                    r = r + old_stps[i] * (alphas[i] - beta)
                d = r
            prev_flat_grad = flat_grad.clone()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(flat_grad.abs().sum().item())) * lr
            else:
                t = lr
            if _dot(flat_grad, d) > -tolerance_change:  # not a descent direction
                break
            evals = 0
            self._add_to_params(t, d)
            opt_cond = False
            if n_iter != max_iter:
                with enable_grad():
                    loss = float(closure())
                flat_grad = self._flat_grad()
                opt_cond = float(flat_grad.abs().amax().item()) <= tolerance_grad
                evals = 1
            current_evals += evals
            state["func_evals"] += evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float((d * t).abs().amax().item()) <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
