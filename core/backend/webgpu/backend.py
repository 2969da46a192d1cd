"""The WebGPU backend: tensors live in pooled GPU buffers and every op runs as a
WGSL compute shader from ``wgsl_kernels/``. Data comes back to the host only
when asked (``.numpy()``, ``.item()``, printing).

Device dtypes: float32 (f32), int32 (i32), bool (u32 0/1). int64 tensors are
stored as i32 on the device (values must fit in 32 bits; checked on upload) and
read back as int64, so int64 indices from numpy just work; int8, uint8, int16, float16
and bfloat16 take their own width (packed in u32 words where WGSL has no such type:
geometry.KIND).
float64 cannot go to the device: convert with ``.float()`` first.
"""
from __future__ import annotations

import functools
import importlib
import math

import numpy as np

from ...dtypes import bfloat16_bits, bfloat16_values
from ...kernels import Program
from . import elementwise, large
from . import random as device_random
from .array import GPUArray
from .geometry import COMPUTE, ELEMENTS, HALVES, compute_kind, dtype_of, fold_grid, itemsize, kind_of, looped_grid
from .buffers import BufferPool, Storage
from .replay import Lowering
from ..scalars import ScalarCache
from .source import assemble

WORKGROUP = elementwise.WORKGROUP  # threads per workgroup of the 1-D launches


@functools.cache
def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def launcher_of(op, record):
    """The function(backend, op, record, arrays, attrs, shape, dtype) that runs ``record``:
    the one its ``launch`` import path names (see webgrad.kernels), imported on first use."""
    if record is None:
        raise NotImplementedError(f"{op.name}: no WebGPU kernel; move the tensors to 'cpu' with .cpu()")
    try:
        return _resolve(record.launch)
    except (ImportError, AttributeError) as err:
        raise NotImplementedError(f"{op.name}: its kernel record names the launcher {record.launch!r}, "
                                  f"which {__package__} does not have ({err})") from None


# Launchers that read and write the narrow kinds (geometry.COMPUTE: 2-byte floats, packed small
# ints) themselves, and which: the elementwise shaders load any of them as f32 or i32 and store
# them rounded or wrapped (so do cat, flip and unslice, made of copies); reductions read any
# (summing in f32 or i32); matmul (F.linear's too), conv2d, max pooling, softmax, cross entropy and layer norm read
# the 16-bit floats (HALVES) and write f16, or f32 rounded after into a packed kind; the optimizers
# update them in place; the quantized Linear multiplies int8 as stored; take and gather move any
# element's bits, index_add and scatter_add sum into any (index.wgsl); views only re-describe a
# buffer. Other kernels compute on copies in the wider kind (``_widened``).
_NARROW_AWARE = {"elementwise.run": tuple(COMPUTE), "views.run": tuple(COMPUTE), "movement.copy_into": tuple(COMPUTE),
                 "movement.unslice": tuple(COMPUTE), "movement.cat": tuple(COMPUTE), "movement.flip": tuple(COMPUTE),
                 "reduce.reduce": tuple(COMPUTE), "reduce.arg_reduce": tuple(COMPUTE), "matmul.matmul": HALVES,
                 "matmul.linear": HALVES, "softmax.softmax": HALVES, "softmax.cross_entropy": HALVES,
                 "layer_norm.layer_norm": HALVES, "layer_norm.layer_norm_backward": HALVES,
                 "conv.conv2d": HALVES, "pooling.max_pool2d": HALVES, "qlinear.quantized_linear": ("i8",),
                 "optim.optim_step": HALVES, "optim_group.optim_group": HALVES, "index.take": tuple(COMPUTE),
                 "index.gather": tuple(COMPUTE), "index.index_add": tuple(COMPUTE), "index.scatter_add": tuple(COMPUTE)}
# Launchers whose results hold only their inputs' values (or elementwise ones, which narrow
# each result as they write it): no narrowing pass after them.
_KEEPS_VALUES = frozenset(("elementwise.run", "views.run", "movement.cat", "movement.flip", "movement.unslice",
                           "index.gather", "index.take", "scan.argsort", "reduce.arg_reduce"))


def _widened(record, kinds) -> bool:
    """Whether ``record``'s launcher must run on wider copies: a narrow kind it does not handle."""
    aware = _NARROW_AWARE.get(record.launch, ())
    return any(kind in COMPUTE and kind not in aware for kind in kinds)


INDEX_OUT_OF_RANGE = 1  # bits of the error flag (index.wgsl, softmax.wgsl, binary.wgsl)
INTEGER_DIVISION_BY_ZERO = 2


class IndexErrors:
    """A one-word flag that kernels set when an index is out of range (bit 1) or an
    integer is divided by zero (bit 2). Checking it on the host at every op would
    stall the queue, so it is read with the next readback (only when such a kernel
    ran since the last check) and raised there as an IndexError (or RuntimeError,
    as PyTorch's ZeroDivisionError), like CUDA's device-side asserts."""

    def __init__(self, backend):
        self.backend = backend
        self.flag = None
        self.pending = []  # op names since the last check
        self.recording: list | None = None  # while webgrad.compile records a step: the op names

    def buffer_for(self, op_name):
        if self.flag is None:
            self.flag = self.backend.full((1,), 0, dtype_of("u32"))
        if self.recording is not None:
            self.recording.append(op_name)
        self.note((op_name,))
        return self.flag.buffer

    def note(self, op_names) -> None:
        """Kernels of ``op_names`` may set the flag (a replay re-issues them without buffer_for)."""
        self.pending += op_names
        del self.pending[:-8]

    def raise_if_set(self, raw) -> None:
        ops, self.pending = sorted(set(self.pending)), []
        bits = int(np.frombuffer(raw, dtype=np.uint32)[0])
        if not bits:
            return
        self.backend.fill(self.flag, 0)
        if bits & INDEX_OUT_OF_RANGE:
            raise IndexError(f"webgpu: an index was out of bounds in {', '.join(ops)} since the last read "
                             f"(those elements read as 0, writes with them were skipped); check the index tensors")
        raise RuntimeError(f"ZeroDivisionError: webgpu: integer division by zero in {', '.join(ops)} since the "
                           f"last read (those elements are 0); mask zero divisors first, or divide floats")

    def piece(self) -> list:
        """[(buffer, offset, size)] of the flag when a kernel since the last read may have set it,
        else []: read along with the data a read returns."""
        return [(self.flag.buffer, 0, itemsize(self.flag.kind))] if self.pending else []


class WebGPUBackend(Lowering):
    name = "wgsl"
    device_name = "webgpu"

    def __init__(self, device):
        self.device = device
        self.limits = dict(device.limits)  # tests lower these to exercise splitting paths
        self.pool = BufferPool(device, self.limits)
        self.index_errors = IndexErrors(self)
        self.scalars = ScalarCache(lambda value, dtype, device: self.from_numpy(np.array(value, dtype=dtype.np), dtype),
                                   limit=256)  # fill values

    # -- running ops ----------------------------------------------------------------
    def run(self, op, inputs, attrs, shape, dtype):
        record = op.impls.get("wgsl")
        arrays = [t._data for t in inputs]
        launcher = launcher_of(op, record)
        out_kind = kind_of(dtype)
        if _widened(record, [out_kind, *(a.kind for a in arrays)]):
            # a narrow kind in or out of a kernel that does not read it: widen the inputs, narrow the result
            wide = [elementwise.converted(self, a, compute_kind(a.kind)) for a in arrays]
            out = launcher(self, op, record, wide, attrs, shape,
                           dtype_of(compute_kind(out_kind)) if out_kind in COMPUTE else dtype)
            return elementwise.converted(self, out, out_kind) if out_kind in COMPUTE else out
        out = launcher(self, op, record, arrays, attrs, shape, dtype)
        if dtype.name in elementwise.NARROW and record.launch not in _KEEPS_VALUES \
                and not any(out.storage is a.storage for a in arrays):
            out = elementwise.narrowed(self, out, dtype)  # elementwise kernels narrow as they write
        return out

    def run_into(self, op, inputs, attrs, out) -> bool:
        return False  # one dispatch can't read and write a buffer: the result is copied in after

    def run_inplace(self, op, tensors, attrs):
        record = op.impls.get("wgsl")
        arrays = [t._data for t in tensors]
        launcher = launcher_of(op, record)
        if _widened(record, [a.kind for a in arrays]):  # the kernel runs on wider copies, written back
            wide = [elementwise.converted(self, a, compute_kind(a.kind)) for a in arrays]
            launcher(self, op, record, wide, attrs, None, None)
            for a, w in zip(arrays[:op.mutates], wide[:op.mutates]):
                if w is not a:
                    elementwise.copy_into(self, w, a)
            return
        launcher(self, op, record, arrays, attrs, None, None)
        for t in tensors[:op.mutates]:
            elementwise.narrow_in_place(self, t._data, t.dtype)  # e.g. an optimizer step on bfloat16 weights

    def empty(self, shape, kind, label) -> GPUArray:
        n = math.prod(shape)
        storage = Storage(self.pool, max(n, 1) * itemsize(kind), (label, shape, kind))
        return GPUArray(storage, shape, kind)

    def dispatch_1d(self, file, entry, types, expr, constants, buffers, params, threads, label):
        """Dispatch ``threads`` threads in workgroups of WORKGROUP, folding the grid
        into two dimensions when it exceeds the per-dimension limit."""
        groups = -(-threads // WORKGROUP)
        self.dispatch(file, entry, types, expr, dict(constants, WG=WORKGROUP), buffers, params,
                      self.grid(groups, label), label)

    def grid(self, groups, label, dims=2):
        """``groups`` workgroups folded under this adapter's per-dimension limit
        into ``dims`` dimensions (geometry.fold_grid); too many raise."""
        return fold_grid(groups, self.limits["max_compute_workgroups_per_dimension"], label, dims)

    def looped_grid(self, groups):
        """The grid of a shader that loops over its workgroups (geometry.looped_grid)."""
        return looped_grid(groups, self.limits["max_compute_workgroups_per_dimension"])

    def dispatch(self, file, entry, types, expr, constants, buffers, params, grid, label):
        self.run_program(Program.of(file, entry, types, expr, constants), buffers, params, grid, label)

    def run_program(self, program: Program, buffers, params, grid, label, source=None):
        """Record one dispatch of ``program``. Its pipeline is compiled once and cached
        by the record itself (never a hand-built key). ``source``: the WGSL of a
        generated program; by default the program's file with its types and expression."""
        if self.pool.large:
            large.check_bindings(self, buffers, label)
        if source is None:
            source = assemble(program.file, program.types, program.expr)
        name = label if program.generated is not None else f"{program.file}:{program.entry}"
        pipeline = self.device.pipeline(program, source, program.entry, dict(program.constants), name)
        self.device.dispatch(pipeline, buffers, params, grid, label)

    # -- data in and out -----------------------------------------------------------
    def from_numpy(self, array: np.ndarray, dtype) -> GPUArray:
        kind = kind_of(dtype)
        host = np.ascontiguousarray(array).reshape(array.shape)  # keeps 0-d as 0-d
        if kind == "i32":
            if host.size and (host.max() > np.iinfo(np.int32).max or host.min() < np.iinfo(np.int32).min):
                raise OverflowError(f"webgpu: {dtype.name} values outside the 32-bit range cannot be "
                                    f"stored on the device (integers are 32-bit there)")
        if dtype.rounding is not None:  # a bfloat16 value from a scalar, not yet rounded
            host = dtype.rounding(host)
        host = bfloat16_bits(host) if kind == "bf16" else host.astype(ELEMENTS[kind].numpy)
        out = self.empty(host.shape, kind, "upload")
        if host.size:
            raw = host.tobytes()
            self.device.write_buffer(out.buffer, 0, raw + bytes(-len(raw) % 4))  # writes come in whole words
        return out

    def to_numpy(self, data: GPUArray) -> np.ndarray:
        pieces = self._pieces(data)
        return self._decoded(data, self.device.read_pieces(pieces) if pieces else [])

    async def to_numpy_async(self, data: GPUArray) -> np.ndarray:
        pieces = self._pieces(data)
        return self._decoded(data, await self.device.read_pieces_async(pieces) if pieces else [])

    def _pieces(self, data: GPUArray) -> list:
        """What reading ``data`` fetches: its bytes (none when empty), then the index-error flag
        where it may be set."""
        return ([] if data.numel() == 0 else [self._readable(data)]) + self.index_errors.piece()

    def _decoded(self, data: GPUArray, raws: list) -> np.ndarray:
        if self.index_errors.pending:
            self.index_errors.raise_if_set(raws.pop())
        return self._decode(data, raws[0] if raws else b"")

    def _readable(self, data):
        size = itemsize(data.kind)
        if not data.is_contiguous() or data.offset * size % 4:  # reads start on a whole word
            data = self.contiguous(data)
        return data.buffer, data.offset * size, -(-data.numel() * size // 4) * 4  # and take whole words

    @staticmethod
    def _decode(data, raw):
        host_dtype = ELEMENTS[data.kind].numpy
        if data.numel() == 0:
            return np.zeros(data.shape, dtype=np.float32 if data.kind == "bf16" else host_dtype)
        host = np.frombuffer(raw, dtype=host_dtype)[:data.numel()]
        if data.kind == "bf16":
            return bfloat16_values(host).reshape(data.shape)  # float32 holding the values, as on the cpu
        return host.reshape(data.shape).copy()

    def is_contiguous(self, data: GPUArray) -> bool:
        return data.is_contiguous()

    def shares_memory(self, a: GPUArray, b: GPUArray) -> bool:
        return a.storage is b.storage

    def contiguous(self, data: GPUArray) -> GPUArray:
        out = self.empty(data.shape, data.kind, "contiguous")
        elementwise.copy_into(self, data, out)
        return out

    def full(self, shape, value, dtype) -> GPUArray:
        out = self.empty(shape, kind_of(dtype), "full")
        if out.numel():
            self.fill(out, value)
        return elementwise.narrowed(self, out, dtype)

    def fill(self, out: GPUArray, value) -> None:
        """Write ``value`` into every element of the (possibly strided) view ``out``."""
        scalar = self.scalars.get(value, dtype_of(out.kind))
        elementwise.copy_into(self, scalar.view(out.shape, (0,) * len(out.shape)), out)

    def arange(self, start, step, count, dtype):
        return self.from_numpy((start + step * np.arange(count)).astype(dtype.np), dtype)

    def uniform(self, shape, low, high, dtype):
        """Drawn on the device (random.wgsl, Philox keyed by webgrad.random.next_device_seed())."""
        return self._drawn(device_random.uniform, shape, low, high, dtype)

    def normal(self, shape, mean, std, dtype):
        return self._drawn(device_random.normal, shape, mean, std, dtype)

    def bernoulli(self, shape, p, scale, dtype):
        return self._drawn(device_random.bernoulli, shape, p, scale, dtype)

    def _drawn(self, draw, shape, a, b, dtype):
        """Samples drawn in f32 (random.wgsl), stored as ``dtype``."""
        kind = kind_of(dtype)
        if kind in COMPUTE:
            return elementwise.converted(self, draw(self, shape, a, b, dtype_of(compute_kind(kind))), kind)
        return elementwise.narrowed(self, draw(self, shape, a, b, dtype), dtype)

    def randint(self, shape, low, high, dtype):
        return self._drawn(device_random.randint, shape, low, high, dtype)

    def synchronize(self) -> None:
        self.device.submit()

    def memory_stats(self) -> dict:
        return {"bytes_in_use": self.pool.in_use, "bytes_pooled": self.pool.pooled, "peak_bytes": self.pool.peak}
