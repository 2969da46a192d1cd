"""Pooled GPU buffers, keyed by size bucket, returned when the last tensor (or
view) using one dies. The byte counters are what ``webgrad.webgpu.memory_stats``
and the profiler report. A buffer may be as large as ``maxBufferSize``; the ones
larger than one storage binding are counted in ``large`` (kernels bind them in
windows, large.py)."""
from __future__ import annotations

import weakref

MIN_BYTES = 256


def bucket_size(nbytes: int) -> int:
    """Round up to 256 B below 64 KiB and to a power of two (or a 1/4 step of
    one) above, so reuse is likely and waste stays under 25%."""
    n = max(nbytes, MIN_BYTES)
    if n <= 65536:
        return -(-n // 256) * 256
    top = 1 << (n - 1).bit_length()
    step = top // 8
    return -(-n // step) * step


def _label(label) -> str:
    if isinstance(label, tuple):
        op, shape, kind = label
        return f"{op} {tuple(shape)} {kind}"
    return label


class BufferPool:
    def __init__(self, device, limits: dict) -> None:
        self.device = device
        self.limits = limits  # the backend's (tests lower the binding size to exercise windows)
        self.large: set[int] = set()  # ids of the in-use buffers larger than one binding
        self.free: dict[int, list] = {}
        self.in_use = 0
        self.pooled = 0
        self.peak = 0
        self.keeping: Keep | None = None  # while webgrad.compile records a step's dispatches

    def acquire(self, nbytes: int, label):
        """A buffer of at least ``nbytes``; ``label`` (a string, or (op, shape, kind),
        formatted only when needed) names it in errors and GPU debuggers."""
        binding, largest = self.limits["max_storage_buffer_binding_size"], self.limits["max_buffer_size"]
        size = bucket_size(nbytes) if nbytes > binding else min(bucket_size(nbytes), binding)
        if size > largest:
            size = nbytes + -nbytes % 4
            if size > largest:
                raise MemoryError(f"webgpu: {_label(label)} needs {nbytes} bytes, more than this adapter's "
                                  f"maxBufferSize ({largest} bytes); use smaller tensors or device='cpu'")
        keeping = self.keeping
        if keeping is not None and keeping.free.get(size):
            return keeping.free[size].pop()  # kept for the recorded step, still counted in use
        bucket = self.free.get(size)
        if bucket:
            buffer = bucket.pop()
            self.pooled -= size
        else:
            buffer = self.device.create_buffer(size, _label(label))
        self.in_use += size
        self.peak = max(self.peak, self.in_use)
        if size > binding:
            self.large.add(id(buffer))
        if keeping is not None:
            keeping.acquired[id(buffer)] = buffer
        return buffer

    def release(self, buffer) -> None:
        keeping = self.keeping
        if keeping is not None and id(buffer) in keeping.acquired:
            keeping.free.setdefault(buffer.size, []).append(buffer)  # the replays of the step own it
            return
        size = buffer.size
        self.large.discard(id(buffer))
        self.in_use -= size
        self.pooled += size
        self.free.setdefault(size, []).append(buffer)

    def clear(self) -> None:
        for bucket in self.free.values():
            for buffer in bucket:
                if hasattr(buffer, "destroy"):
                    buffer.destroy()
        self.free.clear()
        self.pooled = 0


class Storage:
    """One pooled buffer; views of a tensor share it. Returned to the pool when
    the last reference dies."""

    __slots__ = ("buffer", "nbytes", "__weakref__")

    def __init__(self, pool: BufferPool, nbytes: int, label):
        self.buffer = pool.acquire(nbytes, label)
        self.nbytes = nbytes
        weakref.finalize(self, pool.release, self.buffer)


class Keep:
    """What a pool hands out while a step's dispatches are recorded. A replay re-issues them
    on the same buffers, so a buffer released while recording is kept for the replays (still
    counted in use) instead of going back to the pool for others. Kept buffers are reused
    within the step (by size, as the pool does), so the step needs no more than it did."""

    def __init__(self):
        self.acquired: dict = {}  # id -> buffer, every buffer acquired while recording
        self.free: dict = {}      # size -> the kept buffers now unused

    def kept(self) -> list:
        return [buffer for bucket in self.free.values() for buffer in bucket]

    def give_back(self, pool: BufferPool) -> None:
        """The kept buffers back to ``pool`` (the replays that owned them are gone)."""
        kept, self.free = self.kept(), {}
        for buffer in kept:
            pool.release(buffer)
