"""Strided elementwise launches with several elements a thread (strided.wgsl's RUN): on a CPU
adapter a thread takes the largest of STRIDED_RUNS that divides the innermost dim, its operands'
offsets found once and stepped along that dim. Every run size against numpy, over transposed,
flipped (negative strides), broadcast (stride 0), stepped and offset views, for one, two and three
operands, into a new array and into a strided view; a GPU takes one element a thread."""
import numpy as np
import pytest

import webgrad
from conftest import requires_webgpu
from webgrad.backend.webgpu import elementwise

gpu = requires_webgpu
rng = np.random.default_rng(0)
VIEWS = {
    "transposed": lambda t: t.transpose(0, 2),
    "flipped": lambda t: t.flip(-1),
    "stepped": lambda t: t[:, ::2, 1:],
    "permuted_offset": lambda t: t[1:].permute(2, 0, 1),
}


@pytest.fixture(params=[1, 2, 4, 8, 16])
def run(request, monkeypatch):
    monkeypatch.setattr(elementwise, "STRIDED_RUNS", (request.param,))
    monkeypatch.setattr(elementwise, "is_cpu_adapter", lambda info: True)
    elementwise._PLANS.clear()
    yield request.param
    elementwise._PLANS.clear()


@gpu
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_copy_add_and_where_of_views(run, view):
    a, b = rng.standard_normal((4, 6, 16), dtype=np.float32), rng.standard_normal((4, 6, 16), dtype=np.float32)
    ta, tb = (webgrad.tensor(x, device="webgpu") for x in (a, b))
    va, vb = VIEWS[view](ta), VIEWS[view](tb)
    na, nb = va.cpu().numpy(), vb.cpu().numpy()
    np.testing.assert_array_equal(va.contiguous().numpy(), na)
    np.testing.assert_allclose((va + vb[..., :1]).numpy(), na + nb[..., :1], rtol=1e-6)  # broadcast: stride 0
    np.testing.assert_allclose(webgrad.where(va > 0, va, vb).numpy(), np.where(na > 0, na, nb), rtol=1e-6)


@gpu
def test_into_a_strided_view(run):
    out = webgrad.zeros(6, 32, device="webgpu")
    src = rng.standard_normal((16, 6), dtype=np.float32)
    out[:, ::2] = webgrad.tensor(src, device="webgpu").T
    expected = np.zeros((6, 32), np.float32)
    expected[:, ::2] = src.T
    np.testing.assert_array_equal(out.numpy(), expected)


@gpu
def test_run_is_the_largest_that_divides_the_innermost_dim(monkeypatch):
    monkeypatch.setattr(elementwise, "is_cpu_adapter", lambda info: True)
    seen = []
    original = elementwise._plan
    monkeypatch.setattr(elementwise, "_plan", lambda *args: seen.append(original(*args)) or seen[-1])
    elementwise._PLANS.clear()
    for inner, want in ((24, 8), (6, 2), (7, 1)):
        webgrad.zeros(3, 5, inner, device="webgpu").transpose(0, 1).contiguous()
        assert dict(seen[-1][3])["RUN"] == want
    monkeypatch.setattr(elementwise, "is_cpu_adapter", lambda info: False)  # a GPU: one element a thread
    webgrad.zeros(3, 5, 24, device="webgpu").transpose(0, 1).contiguous()
    assert dict(seen[-1][3])["RUN"] == 1
    elementwise._PLANS.clear()


@gpu
def test_negative_strides(run):
    """The product convolution's flipped kernels are views with negative strides (backend/webgpu/conv.py)."""
    backend = webgrad.backend.get_backend("webgpu")
    host = rng.standard_normal((3, 5, 16), dtype=np.float32)
    data = webgrad.tensor(host, device="webgpu")._data
    flipped = data.view((5, 3, 16), (16, 80, -1), 15)  # x[:, :, ::-1] with dims 0 and 1 swapped
    np.testing.assert_array_equal(backend.to_numpy(backend.contiguous(flipped)),
                                  host[:, :, ::-1].transpose(1, 0, 2))
