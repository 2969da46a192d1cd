"""Bad input gets a clear error naming the op and the shapes/dtypes involved, never
a wrong answer. Each test checks the exception type and the words a user needs."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import DEVICES, need_module


def raises(exc, fn, *words):
    """``fn()`` raises ``exc`` and its message contains every one of ``words``."""
    with pytest.raises(exc) as info:
        fn()
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} missing from the error message: {message}"
    return message


def test_errors_are_typed():
    assert issubclass(webgrad.OpError, ValueError)


# -- shapes ----------------------------------------------------------------------------
def test_matmul_inner_dimensions(device):
    a, b = webgrad.ones(3, 4, device=device), webgrad.ones(5, 2, device=device)
    raises(webgrad.OpError, lambda: a @ b, "matmul", "(3, 4)", "(5, 2)", "4 != 5")
    raises(webgrad.OpError, lambda: webgrad.ones(3) @ webgrad.ones(4), "matmul", "(3,)", "(4,)", "3 != 4")
    raises(webgrad.OpError, lambda: webgrad.ones(2, 3) @ webgrad.ones(2), "matmul", "(2, 3)", "(2,)", "3 != 2")


def test_matmul_batch_dimensions():
    raises(webgrad.OpError, lambda: webgrad.ones(2, 3, 4) @ webgrad.ones(3, 4, 5),
           "matmul", "(2, 3, 4)", "(3, 4, 5)", "batch")


def test_matmul_of_different_dtypes_is_refused_as_in_pytorch():
    raises(webgrad.OpError, lambda: webgrad.ones(2, 3) @ webgrad.ones(3, dtype=webgrad.float64),
           "matmul", "same dtype", "(2, 3) float32", "(3,) float64", "x.to(float64)")


def test_matmul_needs_dimensions_and_numbers():
    raises(webgrad.OpError, lambda: webgrad.ones(()) @ webgrad.ones(3), "matmul", "()")
    raises(webgrad.OpError, lambda: webgrad.ones(2, 2, dtype=webgrad.bool) @ webgrad.ones(2, 2, dtype=webgrad.bool),
           "matmul", "bool")
    raises(webgrad.OpError, lambda: webgrad.mm(webgrad.ones(2, 2, 2), webgrad.ones(2, 2)), "mm", "(2, 2, 2)")
    raises(webgrad.OpError, lambda: webgrad.bmm(webgrad.ones(2, 2, 2), webgrad.ones(3, 2, 2)), "bmm", "(3, 2, 2)")


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "eq", "lt", "logical_and", "pow"])
def test_non_broadcastable_shapes(op):
    x, y = webgrad.ones(3, 4), webgrad.ones(3)
    if op == "logical_and":
        x, y = x.bool(), y.bool()
    raises(webgrad.OpError, lambda: getattr(webgrad, op)(x, y), op, "(3, 4)", "(3,)", "broadcast")


def test_where_shapes_and_condition():
    raises(webgrad.OpError, lambda: webgrad.where(webgrad.ones(3, dtype=webgrad.bool), webgrad.ones(4), 0.0),
           "where", "(3,)", "(4,)")
    raises(webgrad.OpError, lambda: webgrad.where(webgrad.ones(3), webgrad.ones(3), 0.0), "where", "bool", "float32")
    raises(webgrad.OpError, lambda: webgrad.ones(2).masked_fill(webgrad.ones(2), 0.0), "masked_fill", "bool", "float32")


def test_bad_reshape():
    x = webgrad.ones(3, 4)
    raises(webgrad.OpError, lambda: x.reshape(5, -1), "reshape", "(5, -1)", "12", "(3, 4)")
    raises(webgrad.OpError, lambda: x.view(4, 2), "reshape", "(4, 2)", "12")
    raises(webgrad.OpError, lambda: x.view(-1, -1), "reshape", "-1")
    raises(webgrad.OpError, lambda: x.unflatten(1, (3, 2)), "unflatten", "(3, 2)", "4")
    raises(webgrad.OpError, lambda: x.flatten(1, 0), "flatten")


def test_cat_and_stack_mismatch():
    raises(webgrad.OpError, lambda: webgrad.cat([webgrad.ones(3, 4), webgrad.ones(3, 5)]), "cat", "(3, 4)", "(3, 5)")
    raises(webgrad.OpError, lambda: webgrad.cat([webgrad.ones(2, 2), webgrad.ones(2)]), "cat", "(2, 2)", "(2,)")
    raises(webgrad.OpError, lambda: webgrad.cat([]), "cat")
    raises(webgrad.OpError, lambda: webgrad.cat([webgrad.ones(()), webgrad.ones(())]), "cat", "stack")
    raises(webgrad.OpError, lambda: webgrad.stack([webgrad.ones(2), webgrad.ones(3)]), "stack", "(2,)", "(3,)")


def test_movement_errors():
    x = webgrad.ones(2, 3)
    raises(webgrad.OpError, lambda: x.permute(0, 0), "permute", "(0, 0)", "(2, 3)")
    raises(webgrad.OpError, lambda: x.expand(4, 3), "expand", "(2, 3)", "(4, 3)")
    raises(webgrad.OpError, lambda: x.split([2, 2], dim=1), "split", "[2, 2]", "3")
    raises(webgrad.OpError, lambda: x.chunk(0), "chunk")
    raises(webgrad.OpError, lambda: x.repeat(2), "repeat", "(2, 3)")
    raises(webgrad.OpError, lambda: webgrad.ops.pad(x, (1,)), "pad")
    raises(webgrad.OpError, lambda: webgrad.ops.pad(x, (-2, -2)), "pad", "(2, 3)")


@pytest.mark.parametrize("call, op", [
    (lambda x: x.sum(2), "sum"), (lambda x: x.mean(-3), "mean"), (lambda x: x.squeeze(3), "squeeze"),
    (lambda x: x.softmax(2), "softmax"), (lambda x: x.flip(5), "flip"), (lambda x: x.transpose(0, 2), "transpose"),
    (lambda x: x.max(2), "max"), (lambda x: x.argmax(2), "argmax"),
    (lambda x: webgrad.cat([x, x], 2), "cat"),
    (lambda x: x.gather(2, webgrad.zeros(2, 3, dtype=webgrad.int64)), "gather"),
])
def test_dimension_out_of_range(call, op):
    raises(IndexError, lambda: call(webgrad.ones(2, 3)), op, "out of range", "[-2, 1]", "got")


def test_unsqueeze_dimension_out_of_range():
    raises(IndexError, lambda: webgrad.ones(2, 3).unsqueeze(4), "unsqueeze", "[-3, 2]", "got 4")


# -- autograd -----------------------------------------------------------------------------
def test_backward_on_non_scalar_needs_a_gradient():
    y = webgrad.ones(3, requires_grad=True) * 2
    raises(RuntimeError, y.backward, "backward", "(3,)", "gradient")


def test_backward_gradient_of_the_wrong_shape():
    y = webgrad.ones(2, requires_grad=True) * 2
    raises(RuntimeError, lambda: y.backward(webgrad.ones(3)), "backward", "(3,)", "(2,)")


def test_backward_on_a_tensor_without_graph():
    raises(RuntimeError, lambda: webgrad.ones(2).sum().backward(), "backward", "requires_grad")


def test_inplace_change_of_a_tensor_needed_for_backward():
    x = webgrad.ones(2, 3, requires_grad=True)
    y = x.sigmoid()
    with webgrad.no_grad():
        y += 1
    raises(RuntimeError, lambda: y.sum().backward(), "sigmoid", "(2, 3)", "in-place", "version 1", "version 0")


def test_requires_grad_on_int_tensor():
    raises(RuntimeError, lambda: webgrad.tensor([1, 2]).requires_grad_(), "floating point", "int64")
    raises(RuntimeError, lambda: webgrad.tensor([True], requires_grad=True), "floating point", "bool")


def test_numpy_on_a_tensor_that_requires_grad():
    raises(RuntimeError, lambda: webgrad.ones(2, requires_grad=True).numpy(), "numpy()", "detach()")


# -- indexing ----------------------------------------------------------------------------
def test_float_index_tensor(device):
    x = webgrad.ones(4, 3, device=device)
    index = webgrad.tensor([0.0, 1.0], device=device)
    raises(webgrad.OpError, lambda: x[index], "index", "float32", "(2,)")
    raises(webgrad.OpError, lambda: x.gather(1, webgrad.zeros(4, 3, device=device)), "gather", "float32", "(4, 3)")
    raises(webgrad.OpError, lambda: x.index_select(0, index), "index_select", "float32", "(2,)")
    raises(TypeError, lambda: x[0.5], "index", "float")


@pytest.mark.parametrize("key", [5, -5, (0, 3), (slice(None), -4)])
def test_int_index_out_of_range(key):
    x = webgrad.ones(4, 3)
    raises(IndexError, lambda: x[key], "out of bounds", "size")


@pytest.mark.parametrize("values", [[0, 4], [-5], [1, 2, 10]])
def test_index_tensor_out_of_range(values):
    x = webgrad.ones(4, 3)
    index = webgrad.tensor(values)
    raises(IndexError, lambda: x[index], "out of bounds", "dimension 0", "size 4")
    raises(IndexError, lambda: x[index, webgrad.zeros_like(index)], "out of bounds", "size 4")
    raises(IndexError, lambda: x[webgrad.zeros_like(index), index.clamp(max=3)] if max(values) > 3 else x[:, index],
           "out of bounds")


def test_gather_and_scatter_out_of_range():
    x = webgrad.ones(2, 3)
    raises(IndexError, lambda: x.gather(1, webgrad.full((2, 3), 3)), "gather", "3", "dimension 1", "size 3")
    raises(IndexError, lambda: x.gather(1, webgrad.full((2, 3), -1)), "gather", "-1")
    raises(IndexError, lambda: x.scatter_add(0, webgrad.full((2, 3), 2), x), "scatter_add", "2", "size 2")


def test_other_index_errors():
    x = webgrad.ones(2, 3)
    raises(IndexError, lambda: x[0, 0, 0], "too many indices", "(2, 3)")
    raises(IndexError, lambda: x[webgrad.ones(3, dtype=webgrad.bool)], "mask", "(3,)", "(2,)")
    raises(ValueError, lambda: x[::-1], "step")
    raises(webgrad.OpError, lambda: x[0, ..., ...], "ellipsis")


def test_setitem_value_shape():
    x = webgrad.zeros(2, 3)
    raises(webgrad.OpError, lambda: x.__setitem__(0, webgrad.ones(4)), "setitem", "(4,)", "(3,)")
    raises(IndexError, lambda: x.__setitem__(5, 1.0), "out of bounds")


# -- dtypes and values --------------------------------------------------------------------
def test_dtype_errors():
    raises(webgrad.OpError, lambda: webgrad.ones(2, dtype=webgrad.int64).mean(), "mean", "int64", ".float()")
    flags = webgrad.ones(2, dtype=webgrad.bool)
    raises(webgrad.OpError, lambda: flags - flags, "sub", "bool")
    raises(webgrad.OpError, lambda: webgrad.ones(2) - webgrad.ones(2, dtype=webgrad.bool), "sub", "(2,) bool")
    raises(webgrad.OpError, lambda: 1 - webgrad.ones(2, dtype=webgrad.bool), "sub", "bool")
    raises(webgrad.OpError, lambda: webgrad.ones(2) - True, "sub", "True")
    raises(webgrad.OpError, lambda: -webgrad.ones(2, dtype=webgrad.bool), "neg", "bool")
    raises(webgrad.OpError, lambda: webgrad.tensor([2, 3]) ** -1, "pow", "int64", "-1")
    raises(webgrad.OpError, lambda: webgrad.tensor([1, 2]).softmax(0), "softmax", "int64")
    raises(TypeError, lambda: webgrad.ones(2, dtype="uint16"), "uint16", "float32")  # (complex64, uint8 exist now)
    raises(TypeError, lambda: webgrad.ones(2) + "a", "add", "str")
    raises(TypeError, lambda: webgrad.ones(2) * [1, 2], "mul", "list")


def test_inplace_result_of_a_wider_dtype_category():
    x = webgrad.tensor([1, 2])
    raises(RuntimeError, lambda: x.add_(1.5), "add_", "float32", "int64")
    raises(RuntimeError, lambda: x.__itruediv__(2), "div_", "float32", "int64")
    raises(RuntimeError, lambda: webgrad.tensor([True]).add_(1), "add_", "int64", "bool")
    assert x.tolist() == [1, 2]  # unchanged


def test_item_on_a_multi_element_tensor():
    raises(RuntimeError, lambda: webgrad.ones(3, 4).item(), "item()", "12 elements", "(3, 4)")
    raises(RuntimeError, lambda: float(webgrad.ones(2)), "item()", "(2,)")
    raises(RuntimeError, lambda: bool(webgrad.ones(2)), "ambiguous", ".any()")


def test_creation_errors():
    raises(ValueError, lambda: webgrad.tensor([[1, 2], [3]]), "tensor", "ragged")
    raises(TypeError, lambda: webgrad.tensor("abc"), "tensor", "str")
    raises(ValueError, lambda: webgrad.zeros(-1), "zeros", "(-1,)")
    raises(ValueError, lambda: webgrad.arange(0, 1, 0), "arange", "step")
    raises(ValueError, lambda: webgrad.randint(5, 2, (2,)), "randint", "high")
    raises(webgrad.OpError, lambda: webgrad.ones(0).max(), "amax", "(0,)")
    raises(webgrad.OpError, lambda: webgrad.ones(0).argmax(), "argmax", "(0,)")


def test_unknown_device():
    raises(RuntimeError, lambda: webgrad.ones(2, device="cuda"), "cuda", "cpu")
    raises(RuntimeError, lambda: webgrad.ones(2).to("tpu"), "tpu")


def test_mixing_devices(fake_device):
    a = webgrad.ones(2, device="cpu")
    b = webgrad.ones(2, device=fake_device)
    raises(RuntimeError, lambda: a + b, "add", "same device", "cpu", fake_device, ".to(")
    raises(RuntimeError, lambda: webgrad.cat([a, b]), "cat", "same device")
    raises(RuntimeError, lambda: webgrad.where(a > 0, a, b), "where", "same device")
    raises(RuntimeError, lambda: a @ b, "matmul", "same device")
    moved = b.to("cpu") + a  # the fix the message suggests
    assert moved.device == "cpu"


@pytest.mark.skipif(len(DEVICES) < 2, reason="needs two real devices (set WEBGRAD_TEST_DEVICES=cpu,webgpu)")
def test_mixing_real_devices():
    a = webgrad.ones(2, device=DEVICES[0])
    b = webgrad.ones(2, device=DEVICES[1])
    raises(RuntimeError, lambda: a + b, "add", "same device", DEVICES[0], DEVICES[1])


def test_same_errors_as_torch_for_the_same_mistakes():
    """Where webgrad raises, PyTorch raises too (and the reverse) for these calls."""
    torch = need_module("torch")
    calls = [
        lambda m, t: t(np.ones((3, 4))) @ t(np.ones((5, 2))),
        lambda m, t: t(np.ones((3, 4))) + t(np.ones(3)),
        lambda m, t: t(np.ones((3, 4))).reshape(5, -1),
        lambda m, t: m.cat([t(np.ones((3, 4))), t(np.ones((3, 5)))]),
        lambda m, t: t(np.ones((3, 4)))[t(np.array([3, 4]))],
        lambda m, t: t(np.ones(2)) - t(np.ones(2)) > 0,  # fine in both
        lambda m, t: (t(np.ones(2)) > 0) - (t(np.ones(2)) > 0),
        lambda m, t: t(np.ones(2)).sum(1),
        lambda m, t: t(np.array([1, 2])).mean(),
        lambda m, t: t(np.ones((2, 3))).gather(1, t(np.array([[3, 0, 0], [0, 0, 0]]))),
        lambda m, t: t(np.ones(3)).item(),
    ]
    for k, call in enumerate(calls):
        outcomes = []
        for module in (webgrad, torch):
            try:
                call(module, module.tensor)
                outcomes.append(None)
            except Exception as err:  # noqa: BLE001 - comparing whether either raised
                outcomes.append(type(err).__name__)
        assert (outcomes[0] is None) == (outcomes[1] is None), f"call {k}: webgrad {outcomes[0]}, torch {outcomes[1]}"
