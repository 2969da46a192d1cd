"""float16 and bfloat16: names, casts and cpu storage, checked against torch and numpy.

float16 is numpy's float16; bfloat16 is float32 storage rounded to bfloat16 after
every op (see webgrad.dtypes). WebGPU has neither and says so.
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import need_module, requires_webgpu

VALUES = np.array([1.0, 3.14159, -1e-3, 65504.0, 7e4, 3.3e38, 3.4e38, -np.inf, np.nan, 1e-42,
                   0.1, 2.0 ** -130], dtype=np.float32)


def torch_round(values, name):
    torch = need_module("torch")
    return torch.tensor(values).to(getattr(torch, name)).float().numpy()


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_cast_rounds_like_torch(name):
    dtype = getattr(webgrad, name)
    rng = np.random.default_rng(0)
    values = np.concatenate([VALUES, rng.standard_normal(2000).astype(np.float32) * 100])
    tensor = webgrad.tensor(values).to(dtype)
    assert tensor.dtype is dtype and tensor.element_size() == 2
    np.testing.assert_array_equal(tensor.float().numpy(), torch_round(values, name))


def test_names_and_methods():
    x = webgrad.tensor([1.5, -2.25])
    assert webgrad.half is webgrad.float16
    assert x.half().dtype is webgrad.float16 and x.bfloat16().dtype is webgrad.bfloat16
    assert x.to(webgrad.float16).dtype is webgrad.float16
    assert x.half().float().dtype is webgrad.float32
    assert x.bfloat16().double().dtype is webgrad.float64
    assert x.half().long().tolist() == [1, -2]
    assert webgrad.zeros(2, dtype="half").dtype is webgrad.float16
    assert webgrad.from_numpy(np.ones(2, np.float16)).dtype is webgrad.float16
    assert webgrad.float16.is_floating_point and webgrad.bfloat16.is_floating_point


def test_numpy_of_half_tensors():
    x = webgrad.tensor([0.1, 2.0])
    assert x.half().numpy().dtype == np.float16
    bf = x.bfloat16().numpy()  # numpy has no bfloat16: float32 holding the bfloat16 values
    assert bf.dtype == np.float32
    np.testing.assert_array_equal(bf, torch_round(np.array([0.1, 2.0], np.float32), "bfloat16"))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_ops_compute_in_float32_and_round_like_torch(name):
    torch = need_module("torch")
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
    tdtype = getattr(torch, name)
    ta, tb = torch.tensor(a).to(tdtype), torch.tensor(b).to(tdtype)
    wa, wb = webgrad.tensor(a).to(getattr(webgrad, name)), webgrad.tensor(b).to(getattr(webgrad, name))
    for ours, theirs in [(wa + wb, ta + tb), (wa * wb, ta * tb), (wa.exp(), ta.exp()),
                         (wa / wb, ta / tb)]:
        assert ours.dtype is getattr(webgrad, name)
        np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())
    # Reductions and matmul accumulate differently; compare within a couple of ulps.
    ulp = 2.0 ** -8 if name == "bfloat16" else 2.0 ** -11
    for ours, theirs in [(wa.sum(1), ta.sum(1)), (wa @ wb.t(), ta @ tb.t())]:
        np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=4 * ulp, atol=4 * ulp)
    # Results stay exactly representable.
    out = (wa * 1.001).float().numpy()
    np.testing.assert_array_equal(out, torch_round(out, name))


def test_promotion():
    h, b = webgrad.ones(2).half(), webgrad.ones(2).bfloat16()
    assert (h + b).dtype is webgrad.float32  # as torch: neither holds the other
    assert (h + webgrad.ones(2)).dtype is webgrad.float32
    assert (b + webgrad.ones(2, dtype=webgrad.float64)).dtype is webgrad.float64
    assert (h + 1.5).dtype is webgrad.float16
    assert (b * webgrad.tensor([2, 3])).dtype is webgrad.bfloat16


def test_gradient_in_half_precision():
    x = webgrad.tensor([1.0, 2.0, 3.0]).half().requires_grad_()
    (x * x).sum().backward()
    assert x.grad.dtype is webgrad.float16
    np.testing.assert_array_equal(x.grad.float().numpy(), [2.0, 4.0, 6.0])


@requires_webgpu
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_webgpu_refuses_half_with_the_fix(name):
    dtype = getattr(webgrad, name)
    with pytest.raises(TypeError, match=f"webgpu: {name} .*\\.float\\(\\)"):
        webgrad.ones(2).to(dtype).to("webgpu")
    with pytest.raises(TypeError, match=name):
        webgrad.ones(2, device="webgpu").to(dtype)
    assert webgrad.ones(2).to(dtype).float().to("webgpu").tolist() == [1.0, 1.0]
