"""``webgrad.cuda``: answers as ``torch.cuda`` does on a machine without CUDA.

webgrad has no CUDA backend (its GPU path is WebGPU: ``webgrad.accelerator``), so
``is_available()`` is False and ``device_count()`` is 0. Seeding and
``empty_cache`` are accepted and do nothing, as in PyTorch; calls that need a
CUDA device (``synchronize``, ``current_device``...) raise, as PyTorch does.

Example:
    >>> device = webgrad.device("cuda" if webgrad.cuda.is_available() else "cpu")
"""
from __future__ import annotations

_NO_CUDA = ("webgrad has no CUDA backend (webgrad.cuda.is_available() is False); "
            "use webgrad.accelerator.current_accelerator() (WebGPU) or 'cpu'")


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as PyTorch does without CUDA (seed with ``webgrad.manual_seed``)."""


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored, as PyTorch does without CUDA."""


def seed() -> None:
    """Accepted and ignored, as PyTorch does without CUDA."""


def seed_all() -> None:
    """Accepted and ignored, as PyTorch does without CUDA."""


def empty_cache() -> None:
    """Nothing to release without CUDA (PyTorch does nothing too)."""


def _unavailable(name):
    def call(*args, **kwargs):
        raise RuntimeError(f"webgrad.cuda.{name}: {_NO_CUDA}")
    call.__name__ = name
    call.__doc__ = f"Raises, as ``torch.cuda.{name}`` does without CUDA."
    return call


synchronize = _unavailable("synchronize")
current_device = _unavailable("current_device")
set_device = _unavailable("set_device")
get_device_name = _unavailable("get_device_name")
get_device_properties = _unavailable("get_device_properties")
memory_allocated = _unavailable("memory_allocated")
max_memory_allocated = _unavailable("max_memory_allocated")


def __getattr__(name):
    # torch.cuda.amp.autocast / GradScaler: the device-agnostic ones in webgrad.amp.
    if name == "amp":
        import importlib

        return importlib.import_module("webgrad.amp")
    raise AttributeError(f"module 'webgrad.cuda' has no attribute {name!r}")
