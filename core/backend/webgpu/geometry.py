"""Geometry the WebGPU launchers share: how many dims a kernel indexes, which
adapters are software (CPU) ones.

Pure functions of numbers and dicts, no device: every launcher takes them from
here so the rules cannot drift apart between kernels.
"""
from __future__ import annotations

# Dims a strided kernel indexes: every Params uniform holds shapes and strides in
# arrays of 8 (strided.wgsl, reduce.wgsl, softmax.wgsl, index.wgsl, ...).
MAX_RANK = 8

# Names of software adapters as they appear in an adapter's info: Mesa's llvmpipe
# (lavapipe is its Vulkan driver, softpipe its older sibling), Chromium's SwiftShader,
# and Windows' WARP ("Microsoft Basic Render Driver").
CPU_ADAPTERS = ("llvmpipe", "lavapipe", "softpipe", "swiftshader", "warp", "microsoft basic render driver")


def is_cpu_adapter(info: dict) -> bool:
    """True for a software adapter, from its info dict (``device.adapter_info``):
    adapter_type "CPU", or a known software adapter's name in any field."""
    if str(info.get("adapter_type", "")).upper() == "CPU":
        return True
    text = " ".join(str(v) for v in info.values()).lower()
    return any(name in text for name in CPU_ADAPTERS)
