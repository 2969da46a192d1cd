"""Dynamic int8 quantization of Linear layers, as ``torch.ao.quantization.quantize_dynamic``.

A quantized Linear keeps its weight as int8 with a float32 scale (symmetric: zero point 0),
one for the whole weight (torch's default, ``default_dynamic_qconfig``) or one per output
row (``per_channel_dynamic_qconfig``), scale = max|w| / 127.5 as torch's observers compute it.
At each call the input is quantized to 0..127 (uint8 with torch's ``reduce_range``) with a
scale and zero point from its own min and max, the integer product is summed, and the result
is scaled back to float32 and the bias added: torch's fbgemm arithmetic, on every device.

All of it is one op, ``quantized_linear``: on WebGPU two dispatches (x's range and x as packed
int8, then the int8 product summed in i32, ``dot4I8Packed`` where the WGSL feature exists; see
qlinear.wgsl); on numpy natively the int8 products are summed in int32 by a C kernel built for the
machine's CPU (AVX-512 VNNI, AVX2 or plain C; backend/numpy/int8_gemm), in Pyodide by the wasm
kernels (relaxed SIMD's int8 dot product; backend/numpy/wasm_gemm), and elsewhere (no build, small
layers) multiplied by BLAS as float32, exact while in_features <= 1032 (|q_x q_w| <= 127 x 128,
sums below 2**24), as float64 past that. Every path gives the same bits.

Example:
    >>> qmodel = webgrad.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=webgrad.qint8)
    >>> qmodel(x)        # int8 weights: a quarter of the float32 bytes (WebGPU packs four to a word)
    >>> webgrad.save(qmodel.state_dict(), "q.safetensors")
"""
from __future__ import annotations

import copy
import math
from typing import NamedTuple

import numpy as np

from .. import creation, dtypes
from ..backend.numpy import int8_gemm, wasm_gemm
from ..backend.numpy.backend import product_kernel
from ..kernels import Kernel
from ..ops._helpers import describe
from ..ops.registry import OpError, apply, defop
from ..nn.modules.linear import Linear
from ..nn.modules.module import Module
from ..tensor import Tensor

__all__ = ["quantize_dynamic", "QConfig", "default_dynamic_qconfig", "per_channel_dynamic_qconfig",
           "DynamicQuantizedLinear"]

_ACTIVATION_MAX = 127  # uint8 with reduce_range, as torch's dynamic quantization


class QConfig(NamedTuple):
    """How weights are quantized: ``per_channel`` scales (one per output row) or one scale."""
    per_channel: bool


default_dynamic_qconfig = QConfig(per_channel=False)
per_channel_dynamic_qconfig = QConfig(per_channel=True)


def quantize_weight(weight: Tensor, per_channel: bool) -> tuple[Tensor, Tensor]:
    """(int8 weight, float32 scale), computed on the host as torch's symmetric MinMax observers
    and its quantizer do: scale = max(max|w| / 127.5, float32 eps) per row or for all, then
    w * (1 / scale) in float32, rounded half to even and clamped to -128..127."""
    w = weight.detach().float().cpu().numpy()
    amax = np.abs(w).max(axis=1) if per_channel else np.abs(w).max(initial=0.0)
    scale = np.maximum(np.float32(amax) / np.float32(127.5), np.finfo(np.float32).eps).astype(np.float32)
    inverse = np.float32(1.0) / (scale[:, None] if per_channel else scale)
    q = np.clip(np.rint(w * inverse), -128, 127).astype(np.int8)
    return creation.tensor(q, device=weight.device), creation.tensor(scale, device=weight.device)


def _quantized_linear_numpy(x, weight, weight_scale, bias=None):
    """torch's arithmetic (see qlinear.wgsl): x quantized to 0..127 by its own range."""
    if x.size and weight.size:  # int8 products in C where built (int8_gemm), in wasm in Pyodide (wasm_gemm)
        rows = x.reshape(-1, x.shape[-1])
        out = int8_gemm.linear(rows, weight, weight_scale, bias)
        if out is None:
            out = wasm_gemm.quantized_linear(rows, weight, weight_scale, bias)
        if out is not None:
            return out.reshape(*x.shape[:-1], weight.shape[0])
    lo = np.minimum(x.min(initial=0), 0).astype(np.float32)
    hi = np.maximum(x.max(initial=0), 0).astype(np.float32)
    scale = (hi - lo) / np.float32(_ACTIVATION_MAX)
    scale = scale if scale > 0 else np.float32(1)
    zero_point = np.clip(np.rint(-lo / scale), 0, _ACTIVATION_MAX)
    centered = np.clip(np.rint(x / scale) + zero_point, 0, _ACTIVATION_MAX) - zero_point
    if x.shape[-1] <= 1032:  # sums of integers exact in float32: the product as matmul takes it
        w = weight.T.astype(np.float32)
        product = product_kernel(centered, w)(centered, w)
    else:
        product = np.matmul(centered, weight.T.astype(np.float64)).astype(np.float32)
    out = product * (scale * weight_scale)
    return (out if bias is None else out + bias).astype(np.float32)


def _quantized_linear_infer(x, weight, weight_scale, bias=None):
    if x.dtype is not dtypes.float32 or weight.dtype is not dtypes.int8 or x.shape[-1:] != weight.shape[1:]:
        raise OpError(f"quantized_linear: needs float32 x (..., k) and an int8 weight (n, k); got "
                      f"{describe(x)} and {describe(weight)}")
    return (*x.shape[:-1], weight.shape[0]), dtypes.float32


QUANTIZED_LINEAR = defop("quantized_linear", kind="matmul", infer=_quantized_linear_infer,
                         numpy=_quantized_linear_numpy,
                         wgsl=Kernel("qlinear.wgsl", "qmatmul", "qlinear.quantized_linear"),
                         flops=lambda shapes, out, **_: 2 * math.prod(out) * shapes[1][1])


def quantized_linear(x: Tensor, weight: Tensor, weight_scale: Tensor, bias: Tensor | None) -> Tensor:
    """torch's dynamic quantized linear: x quantized to 0..127 by its own range, int8 weight."""
    return apply(QUANTIZED_LINEAR, x, weight, weight_scale, *(() if bias is None else (bias,)))


class LinearPackedParams(Module):
    """The quantized weight, its scale and the bias (torch names this submodule ``_packed_params``)."""

    def __init__(self, weight: Tensor, weight_scale: Tensor, bias: Tensor | None):
        super().__init__()
        self.register_buffer("weight", weight)
        self.register_buffer("weight_scale", weight_scale)
        self.register_buffer("bias", bias)


class DynamicQuantizedLinear(Module):
    """A Linear with an int8 weight, as ``torch.ao.nn.quantized.dynamic.Linear``.

    Its state dict: ``scale`` and ``zero_point`` (torch's output qparams, 1.0 and 0, unused by a
    dynamic layer) and ``_packed_params.{weight, weight_scale, bias}`` (int8, float32, float32):
    torch's key prefix, with the weight's scale a tensor of its own since webgrad has no
    quantized tensor type.
    """

    def __init__(self, in_features, out_features, bias_=True, dtype=dtypes.qint8, per_channel=False, device=None):
        super().__init__()
        if dtype is not dtypes.qint8:
            raise ValueError(f"DynamicQuantizedLinear: only webgrad.qint8 weights are supported, got {dtype}")
        self.in_features, self.out_features = in_features, out_features
        self.dtype, self.per_channel = dtype, per_channel
        weight = creation.zeros(out_features, in_features, dtype=dtypes.int8, device=device)
        scale = creation.ones(*((out_features,) if per_channel else ()), device=device)
        bias = creation.zeros(out_features, device=device) if bias_ else None
        self.register_buffer("scale", creation.tensor(1.0, device=device))
        self.register_buffer("zero_point", creation.tensor(0, device=device))
        self._packed_params = LinearPackedParams(weight, scale, bias)

    @classmethod
    def from_float(cls, mod: Linear, per_channel: bool = False) -> "DynamicQuantizedLinear":
        """The quantized copy of the float Linear ``mod`` (its weight quantized now)."""
        device = mod.weight.device
        q = cls(mod.in_features, mod.out_features, mod.bias is not None, per_channel=per_channel, device=device)
        weight, scale = quantize_weight(mod.weight, per_channel)
        params = q._packed_params
        params.weight, params.weight_scale = weight, scale
        if mod.bias is not None:
            params.bias = mod.bias.detach().float().clone()
        return q

    def weight(self) -> Tensor:
        """The dequantized weight (float32), as torch's ``weight()`` gives the quantized one."""
        params = self._packed_params
        scale = params.weight_scale.unsqueeze(1) if self.per_channel else params.weight_scale
        return params.weight.float() * scale

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.in_features:
            raise RuntimeError(f"DynamicQuantizedLinear: input {tuple(x.shape)} does not match in_features = "
                               f"{self.in_features}")
        params = self._packed_params
        return quantized_linear(x.float(), params.weight, params.weight_scale, params.bias)

    def _get_name(self) -> str:
        return "DynamicQuantizedLinear"

    def extra_repr(self) -> str:
        scheme = "per_channel_affine" if self.per_channel else "per_tensor_affine"
        return (f"in_features={self.in_features}, out_features={self.out_features}, dtype={self.dtype}, "
                f"qscheme=webgrad.{scheme}")


def _config_for(qconfig_spec, module) -> QConfig | None:
    """The QConfig ``qconfig_spec`` gives ``module``'s type (a set of types: the default)."""
    if isinstance(qconfig_spec, dict):
        for key, config in qconfig_spec.items():
            if isinstance(key, type) and isinstance(module, key):
                return config if isinstance(config, QConfig) else default_dynamic_qconfig
        return None
    return default_dynamic_qconfig if any(isinstance(module, t) for t in qconfig_spec) else None


def quantize_dynamic(model: Module, qconfig_spec=None, dtype=dtypes.qint8, mapping=None, inplace=False) -> Module:
    """``model`` with each Linear named by ``qconfig_spec`` replaced by its int8 dynamic version.

    Args (torch's): qconfig_spec: a set of module types (``{nn.Linear}``; default: Linear), or a
        dict from types or submodule names to a QConfig (``per_channel_dynamic_qconfig`` for one
        scale per output row). dtype: ``webgrad.qint8``. inplace: change ``model`` itself
        instead of a deep copy.
    """
    if dtype is not dtypes.qint8:
        raise ValueError(f"quantize_dynamic: only dtype=webgrad.qint8 is supported, got {dtype}")
    if mapping is not None:
        raise NotImplementedError("quantize_dynamic: a custom mapping is not supported; Linear is quantized")
    spec = {Linear} if qconfig_spec is None else qconfig_spec
    names = {k: v for k, v in spec.items() if isinstance(k, str)} if isinstance(spec, dict) else {}
    for key in (spec if not isinstance(spec, dict) else spec.keys()):
        if isinstance(key, type) and not issubclass(key, Linear):
            raise NotImplementedError(f"quantize_dynamic: only nn.Linear can be quantized here, got {key.__name__}")
    if not inplace:
        model = copy.deepcopy(model)
    _swap(model, "", spec, names)
    return model


def _swap(module: Module, prefix: str, spec, names: dict) -> None:
    for name, child in list(module._modules.items()):
        path = prefix + name
        config = names.get(path) if path in names else _config_for(spec, child)
        if isinstance(child, Linear) and config is not None:
            module._modules[name] = DynamicQuantizedLinear.from_float(child, per_channel=config.per_channel)
        elif child is not None:
            _swap(child, path + ".", spec, names)
