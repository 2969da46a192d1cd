"""Integer division by zero: one rule on every device, PyTorch's — a RuntimeError
naming ZeroDivisionError (at once on the cpu and for a Python 0; at the next read
on webgpu, whose kernels flag it). Float division by zero gives inf/nan as numpy."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import assert_close, need_module

NUMERATOR = np.array([7, -7, 3, 0], dtype=np.int64)
DIVISOR = np.array([2, 0, -3, 5], dtype=np.int64)

ROWS = {
    "floor_divide": lambda x, y: x // y,
    "remainder": lambda x, y: x % y,
    "floor_divide_scalar": lambda x, y: x // 0,
    "remainder_scalar": lambda x, y: x % 0,
    "floor_divide_function": lambda x, y: webgrad.ops.floor_divide(x, y),
    "remainder_function": lambda x, y: webgrad.remainder(x, y),
    "remainder_scalar_left": lambda x, y: 5 % y,
    "floor_divide_broadcast": lambda x, y: x.reshape(4, 1) // y,
    "floor_divide_int32": lambda x, y: x.int() // y.int(),
    "remainder_int32": lambda x, y: x.int() % y.int(),
    "floor_divide_0d": lambda x, y: x // y[1],
}


def _inplace_floor_divide(x, y):
    x = x.clone()
    x //= y
    return x


def _inplace_remainder(x, y):
    x = x.clone()
    x %= y
    return x


ROWS["floor_divide_inplace"] = _inplace_floor_divide
ROWS["remainder_inplace"] = _inplace_remainder


@pytest.mark.parametrize("name", list(ROWS))
def test_integer_division_by_zero_raises(name, device):
    x, y = webgrad.tensor(NUMERATOR, device=device), webgrad.tensor(DIVISOR, device=device)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ROWS[name](x, y).numpy()  # the cpu raises in the op, webgpu at this read
    # The error is reported once; the tensors and later ops are fine.
    np.testing.assert_array_equal((x // 2).numpy(), NUMERATOR // 2)
    np.testing.assert_array_equal(y.numpy(), DIVISOR)


@pytest.mark.parametrize("name", [n for n in ROWS if not n.endswith("_function")])  # operators only
def test_torch_raises_too(name):
    torch = need_module("torch")
    x, y = torch.tensor(NUMERATOR), torch.tensor(DIVISOR)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ROWS[name](x, y)


def test_nonzero_divisors_and_float_division(device):
    x = webgrad.tensor(NUMERATOR, device=device)
    y = webgrad.tensor(np.where(DIVISOR == 0, -4, DIVISOR), device=device)
    assert_close(x // y, NUMERATOR // y.numpy(), dtype="int64")
    assert_close(x % y, NUMERATOR % y.numpy(), dtype="int64")
    zero = webgrad.tensor(DIVISOR, device=device).float()
    with np.errstate(divide="ignore", invalid="ignore"):
        assert_close(x.float() // zero, np.floor_divide(NUMERATOR.astype(np.float32), DIVISOR.astype(np.float32)))
        assert_close(x.float() % zero, np.remainder(NUMERATOR.astype(np.float32), DIVISOR.astype(np.float32)))
        assert_close(x / webgrad.tensor(DIVISOR, device=device), NUMERATOR / DIVISOR, dtype="float32")
