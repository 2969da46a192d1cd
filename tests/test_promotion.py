"""dtype promotion: webgrad's result dtype equals PyTorch's for every pair of
operands drawn from {float32, float64, int32, int64, bool} tensors (with dims and
0-d) and Python int/float/bool scalars, for add, mul, div and comparisons.
Where PyTorch raises (bool - bool), webgrad must raise too."""
from __future__ import annotations

import itertools

import pytest

import webgrad
from conftest import need_module

torch = need_module("torch")

DTYPES = ["float32", "float64", "int32", "int64", "bool"]
OPERANDS = ([("tensor", d) for d in DTYPES] + [("zero_dim", d) for d in DTYPES]
            + [("python", v) for v in (2, 2.5, True)])
OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "lt": lambda a, b: a < b,
    "eq": lambda a, b: a == b,
    "maximum": None,  # tensors only, below
    "where": None,
}


def make(module, operand):
    kind, value = operand
    if kind == "python":
        return value
    shape = (2,) if kind == "tensor" else ()
    return module.ones(shape, dtype=getattr(module, value if value != "bool" else "bool"))


def outcome(module, op, a, b):
    try:
        out = op(make(module, a), make(module, b))
    except Exception as err:  # noqa: BLE001 - only whether it raised matters here
        return "raises", type(err).__name__
    name = str(out.dtype).split(".")[-1]
    return "dtype", name


PAIRS = [(a, b) for a, b in itertools.product(OPERANDS, OPERANDS) if not (a[0] == "python" and b[0] == "python")]


@pytest.mark.parametrize("op_name", [k for k, v in OPS.items() if v is not None])
def test_binary_promotion_matches_torch(op_name):
    op = OPS[op_name]
    mismatches = []
    for a, b in PAIRS:
        ours, theirs = outcome(webgrad, op, a, b), outcome(torch, op, a, b)
        if ours[0] != theirs[0] or (ours[0] == "dtype" and ours[1] != theirs[1]):
            mismatches.append(f"{a} {op_name} {b}: webgrad {ours}, torch {theirs}")
    assert not mismatches, "\n".join(mismatches)


def test_maximum_and_where_promotion_match_torch():
    tensors = [o for o in OPERANDS if o[0] != "python"]
    mismatches = []
    for a, b in itertools.product(tensors, tensors):
        for name, op in [("maximum", lambda m, x, y: m.maximum(x, y)),
                         ("where", lambda m, x, y: m.where(m.ones((), dtype=m.bool), x, y))]:
            ours = outcome(webgrad, lambda x, y, op=op: op(webgrad, x, y), a, b)
            theirs = outcome(torch, lambda x, y, op=op: op(torch, x, y), a, b)
            if ours != theirs and not (ours[0] == theirs[0] == "raises"):
                mismatches.append(f"{name}({a}, {b}): webgrad {ours}, torch {theirs}")
    assert not mismatches, "\n".join(mismatches)


def test_default_dtype_float64_changes_python_float_results():
    webgrad.set_default_dtype(webgrad.float64)
    try:
        assert (webgrad.tensor([1, 2]) * 1.5).dtype is webgrad.float64
        assert webgrad.tensor([1.0]).dtype is webgrad.float64
        assert (webgrad.tensor([1, 2]) / 2).dtype is webgrad.float64
        assert webgrad.randn(2).dtype is webgrad.float64
    finally:
        webgrad.set_default_dtype(webgrad.float32)
    assert webgrad.tensor([1.0]).dtype is webgrad.float32


def test_result_type_function():
    rt = webgrad.dtypes.result_type
    assert rt([webgrad.int32], [webgrad.float64], []) is webgrad.float64
    assert rt([webgrad.float32], [webgrad.float64], [1.0]) is webgrad.float32
    assert rt([webgrad.bool], [], [3]) is webgrad.int64
    assert rt([], [webgrad.int32], [3]) is webgrad.int32
    assert webgrad.dtypes.promote_types(webgrad.int32, webgrad.float32) is webgrad.float32
