"""Fused optimizer updates: one in-place primitive per parameter and step.

Each op reads a parameter's gradient and writes the parameter and its state
buffers in one kernel call, as PyTorch's fused optimizers and TF.js do. The
WebGPU backend runs the function of ``optim.wgsl`` named after each op.

Inputs are ordered "written first, gradient last": ``mutates`` counts the
written ones. A state buffer that an option turns off (SGD without momentum,
Adam without amsgrad, ...) is not allocated, so each combination is its own
small op with a fixed binding table (a GPU kernel needs one per entry point).
Every scalar (lr, betas, bias corrections, ...) is a plain Python number in the
attrs: it becomes a uniform on the GPU and never forces a readback.

The numpy kernels follow PyTorch's single-tensor code operation by operation,
so results match torch to rounding, and reuse one scratch array to avoid
temporaries.
"""
from __future__ import annotations

import numpy as np

from .. import autograd, dtypes
from ..backend import get_backend
from ..backend.numpy.blas import cpu_threads
from ..kernels import Grouped, Kernel
from ..ops import registry
from ..ops.registry import Op, OpError, apply_inplace, defop

__all__ = [
    "SGD_STEP", "SGD_MOMENTUM_STEP", "ADAM_STEP", "ADAM_AMSGRAD_STEP", "RMSPROP_STEP",
    "RMSPROP_CENTERED_STEP", "RMSPROP_MOMENTUM_STEP", "RMSPROP_CENTERED_MOMENTUM_STEP", "ADADELTA_STEP",
    "OPTIMIZER_OPS", "Updates", "grouped_op",
    "apply_inplace",  # re-exported: the optimizers call every op here through it
]


def _same_as_param(op_name: str, names: tuple[str, ...], flags: dict):
    """Shape/dtype rule: every input is shaped and typed like the parameter, and
    the option attrs that choose the buffers agree with this op's buffers."""
    def infer(*tensors, **attrs):
        for flag, wanted in flags.items():
            if bool(attrs[flag]) != wanted:
                raise OpError(f"{op_name}: called with {flag}={attrs[flag]!r}; this op has the buffers "
                              f"{', '.join(names[1:-1])}, pick the op that matches the options")
        param = tensors[0]
        shape, dtype = param.shape, param.dtype
        if dtype.category != "float":
            raise OpError(f"{op_name}: param must be a floating point tensor, got "
                          f"{tuple(shape)} {dtype.name}")
        for name, t in zip(names[1:], tensors[1:]):
            if t.dtype is not dtype or t.shape != shape:
                raise OpError(f"{op_name}: {name} has shape {tuple(t.shape)} {t.dtype.name} but "
                              f"param has shape {tuple(shape)} {dtype.name}; they must match")
        return shape, dtype
    return infer


def _declare(name: str, names: tuple[str, ...], kernel, **flags):
    """An optimizer op: ``names`` lists its inputs, every one but the last (grad) is
    written. ``flags`` are the boolean attrs this op's buffer layout implies."""
    def numpy(*arrays, **attrs):  # a large parameter's elements split over the cpu threads (blas.py)
        cpu_threads.update(kernel, arrays, attrs)
    return defop(name, infer=_same_as_param(name, names, flags), inplace=True,
                 wgsl=Kernel("optim.wgsl", name, "optim.optim_step"),  # update function named after the op
                 mutates=len(names) - 1, numpy=numpy)


def _effective_grad(param, grad, weight_decay, maximize):
    """``-grad`` if maximizing, plus ``weight_decay * param`` (L2). Allocates only if needed."""
    if maximize:
        grad = np.negative(grad)
        if weight_decay != 0:
            grad += weight_decay * param
        return grad
    if weight_decay != 0:
        decayed = np.multiply(param, weight_decay)
        decayed += grad
        return decayed
    return grad


def _lerp_(start, end, weight, scratch):
    """``start.lerp_(end, weight)`` with PyTorch's formula (exact at both ends)."""
    np.subtract(end, start, out=scratch)
    if weight < 0.5:
        scratch *= weight
        start += scratch
    else:
        scratch *= 1 - weight
        np.subtract(end, scratch, out=start)


# -- SGD ---------------------------------------------------------------------------
def _sgd_numpy(param, grad, *, lr, weight_decay, maximize):
    """param -= lr * (grad + weight_decay * param)."""
    update = np.multiply(_effective_grad(param, grad, weight_decay, maximize), -lr)
    param += update


def _sgd_momentum_numpy(param, momentum_buffer, grad, *, lr, momentum, dampening, weight_decay,
                        nesterov, maximize, first_step):
    """buf = momentum * buf + (1 - dampening) * g (buf = g on the first step);
    param -= lr * (g + momentum * buf if nesterov else buf)."""
    d_p = _effective_grad(param, grad, weight_decay, maximize)
    if first_step:
        np.copyto(momentum_buffer, d_p)
    else:
        momentum_buffer *= momentum
        if dampening == 0:
            momentum_buffer += d_p
        else:
            momentum_buffer += (1 - dampening) * d_p
    if nesterov:
        update = np.multiply(momentum_buffer, momentum)
        update += d_p
        update *= -lr
    else:
        update = np.multiply(momentum_buffer, -lr)
    param += update


SGD_STEP = _declare("sgd_step", ("param", "grad"), _sgd_numpy)
SGD_MOMENTUM_STEP = _declare("sgd_momentum_step", ("param", "momentum_buffer", "grad"),
                             _sgd_momentum_numpy)


# -- Adam / AdamW ------------------------------------------------------------------
def _adam_numpy(param, exp_avg, exp_avg_sq, *rest, lr, beta1, beta2, eps, weight_decay,
                decoupled_weight_decay, maximize, step_size, bias_correction2_sqrt):
    """m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g;
    param -= step_size * m / (sqrt(v) / bias_correction2_sqrt + eps).
    With amsgrad ``rest`` is (max_exp_avg_sq, grad) and the max of v is used."""
    grad = rest[-1]
    if decoupled_weight_decay:
        if weight_decay != 0:
            param *= 1 - lr * weight_decay
        grad = _effective_grad(param, grad, 0, maximize)
    else:
        grad = _effective_grad(param, grad, weight_decay, maximize)
    scratch = np.empty_like(param)
    _lerp_(exp_avg, grad, 1 - beta1, scratch)
    exp_avg_sq *= beta2
    np.multiply(grad, 1 - beta2, out=scratch)
    scratch *= grad
    exp_avg_sq += scratch
    if len(rest) == 2:
        max_exp_avg_sq = rest[0]
        np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        np.sqrt(max_exp_avg_sq, out=scratch)
    else:
        np.sqrt(exp_avg_sq, out=scratch)
    scratch /= bias_correction2_sqrt
    scratch += eps
    np.divide(exp_avg, scratch, out=scratch)
    scratch *= -step_size
    param += scratch


ADAM_STEP = _declare("adam_step", ("param", "exp_avg", "exp_avg_sq", "grad"), _adam_numpy)
ADAM_AMSGRAD_STEP = _declare("adam_amsgrad_step",
                             ("param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "grad"), _adam_numpy)


# -- RMSprop -----------------------------------------------------------------------
def _rmsprop_numpy(param, square_avg, *rest, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    """v = alpha * v + (1 - alpha) * g * g; centered: a = lerp(a, g, 1 - alpha), v - a * a;
    param -= lr * g / (sqrt(v) + eps), through buf = momentum * buf + g / (...) if momentum > 0.
    ``rest`` is ([grad_avg,] [momentum_buffer,] grad), as the options say."""
    grad = _effective_grad(param, rest[-1], weight_decay, maximize)
    scratch = np.empty_like(param)
    square_avg *= alpha
    np.multiply(grad, 1 - alpha, out=scratch)
    scratch *= grad
    square_avg += scratch
    if centered:
        grad_avg = rest[0]
        _lerp_(grad_avg, grad, 1 - alpha, scratch)
        np.multiply(grad_avg, grad_avg, out=scratch)
        np.subtract(square_avg, scratch, out=scratch)
        np.sqrt(scratch, out=scratch)
    else:
        np.sqrt(square_avg, out=scratch)
    scratch += eps
    np.divide(grad, scratch, out=scratch)
    if momentum > 0:
        momentum_buffer = rest[-2]
        momentum_buffer *= momentum
        momentum_buffer += scratch
        np.multiply(momentum_buffer, -lr, out=scratch)
    else:
        scratch *= -lr
    param += scratch


RMSPROP_STEP = _declare("rmsprop_step", ("param", "square_avg", "grad"), _rmsprop_numpy,
                        centered=False, momentum=False)
RMSPROP_CENTERED_STEP = _declare("rmsprop_centered_step",
                                 ("param", "square_avg", "grad_avg", "grad"), _rmsprop_numpy,
                                 centered=True, momentum=False)
RMSPROP_MOMENTUM_STEP = _declare("rmsprop_momentum_step",
                                 ("param", "square_avg", "momentum_buffer", "grad"), _rmsprop_numpy,
                                 centered=False, momentum=True)
RMSPROP_CENTERED_MOMENTUM_STEP = _declare(
    "rmsprop_centered_momentum_step",
    ("param", "square_avg", "grad_avg", "momentum_buffer", "grad"), _rmsprop_numpy,
    centered=True, momentum=True)



# -- Adadelta ----------------------------------------------------------------------
def _adadelta_numpy(param, square_avg, acc_delta, grad, *, lr, rho, eps, weight_decay, maximize):
    """v = rho * v + (1 - rho) * g * g; delta = sqrt(u + eps) / sqrt(v + eps) * g;
    u = rho * u + (1 - rho) * delta * delta; param -= lr * delta."""
    grad = _effective_grad(param, grad, weight_decay, maximize)
    delta, scratch = np.empty_like(param), np.empty_like(param)
    square_avg *= rho
    np.multiply(grad, 1 - rho, out=scratch)
    scratch *= grad
    square_avg += scratch
    np.add(square_avg, eps, out=scratch)
    np.sqrt(scratch, out=scratch)  # std
    np.add(acc_delta, eps, out=delta)
    np.sqrt(delta, out=delta)
    delta /= scratch
    delta *= grad
    acc_delta *= rho
    np.multiply(delta, 1 - rho, out=scratch)
    scratch *= delta
    acc_delta += scratch
    delta *= -lr
    param += delta


ADADELTA_STEP = _declare("adadelta_step", ("param", "square_avg", "acc_delta", "grad"), _adadelta_numpy)

# Every op declared here; tests/test_optim.py checks each one against PyTorch.
OPTIMIZER_OPS = (SGD_STEP, SGD_MOMENTUM_STEP, ADAM_STEP, ADAM_AMSGRAD_STEP, RMSPROP_STEP,
                 RMSPROP_CENTERED_STEP, RMSPROP_MOMENTUM_STEP, RMSPROP_CENTERED_MOMENTUM_STEP, ADADELTA_STEP)


_GROUPED: dict = {}


def grouped_op(member: Op, count: int, arity: int) -> Op:
    """``count`` calls of the optimizer op ``member`` (``arity`` inputs each, one after another)
    as one in-place op: one kernel on WebGPU (backend/webgpu/optim_group.py), the member's numpy
    kernel on each in turn. Used for a compiled step's groups (graph/passes/group.py) and an eager
    step's (``Updates``)."""
    key = (member.name, count, arity)
    if key not in _GROUPED:
        kernel = member.impls["numpy"]

        def run(*arrays, **attrs):
            for k in range(count):
                kernel(*arrays[k * arity:(k + 1) * arity], **attrs)
        _GROUPED[key] = Op(f"{member.name}[{count} params]", infer=lambda *a, **k: None, inplace=True,
                           kind="inplace", mutates=member.mutates,
                           impls={"wgsl": Grouped(member.name, count, arity), "numpy": run})
    return _GROUPED[key]


class Updates:
    """An optimizer step's per-parameter updates, added inside ``with Updates() as updates:``
    and run when the block ends (also when it raises: the updates added before the error run, as
    they would have one by one). Consecutive calls of one op with equal attrs go to a device that
    takes groups (WebGPU) as one dispatch per group, as torch's foreach optimizers do: the digits
    MLP's Adam step was four dispatches, now one. Each call is checked as it is added. While
    something observes the calls one by one (webgrad.compile's trace, which groups them itself,
    or the profiler), each runs alone."""

    def __init__(self):
        self.calls: list = []

    def __enter__(self) -> "Updates":
        return self

    def __exit__(self, *error) -> None:
        self.run()

    def add(self, op: Op, *tensors, **attrs) -> None:
        op.infer(*tensors, **attrs)
        self.calls.append((op, tensors, attrs))

    def run(self) -> None:
        start = 0
        while start < len(self.calls):
            op, _, attrs = self.calls[start]
            end = start + 1
            while end < len(self.calls) and self.calls[end][0] is op and self.calls[end][2] == attrs:
                end += 1
            _run_group(op, [tensors for _, tensors, _ in self.calls[start:end]], attrs)
            start = end
        self.calls = []


def _run_group(op: Op, members: list, attrs: dict) -> None:
    """Members whose tensors are all float32 on the first one's device go in groups as large as
    that device takes; the rest run alone (the backend's own rules: widened copies, devices)."""
    device = members[0][0].device
    arity = len(members[0])
    size = 1 if registry.OBSERVERS else get_backend(device).group_capacity(arity)
    alike = [m for m in members if all(t.device == device and t.dtype is dtypes.float32 for t in m)]
    if size < 2 or len(alike) < 2:
        alike = []
    grouped = {id(m) for m in alike}
    for m in members:
        if id(m) not in grouped:
            apply_inplace(op, *m, **attrs)
    for first in range(0, len(alike), size):
        chunk = alike[first:first + size]
        if len(chunk) == 1:
            apply_inplace(op, *chunk[0], **attrs)
            continue
        written = [t for m in chunk for t in m[:op.mutates]]
        for t in written:
            autograd.check_inplace_allowed(op.name, t)
        get_backend(device).run_inplace(grouped_op(op, len(chunk), arity), [t for m in chunk for t in m], attrs)
        for t in written:
            t._bump_version()
