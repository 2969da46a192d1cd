"""What ``webgrad.autocast`` does to each op: torch's autocast lists, applied where the op is called.

Inside an enabled ``autocast(device_type, dtype)`` block, a call of a listed op on tensors of
that device casts its floating-point tensor arguments first (never float64 ones, never other
devices' tensors), by the op's policy on that device:

- ``lower``: to the block's dtype (float16 or bfloat16): products and convolutions;
- ``fp32``: to float32: ops that need its range or precision (exp, log, losses, norms);
- ``fp32_unless_dtype``: to float32 unless the call names a ``dtype`` (softmax, sum, cumsum);
- ``promote``: to the widest floating dtype among them (mixed-input ops such as addcmul).

The lists are torch's (aten/src/ATen/autocast_mode.h): its CPU lists for "cpu" and its CUDA
lists for "webgpu", the GPU device, so a CUDA training script keeps its dtypes here. Ops on
no list run in their inputs' dtype. While a listed op, or any op built from others
(``registry.composite``), runs, the ops it calls are not cast again: torch likewise runs an
op's insides below autocast, so ``F.gelu`` of float16 stays float16 though ``exp`` is fp32.
"""
from __future__ import annotations

import contextlib
import functools
import threading

from .. import dtypes
from ..tensor import Tensor

_LOWER_BOTH = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
               "addmm", "addbmm", "baddbmm", "bmm", "mm", "matmul", "linear", "linalg_vecdot",
               "scaled_dot_product_attention")
_LOSSES = ("mse_loss", "cosine_embedding_loss", "nll_loss", "hinge_embedding_loss", "poisson_nll_loss",
           "smooth_l1_loss", "cross_entropy", "l1_loss", "huber_loss", "margin_ranking_loss", "soft_margin_loss",
           "triplet_margin_loss", "multi_margin_loss", "kl_div", "multilabel_margin_loss",
           "binary_cross_entropy_with_logits")
POLICIES = {
    "cpu": {
        "lower": frozenset(_LOWER_BOTH),
        "fp32": frozenset(_LOSSES + (
            "avg_pool3d", "max_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "max_unpool2d", "max_unpool3d",
            "fractional_max_pool2d", "fractional_max_pool3d", "binary_cross_entropy", "ctc_loss", "grid_sample",
            "polar", "prod", "quantile", "nanquantile", "stft", "cdist", "trace", "cholesky", "cholesky_inverse",
            "cholesky_solve", "inverse", "lu_solve", "pinverse", "qr", "svd", "triangular_solve")),
        "fp32_unless_dtype": frozenset(),
        "promote": frozenset(("stack", "cat", "index_copy")),
    },
    "webgpu": {
        "lower": frozenset(_LOWER_BOTH + ("addmv", "addr", "einsum", "mv", "chain_matmul", "linalg_multi_dot",
                                          "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell")),
        "fp32": frozenset(_LOSSES + (
            "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
            "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm", "norm", "cosine_similarity",
            "dist", "pdist", "cdist", "renorm", "logsumexp", "interpolate")),
        "fp32_unless_dtype": frozenset(("prod", "softmax", "log_softmax", "cumprod", "cumsum", "sum",
                                        "linalg_vector_norm", "linalg_matrix_norm")),
        "promote": frozenset(("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sample",
                              "index_put", "scatter_add", "tensordot")),
    },
}
_POLICY_OF = {device: {name: policy for policy, names in table.items() for name in names}
              for device, table in POLICIES.items()}

# Enabled blocks in any thread: zero means every listed op goes straight to its function.
ACTIVE = [0]
_state = threading.local()


def stack() -> list:
    """This thread's autocast blocks, innermost last: dicts of device_type, dtype, enabled."""
    if not hasattr(_state, "stack"):
        _state.stack = []
    return _state.stack


def key() -> tuple:
    """This thread's autocast state as a hashable value (webgrad.compile keys its graphs by it)."""
    return tuple((b["device_type"], b["dtype"].name, b["enabled"]) for b in stack()) if ACTIVE[0] else ()


def thread_state() -> tuple:
    """This thread's autocast blocks and whether an op is running inside (as autograd.grad_modes)."""
    return list(stack()), getattr(_state, "inside_op", False)


def restore_thread_state(state: tuple) -> None:
    blocks, inside = state
    ACTIVE[0] += sum(b["enabled"] for b in blocks) - sum(b["enabled"] for b in stack())
    stack()[:] = blocks
    _state.inside_op = inside


def push(device_type: str, dtype, enabled: bool) -> None:
    stack().append({"device_type": device_type, "dtype": dtype, "enabled": enabled})
    ACTIVE[0] += enabled


def pop() -> None:
    ACTIVE[0] -= stack().pop()["enabled"]


def target_dtype(device_type: str):
    """The dtype of the innermost block for ``device_type`` if it is enabled, else None."""
    for entry in reversed(stack()):
        if entry["device_type"] == device_type:
            return entry["dtype"] if entry["enabled"] else None
    return None


def _eligible(value, device_type) -> bool:
    return isinstance(value, Tensor) and value.dtype.is_floating_point and value.dtype is not dtypes.float64 \
        and value.device == device_type


def _cast(value, dtype, device_type):
    if _eligible(value, device_type) and value.dtype is not dtype:
        return value.to(dtype)
    if isinstance(value, (list, tuple)) and any(_eligible(v, device_type) for v in value):
        return type(value)(_cast(v, dtype, device_type) for v in value)
    return value


def _widest(values, device_type):
    found = {v.dtype for v in values if _eligible(v, device_type)}
    found |= {v.dtype for seq in values if isinstance(seq, (list, tuple)) for v in seq if _eligible(v, device_type)}
    return found.pop() if len(found) == 1 else dtypes.float32 if found else None


def _first_tensor(args):
    for a in args:
        if isinstance(a, Tensor):
            return a
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            return a[0]
    return None


def _cast_arguments(name, args, kwargs):
    """``args``/``kwargs`` cast by ``name``'s policy on the first tensor's device, if a block applies."""
    first = _first_tensor(args)
    if first is None:
        first = _first_tensor(kwargs.values())
    device_type = str(first.device) if first is not None else None
    low = target_dtype(device_type) if device_type in _POLICY_OF else None
    policy = _POLICY_OF[device_type].get(name) if low is not None else None
    if policy is None or policy == "fp32_unless_dtype" and kwargs.get("dtype") is not None:
        return args, kwargs
    if policy == "promote":
        dtype = _widest([*args, *kwargs.values()], device_type)
    else:
        dtype = low if policy == "lower" else dtypes.float32
    if dtype is None:
        return args, kwargs
    return ([_cast(a, dtype, device_type) for a in args],
            {k: _cast(v, dtype, device_type) for k, v in kwargs.items()})


@contextlib.contextmanager
def suspended():
    """No op is cast while this runs (a listed op's insides; autograd's backward)."""
    outer, _state.inside_op = getattr(_state, "inside_op", False), True
    try:
        yield
    finally:
        _state.inside_op = outer


def autocast_op(name: str | None):
    """Decorator: ``fn`` is torch's op ``name`` for autocast (None: an op on no list, built from
    others). Costs one list lookup per call while no block is enabled anywhere."""
    def declare(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not ACTIVE[0] or getattr(_state, "inside_op", False):
                return fn(*args, **kwargs)
            if name is not None:
                args, kwargs = _cast_arguments(name, args, kwargs)
            with suspended():
                return fn(*args, **kwargs)
        return wrapper
    return declare
