"""``webgrad.amp``: ``autocast`` and ``GradScaler`` with ``torch.amp``'s names and arguments.

- ``autocast(device_type, dtype)`` changes the computation as torch's does: inside the
  block, ops on torch's lower-precision list (matmul, linear, conv, bmm, addmm, ...) run in
  ``dtype`` (float16 or bfloat16), ops on its float32 list (softmax and log_softmax on the
  GPU, losses, norms, exp/log, ...) run in float32, and outputs carry torch's dtypes. "cpu"
  follows torch's CPU lists (default bfloat16); "webgpu" follows torch's CUDA lists (default
  float16), so a CUDA script's dtypes hold here. The lists and rules: ``ops/autocasting.py``.
  Backward runs outside autocast, and gradients come back in each parameter's dtype.
- ``GradScaler`` on "cpu" / "webgpu" is PyTorch's loss scaler: ``scale(loss)``
  multiplies by the scale, ``step`` unscales the gradients and skips the step when
  any is inf/NaN, ``update`` grows or backs off the scale. With ``enabled=False``, or
  for ``device="cuda"`` (which webgrad does not have; PyTorch also disables it with a
  warning when CUDA is absent), ``scale`` returns the loss, ``step`` calls
  ``optimizer.step()`` and ``update`` does nothing.

Example:
    >>> scaler = webgrad.amp.GradScaler("webgpu")
    >>> with webgrad.autocast("webgpu", dtype=webgrad.float16):
    ...     loss = loss_fn(model(x), y)      # model(x): float16; loss_fn: float32
    >>> scaler.scale(loss).backward()
    >>> scaler.step(optimizer)
    >>> scaler.update()
"""
from __future__ import annotations

import functools
import math
import warnings

from . import dtypes
from .autograd import no_grad
from .ops import autocasting
from .tensor import Tensor

__all__ = ["autocast", "GradScaler", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype"]

_DEVICE_TYPES = ("cpu", "webgpu", "cuda", "mps", "xpu")
_DEFAULT_DTYPE = {"cpu": "bfloat16", "webgpu": "float16", "cuda": "float16", "mps": "float16", "xpu": "bfloat16"}


def _check_device_type(function: str, device_type) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"{function}: expected device_type to be a str such as 'cpu' or 'cuda', got "
                        f"{type(device_type).__name__}")
    base = device_type.split(":")[0]
    if base not in _DEVICE_TYPES:
        raise RuntimeError(f"{function}: device_type {device_type!r} is not one of {list(_DEVICE_TYPES)}")
    return base


def is_autocast_available(device_type: str) -> bool:
    """True for the device types whose ops webgrad's autocast casts ("cpu" and "webgpu")."""
    return _check_device_type("is_autocast_available", device_type) in ("cpu", "webgpu")


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether an enclosing ``autocast`` block (for ``device_type``, or any) is enabled."""
    return any(entry["enabled"] and (device_type is None or entry["device_type"] == device_type)
               for entry in autocasting.stack())


def get_autocast_dtype(device_type: str):
    """The dtype the innermost enabled ``autocast`` for ``device_type`` asked for (its default otherwise)."""
    base = _check_device_type("get_autocast_dtype", device_type)
    for entry in reversed(autocasting.stack()):
        if entry["device_type"] == base:
            return entry["dtype"]
    return getattr(dtypes, _DEFAULT_DTYPE[base], dtypes.float32)


class autocast:  # noqa: N801  (PyTorch's name)
    """Mixed-precision region, as ``torch.autocast``: listed ops run in ``dtype`` or float32.

    Works as a context manager and as a decorator. ``dtype`` defaults to bfloat16 on
    cpu and float16 elsewhere, as PyTorch; float16/bfloat16 must be what was asked
    for (anything else raises, as PyTorch does on cpu). Without ``device_type`` it is
    ``torch.cuda.amp.autocast`` (``webgrad.cuda.amp`` is this module): "cuda", so disabled.
    ``enabled=False`` turns casting off inside an enclosing block.

    Example:
        >>> with webgrad.autocast(device_type="cpu"):
        ...     out = model(x)    # nn.Linear: computed and returned in bfloat16
        >>> out.dtype
        webgrad.bfloat16
    """

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        self.device_type = _check_device_type("autocast", device_type)
        if dtype is None:
            dtype = get_autocast_dtype(self.device_type) if is_autocast_enabled(self.device_type) else \
                getattr(dtypes, _DEFAULT_DTYPE[self.device_type], dtypes.float32)
        names = {getattr(dtypes, n, None) for n in ("float16", "bfloat16")} - {None}
        if enabled and dtype not in names and dtype is not dtypes.float32:
            raise RuntimeError(f"autocast: in autocast, but the target dtype is not supported: {dtype}; use "
                               f"webgrad.bfloat16 or webgrad.float16")
        if enabled and self.device_type == "cuda":
            warnings.warn("autocast: device_type 'cuda' was given, but webgrad has no CUDA; autocast is disabled "
                          "(as PyTorch does when CUDA is not available)", stacklevel=2)
            enabled = False
        self.fast_dtype, self._enabled, self._cache_enabled = dtype, bool(enabled), cache_enabled

    def __enter__(self):
        autocasting.push(self.device_type, self.fast_dtype, self._enabled)
        return self

    def __exit__(self, *exc_info) -> None:
        autocasting.pop()

    def __call__(self, func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)
        return wrapped


_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """Dynamic loss scaling, as ``torch.amp.GradScaler``: scale the loss, unscale grads, skip non-finite steps.

    Args:
        device: "cpu" or "webgpu" scale for real; "cuda" (the default, as in PyTorch)
            disables the scaler with a warning, as PyTorch does without CUDA.
        init_scale, growth_factor, backoff_factor, growth_interval: PyTorch's
            dynamic-scale schedule. enabled: False makes every method a pass-through.

    Example:
        >>> scaler = webgrad.amp.GradScaler("cpu")
        >>> scaler.scale(loss).backward()
        >>> scaler.unscale_(optimizer)          # optional: to clip the real gradients
        >>> nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        >>> scaler.step(optimizer)
        >>> scaler.update()
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        device = _check_device_type("GradScaler", str(device))
        if enabled and device == "cuda":
            warnings.warn("GradScaler: device 'cuda' was given, but webgrad has no CUDA; the scaler is disabled "
                          "(as PyTorch does when CUDA is not available)", stacklevel=2)
            enabled = False
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor should be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor should be in (0, 1), got {backoff_factor}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval should be a positive int, got {growth_interval!r}")
        self._device, self._enabled = device, bool(enabled)
        self._scale, self._growth_factor, self._backoff_factor = float(init_scale), growth_factor, backoff_factor
        self._growth_interval, self._growth_tracker = growth_interval, 0
        self._per_optimizer: dict[int, dict] = {}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def scale(self, outputs):
        """``outputs`` (a tensor, or lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: outputs must be a Tensor or a list/tuple of Tensors, got "
                        f"{type(outputs).__name__}")

    def _optimizer_state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": False})

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place (once per step) and note any inf/NaN."""
        if not self._enabled:
            return
        state = self._optimizer_state(optimizer)
        if state["stage"] is _UNSCALED:
            raise RuntimeError("GradScaler.unscale_() has already been called on this optimizer since the last "
                               "update()")
        if state["stage"] is _STEPPED:
            raise RuntimeError("GradScaler.unscale_() is being called after step(); call update() first")
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        inv_scale = 1.0 / self._scale
        with no_grad():
            for g in grads:
                g.mul_(inv_scale)
            # One readback for all gradients: a sum is inf/NaN exactly when some element is.
            total = float(sum(g.abs().sum() for g in grads).item()) if grads else 0.0
        state["found_inf"] = not math.isfinite(total)
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless done) and call ``optimizer.step()`` unless a gradient was inf/NaN; returns its result."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: closure use is not currently supported if GradScaler is enabled")
        state = self._optimizer_state(optimizer)
        if state["stage"] is _STEPPED:
            raise RuntimeError("GradScaler.step() has already been called since the last update()")
        if state["stage"] is _READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """Back off the scale after a skipped step, grow it after ``growth_interval`` good ones."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            found_inf = any(state["found_inf"] for state in self._per_optimizer.values())
            if found_inf:
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self) -> dict:
        """``{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}`` ({} if disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("GradScaler.load_state_dict: the state_dict is empty, probably saved from a "
                               "disabled GradScaler")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
