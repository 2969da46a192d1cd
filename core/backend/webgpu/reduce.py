"""Launchers for the reductions in reduce.wgsl: sum, prod, amax, amin, argmax, argmin.

The input stays a strided view (broadcast, permuted, sliced or flipped); the
shader walks it as (rows = kept dims) x (row = reduced dims) through index
maths on the shapes and strides packed into Params here; nothing is copied.
Neighbouring dims merge when their strides allow, so only views with more than
MAX_RANK unmergeable kept (or reduced) dims are refused.

How many threads share a row (LANES, a power of two) is chosen here from the
row length, the memory layout and the adapter; see ``choose_lanes``. A few
very long rows are first cut into pieces reduced in parallel (``choose_chunks``),
then the pieces' results are reduced in a second pass.

A fused reduction (``kernels.Reduction``, from graph.passes.reduce) runs the same
passes with generated hooks: its prologue chain in the first, its epilogue in the last.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...kernels import Program
from . import elementwise, geometry, large
from .fused import launch_fused, reduction_source
from .geometry import COMPUTE, KIND, MAX_RANK, coalesce_dims, compute_kind, kind_of

FILE = "reduce.wgsl"
WORKGROUP = 128          # threads per workgroup (capped by the device limit)
ITEMS_PER_LANE = 4       # aim for at least this many elements per thread before widening a row's team
WIDE_OUTPUTS = 128       # a reduction down columns with at least this many outputs runs one thread per row
MIN_CHUNK = 2048         # a long row is split into pieces no shorter than this ...
TARGET_PIECES = 256      # ... until there are about this many pieces in all (enough workgroups to fill a GPU)
# llvmpipe (Mesa's CPU driver) silently ends an invocation after about 65535 loop
# trips in all. The row walk takes 4 elements a trip, so a thread is given at most
# MAX_LANE_ELEMENTS elements (16384 trips); CPU adapters also check the total.
MAX_LANE_ELEMENTS = 65536
LOOP_TRIP_LIMIT = 60000


def split_dims(x, reduced):
    """(kept, reduced) lists of (size, stride) for the view ``x``, each coalesced."""
    kept = [(n, s) for d, (n, s) in enumerate(zip(x.shape, x.strides)) if d not in reduced]
    red = [(n, s) for d, (n, s) in enumerate(zip(x.shape, x.strides)) if d in reduced]
    return coalesce_dims(kept), coalesce_dims(red)


def choose_lanes(outer, inner, kept, red, workgroup, cpu_adapter=False):
    """Threads per row (a power of two, LANES in reduce.wgsl).

    On a CPU adapter (llvmpipe, SwiftShader) always 1: there a workgroup barrier
    costs far more than a thread summing its row alone (bench/reduce_webgpu.py
    --layouts: 4-6x slower with 128 lanes). On a GPU, 1 when rows are short or
    when neighbouring outputs are neighbours in memory and there are many of
    them (a reduction down columns: one thread per output reads coalesced and
    needs no barrier); otherwise the largest power of two <= inner /
    ITEMS_PER_LANE, up to one workgroup per row."""
    if cpu_adapter or inner <= ITEMS_PER_LANE:
        return 1
    columns = kept and abs(kept[-1][1]) == 1 and not (red and abs(red[-1][1]) == 1)
    if columns and outer >= WIDE_OUTPUTS:
        return 1
    lanes = 1
    while lanes * 2 <= min(workgroup, inner // ITEMS_PER_LANE):
        lanes *= 2
    return lanes


def is_cpu_adapter(backend) -> bool:
    """Whether ``backend`` runs on a software adapter (a module name, so tests can force it)."""
    return geometry.is_cpu_adapter(getattr(backend.device, "adapter_info", None) or {})


def choose_chunks(outer, inner, entry):
    """Pieces to split each row into. Few long rows would leave most of the
    device idle (one workgroup per row), so they are cut into pieces of at
    least MIN_CHUNK elements; any row is cut so that one thread can walk a
    piece alone (MAX_LANE_ELEMENTS). argmax/argmin are never split (the second
    pass would need the values too); they widen the team instead (``dispatch``)."""
    if entry in ("argmax", "argmin"):
        return 1
    chunks = 1
    if inner >= 2 * MIN_CHUNK and outer < TARGET_PIECES:
        chunks = min(inner // MIN_CHUNK, -(-TARGET_PIECES // outer))
    return max(chunks, -(-inner // MAX_LANE_ELEMENTS))


def pack_params(rows, inner, offset, groups, kept, red, chunks, chunk_len, extra_offsets=()) -> bytes:
    words = np.zeros(44, dtype=np.uint32)
    words[0:8] = (rows, inner, offset, groups, len(kept), len(red), chunks, chunk_len)
    words[40:40 + len(extra_offsets)] = extra_offsets
    signed = words.view(np.int32)
    for base, dims in ((8, kept), (24, red)):
        for k, (n, s) in enumerate(dims):
            words[base + k] = n
            signed[base + 8 + k] = s
    return words.tobytes()


@dataclass(frozen=True)
class Hooks:
    """The chains a fused reduction splices in (kernels.Reduction; None: as read or as
    stored) with their one-element input arrays, and the accumulator's kind."""
    prologue: Any = None
    prologue_inputs: tuple = ()
    epilogue: Any = None
    epilogue_inputs: tuple = ()
    accumulator: str | None = None

    def first_pass(self) -> "Hooks":
        return Hooks(self.prologue, self.prologue_inputs, accumulator=self.accumulator)

    def second_pass(self) -> "Hooks":
        return Hooks(epilogue=self.epilogue, epilogue_inputs=self.epilogue_inputs, accumulator=self.accumulator)


PLAIN = Hooks()


def run(backend, entry, x, reduced, out_shape, out_kind, hooks=PLAIN):
    """Reduce the view ``x`` over the dims in ``reduced`` into a new contiguous
    array of ``out_shape``."""
    out = backend.empty(out_shape, out_kind, entry)
    kept, red = split_dims(x, reduced)
    if len(kept) > MAX_RANK or len(red) > MAX_RANK:
        raise ValueError(f"{entry}: webgpu reductions handle at most {MAX_RANK} kept and {MAX_RANK} reduced dims "
                         f"that cannot be merged; got shape {tuple(x.shape)} reducing dims {tuple(sorted(reduced))}; "
                         f"reduce in two steps or move the tensor to 'cpu'")
    outer = math.prod([n for n, _ in kept])
    inner = math.prod([n for n, _ in red])
    if outer == 0:
        return out
    chunks = choose_chunks(outer, inner, entry)
    if chunks == 1:
        dispatch(backend, entry, x, out, kept, red, outer, inner, 1, inner, hooks)
        return out
    chunk_len = -(-inner // chunks)
    chunks = -(-inner // chunk_len)
    partial = backend.empty((outer, chunks), hooks.accumulator or compute_kind(x.kind), f"{entry} partial")
    dispatch(backend, entry, x, partial, kept, red, outer * chunks, inner, chunks, chunk_len, hooks.first_pass())
    kept, red = coalesce_dims([(outer, chunks)]), [(chunks, 1)]
    dispatch(backend, entry, partial, out, kept, red, outer, chunks, 1, chunks, hooks.second_pass())
    return out


def dispatch(backend, entry, x, out, kept, red, rows, inner, chunks, chunk_len, hooks=PLAIN):
    """One pass: ``rows`` outputs, each reducing ``chunk_len`` elements of a row."""
    workgroup = min(WORKGROUP, backend.limits["max_compute_invocations_per_workgroup"])
    cpu_adapter = is_cpu_adapter(backend)
    lanes = choose_lanes(rows, chunk_len, kept, red, workgroup, cpu_adapter)
    while lanes < workgroup and lanes * MAX_LANE_ELEMENTS < chunk_len:
        lanes *= 2  # long unsplit rows (argmax/argmin): more threads per row
    groups = -(-rows // (workgroup // lanes))
    launch = backend.looped_grid(groups)  # past limit * limit, reduce.wgsl loops over the rest
    if cpu_adapter:
        rounds = -(-groups // (launch[0] * launch[1]))
        trips = rounds * (-(-chunk_len // lanes) // 4 + 4 + lanes.bit_length())
        if trips > LOOP_TRIP_LIMIT:
            raise ValueError(f"{entry}: rows of {chunk_len} elements ({tuple(x.shape)}) are too long for "
                             f"this CPU adapter's loop limit; reduce in two steps or move the tensor to 'cpu'")
    accumulator = hooks.accumulator or compute_kind(x.kind)  # f16 sums in f32
    constants = {"WG": workgroup, "LANES": lanes, "IS_FLOAT": accumulator == "f32",
                 "KEEP_FLAT": len(kept) <= 1, "ROW_FLAT": len(red) <= 1,
                 "KEEP_RANK": len(kept), "RED_RANK": len(red)}
    label = f"{FILE}:{entry} {tuple(x.shape)}"
    if hooks is PLAIN:
        params = pack_params(rows, inner, x.offset, groups, kept, red, chunks, chunk_len)
        types = (("X", x.kind), ("T", accumulator), ("O", out.kind))
        backend.dispatch(FILE, entry, types, None, constants, [x.buffer, out.buffer], params, launch, label)
        return
    extras = (*hooks.prologue_inputs, *hooks.epilogue_inputs)
    types = (("X", x.kind), ("T", accumulator), ("O", out.kind), *((f"S{k}", e.kind) for k, e in enumerate(extras)))
    params = pack_params(rows, inner, x.offset, groups, kept, red, chunks, chunk_len, [e.offset for e in extras])
    program = Program.of(FILE, entry, types, None, constants, generated=(hooks.prologue, hooks.epilogue))
    backend.run_program(program, [x.buffer, out.buffer, *(e.buffer for e in extras)], params, launch,
                        f"fused {label}", source=reduction_source(hooks.prologue, hooks.epilogue, types))


def _check_kind(op, x, kinds):
    if x.kind not in kinds:
        raise TypeError(f"{op.name}: not supported on webgpu for element type {x.kind} "
                        f"(supported: {', '.join(kinds)})")


def reduce(backend, op, record, arrays, attrs, shape, dtype):
    """sum / prod / amax / amin over ``attrs["dims"]``; keepdim only changes the
    output's shape, not its (contiguous) layout."""
    (x,) = arrays
    _check_kind(op, x, ("f32", "i32", *COMPUTE) if op.name in ("sum", "prod") else ("f32", "i32", "u32", *COMPUTE))
    out_kind = kind_of(dtype)
    if out_kind in COMPUTE:  # a narrow kind is read as it is, summed in f32 or i32; the (smaller) result cast
        wide = reduce(backend, op, record, arrays, attrs, shape, geometry.dtype_of(compute_kind(out_kind)))
        return elementwise.converted(backend, wide, out_kind)
    if large.too_large(backend, [x]):
        return _in_windows(backend, record.entry, x, set(attrs["dims"]), shape, out_kind)
    return run(backend, record.entry, x, set(attrs["dims"]), shape, out_kind)


def _in_windows(backend, entry, x, reduced, shape, out_kind):
    """A view larger than one binding, reduced window by window along its widest dim. Kept,
    each window's result fills its slice of the output; reduced, the windows' results are
    reduced once more (sum, prod, amax and amin are associative)."""
    dim = large.widest_dim(x)
    windows = large.row_windows(x, large.binding_limit(backend), dim)
    if dim not in reduced:
        out = backend.empty(shape, out_kind, entry)
        at = dim if len(shape) == len(x.shape) else dim - sum(r < dim for r in reduced)  # keepdim or not
        for first, count, part in windows:
            part_shape = (*shape[:at], count, *shape[at + 1:])
            into = out.view(part_shape, out.strides, first * out.strides[at])
            elementwise.copy_into(backend, run(backend, entry, part, reduced, part_shape, out_kind), into)
        return out
    partials = [run(backend, entry, part, reduced, shape, out_kind) for _, _, part in windows]
    stacked = backend.empty((len(partials), *shape), out_kind, f"{entry} windows")
    size = partials[0].numel()
    for k, partial in enumerate(partials):
        elementwise.copy_into(backend, partial, stacked.view(partial.shape, partial.strides, k * size))
    return run(backend, entry, stacked, {0}, shape, out_kind)


def fused_reduction(backend, op, record, arrays, attrs, shape, dtype):
    """A reduction with chains spliced in (graph.passes.reduce): inputs are the reduced
    tensor, the prologue's one-element inputs, then the epilogue's."""
    x, extras = arrays[0], tuple(arrays[1:])
    split = 0 if record.prologue is None else record.prologue.inputs - 1
    if large.too_large(backend, [x]):
        return _fused_in_windows(backend, op, record, x, extras[:split], extras[split:], attrs, shape, dtype)
    accumulator = KIND[record.prologue.steps[-1][3]] if record.prologue is not None else x.kind
    hooks = Hooks(record.prologue, extras[:split], record.epilogue, extras[split:], accumulator)
    return run(backend, record.entry, x, set(attrs["dims"]), shape, kind_of(dtype), hooks)


def _fused_in_windows(backend, op, record, x, before, after, attrs, shape, dtype):
    """A fused reduction of a view larger than one binding: its chains as elementwise passes of
    their own (which split) around the reduction in windows."""
    if record.prologue is not None:
        kind = KIND[record.prologue.steps[-1][3]]
        x = launch_fused(backend, op, record.prologue, [x, *before], attrs, x.shape, geometry.dtype_of(kind))
    if record.epilogue is None:
        return _in_windows(backend, record.entry, x, set(attrs["dims"]), shape, kind_of(dtype))
    result = _in_windows(backend, record.entry, x, set(attrs["dims"]), shape, x.kind)
    return launch_fused(backend, op, record.epilogue, [result, *after], attrs, shape, dtype)


def arg_reduce(backend, op, record, arrays, attrs, shape, dtype):
    """argmax / argmin along ``attrs["dim"]``, or over the flattened tensor when None."""
    (x,) = arrays
    _check_kind(op, x, ("f32", "i32", "u32", *COMPUTE))
    dim = attrs["dim"]
    reduced = set(range(len(x.shape))) if dim is None else {dim}
    return run(backend, record.entry, x, reduced, shape, "i32")


def three_pass_loop_trips(inner, lanes, rounds):
    """Loop trips one thread takes in a three-pass row kernel (softmax, layer_norm):
    three passes of four elements a trip, and two tree combines."""
    per_lane = -(-inner // lanes)
    return rounds * (3 * (per_lane // 4 + 4) + 2 * lanes.bit_length())


def widen_for_long_rows(backend, op_name, shape, rows, inner, lanes, workgroup, cpu_adapter, loop_trips):
    """Double the threads per row while one thread's share of a row is too long
    (llvmpipe silently ends an invocation after ~65535 loop trips). Returns
    (lanes, workgroups, grid)."""
    while True:
        groups = -(-rows // (workgroup // lanes))
        launch = backend.looped_grid(groups)
        rounds = -(-groups // (launch[0] * launch[1]))
        too_long = -(-inner // lanes) > MAX_LANE_ELEMENTS or (
            cpu_adapter and loop_trips(inner, lanes, rounds) > LOOP_TRIP_LIMIT)
        if not too_long:
            return lanes, groups, launch
        if lanes >= workgroup:
            raise ValueError(f"{op_name}: rows of {inner} elements ({tuple(shape)}) are too long for this "
                             f"adapter's loop limit; move the tensor to 'cpu'")
        lanes *= 2
