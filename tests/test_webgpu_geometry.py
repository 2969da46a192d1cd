"""The geometry helpers every WebGPU launcher shares (webgrad.backend.webgpu.geometry):
pure functions of shapes, strides, limits and adapter info, so no device is needed."""
from __future__ import annotations

import pytest

from webgrad.backend.webgpu import geometry


# -- software adapters -------------------------------------------------------------------
@pytest.mark.parametrize("info", [
    {"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "adapter_type": "CPU"},                 # wgpu-py on Mesa
    {"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "adapter_type": "Unknown"},             # type not reported
    {"vendor": "google", "architecture": "swiftshader", "device": "", "adapter_type": ""},  # Chromium
    {"device": "Microsoft Basic Render Driver", "adapter_type": "Unknown"},                # Windows
    {"vendor": "microsoft", "architecture": "", "description": "WARP", "adapter_type": ""},
    {"device": "softpipe", "adapter_type": ""},
    {"device": "lavapipe", "adapter_type": ""},
    {"device": "", "adapter_type": "cpu"},
])
def test_software_adapters_are_cpu(info):
    assert geometry.is_cpu_adapter(info)


@pytest.mark.parametrize("info", [
    {"device": "NVIDIA H200", "adapter_type": "DiscreteGPU", "backend_type": "Vulkan"},
    {"vendor": "apple", "architecture": "metal-3", "device": "", "adapter_type": "GPU"},
    {},
])
def test_hardware_adapters_are_not_cpu(info):
    assert not geometry.is_cpu_adapter(info)


def test_max_rank_is_shared():
    from webgrad.backend.webgpu import elementwise, index, layer_norm, reduce, softmax

    for module in (elementwise, index, layer_norm, reduce, softmax):
        assert module.MAX_RANK is geometry.MAX_RANK == 8
