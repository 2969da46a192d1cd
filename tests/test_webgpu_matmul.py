"""matmul on WebGPU against numpy: shapes, strided operands, batching, grid
folding, gradients, and both kernel variants (register blocking and shared-memory
tiling) whatever the adapter here would choose."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import requires_webgpu
from webgrad.backend.webgpu import matmul as gpu_matmul

pytestmark = requires_webgpu

RTOL, ATOL = 1e-5, 1e-5


@pytest.fixture(params=sorted(gpu_matmul.BLOCKINGS))
def variant(request, monkeypatch):
    """Run the test once per kernel variant."""
    monkeypatch.setattr(gpu_matmul, "VARIANT", request.param)
    return request.param


def rand(*shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    if np.dtype(dtype).kind == "i":
        return rng.integers(-5, 6, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def on_gpu(array):
    return webgrad.tensor(array, device="webgpu")


def check(got, want, exact=False):
    got = got.numpy()
    assert got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale)


def check_against_cpu(x, y):
    """x @ y on webgpu equals the same product on cpu."""
    check(x @ y, (x.cpu() @ y.cpu()).numpy())


SHAPES = [
    ((1, 1), (1, 1)),
    ((7, 13), (13, 5)),                  # primes
    ((33, 10), (10, 35)),                # non-multiples of every block, K % 4 != 0
    ((65, 67), (67, 70)),                # beyond one tile of either variant
    ((32, 64), (64, 96)),                # multiples of the block
    ((4, 4), (4, 4)),
    ((3, 2), (2, 1)),
    ((2, 3, 5, 7), (7, 4)),              # batched @ 2-D
    ((2, 1, 5, 7), (3, 7, 4)),           # broadcast batch dims
    ((1, 5, 8), (3, 8, 6)),
    ((3, 6, 9), (3, 9, 2)),
]


@pytest.mark.parametrize("a_shape,b_shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_shapes(variant, a_shape, b_shape):
    a, b = rand(*a_shape), rand(*b_shape, seed=1)
    check(on_gpu(a) @ on_gpu(b), a @ b)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((5,), (5,)), ((5,), (5, 3)), ((3, 5), (5,)), ((2, 3, 5), (5,)), ((5,), (2, 5, 3)),
], ids=lambda s: "x".join(map(str, s)))
def test_vectors(variant, a_shape, b_shape):
    a, b = rand(*a_shape), rand(*b_shape, seed=1)
    out = webgrad.matmul(on_gpu(a), on_gpu(b))
    check(out, np.matmul(a, b))


def test_strided_operands(variant):
    a, b = rand(9, 12), rand(12, 10, seed=1)
    x, y = on_gpu(a), on_gpu(b)
    cases = {
        "a.mT @ b": (on_gpu(a.T.copy()).mT @ y, a @ b),
        "a @ b.mT": (x @ on_gpu(b.T.copy()).mT, a @ b),
        "a.mT @ b.mT": (on_gpu(a.T.copy()).mT @ on_gpu(b.T.copy()).mT, a @ b),
        "a[:, ::2] @ b[::2]": (x[:, ::2] @ y[::2], a[:, ::2] @ b[::2]),
        "a[1:] @ b": (x[1:] @ y, a[1:] @ b),                       # offset not a multiple of 4
        "a[4:, 4:] @ b[4:, 4:]": (x[4:, 4:] @ y[4:, 4:], a[4:, 4:] @ b[4:, 4:]),
        "flip(a) @ b": (x.flip(0) @ y.flip(1), a[::-1] @ b[:, ::-1]),  # negative strides
        "a[::3] @ b[:, 1::2]": (x[::3] @ y[:, 1::2], a[::3] @ b[:, 1::2]),
    }
    for name, (got, want) in cases.items():
        try:
            check(got, want)
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None


LAYOUTS = ["row", "col", "row_padded", "col_padded", "every_other"]


def laid_out(array, layout):
    """A webgpu view holding ``array``'s values with the given memory layout:
    row- or column-major, inside a wider (4-aligned) buffer, or every other element."""
    rows, cols = array.shape
    if layout == "row":
        return on_gpu(array)
    if layout == "col":
        return on_gpu(np.ascontiguousarray(array.T)).mT
    if layout == "row_padded":
        wide = np.zeros((rows, -(-cols // 4) * 4 + 4), np.float32)
        wide[:, :cols] = array
        return on_gpu(wide)[:, :cols]
    if layout == "col_padded":
        wide = np.zeros((cols, -(-rows // 4) * 4 + 4), np.float32)
        wide[:, :rows] = array.T
        return on_gpu(wide)[:, :rows].mT
    wide = np.zeros((rows, 2 * cols), np.float32)
    wide[:, ::2] = array
    return on_gpu(wide)[:, ::2]


CUSTOM_BLOCKINGS = [
    gpu_matmul.REGISTER,
    gpu_matmul.Blocking("matmul", wg_x=2, wg_y=2, tm=4, tn4=1),            # many small tiles
    gpu_matmul.Blocking("matmul_tiled", wg_x=4, wg_y=2, tm=2, tn4=2, tile_k=4),  # several k steps
    gpu_matmul.Blocking("matmul_4x4", wg_x=2, wg_y=2, tm=4),  # k four at a time where A's rows allow, then one
    gpu_matmul.Blocking("matmul_4x4", wg_x=2, wg_y=1, tm=8),  # two 4 x 4 blocks a thread; rows past m clamped
    gpu_matmul.Blocking("matmul_4x4", wg_x=1, wg_y=2, tm=4, tn4=2),  # side by side; columns past n clamped
    gpu_matmul.Blocking("matmul_4x4", wg_x=1, wg_y=1, tm=8, tn4=2),  # four
]


@pytest.mark.parametrize("blocking", CUSTOM_BLOCKINGS, ids=lambda b: f"{b.entry}-{b.wg_x}x{b.wg_y}-{b.tm}x{4 * b.tn4}")
@pytest.mark.parametrize("m,k,n", [(12, 8, 20), (10, 9, 6)])
def test_layouts_and_blockings(monkeypatch, blocking, m, k, n):
    """Every pairing of operand layouts (which selects vec4 or element reads in
    the register kernel), with edge tiles, under several blockings."""
    monkeypatch.setitem(gpu_matmul.BLOCKINGS, "custom", blocking)
    monkeypatch.setattr(gpu_matmul, "VARIANT", "custom")
    a, b = rand(m, k), rand(k, n, seed=1)
    for a_layout in LAYOUTS[2:]:       # vec4 along k, vec4 along m, element reads
        for b_layout in LAYOUTS[2:]:   # vec4 along n, vec4 along k, element reads
            try:
                check(laid_out(a, a_layout) @ laid_out(b, b_layout), a @ b)
            except AssertionError as err:
                raise AssertionError(f"A {a_layout}, B {b_layout}: {err}") from None


def test_expanded_and_permuted_batches(variant):
    a, b = rand(3, 1, 6, 5), rand(4, 5, 7, seed=1)
    x = on_gpu(a).expand(3, 4, 6, 5)           # stride-0 batch dim
    check(x @ on_gpu(b), a @ b)
    c = rand(6, 2, 5)                          # batch dim in the middle of memory
    check(on_gpu(c).permute(1, 0, 2) @ on_gpu(b[:2]), c.transpose(1, 0, 2) @ b[:2])


def test_many_batch_dims(variant):
    # Five batch dims that do not merge (broadcast alternates): more than the
    # kernel's four, so the launcher materializes the operands first.
    a, b = rand(2, 1, 2, 1, 2, 3, 4), rand(1, 2, 1, 2, 1, 4, 5, seed=1)
    check(on_gpu(a) @ on_gpu(b), a @ b)


def test_empty_and_zero_inner(variant):
    cases = [((3, 0), (0, 4)), ((0, 3), (3, 4)), ((3, 4), (4, 0)), ((0, 2, 3), (3, 4)), ((2, 0, 5), (5, 3))]
    for a_shape, b_shape in cases:
        a, b = rand(*a_shape), rand(*b_shape, seed=1)
        check(on_gpu(a) @ on_gpu(b), a @ b)


def test_integers(variant):
    a, b = rand(6, 9, dtype=np.int32), rand(9, 5, seed=1, dtype=np.int32)
    out = on_gpu(a) @ on_gpu(b)
    assert out.dtype == webgrad.int32
    check(out, a @ b, exact=True)
    c, d = rand(8, 12, dtype=np.int32), rand(12, 8, seed=1, dtype=np.int32)     # vec4 reads
    check(on_gpu(c) @ on_gpu(d), c @ d, exact=True)
    check(on_gpu(c.T.copy()).mT @ on_gpu(d.T.copy()).mT, c @ d, exact=True)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    check(on_gpu(a64)[:, 1:] @ on_gpu(b64)[1:], a64[:, 1:] @ b64[1:], exact=True)


def test_float16_sums_in_float32(variant):
    """float16 operands are read as f16 (where the adapter has 'shader-f16'), summed in f32 and
    stored as f16: the cpu's float16 product (also summed in float32), within one rounding."""
    cases = (((6, 9), (9, 5), False), ((8, 12), (12, 8), False), ((3, 16, 8), (8, 20), True))
    for a_shape, b_shape, transpose in cases:
        a, b = rand(*a_shape).astype(np.float16), rand(*b_shape, seed=1).astype(np.float16)
        x, y = on_gpu(a), on_gpu(b)
        if transpose:  # strided operands, element reads
            x, y = on_gpu(np.ascontiguousarray(a.swapaxes(-1, -2))).mT, on_gpu(np.ascontiguousarray(b.T)).mT
        out = x @ y
        assert out.dtype is webgrad.float16
        want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
        np.testing.assert_allclose(out.cpu().numpy().astype(np.float32), want.astype(np.float32),
                                   rtol=2 ** -10, atol=2 ** -14)


def test_grid_folds_under_small_limits(variant):
    blocking = gpu_matmul.BLOCKINGS[variant]
    m, n, batch = 2 * blocking.rows + 1, 2 * blocking.cols + 3, 5   # 3 x 3 tiles x 5 = 45 workgroups
    a, b = rand(batch, m, 6), rand(batch, 6, n, seed=1)
    with webgrad.webgpu.override_limits(max_compute_workgroups_per_dimension=4):
        check(on_gpu(a) @ on_gpu(b), a @ b)
        with pytest.raises(ValueError, match="workgroups"):
            on_gpu(rand(70, 1, 2)) @ on_gpu(rand(2, 1, seed=1))           # 70 > 4 * 4 * 4


def test_fold_grid():
    class Limits:
        limits = {"max_compute_workgroups_per_dimension": 4}

    assert gpu_matmul.fold_grid(Limits, 3, "t") == (3, 1, 1)
    assert gpu_matmul.fold_grid(Limits, 5, "t") == (4, 2, 1)
    assert gpu_matmul.fold_grid(Limits, 17, "t") == (4, 4, 2)
    assert gpu_matmul.fold_grid(Limits, 64, "t") == (4, 4, 4)


def test_vector_modes_follow_strides():
    """vec4 reads are used exactly where the strides allow them."""
    from webgrad.backend.webgpu.array import GPUArray

    def view(shape, strides, offset=0):
        return GPUArray(None, shape, "f32", strides, offset)

    def modes(a, b):
        return gpu_matmul.vector_modes(a, b, [], [], [], a.shape[0], b.shape[1], a.shape[1], 4)

    assert modes(view((8, 8), (8, 1)), view((8, 8), (8, 1))) == (1, 1)    # both row-major
    assert modes(view((8, 8), (1, 8)), view((8, 8), (1, 8))) == (2, 2)    # both transposed (x.mT)
    assert modes(view((8, 6), (6, 1)), view((6, 8), (8, 1))) == (0, 1)    # rows of A not 4-aligned
    assert modes(view((8, 8), (8, 1), 1), view((8, 8), (16, 2))) == (0, 0)  # offset 1; B stride 2
    assert modes(view((8, 3), (3, 1)), view((3, 8), (8, 1))) == (0, 0)    # K < 4


def test_choose_blocking(monkeypatch):
    class Device:
        adapter_info = {"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "adapter_type": "CPU"}

    class Backend:
        device = Device

    monkeypatch.setattr(gpu_matmul, "VARIANT", None)
    assert gpu_matmul.choose_blocking(Backend, 64, 128) is gpu_matmul.REGISTER
    assert gpu_matmul.choose_blocking(Backend, 64, 64) is gpu_matmul.EIGHT  # most of REGISTER's columns would idle
    assert gpu_matmul.choose_blocking(Backend, 16, 512) is gpu_matmul.EIGHT  # and most of its rows here
    Device.adapter_info = {"vendor": "google", "architecture": "swiftshader", "device": "", "adapter_type": ""}
    assert gpu_matmul.choose_blocking(Backend, 64, 512) is gpu_matmul.EIGHT  # 8 x 8 blocks in plain variables
    assert gpu_matmul.choose_blocking(Backend, 64, 10) is gpu_matmul.EIGHT
    Device.adapter_info = {"device": "NVIDIA H200", "adapter_type": "DiscreteGPU"}
    assert gpu_matmul.choose_blocking(Backend, 64, 10) is gpu_matmul.TILED
    monkeypatch.setattr(gpu_matmul, "VARIANT", "register")
    assert gpu_matmul.choose_blocking(Backend, 64, 10) is gpu_matmul.REGISTER
    monkeypatch.setattr(gpu_matmul, "VARIANT", "fast")
    with pytest.raises(ValueError, match="unknown variant"):
        gpu_matmul.choose_blocking(Backend, 64, 10)
    with pytest.raises(ValueError, match="matmul_4x4 computes 4 or 8 rows by 4 or 8 columns, got 6 x 4"):
        gpu_matmul.Blocking("matmul_4x4", wg_x=4, wg_y=4, tm=6)


@pytest.mark.parametrize("a_shape,b_shape", [((5, 7), (7, 3)), ((2, 4, 6), (2, 6, 3)), ((2, 1, 4, 6), (3, 6, 5))],
                         ids=lambda s: "x".join(map(str, s)))
def test_gradients_match_cpu(variant, a_shape, b_shape):
    a, b = rand(*a_shape), rand(*b_shape, seed=1)
    g = rand(*np.broadcast_shapes(a_shape[:-2], b_shape[:-2]), a_shape[-2], b_shape[-1], seed=2)
    grads = {}
    for device in ("cpu", "webgpu"):
        x = webgrad.tensor(a, device=device, requires_grad=True)
        y = webgrad.tensor(b, device=device, requires_grad=True)
        (x @ y).backward(webgrad.tensor(g, device=device))
        grads[device] = (x.grad.numpy(), y.grad.numpy())
    for got, want in zip(grads["webgpu"], grads["cpu"]):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * max(1.0, np.abs(want).max()))


def test_mixed_devices_and_bad_shapes():
    x = on_gpu(rand(3, 4))
    with pytest.raises(ValueError, match="inner dimensions differ"):
        x @ on_gpu(rand(5, 2))
    with pytest.raises(RuntimeError, match="same device"):
        x @ webgrad.tensor(rand(4, 2))


def test_product_stays_on_device_and_is_reused(variant):
    # Chained products read the previous output in place (no host round trip).
    a, b, c = rand(6, 5), rand(5, 7, seed=1), rand(7, 3, seed=2)
    out = on_gpu(a) @ on_gpu(b) @ on_gpu(c)
    assert out.device == "webgpu"
    check(out, a @ b @ c)


def test_an_inner_dimension_past_the_cpu_adapters_loop_limit_is_refused_not_wrong():
    """llvmpipe stops an invocation silently after ~65535 loop trips: a product whose K loop
    would pass that raises, naming the sizes, instead of returning a partial sum."""
    from webgrad.backend.webgpu import backend
    from webgrad.backend.webgpu.geometry import is_cpu_adapter

    k = 4 * (gpu_matmul.LOOP_TRIP_LIMIT + 8)
    a, b = webgrad.ones(1, k, device="webgpu"), webgrad.ones(k, 1, device="webgpu")
    if is_cpu_adapter(backend().device.adapter_info or {}):
        with pytest.raises(ValueError, match=rf"matmul: an inner dimension of {k} .* move the tensors to 'cpu'"):
            a @ b
    else:
        assert (a @ b).item() == k
