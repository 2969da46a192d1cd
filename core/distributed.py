"""``webgrad.distributed``: the part of ``torch.distributed`` a single-process script touches.

Scripts written for several processes import it at the top and ask before using it::

    import webgrad.distributed as dist
    if dist.is_available() and dist.is_initialized():
        ...

webgrad has no process groups yet, so both answers are False (a script then runs on one
process) and ``init_process_group`` says so.
"""
from __future__ import annotations


def is_available() -> bool:
    """False: webgrad has no distributed backend (no process groups)."""
    return False


def is_initialized() -> bool:
    """False: no process group can be made here."""
    return False


def is_torchelastic_launched() -> bool:
    return False


def get_rank(group=None) -> int:
    _require("get_rank")
    return 0


def get_world_size(group=None) -> int:
    _require("get_world_size")
    return 1


def init_process_group(*args, **kwargs) -> None:
    _require("init_process_group")


def _require(name: str) -> None:
    raise ValueError(f"webgrad.distributed.{name}: the default process group has not been initialized: "
                     f"webgrad has no distributed backend (is_available() is False); run the script as one process")
