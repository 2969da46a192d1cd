"""The launcher of the fused optimizer steps: one dispatch per parameter that updates the
parameter and its state buffers in place. The update arithmetic is optim.wgsl's pure
function per op; optim_step.wgsl, a template, runs it over one parameter here and over
a group of them in optim_group.py, so both call the same function.

The op's inputs come "written first, gradient last" (core/optim/updates.py); the
kernel binds the gradient first (1) and the written buffers after it (2, 3, ...).
Every scalar is rounded to float32 here, from the same float64 expressions the
numpy kernels use (``1 - dampening``, ``-lr``, ...), so both backends see the
same constants. float16 and bfloat16 parameters, states and gradients are updated as
stored (``geometry.FLOATS``): loaded as f32, each result rounded once as it is written back,
the same bits as an update on widened copies without the copies.
"""
from __future__ import annotations

import functools
import struct

import numpy as np

from ...kernels import Program
from . import large
from .elementwise import WORKGROUP
from .geometry import ELEMENTS, FLOATS, PACKED
from .source import PACKING, fill, read

FILE = "optim.wgsl"  # the update functions
TEMPLATE = "optim_step.wgsl"  # the entry point over one or a group of parameters
MEMBER = "optim_member.wgsl"
MEMBER_BYTES = 32
MAXIMIZE, NESTEROV, FIRST_STEP, DAMPENED, DECOUPLED, LERP_FROM_END = 1, 2, 4, 8, 16, 32
FIELDS = ("weight_decay", "neg_lr", "momentum", "one_minus_dampening", "decay", "rate", "one_minus_rate",
          "lerp_weight", "lerp_complement", "bias_correction2_sqrt", "eps")


def _lerp(weight: float) -> dict:
    return {"lerp_weight": weight, "lerp_complement": 1 - weight}


def _scalars(op_name: str, attrs: dict) -> tuple[int, dict]:
    """(flags, float fields) of the ``Params`` uniform for one op call."""
    flags = MAXIMIZE if attrs["maximize"] else 0
    values = {"weight_decay": attrs["weight_decay"]}
    if op_name.startswith("sgd"):
        values["neg_lr"] = -attrs["lr"]
        if op_name == "sgd_momentum_step":
            values["momentum"] = attrs["momentum"]
            values["one_minus_dampening"] = 1 - attrs["dampening"]
            flags |= (NESTEROV if attrs["nesterov"] else 0) | (FIRST_STEP if attrs["first_step"] else 0)
            flags |= DAMPENED if attrs["dampening"] != 0 else 0
    elif op_name.startswith("adam"):
        beta1, beta2 = attrs["beta1"], attrs["beta2"]
        values.update(neg_lr=-attrs["step_size"], rate=beta2, one_minus_rate=1 - beta2,
                      bias_correction2_sqrt=attrs["bias_correction2_sqrt"], eps=attrs["eps"],
                      decay=1 - attrs["lr"] * attrs["weight_decay"], **_lerp(1 - beta1))
        flags |= (DECOUPLED if attrs["decoupled_weight_decay"] else 0)
        flags |= LERP_FROM_END if 1 - beta1 >= 0.5 else 0
    elif op_name.startswith("rmsprop"):
        alpha = attrs["alpha"]
        values.update(neg_lr=-attrs["lr"], momentum=attrs["momentum"], rate=alpha, one_minus_rate=1 - alpha,
                      eps=attrs["eps"], **_lerp(1 - alpha))
        flags |= LERP_FROM_END if 1 - alpha >= 0.5 else 0
    elif op_name == "adadelta_step":
        rho = attrs["rho"]
        values.update(neg_lr=-attrs["lr"], rate=rho, one_minus_rate=1 - rho, eps=attrs["eps"])
    else:
        raise NotImplementedError(f"{op_name}: optim.wgsl has no step for this op")
    return flags, values


def _params(flags: int, values: dict) -> bytes:
    """optim.wgsl's ``Params``: the flags, then the float fields from byte 32 (80 bytes)."""
    words = np.zeros(20, dtype=np.uint32)
    words[0] = flags
    floats = np.array([float(values.get(name, 0.0)) for name in FIELDS] + [0.0], dtype=np.float32)
    words[8:20] = floats.view(np.uint32)
    return words.tobytes()


def _members(rows) -> bytes:
    """optim_step.wgsl's ``Member`` per (n, grad offset, first thread, written buffers' offsets)."""
    words = np.zeros((len(rows), MEMBER_BYTES // 4), dtype=np.uint32)
    for row, (n, grad_offset, start, offsets) in zip(words, rows):
        row[0:3] = (n, grad_offset, start)
        row[4:4 + len(offsets)] = offsets
    return words.tobytes()


def _pack(n, flags, grad_offset, offsets, values) -> bytes:
    """The uniform of one parameter's update: ``Params`` and its one ``Member``."""
    return _params(flags, values) + _members([(n, grad_offset, 0, offsets)])


def repack(uniform: bytes, op_name: str, attrs: dict) -> bytes:
    """A recorded update's uniform (one parameter's or a group's: both start with ``Params``)
    with this call's flags and scalars (lr, bias corrections...); its members kept.
    A compiled step's replay re-issues its recorded updates so (backend/webgpu/replay.py)."""
    flags, values = _scalars(op_name, attrs)
    out = bytearray(uniform)
    try:  # struct, not numpy: several times faster per call in Pyodide
        struct.pack_into("<I", out, 0, flags)
        struct.pack_into("<12f", out, 32, *(float(values.get(name, 0.0)) for name in FIELDS), 0.0)
    except OverflowError:  # a scalar past float32's range: numpy rounds it to inf, as _params does
        fresh = _params(flags, values)
        out[0:4], out[32:80] = fresh[0:4], fresh[32:80]
    return bytes(out)


def is_update(program) -> bool:
    """Whether a dispatch of ``program`` is an optimizer update (a replay re-packs its uniform
    with each call's scalars, ``repack``)."""
    return isinstance(program, Program) and program.file == TEMPLATE


def optim_step(backend, op, record, arrays, attrs, shape, dtype):
    """In place: ``arrays`` is (param, *state buffers, grad). The op's update is the function
    of optim.wgsl named after it (``record.entry``)."""
    update(backend, op.name, arrays, attrs)


def update(backend, op_name, arrays, attrs):
    """One optimizer step ``op_name`` on (param, *state buffers, grad)."""
    *written, grad = arrays
    for name, a in zip(("param",) + ("state",) * (len(written) - 1) + ("grad",), arrays):
        if a.kind not in FLOATS:
            raise TypeError(f"{op_name}: webgpu optimizers update floating-point tensors, got a {a.kind} {name}")
    for name, a in zip(("param",) + ("state",) * (len(written) - 1), written):
        if not a.is_contiguous():
            raise ValueError(f"{op_name}: webgpu updates contiguous parameters and state in place; this "
                             f"{name} of shape {a.shape} is a strided view (use .contiguous() parameters)")
    if len({id(a.storage) for a in written}) != len(written):
        raise ValueError(f"{op_name}: the parameter and its state buffers must not share memory")
    if not grad.is_contiguous() or any(grad.storage is a.storage for a in written):
        grad = backend.contiguous(grad)  # a broadcast gradient, or one aliasing a written buffer
    member = (*written, grad)
    # A parameter larger than one binding is updated window by window, in step with its state.
    parts = large.split(member, large.binding_limit(backend)) if large.too_large(backend, member) else [member]
    for part in parts:
        run(backend, op_name, [tuple(part)], attrs, f"{FILE}:{op_name}")


def run(backend, op_name, members, attrs, label) -> None:
    """One dispatch of the update ``op_name`` over ``members``, each (param, *state buffers,
    grad), contiguous, of FLOATS, with no buffer bound twice: optim_step.wgsl."""
    rows, start = [], 0
    for *written, grad in members:
        n = written[0].numel()
        rows.append((n, grad.offset, start, [a.offset for a in written]))
        start += n
    if start == 0:
        return
    flags, values = _scalars(op_name, attrs)
    kinds = tuple(tuple(a.kind for a in (grad, *written)) for *written, grad in members)
    program = Program.of(TEMPLATE, "main", constants={"WG": WORKGROUP}, generated=(op_name, kinds))
    buffers = [a.buffer for *written, grad in members for a in (grad, *written)]
    grid = backend.grid(-(-start // WORKGROUP), label)
    backend.run_program(program, buffers, _params(flags, values) + _members(rows), grid, label,
                        source=step_source(op_name, kinds))


def _access(kind: str, buffer: str, value: str | None = None) -> tuple[str, str, str]:
    """(WGSL element type, load of element o as f32, store of the f32 ``value`` at o; None: the
    buffer is read only) for a buffer of ``kind``: f32 and f16 as they are; a packed 16-bit float
    from and into its half of a word (atomics where the buffer is written: the word's other half
    is another thread's)."""
    if kind not in PACKED:
        return ELEMENTS[kind].wgsl, f"f32({buffer}[o])", f"{buffer}[o] = {ELEMENTS[kind].wgsl}({value});"
    _, value_of, bits_of = PACKING[kind]
    shift = "((o & 1u) * 16u)"
    if value is None:
        return "u32", f"{value_of}({buffer}[o >> 1u] >> {shift})", ""
    word = f"&{buffer}[o >> 1u]"
    return ("atomic<u32>", f"{value_of}(atomicLoad({word}) >> {shift})",
            f"atomicAnd({word}, ~(0xffffu << {shift})); atomicOr({word}, {bits_of}({value}) << {shift});")


@functools.lru_cache(maxsize=64)
def step_source(op_name: str, kinds: tuple) -> str:
    """optim.wgsl's functions and optim_step.wgsl filled for one member per entry of ``kinds``,
    the element kinds of its gradient and written buffers (the gradient bound first, at
    1 + j * arity, then the written ones)."""
    members = []
    for j, (grad_kind, *written) in enumerate(kinds):
        arity = 1 + len(written)
        grad_type, grad_load, _ = _access(grad_kind, f"grad_{j}")
        rows = []
        for k, kind in enumerate(written):
            wgsl_type, load, store = _access(kind, f"w{k}_{j}", f"v[{k}]")
            rows.append({"k": k, "binding": 2 + j * arity + k, "type": wgsl_type, "load": load, "store": store})
        members.append(fill(MEMBER, rows, j=j, grad=1 + j * arity, update=op_name, grad_type=grad_type,
                            grad_load=grad_load))
    entry = fill(TEMPLATE, [{"k": j} for j in range(len(kinds))], count=len(kinds), members="\n".join(members))
    used = {kind for member in kinds for kind in member}
    prelude = (["enable f16;"] if "f16" in used else []) + ([read("math.wgsl")] if used & set(PACKED) else [])
    return "\n".join(prelude + [read(FILE), entry])
