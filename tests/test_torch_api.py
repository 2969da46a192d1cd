"""PyTorch idioms that real scripts use in their first lines: device objects and
device probing (cuda, mps, accelerator), the legacy constructors (``Tensor([...])``,
``LongTensor``), ``.data``, ``new_*``, ``f"{loss:.4f}"`` and ``inference_mode``.
Where torch is installed, the answers are compared with its own."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import webgrad
from conftest import assert_close, need_module, webgpu_available


# -- device objects -------------------------------------------------------------------
def test_device_object_type_index_repr_and_equality():
    d = webgrad.device("webgpu:0")
    assert (d.type, d.index) == ("webgpu", 0)
    assert repr(d) == "device(type='webgpu', index=0)" and str(d) == "webgpu:0"
    assert webgrad.device("webgpu", 0) == d and hash(webgrad.device("webgpu", 0)) == hash(d)
    cpu = webgrad.device("cpu")
    assert (cpu.type, cpu.index, repr(cpu)) == ("cpu", None, "device(type='cpu')")
    assert cpu == "cpu" and cpu != webgrad.device("webgpu") and webgrad.device(cpu) is cpu
    assert {cpu: 1}["cpu"] == 1
    assert pickle.loads(pickle.dumps(d)) == d and isinstance(pickle.loads(pickle.dumps(d)), webgrad.device)


def test_device_errors_say_what_is_accepted():
    with pytest.raises(RuntimeError, match="unknown device type 'foo'.*cpu"):
        webgrad.device("foo")
    with pytest.raises(RuntimeError, match="invalid device string"):
        webgrad.device("cpu:x")
    with pytest.raises(RuntimeError, match="non-negative"):
        webgrad.device("webgpu", -1)
    with pytest.raises(TypeError, match="expected a string"):
        webgrad.device(3.5)


def test_tensor_device_equals_device_objects_and_strings(device):
    t = webgrad.ones(2, device=device)
    assert isinstance(t.device, webgrad.device)
    assert t.device == webgrad.device(device) and t.device == device and t.device.type == device
    assert t.to(webgrad.device(device)) is t
    assert (t + 1).device == webgrad.device(device)
    assert isinstance(webgrad.get_default_device(), webgrad.device)


def test_device_selection_boilerplate_runs():
    device = webgrad.device("cuda" if webgrad.cuda.is_available() else "cpu")
    model = webgrad.nn.Linear(3, 2).to(device)
    x = webgrad.randn(4, 3).to(device)
    assert model(x).device == device == webgrad.device("cpu")
    if webgrad.backends.mps.is_available():  # never here; the idiom must still run
        device = webgrad.device("mps")
    assert device.type == "cpu"


def test_cuda_answers_as_torch_without_cuda():
    assert webgrad.cuda.is_available() is False and webgrad.cuda.device_count() == 0
    webgrad.cuda.manual_seed(1)
    webgrad.cuda.manual_seed_all(1)
    webgrad.cuda.empty_cache()
    with pytest.raises(RuntimeError, match="no CUDA backend"):
        webgrad.cuda.synchronize()
    with pytest.raises(RuntimeError, match="not available.*no cuda backend.*webgpu"):
        webgrad.ones(2).to("cuda")
    with pytest.raises(RuntimeError, match="mps"):
        webgrad.zeros(2, device=webgrad.device("mps"))
    assert webgrad.mps.is_available() is False and webgrad.backends.mps.is_available() is False
    webgrad.backends.cudnn.benchmark = True  # a flag scripts set; changes nothing
    assert webgrad.cuda.amp.GradScaler is webgrad.amp.GradScaler  # old scripts' torch.cuda.amp
    with pytest.raises(AttributeError, match="webgrad.cuda"):
        _ = webgrad.cuda.no_such_thing


def test_cuda_module_matches_torch_where_it_answers():
    torch = need_module("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the comparison is for machines without it")
    assert webgrad.cuda.is_available() == torch.cuda.is_available()
    assert webgrad.cuda.device_count() == torch.cuda.device_count()
    assert repr(webgrad.device("cpu")) == repr(torch.device("cpu"))
    assert repr(webgrad.device("cuda", 1)) == repr(torch.device("cuda", 1))


def test_accelerator_is_webgpu_where_an_adapter_exists(monkeypatch):
    # A software adapter counts only when allowed (the rule itself: tests/test_api_gaps.py).
    monkeypatch.setattr(webgrad.accelerator, "allow_software_adapter", True)
    available = webgpu_available()
    assert webgrad.accelerator.is_available() == available
    assert webgrad.accelerator.device_count() == (1 if available else 0)
    if not available:
        assert webgrad.accelerator.current_accelerator() is None
        with pytest.raises(RuntimeError, match="none is available"):
            webgrad.accelerator.synchronize()
        return
    acc = webgrad.accelerator.current_accelerator()
    assert acc == webgrad.device("webgpu") and acc.type == "webgpu"
    x = webgrad.arange(4.0, device=acc) * 2
    webgrad.accelerator.synchronize()
    assert x.device == acc and x.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert webgrad.accelerator.current_device_index() == 0


# -- legacy constructors ------------------------------------------------------------------
def test_tensor_constructor_forms_match_torch():
    torch = need_module("torch")
    for args in [([1, 2],), ([[1.5, 2], [3, 4]],), (2, 3), (), (3,)]:
        ours, theirs = webgrad.Tensor(*args), torch.Tensor(*args)
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype is webgrad.float32, args
        if args and isinstance(args[0], list):
            assert_close(ours, theirs.numpy())
    assert tuple(webgrad.Tensor(webgrad.Size([2, 2])).shape) == (2, 2)
    for name, dtype in [("FloatTensor", "float32"), ("DoubleTensor", "float64"), ("LongTensor", "int64"),
                        ("IntTensor", "int32"), ("BoolTensor", "bool")]:
        ours, theirs = getattr(webgrad, name)([1, 0, 1]), getattr(torch, name)([1, 0, 1])
        assert ours.dtype.name == dtype and ours.tolist() == theirs.tolist()
        assert isinstance(ours, getattr(webgrad, name)) and isinstance(ours, webgrad.Tensor)
        assert tuple(getattr(webgrad, name)(2, 3).shape) == (2, 3)
    assert not isinstance(webgrad.zeros(2), webgrad.LongTensor)
    assert webgrad.IntTensor([1.7]).tolist() == torch.IntTensor([1.7]).tolist()


def test_tensor_constructor_on_device_and_errors(device):
    t = webgrad.Tensor([1, 2], device=device)
    assert t.device == device and t.dtype is webgrad.float32
    with pytest.raises(TypeError, match="only device="):
        webgrad.Tensor([1, 2], dtype=webgrad.int64)
    with pytest.raises(TypeError, match="read as a size"):
        webgrad.Tensor(2.5)
    with pytest.raises(TypeError, match="expected a int64 tensor"):
        webgrad.LongTensor(webgrad.zeros(2))


def test_type_names_and_conversions():
    x = webgrad.zeros(2)
    assert x.type() == "webgrad.FloatTensor" and x.long().type() == "webgrad.LongTensor"
    assert x.type(webgrad.LongTensor).dtype is webgrad.int64
    assert x.type(webgrad.float64).dtype is webgrad.float64


# -- .data --------------------------------------------------------------------------------
def test_data_shares_memory_outside_autograd(device):
    p = webgrad.nn.Parameter(webgrad.zeros(3, device=device))
    d = p.data
    assert not d.requires_grad and d.device == device
    d.add_(1.0)  # the manual SGD idiom: p.data -= lr * p.grad
    assert p.tolist() == [1.0, 1.0, 1.0]
    (p * 2).sum().backward()  # changing .data does not invalidate autograd (as in torch)
    p.data -= 0.5 * p.grad.data
    assert p.tolist() == [0.0, 0.0, 0.0] and p.requires_grad


def test_data_setter_keeps_identity_like_torch(device):
    torch = need_module("torch")
    p = webgrad.nn.Parameter(webgrad.zeros(3, device=device))
    params = [p]
    p.data = webgrad.ones(2, 2, device=device)
    q = torch.nn.Parameter(torch.zeros(3))
    q.data = torch.ones(2, 2)
    assert params[0] is p and p.requires_grad == q.requires_grad
    assert tuple(p.shape) == tuple(q.shape) and p.tolist() == q.tolist()
    assert p.device == device
    with pytest.raises(TypeError, match="expected a Tensor"):
        p.data = [1.0, 2.0]


# -- new_* ----------------------------------------------------------------------------
def test_new_methods_take_dtype_and_device_from_self(device):
    torch = need_module("torch")
    x = webgrad.zeros(2, dtype=webgrad.int32, device=device)
    tx = torch.zeros(2, dtype=torch.int32)
    for name, args in [("new_zeros", (2, 3)), ("new_ones", ((2,),)), ("new_empty", (1, 2))]:
        ours, theirs = getattr(x, name)(*args), getattr(tx, name)(*args)
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype is webgrad.int32 and ours.device == device
    assert x.new_full((2,), 3).tolist() == tx.new_full((2,), 3).tolist()
    assert x.new_tensor([1.7, 2]).tolist() == tx.new_tensor([1.7, 2]).tolist()
    f = x.new_zeros(2, dtype=webgrad.float32, requires_grad=True)
    assert f.dtype is webgrad.float32 and f.requires_grad


# -- __format__ ----------------------------------------------------------------------------
def test_format_like_torch(device):
    torch = need_module("torch")
    loss = webgrad.tensor(3.14159, device=device)
    assert f"{loss:.4f}" == f"{torch.tensor(3.14159):.4f}" == "3.1416"
    assert f"{webgrad.tensor(7, device=device):>4d}" == "   7"
    assert f"{webgrad.tensor([2.5], device=device):.1f}" == "2.5"  # one element: a convenience torch lacks
    many = webgrad.tensor([1.0, 2.0], device=device)
    assert f"{many}" == str(many)
    with pytest.raises(TypeError, match="one-element"):
        f"{many:.2f}"


# -- inference_mode ------------------------------------------------------------------------
def test_inference_mode_context_and_decorator():
    x = webgrad.ones(2, requires_grad=True)
    with webgrad.inference_mode():
        assert not (x * 2).requires_grad and webgrad.is_inference_mode_enabled()
        assert not webgrad.is_grad_enabled()
    assert (x * 2).requires_grad and not webgrad.is_inference_mode_enabled()

    @webgrad.inference_mode()
    def predict(v):
        return v * 2

    @webgrad.inference_mode
    def bare(v):
        return v * 2

    assert not predict(x).requires_grad and not bare(x).requires_grad
    with webgrad.inference_mode(False):
        assert (x * 2).requires_grad
    with webgrad.no_grad(), webgrad.inference_mode(False):
        assert not (x * 2).requires_grad  # False leaves the mode as it was


def test_generator_gives_its_own_reproducible_stream():
    a = webgrad.Generator().manual_seed(5)
    b = webgrad.Generator().manual_seed(5)
    assert a.initial_seed() == 5
    from webgrad.random import numpy_generator_for

    draws = [numpy_generator_for(g).random(3) for g in (a, b)]
    np.testing.assert_array_equal(*draws)
    with pytest.raises(TypeError, match="webgrad.Generator"):
        numpy_generator_for(1)
    assert webgrad.seed() == webgrad.initial_seed()


def test_deepcopy_of_tensors_and_state_dicts(device):
    import copy

    model = webgrad.nn.Linear(3, 2).to(device)
    best = copy.deepcopy(model.state_dict())  # the "keep the best weights" idiom
    with webgrad.no_grad():
        model.weight.add_(1.0)
    assert best["weight"].device == device
    assert_close(best["weight"] + 1.0, model.weight.detach().numpy(), 1e-6, 1e-6)
    t = webgrad.ones(2, device=device, requires_grad=True)
    (t * 3).sum().backward()
    copied = copy.deepcopy(t)
    assert copied.requires_grad and copied.is_leaf and copied.grad.tolist() == [3.0, 3.0]
    with webgrad.no_grad():
        copied.add_(1.0)
    assert t.tolist() == [1.0, 1.0]  # its own memory
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(t * 2)


def test_to_accepts_non_blocking(device):
    x = webgrad.ones(2).to(webgrad.device(device), non_blocking=True)
    assert x.device == device and x.tolist() == [1.0, 1.0]


def test_random_creation_takes_a_generator(device):
    def draws(seed):
        g = webgrad.Generator().manual_seed(seed)
        return [webgrad.rand(3, generator=g, device=device).tolist(),
                webgrad.randn(2, generator=g, device=device).tolist(),
                webgrad.randint(0, 10, (4,), generator=g, device=device).tolist(),
                webgrad.randperm(5, generator=g, device=device).tolist()]

    first = draws(4)
    webgrad.manual_seed(123)  # the global state plays no part
    assert draws(4) == first and draws(5) != first
    assert sorted(first[3]) == [0, 1, 2, 3, 4] and all(0 <= v < 10 for v in first[2])
    assert all(0 <= v < 1 for v in first[0])


def test_device_as_context_manager_and_cuda_method(device):
    before = webgrad.get_default_device()
    with webgrad.device(device) as d:
        assert d == device and webgrad.zeros(2).device == device
    assert webgrad.get_default_device() == before
    with pytest.raises(RuntimeError, match="no CUDA backend"):
        webgrad.ones(2).cuda()


def test_use_deterministic_algorithms_guards_the_atomic_scatter(device):
    webgrad.use_deterministic_algorithms(True)
    try:
        assert webgrad.are_deterministic_algorithms_enabled()
        small = webgrad.zeros(4, 2, device=device, requires_grad=True)
        small.index_select(0, webgrad.tensor([0, 0, 3], device=device)).sum().backward()  # deterministic path
        assert small.grad[:, 0].tolist() == [2.0, 0.0, 0.0, 1.0]
        big = webgrad.zeros(70000, 2, device=device, requires_grad=True)
        picked = big.index_select(0, webgrad.zeros(70000, dtype=webgrad.int64, device=device)).sum()
        if device == "webgpu":  # the atomic scatter: refused, or allowed with a warning
            with pytest.raises(RuntimeError, match="does not have a deterministic implementation"):
                picked.backward(retain_graph=True)
            webgrad.use_deterministic_algorithms(True, warn_only=True)
            with pytest.warns(UserWarning, match="deterministic"):
                picked.backward()
        else:
            picked.backward()
        assert big.grad[0, 0].item() == 70000.0
    finally:
        webgrad.use_deterministic_algorithms(False)
    assert not webgrad.are_deterministic_algorithms_enabled()
