"""The op table (tests/op_cases.py) against numpy on every device: forward values,
shapes and dtypes. Also the creation ops, which have no inputs."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import assert_close, need_module, supports_dtype
from op_cases import CASES, CREATION_CASES, GETITEM_KEYS, tolerance, torch_getitem


def _flatten(result) -> list:
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def _expected_dtypes(case, arrays, reference_outputs) -> list:
    if case.dtype is not None:
        names = case.dtype if isinstance(case.dtype, tuple) else (case.dtype,) * len(reference_outputs)
        return [webgrad.dtypes.from_name(n) for n in names]
    # numpy's own result dtype, from the reference run on the inputs' own dtypes.
    natives = _flatten(case.ref(*[a.copy() for a in arrays]))
    return [webgrad.dtypes.from_numpy(np.asarray(r).dtype) for r in natives]


def _device_can_run(device, arrays, output_dtypes) -> bool:
    needed = list(output_dtypes) + [webgrad.dtypes.from_numpy(a.dtype) for a in arrays]
    return all(supports_dtype(device, d) for d in needed)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward(case, device):
    arrays = case.make_inputs()
    # The reference runs in float64 (float32 inputs widened exactly), so it is the
    # true value and the tolerance measures webgrad's own rounding.
    wide = [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays]
    expected = [np.asarray(r) for r in _flatten(case.ref(*wide))]
    dtypes = _expected_dtypes(case, arrays, expected)
    if not _device_can_run(device, arrays, dtypes):
        with pytest.raises(TypeError, match="float64"):  # a clear error, never a silent downcast
            case.fn(*[webgrad.tensor(a, device=device) for a in arrays])
        return
    inputs = [webgrad.tensor(a, device=device) for a in arrays]
    outputs = _flatten(case.fn(*inputs))
    assert len(outputs) == len(expected), f"{case.name}: {len(outputs)} outputs, reference has {len(expected)}"
    for k, (out, ref, dtype) in enumerate(zip(outputs, expected, dtypes)):
        rtol, atol = tolerance(case.op, dtype)
        assert out.device == device
        assert_close(out, ref, rtol, atol, dtype=dtype, msg=f"{case.name} output {k}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_stays_on_its_device(case, fake_device):
    """On a second device every op, forward and backward, keeps to its inputs' device."""
    arrays = case.make_inputs()
    inputs = [webgrad.tensor(a, device=fake_device, requires_grad=case.grad and a.dtype.kind == "f")
              for a in arrays]
    outputs = [o for o in _flatten(case.fn(*inputs)) if isinstance(o, webgrad.Tensor)]
    assert all(o.device == fake_device for o in outputs), case.name
    differentiable = [o for o in outputs if o.requires_grad]
    if differentiable:
        total = sum(o.sum() for o in differentiable)
        total.backward()
        for t in inputs:
            assert t.grad is None or t.grad.device == fake_device, case.name


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_inputs_unchanged(case, device):
    """No op (except the in-place ones on their own copies) writes into its inputs."""
    arrays = case.make_inputs()
    # float64 cases run on the cpu; on webgpu test_forward checks they raise.
    if not _device_can_run(device, arrays, _expected_dtypes(case, arrays, _flatten(case.ref(*arrays)))):
        device = "cpu"
    inputs = [webgrad.tensor(a, device=device) for a in arrays]
    case.fn(*inputs)
    for a, t in zip(arrays, inputs):
        np.testing.assert_array_equal(t.numpy(), a, err_msg=f"{case.name} changed an input")


@pytest.mark.parametrize("case", CREATION_CASES, ids=lambda c: c.name)
def test_creation(case, device):
    if not supports_dtype(device, webgrad.dtypes.from_name(case.dtype)):
        with pytest.raises(TypeError, match="float64"):
            case.fn(device)
        return
    out = case.fn(device)
    assert out.device == device
    assert_close(out, case.ref(), 1e-6, 1e-7, dtype=case.dtype, msg=case.name)
    assert not out.requires_grad


def test_every_op_has_a_case():
    """Completeness, not skip lists: every primitive of webgrad.ops has rows in the
    table, except the internal ones named here (reached only through other ops'
    backward passes, slicing, in-place writes and .to(device))."""
    import importlib

    from webgrad.ops.registry import Op

    core_ops = set()  # the primitives of webgrad.ops (nn and optim declare their own elsewhere)
    for module in ("elementwise", "reduce", "movement", "linalg", "indexing", "device", "scan", "sorting"):
        values = vars(importlib.import_module(f"webgrad.ops.{module}")).values()
        core_ops |= {v.name for v in values if isinstance(v, Op)}
    internal = {"unslice", "index_add", "copy_into", "to_device", "slice", "copy", "cross_entropy_backward"}
    covered = {c.op for c in CASES}
    missing = sorted(name for name in core_ops if name not in covered and name not in internal)
    assert missing == [], f"ops without a row in tests/op_cases.py: {missing}"


@pytest.mark.parametrize("variant, key", GETITEM_KEYS, ids=[v for v, _ in GETITEM_KEYS])
def test_getitem_matches_torch(variant, key):
    """x[key] follows PyTorch (not numpy) where the two disagree; so does the reference."""
    torch = need_module("torch")
    x = np.arange(120.0).reshape(4, 5, 6)
    items = key if isinstance(key, tuple) else (key,)
    torch_key = tuple(torch.tensor(i) if isinstance(i, np.ndarray) else i for i in items)
    expected = torch.tensor(x)[torch_key].numpy()
    np.testing.assert_array_equal(torch_getitem(x, key), expected)
    wg_key = tuple(webgrad.tensor(i) if isinstance(i, np.ndarray) else i for i in items)
    assert_close(webgrad.tensor(x)[wg_key], expected, 0, 0)


def test_an_embeddings_gradient_sums_each_rows_repeats_by_sorting(monkeypatch, device):
    """Take's backward scatters onto a broadcast 0 (an embedding's gradient): on numpy the rows
    of each index are summed after a stable sort (np.add.at costs ~4x more), to np.add.at's
    values; onto a real base np.add.at still runs."""
    from webgrad.ops import indexing

    sorted_calls = []
    rows_summed = indexing._rows_summed
    monkeypatch.setattr(indexing, "_rows_summed", lambda *a: sorted_calls.append(1) or rows_summed(*a))
    rng = np.random.default_rng(0)
    table, ids = rng.standard_normal((7, 3)).astype(np.float32), rng.integers(0, 7, (5, 40))
    g = rng.standard_normal((5, 40, 3)).astype(np.float32)
    weight = webgrad.tensor(table, device=device, requires_grad=True)
    (weight[webgrad.tensor(ids, device=device)] * webgrad.tensor(g, device=device)).sum().backward()
    want = np.zeros_like(table)
    np.add.at(want, ids, g)
    np.testing.assert_allclose(weight.grad.numpy(), want, rtol=1e-5, atol=1e-5)
    assert len(sorted_calls) == (device == "cpu")
    added = np.ones((7, 3), np.float32)
    np.add.at(added, ids[0], g[0])
    base = webgrad.ones(7, 3, device=device)
    got = base.index_add(0, webgrad.tensor(ids[0], device=device), webgrad.tensor(g[0], device=device))
    np.testing.assert_allclose(got.numpy(), added, rtol=1e-5, atol=1e-6)
    assert len(sorted_calls) == (device == "cpu")


@pytest.mark.parametrize("shape, axis", [((16, 4, 32, 32), 3), ((16, 4, 32, 32), -1), ((2048, 10), 1),
                                         ((256, 64), 1), ((3, 64), 1), ((256, 65), 1), ((4, 32), 0), ((3, 1), 1),
                                         ((5,), 0), ((), None)])
def test_softmaxs_row_max_is_numpys(shape, axis):
    """softmax/log_softmax (and cross entropy) on numpy take a short last axis's max down the
    transposed rows: the same values, NaN propagated, any layout."""
    from webgrad.ops.reduce import _row_max

    x = np.asarray(np.random.default_rng(0).standard_normal(shape), dtype=np.float32)
    if x.ndim:
        x.flat[min(5, x.size - 1)] = np.nan
    for array in (x, x.T.copy().T):
        got = _row_max(array, axis)
        np.testing.assert_array_equal(got, np.max(array, axis=axis, keepdims=True))
        assert got.shape == np.max(array, axis=axis, keepdims=True).shape
