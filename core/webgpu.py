"""``webgrad.webgpu``: is the WebGPU device here, what is it, how much memory.

Example:
    >>> import webgrad
    >>> if webgrad.webgpu.is_available():
    ...     x = webgrad.ones(3, device="webgpu")
"""
from __future__ import annotations

import contextlib
from . import creation


def _backend():
    from .backend.webgpu import backend

    return backend()


def is_available() -> bool:
    """True when a WebGPU adapter and device can be created here."""
    try:
        _backend()
        return True
    except Exception:
        return False


def adapter_info() -> dict:
    """The adapter's description, e.g. ``{"device": "llvmpipe (LLVM 15...)", "adapter_type": "CPU", ...}``."""
    return dict(_backend().device.adapter_info)


def memory_stats() -> dict:
    """``bytes_in_use`` by live tensors, ``bytes_pooled`` for reuse, and ``peak_bytes``."""
    return _backend().memory_stats()


def synchronize() -> None:
    """Submit all recorded GPU work now."""
    _backend().synchronize()


def empty_cache() -> None:
    """Release pooled (unused) buffers back to the driver."""
    backend = _backend()
    backend.device.bind_groups.clear()  # they hold the buffers about to be destroyed
    backend.pool.clear()


def reset() -> None:
    """Forget the current device, e.g. after it was lost; the next webgpu op makes a new one.

    Tensors made on the old device cannot be used afterwards (move what you need to the
    cpu first). In the browser, restarting the runtime does the same and more."""
    from .backend.webgpu import reset as reset_backend

    reset_backend()
    creation.SCALARS.forget("webgpu")  # cached constants lived on the old device


@contextlib.contextmanager
def override_limits(**limits):
    """Pretend the adapter has smaller limits (tests use this to exercise the
    paths that split large dispatches), e.g.
    ``override_limits(max_compute_workgroups_per_dimension=1024)``."""
    backend = _backend()
    unknown = set(limits) - set(backend.limits)
    if unknown:
        raise KeyError(f"override_limits: unknown limits {sorted(unknown)}; known: {sorted(backend.limits)}")
    saved = dict(backend.limits)
    backend.pool_limits_saved = dict(backend.pool.device.limits)
    backend.limits.update(limits)
    backend.pool.device.limits.update({k: v for k, v in limits.items() if k in backend.pool.device.limits})
    try:
        yield backend.limits
    finally:
        backend.limits.clear()
        backend.limits.update(saved)
        backend.pool.device.limits.update(backend.pool_limits_saved)
