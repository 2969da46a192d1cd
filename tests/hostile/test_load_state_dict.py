"""Module.load_state_dict either loads everything or changes nothing.

Every failure class, on every device, strict and not: after the RuntimeError
every parameter and buffer is the same object with bitwise the same data,
dtype and device. Values convert as torch's copy_ does (float64 -> float32).
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import need_module

nn = webgrad.nn


def make_model(device):
    webgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)).to(device)
    model(webgrad.randn(5, 3, device=device))  # running stats and the step counter move off their defaults
    return model


def snapshot(model):
    """Everything a failed load must leave as it was."""
    return {key: (id(t), t.dtype, str(t.device), tuple(t.shape), t.detach().cpu().numpy().tobytes())
            for key, t in model.state_dict(keep_vars=True).items()}


def good_state(model):
    """A loadable state dict with values different from the model's, in the model's key order."""
    state = {}
    for key, value in model.state_dict().items():
        value = value.cpu()
        state[key] = value * 2 + 1 if value.is_floating_point() else value + 7
    return state


def edited(model, **changes):
    state = good_state(model)
    for key, value in changes.items():
        key = key.replace("__", ".")
        if value is None:
            del state[key]
        else:
            state[key] = value
    return state


LAST = "3__bias"  # the last key: a load that writes as it goes has written all the others
FAILURES = {
    "wrong-shape-last": (lambda m: edited(m, **{LAST: webgrad.zeros(3)}), ["size mismatch for 3.bias", "(3,)", "(2,)"]),
    "wrong-shape-first": (lambda m: edited(m, **{"0__weight": webgrad.zeros(3, 4)}), ["size mismatch for 0.weight"]),
    "not-a-tensor": (lambda m: edited(m, **{LAST: [0.5, 0.5]}), ['"3.bias"', "expected a Tensor", "list"]),
    "a-number": (lambda m: edited(m, **{"1__num_batches_tracked": 3}), ['"1.num_batches_tracked"', "int"]),
    "unconvertible-array": (lambda m: edited(m, **{LAST: np.array(["a", "b"])}), ['"3.bias"', "numpy array"]),
    "object-array": (lambda m: edited(m, **{LAST: np.array(["a", None], dtype=object)}), ['"3.bias"']),
    "missing-key": (lambda m: edited(m, **{LAST: None}), ["Missing key(s)", '"3.bias"']),
    "unexpected-key": (lambda m: {**good_state(m), "4.weight": webgrad.ones(1)}, ["Unexpected key(s)", '"4.weight"']),
    "several-at-once": (lambda m: {**edited(m, **{"0__bias": webgrad.ones(5), LAST: "x"}), "extra": webgrad.ones(1)},
                        ["size mismatch for 0.bias", '"3.bias"', '"extra"']),
}
STRICT_ONLY = {"missing-key", "unexpected-key"}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_failed_load_changes_nothing(device, failure, strict):
    model = make_model(device)
    before = snapshot(model)
    make_state, fragments = FAILURES[failure]
    state = make_state(model)
    if not strict and failure in STRICT_ONLY:
        model.load_state_dict(state, strict=False)  # not an error then: the rest loads
        assert snapshot(model) != before
        return
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(state, strict=strict)
    for fragment in fragments:
        if strict or fragment != '"extra"':  # unexpected keys are only errors when strict
            assert fragment in str(info.value), str(info.value)
    assert ('"extra"' in str(info.value)) == (strict and failure == "several-at-once")
    assert snapshot(model) == before


@pytest.mark.parametrize("assign", [False, True])
def test_counter_beyond_32_bits(device, assign):
    """int64 lives as 32-bit on WebGPU: a 2**40 step counter cannot go there."""
    model = make_model(device)
    before = snapshot(model)
    state = edited(model, **{"1__num_batches_tracked": webgrad.tensor(2**40)})
    if device == "cpu":
        model.load_state_dict(state, assign=assign)
        assert model[1].num_batches_tracked.item() == 2**40
        return
    with pytest.raises(RuntimeError, match=r'"1.num_batches_tracked".*32-bit'):
        model.load_state_dict(state, assign=assign)
    assert snapshot(model) == before


def test_assign_with_a_dtype_the_device_lacks(device):
    model = make_model(device)
    before = snapshot(model)
    state = edited(model, **{LAST: webgrad.zeros(2, dtype=webgrad.float64)})
    if device == "cpu":
        model.load_state_dict(state, assign=True)  # assign keeps the checkpoint's dtype, as torch
        assert model[3].bias.dtype is webgrad.float64 and model[3].bias.requires_grad
        return
    with pytest.raises(RuntimeError, match=r'"3.bias".*float64'):
        model.load_state_dict(state, assign=True)
    assert snapshot(model) == before


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_other_float_checkpoints_convert_to_the_parameters_dtype(device, dtype):
    torch = need_module("torch")
    model = make_model(device)
    identities = {key: id(t) for key, t in model.state_dict(keep_vars=True).items()}
    rng = np.random.default_rng(0)
    state, reference = {}, {}
    for key, value in model.state_dict().items():
        if value.is_floating_point():
            array = rng.standard_normal(tuple(value.shape)) / 3
            state[key] = webgrad.tensor(array, dtype=webgrad.float64).to(getattr(webgrad, dtype))
            # torch's copy_ from the same checkpoint into a float32 tensor
            source = torch.tensor(array, dtype=torch.float64).to(getattr(torch, dtype))
            reference[key] = torch.zeros(tuple(value.shape)).copy_(source).numpy()
        else:
            state[key] = webgrad.tensor(41)
            reference[key] = np.array(41)
    assert model.load_state_dict(state) == ([], [])
    for key, tensor in model.state_dict(keep_vars=True).items():
        assert id(tensor) == identities[key] and str(tensor.device) == device
        assert tensor.dtype is (webgrad.float32 if tensor.is_floating_point() else webgrad.int64)
        np.testing.assert_array_equal(tensor.detach().cpu().numpy(), reference[key])


def test_loaded_values_are_copies(device):
    """Changing the state dict afterwards must not change the model (and vice versa)."""
    model = make_model(device)
    state = good_state(model)
    model.load_state_dict(state)
    expected = model[3].bias.detach().cpu().numpy().copy()
    state["3.bias"].add_(100)
    np.testing.assert_array_equal(model[3].bias.detach().cpu().numpy(), expected)


def test_float64_file_into_a_model(tmp_path, device):
    """The issue's case: a float64 checkpoint file loaded into a (WebGPU) model."""
    model = make_model(device)
    state = {k: (v.double() if v.is_floating_point() else v) for k, v in good_state(model).items()}
    path = tmp_path / "f64.safetensors"
    webgrad.save(state, path)
    model.load_state_dict(webgrad.load(path))
    np.testing.assert_array_equal(model[3].bias.detach().cpu().numpy(), state["3.bias"].float().numpy())
