"""Random numbers drawn on the device (``random.wgsl``, Philox4x32-10).

Each call takes a fresh 32-bit key from ``webgrad.random.next_device_seed()``,
so ``webgrad.manual_seed(s)`` reproduces every draw on webgpu, and nothing is
uploaded from the host: dropout masks stay on the GPU. The
numbers differ from the cpu backend's (numpy's generator) for the same seed.
"""
from __future__ import annotations

import numpy as np

from ... import random as wg_random
from . import large
from .geometry import kind_of

FILE = "random.wgsl"


def _pack(n, seed, *, offset=0, low=0.0, scale=1.0, int_low=0, value_range=0, first_block=0) -> bytes:
    words = np.zeros(8, dtype=np.uint32)
    words[0:4] = (n, seed, offset, value_range)
    words[4:6] = np.array([low, scale], dtype=np.float32).view(np.uint32)
    words[6:7] = np.array([int_low], dtype=np.int32).view(np.uint32)
    words[7] = first_block
    return words.tobytes()


def _draw(backend, entry, shape, dtype, **params):
    out = backend.empty(shape, kind_of(dtype), entry)
    n = out.numel()
    if n == 0:
        return out
    if n >= 2**32:
        raise ValueError(f"{entry}: webgpu draws at most 2**32 - 1 numbers per call, got shape {tuple(shape)}")
    seed = wg_random.next_device_seed()
    # A buffer larger than one binding is drawn window by window. Element e is always from
    # block e // 4 of the whole draw; a window starts on 256 bytes (a whole block), and the
    # elements it holds before its part are rewritten with the values they already have.
    parts = large.split([out], large.binding_limit(backend)) if large.too_large(backend, [out]) else [[out]]
    for (part,) in parts:
        start = part.buffer.offset // 4 if large.is_window(part.buffer) else 0  # 4-byte kinds only
        count = part.offset + part.numel()
        backend.dispatch_1d(FILE, entry, (("O", out.kind),), None, {}, [part.buffer],
                            _pack(count, seed, first_block=start // 4, **params), -(-count // 4), f"{FILE}:{entry}")
    return out


def uniform(backend, shape, low, high, dtype):
    """Samples of U[low, high) (up to float32 rounding at ``high``)."""
    return _draw(backend, "rand", shape, dtype, low=float(low), scale=float(high) - float(low))


def normal(backend, shape, mean, std, dtype):
    """Samples of N(mean, std**2)."""
    return _draw(backend, "randn", shape, dtype, low=float(mean), scale=float(std))


def bernoulli(backend, shape, p, scale, dtype):
    """``scale`` with probability ``p``, else 0 (dropout's mask, one pass)."""
    return _draw(backend, "bernoulli", shape, dtype, low=float(p), scale=float(scale))


def randint(backend, shape, low, high, dtype):
    """Integers in [low, high); both must fit in int32 (the device's integers)."""
    low, high = int(low), int(high)
    if not -2**31 <= low < high <= 2**31:
        raise ValueError(f"randint: webgpu integers are 32-bit; low={low} and high={high} must fit in int32")
    return _draw(backend, "randint", shape, dtype, int_low=low, value_range=high - low)
