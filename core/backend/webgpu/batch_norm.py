"""Launchers for batch_norm.wgsl: batch norm's statistics, its normalization and its backward.

Every operand is bound as a contiguous f32 array from offset 0 (other views and f16 values are
copied first; the backend widens half inputs). The two per-channel sums, ``stats`` and
``grad_sums``, run one workgroup per channel, each thread walking every WG-th of the channel's
N * S values (workgroups loop over channels past the grid); ``normalize`` and ``backward`` run
one thread per element.
"""
from __future__ import annotations

import math

import numpy as np

from . import reduce as gpu_reduce

FILE = "batch_norm.wgsl"
# Threads per channel in the sums (a power of two, capped by the device limit): on a GPU, and on a
# CPU adapter, where the ResNet block's batch norms (16 to 64K values a channel) took 4-12x longer
# with 256 threads on llvmpipe and SwiftShader, whose barriers are dear. A channel longer than
# CPU_WORKGROUP threads may walk within llvmpipe's loop limit gets more.
WORKGROUP = 256
CPU_WORKGROUP = 16


def _flat(backend, a):
    return a if a.is_contiguous() and not a.offset else backend.contiguous(a)


def _params(x, eps=0.0) -> bytes:
    n, c, s = x.shape[0], x.shape[1], math.prod(x.shape[2:])
    words = np.array([n, c, s, 0], dtype=np.uint32)
    words.view(np.float32)[3] = eps
    return words.tobytes()


def _per_channel(backend, record, arrays, eps, label):
    """(2, C) sums of ``record``'s entry over each channel of ``arrays[0]`` (x)."""
    x = arrays[0]
    channels, values = x.shape[1], x.shape[0] * math.prod(x.shape[2:])
    most = backend.limits["max_compute_invocations_per_workgroup"]
    workgroup = WORKGROUP
    if gpu_reduce.is_cpu_adapter(backend):
        # stats walks the channel twice; llvmpipe silently ends an invocation after ~65535 loop trips
        workgroup = max(CPU_WORKGROUP, 1 << (-(-2 * values // gpu_reduce.LOOP_TRIP_LIMIT) - 1).bit_length())
        if 2 * -(-values // min(workgroup, most)) > gpu_reduce.LOOP_TRIP_LIMIT:
            raise ValueError(f"{label}: {values} values per channel ({tuple(x.shape)}) are too many for this CPU "
                             f"adapter's loop limit; use a smaller batch or move the tensors to 'cpu'")
    workgroup = 1 << (min(workgroup, most).bit_length() - 1)
    out = backend.empty((2, channels), "f32", label)
    buffers = [x.buffer, out.buffer, *(a.buffer for a in arrays[1:])]
    backend.dispatch(FILE, record.entry, (), None, {"WG": workgroup}, buffers, _params(x, eps),
                     backend.looped_grid(channels), f"{FILE}:{record.entry} {tuple(x.shape)}")
    return out


def _elementwise(backend, record, arrays, eps, label):
    """``record``'s entry for each element of ``arrays[0]`` (x), into a new f32 array."""
    x = arrays[0]
    out = backend.empty(x.shape, "f32", label)
    buffers = [x.buffer, out.buffer, *(a.buffer for a in arrays[1:])]
    backend.dispatch_1d(FILE, record.entry, (), None, {}, buffers, _params(x, eps), math.prod(x.shape),
                        f"{FILE}:{record.entry} {tuple(x.shape)}")
    return out


def stats(backend, op, record, arrays, attrs, shape, dtype):
    return _per_channel(backend, record, [_flat(backend, arrays[0])], 0.0, "batch_norm_stats")


def grad_sums(backend, op, record, arrays, attrs, shape, dtype):
    g, x, stats_ = (_flat(backend, a) for a in arrays)
    return _per_channel(backend, record, [x, stats_, g], attrs["eps"], "batch_norm_grad_sums")


def normalize(backend, op, record, arrays, attrs, shape, dtype):
    x, stats_, w, b = (_flat(backend, a) for a in arrays)
    return _elementwise(backend, record, [x, stats_, w, b], attrs["eps"], "batch_norm")


def backward(backend, op, record, arrays, attrs, shape, dtype):
    g, x, stats_, w, sums = (_flat(backend, a) for a in arrays)
    return _elementwise(backend, record, [x, stats_, g, w, sums], attrs["eps"], "batch_norm_backward")
