"""``webgrad.mps``: Apple's Metal backend, which webgrad does not have. Answers as
``torch.mps`` does on a machine without it; webgrad's GPU path is ``webgrad.accelerator``."""
from __future__ import annotations


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Accepted and ignored without MPS (seed with ``webgrad.manual_seed``)."""


def empty_cache() -> None:
    """Nothing to release without MPS."""


def synchronize() -> None:
    raise RuntimeError("webgrad.mps.synchronize: webgrad has no MPS backend; use webgrad.accelerator "
                       "(WebGPU) or 'cpu'")
