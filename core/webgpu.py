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


# torch.cuda's memory API. Bytes are the pool's: each tensor's buffer rounded up to its size
# bucket (buffers.bucket_size), as torch counts its allocator's blocks.
def memory_allocated(device=None) -> int:
    """Bytes held by live tensors (``torch.cuda.memory_allocated``)."""
    return int(_backend().pool.in_use)


def max_memory_allocated(device=None) -> int:
    """The most bytes live tensors held at once since the start or ``reset_peak_memory_stats()``."""
    return int(_backend().pool.peak)


def reset_peak_memory_stats(device=None) -> None:
    """Start ``max_memory_allocated`` over from what is held now."""
    pool = _backend().pool
    pool.peak = pool.in_use


def memory_reserved(device=None) -> int:
    """Bytes the device holds for webgrad: live tensors plus pooled buffers kept for reuse."""
    pool = _backend().pool
    return int(pool.in_use + pool.pooled)


def max_memory_reserved(device=None) -> int:
    """Not tracked separately: the peak of live tensors plus what is pooled now (an upper bound)."""
    pool = _backend().pool
    return int(max(pool.peak, pool.in_use) + pool.pooled)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A short table of the figures above, as ``torch.cuda.memory_summary`` prints."""
    rows = [("allocated", memory_allocated()), ("peak allocated", max_memory_allocated()),
            ("pooled for reuse", memory_reserved() - memory_allocated()), ("reserved", memory_reserved())]
    return "webgrad.webgpu memory\n" + "\n".join(f"  {name:<18}{value / 2 ** 20:12.2f} MiB" for name, value in rows)


def synchronize() -> None:
    """Wait until the GPU has finished all work recorded so far, as ``torch.cuda.synchronize``:
    submit it, then block (what timing a stretch of GPU work needs)."""
    _backend().device.wait()


def empty_cache() -> None:
    """Release pooled (unused) buffers back to the driver."""
    backend = _backend()
    backend.synchronize()  # recorded work may still read a pooled buffer: submit it before destroying any
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
    backend.limits.update(limits)  # the pool reads this same dict
    try:
        yield backend.limits
    finally:
        backend.limits.clear()
        backend.limits.update(saved)
