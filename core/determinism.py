"""``webgrad.use_deterministic_algorithms``: ask for bit-identical results run to run.

Every cpu op is deterministic, and so are WebGPU's kernels, except one: a large
scatter-add (the gradient of an embedding or of index_select with many repeated
indices) adds through atomics, whose order, and so whose last-bit rounding, varies.
With deterministic algorithms on, that path raises (or warns, with
``warn_only=True``), as PyTorch does for ops without a deterministic kernel.

Example:
    >>> webgrad.use_deterministic_algorithms(True)
"""
from __future__ import annotations

import warnings

_state = {"enabled": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Turn deterministic mode on or off (see the module doc for what it changes)."""
    _state["enabled"], _state["warn_only"] = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _state["enabled"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["warn_only"]


def alert_not_deterministic(what: str) -> None:
    """Called by a kernel path whose results can vary between runs."""
    if not _state["enabled"]:
        return
    message = (f"{what} does not have a deterministic implementation, but you set "
               f"webgrad.use_deterministic_algorithms(True); run it on 'cpu', or pass warn_only=True "
               f"to allow it with a warning")
    if _state["warn_only"]:
        warnings.warn(message, UserWarning, stacklevel=3)
    else:
        raise RuntimeError(message)
