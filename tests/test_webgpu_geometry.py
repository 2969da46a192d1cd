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


@pytest.mark.parametrize("device, cpu", [("Microsoft Basic Render Driver", True), ("swiftshader", True),
                                         ("NVIDIA H200", False)])
def test_browser_describes_adapters_by_the_same_rule(device, cpu):
    """The browser device's adapter description (a JS GPUAdapter) uses is_cpu_adapter too."""
    from types import SimpleNamespace

    from webgrad.backend.webgpu.browser import BrowserDevice

    info = SimpleNamespace(vendor="", architecture="", device=device, description="", isFallbackAdapter=False)
    described = BrowserDevice._describe(SimpleNamespace(info=info, isFallbackAdapter=False))
    assert described["adapter_type"] == ("CPU" if cpu else "GPU")


def test_max_rank_is_shared():
    from webgrad.backend.webgpu import elementwise, index, layer_norm, reduce, softmax

    for module in (elementwise, index, layer_norm, reduce, softmax):
        assert module.MAX_RANK is geometry.MAX_RANK == 8


# -- merging dims ------------------------------------------------------------------------
def test_coalesce_contiguous_merges_to_one_dim():
    assert geometry.coalesce((2, 3, 4), [[12, 4, 1]]) == ([24], [[1]])
    assert geometry.coalesce_dims([(2, 12), (3, 4), (4, 1)]) == [(24, 1)]


def test_coalesce_drops_size_one_dims_whatever_their_stride():
    assert geometry.coalesce((1, 5, 1, 3, 1), [[99, 3, 7, 1, 0]]) == ([15], [[1]])
    assert geometry.coalesce((1, 1), [[4, 1]]) == ([], [[]])
    assert geometry.coalesce_dims([(1, 5)]) == []


def test_coalesce_keeps_dims_an_operand_cannot_merge():
    # a transposed view: its neighbours do not step evenly
    assert geometry.coalesce((3, 4), [[1, 3]]) == ([3, 4], [[1, 3]])
    # a sliced view (every other column): rows cannot merge into the columns
    assert geometry.coalesce((3, 4), [[16, 2]]) == ([3, 4], [[16, 2]])
    # one operand contiguous, the other transposed: nothing merges
    assert geometry.coalesce((2, 3), [[3, 1], [1, 2]]) == ([2, 3], [[3, 1], [1, 2]])


def test_coalesce_broadcast_zero_strides():
    # a row broadcast down (stride 0) next to a contiguous output: only the columns
    # would merge with each other, the broadcast dim stays
    assert geometry.coalesce((5, 2, 3), [[0, 3, 1], [6, 3, 1]]) == ([5, 6], [[0, 1], [6, 1]])
    # every operand broadcast along the same dims: those merge (0 == 0 * n)
    assert geometry.coalesce((4, 5, 3), [[0, 0, 1], [0, 0, 1]]) == ([20, 3], [[0, 1], [0, 1]])
    # a scalar broadcast to a shape: one dim of stride 0
    assert geometry.coalesce((2, 3, 4), [[0, 0, 0], [12, 4, 1]]) == ([24], [[0], [1]])


def test_coalesce_negative_strides_of_a_flipped_view():
    assert geometry.coalesce((3, 4), [[-4, -1]]) == ([12], [[-1]])
    assert geometry.coalesce((3, 4), [[-4, 1]]) == ([3, 4], [[-4, 1]])


def test_coalesce_dims_keeps_one_stride_per_operand():
    # softmax's (size, input stride, output stride): the input's last dim is its outermost
    assert geometry.coalesce_dims([(2, 3, 12), (3, 1, 4), (4, 6, 1)]) == [(6, 1, 4), (4, 6, 1)]
    assert geometry.coalesce_dims(iter([(2, 3, 0), (3, 1, 0)])) == [(6, 1, 0)]


def test_matmul_batch_dims_merge_through_the_shared_helper():
    from webgrad.backend.webgpu import matmul

    # a broadcast (stride 0) A batch and a contiguous B batch over (2, 3) of 4x5 outputs
    dims, a, b = matmul.coalesce_batch((2, 3), [0, 0], [3 * 30, 30], 20)
    assert (dims, a, b) == ([6], [0], [30])
    dims, a, b = matmul.coalesce_batch((2, 1, 3), [0, 7, 30], [90, 0, 30], 20)
    assert (dims, a, b) == ([2, 3], [0, 30], [90, 30])


# -- grids -------------------------------------------------------------------------------
LIMIT = 65535  # WebGPU's default maxComputeWorkgroupsPerDimension


@pytest.mark.parametrize("groups,grid", [
    (0, (1, 1, 1)), (1, (1, 1, 1)), (LIMIT, (LIMIT, 1, 1)),
    (LIMIT + 1, (LIMIT, 2, 1)), (3 * LIMIT + 5, (LIMIT, 4, 1)), (LIMIT * LIMIT, (LIMIT, LIMIT, 1)),
])
def test_fold_grid_beyond_one_dimension(groups, grid):
    got = geometry.fold_grid(groups, LIMIT, "t")
    assert got == grid
    assert got[0] * got[1] * got[2] >= groups and max(got) <= LIMIT


def test_fold_grid_refuses_more_than_the_grid_holds():
    with pytest.raises(ValueError, match=f"t: {LIMIT * LIMIT + 1} workgroups exceed .* {LIMIT} x {LIMIT}$"):
        geometry.fold_grid(LIMIT * LIMIT + 1, LIMIT, "t")
    assert geometry.fold_grid(LIMIT * LIMIT + 1, LIMIT, "t", dims=3) == (LIMIT, LIMIT, 2)
    with pytest.raises(ValueError, match="workgroups exceed"):
        geometry.fold_grid(65, 4, "t", dims=3)
    with pytest.raises(ValueError, match="workgroups exceed"):
        geometry.fold_grid(5, 4, "t", dims=1)


@pytest.mark.parametrize("groups", [1, 3, 4, 5, 15, 16, 17, 63, 64])
def test_fold_grid_three_dims_covers_every_group_once_folded(groups):
    x, y, z = geometry.fold_grid(groups, 4, "t", dims=3)
    assert max(x, y, z) <= 4 and x * y * z >= groups
    assert x * y * (z - 1) < groups  # no wasted plane of workgroups


@pytest.mark.parametrize("groups,grid", [
    (0, (1, 1, 1)), (7, (7, 1, 1)), (LIMIT + 1, (LIMIT, 2, 1)),
    (LIMIT * LIMIT, (LIMIT, LIMIT, 1)), (LIMIT * LIMIT * 3, (LIMIT, LIMIT, 1)),  # capped: the shader loops
])
def test_looped_grid_caps_at_the_limit(groups, grid):
    assert geometry.looped_grid(groups, LIMIT) == grid


def test_backend_grids_read_the_adapter_limit():
    from webgrad.backend.webgpu.backend import WebGPUBackend

    class Fake:
        limits = {"max_compute_workgroups_per_dimension": 4}

    assert WebGPUBackend.grid(Fake, 17, "t", dims=3) == (4, 4, 2)
    assert WebGPUBackend.grid(Fake, 5, "t") == (4, 2, 1)
    assert WebGPUBackend.looped_grid(Fake, 100) == (4, 4, 1)


# -- element kinds -----------------------------------------------------------------------
def test_element_table_matches_the_host_dtypes():
    import numpy as np

    for kind, element in geometry.ELEMENTS.items():
        assert element.itemsize == np.dtype(element.numpy).itemsize == geometry.itemsize(kind)
        # every kind is a WGSL scalar type of its own, but the packed ones: 2 to a u32 word
        assert element.wgsl == ("u32" if kind in geometry.PACKED else kind)
        float16_kinds = ("f16", "f16p") if kind in ("f16", "f16p") else (kind,)  # as the adapter allows
        assert geometry.KIND[geometry.dtype_of(kind).name] in float16_kinds
    assert set(geometry.KIND.values()) <= set(geometry.ELEMENTS)
    assert geometry.KIND["int64"] == "i32"  # int64 is stored as 32-bit on the device


class _FakePool:
    def acquire(self, nbytes, label):
        return ("buffer", nbytes)

    def release(self, buffer):
        pass


def test_buffer_bytes_follow_the_itemsize(monkeypatch):
    """Sizes and byte offsets scale by the kind's itemsize, not by 4 (f16, int8 come next)."""
    from webgrad.backend.webgpu.backend import WebGPUBackend

    class Fake:
        pool = _FakePool()

    half = geometry.Element("f16", 2, geometry.np.float16, "float16")
    monkeypatch.setitem(geometry.ELEMENTS, "f16", half)
    f32 = WebGPUBackend.empty(Fake, (3, 4), "f32", "t")
    f16 = WebGPUBackend.empty(Fake, (3, 4), "f16", "t")
    assert (f32.storage.nbytes, f16.storage.nbytes) == (48, 24)
    assert WebGPUBackend.empty(Fake, (0,), "f16", "t").storage.nbytes == 2  # never a 0-byte buffer
    view = f16.view((2, 4), (4, 1), offset=4)
    assert WebGPUBackend._readable(Fake, view)[1:] == (8, 16)  # byte offset and length
    raw = geometry.np.arange(8, dtype=geometry.np.float16).tobytes()
    assert WebGPUBackend._decode(view, raw).dtype == geometry.np.float16


def test_wgsl_aliases_come_from_the_table():
    from webgrad.backend.webgpu import source

    code = source.assemble("unary.wgsl", (("A", "i32"), ("O", "f32")), "O(a)")
    assert code.startswith("alias A = i32;\nalias SA = i32;\nalias O = f32;\nalias SO = f32;\n")
    # f16: stored as f16 (S-alias), computed as f32, with the extension enabled first
    code = source.assemble("unary.wgsl", (("A", "f16"), ("O", "f16")), "O(a)")
    assert code.startswith("enable f16;\nalias A = f32;\nalias SA = f16;\nalias O = f32;\nalias SO = f16;\n")
    # packed kinds: u32 words, atomic where written (other threads share a word); no extension
    code = source.assemble("unary.wgsl", (("A", "bf16"), ("O", "f16p")), "O(a)")
    assert code.startswith("alias A = f32;\nalias SA = u32;\nalias O = f32;\nalias SO = atomic<u32>;\n")
    assert "wg_bf16_value(a[i >> 1u] >> ((i & 1u) * 16u))" in code and "wg_f16_bits(v) << shift" in code
    code = source.assemble("unary.wgsl", (("A", "i8"), ("O", "u8")), "O(a)")
    assert code.startswith("alias A = i32;\nalias SA = u32;\nalias O = i32;\nalias SO = atomic<u32>;\n")
    assert "wg_i8_value(a[i >> 2u] >> ((i & 3u) * 8u))" in code and "~(0xffu << shift)" in code


def test_broadcast_strides():
    # numpy's broadcasting: new leading dims and stretched size-1 dims read with stride 0
    assert geometry.broadcast_strides((4,), (1,), (3, 4)) == [0, 1]
    assert geometry.broadcast_strides((3, 1), (1, 1), (3, 5)) == [1, 0]
    assert geometry.broadcast_strides((1, 1), (7, 7), (1, 1)) == [7, 7]  # size 1 kept: own stride
    assert geometry.broadcast_strides((), (), (2, 3)) == [0, 0]
    assert geometry.broadcast_strides((2, 3), (-3, 2), (2, 3)) == [-3, 2]
