"""The launcher of the fused optimizer steps (``optim.wgsl``): one dispatch per
parameter that updates the parameter and its state buffers in place.

The op's inputs come "written first, gradient last" (core/optim/kernels.py); the
kernel binds the gradient first (1) and the written buffers after it (2, 3, ...).
Every scalar is rounded to float32 here, from the same float64 expressions the
numpy kernels use (``1 - dampening``, ``-lr``, ...), so both backends see the
same constants.
"""
from __future__ import annotations

import struct

import numpy as np


FILE = "optim.wgsl"
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
    else:
        raise NotImplementedError(f"{op_name}: optim.wgsl has no step for this op")
    return flags, values


def _pack(n, flags, grad_offset, offsets, values) -> bytes:
    words = np.zeros(20, dtype=np.uint32)
    words[0:3] = (n, flags, grad_offset)
    words[4:4 + len(offsets)] = offsets
    floats = np.array([float(values.get(name, 0.0)) for name in FIELDS] + [0.0], dtype=np.float32)
    words[8:20] = floats.view(np.uint32)
    return words.tobytes()


def repack(uniform: bytes, op_name: str, attrs: dict) -> bytes:
    """A recorded update's uniform (``update``'s or a group's: both start with ``Params``)
    with this call's flags and scalars (lr, bias corrections...); its sizes and offsets kept.
    A compiled step's replay re-issues its recorded updates so (graph/replay.py)."""
    flags, values = _scalars(op_name, attrs)
    out = bytearray(uniform)
    try:  # struct, not numpy: several times faster per call in Pyodide
        struct.pack_into("<I", out, 4, flags)
        struct.pack_into("<12f", out, 32, *(float(values.get(name, 0.0)) for name in FIELDS), 0.0)
    except OverflowError:  # a scalar past float32's range: numpy rounds it to inf, as _pack does
        fresh = _pack(0, flags, 0, [], values)
        out[4:8], out[32:80] = fresh[4:8], fresh[32:80]
    return bytes(out)


def optim_step(backend, op, record, arrays, attrs, shape, dtype):
    """In place: ``arrays`` is (param, *state buffers, grad)."""
    update(backend, op.name, record.entry, arrays, attrs)


def update(backend, op_name, entry, arrays, attrs):
    """One optimizer step ``op_name`` (entry point ``entry``) on (param, *state buffers, grad)."""
    *written, grad = arrays
    param = written[0]
    for name, a in zip(("param",) + ("state",) * len(written), written):
        if a.kind != "f32":
            raise TypeError(f"{op_name}: webgpu optimizers update float32 tensors, got a {a.kind} {name}")
        if not a.is_contiguous():
            raise ValueError(f"{op_name}: webgpu updates contiguous parameters and state in place; this "
                             f"{name} of shape {a.shape} is a strided view (use .contiguous() parameters)")
    if len({id(a.storage) for a in written}) != len(written):
        raise ValueError(f"{op_name}: the parameter and its state buffers must not share memory")
    if not grad.is_contiguous() or any(grad.storage is a.storage for a in written):
        grad = backend.contiguous(grad)  # a broadcast gradient, or one aliasing a written buffer
    n = param.numel()
    if n == 0:
        return
    flags, values = _scalars(op_name, attrs)
    params = _pack(n, flags, grad.offset, [a.offset for a in written], values)
    backend.dispatch_1d(FILE, entry, (), None, {}, [grad.buffer] + [a.buffer for a in written],
                        params, n, f"{FILE}:{op_name}")
