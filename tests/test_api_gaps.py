"""The small torch API gaps real PyTorch programs hit (issue 22): constants, finfo/iinfo,
the is_* flags, every Tensor.to overload, saving a whole module, lazy samplers,
torch.accelerator's software-adapter rule and torch.distributed's answers."""
import io
import itertools
import math
import tracemalloc

import numpy as np
import pytest

import webgrad
from webgrad import nn
from webgrad.utils.data import RandomSampler, WeightedRandomSampler
from conftest import webgpu_available

DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"]


def test_constants_match_torch(torch_ref):
    ours = [webgrad.pi, webgrad.e, webgrad.inf]
    assert ours == list(torch_ref(lambda torch: [torch.pi, torch.e, torch.inf]))
    assert math.isnan(webgrad.nan) and webgrad.newaxis is None
    x = webgrad.arange(3.0)
    assert tuple(x[webgrad.newaxis].shape) == (1, 3)


@pytest.mark.parametrize("name", DTYPES)
def test_finfo_and_iinfo_match_torch(name, torch_ref):
    dtype = getattr(webgrad, name)
    if dtype.is_floating_point:
        info = webgrad.finfo(dtype)
        fields = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution")
        expected = torch_ref(lambda torch: [float(getattr(torch.finfo(getattr(torch, name)), f)) for f in fields])
        np.testing.assert_array_equal([float(getattr(info, f)) for f in fields], expected)
        assert info.dtype == name
        with pytest.raises(TypeError, match="iinfo"):
            webgrad.iinfo(dtype)
    elif name == "bool":
        with pytest.raises(TypeError):
            webgrad.iinfo(dtype)
        with pytest.raises(TypeError):
            webgrad.finfo(dtype)
    else:
        info = webgrad.iinfo(dtype)
        fields = ("bits", "max", "min")
        expected = torch_ref(lambda torch: [getattr(torch.iinfo(getattr(torch, name)), f) for f in fields])
        assert [info.bits, info.max, info.min] == [int(v) for v in expected] and info.dtype == name
        with pytest.raises(TypeError, match="finfo"):
            webgrad.finfo(dtype)
    assert webgrad.finfo().eps == webgrad.finfo(webgrad.get_default_dtype()).eps


FLAGS = ["is_cuda", "is_xpu", "is_mps", "is_meta", "is_sparse", "is_sparse_csr", "is_quantized", "is_cpu", "is_nested",
         "is_mkldnn", "is_vulkan", "is_ipu", "is_mtia", "is_maia"]
CALLS = ["is_complex", "is_inference", "is_signed", "is_conj", "is_neg", "is_floating_point", "nelement", "numel"]


def test_is_flags_and_nelement_match_torch(torch_ref):
    for make in (lambda lib: lib.ones(2, 3), lambda lib: lib.arange(4), lambda lib: lib.tensor([True]),
                 lambda lib: lib.tensor(2.5)):
        x = make(webgrad)
        ours = [getattr(x, f) for f in FLAGS] + [getattr(x, f)() for f in CALLS]
        theirs = torch_ref(lambda torch, make=make: [getattr(make(torch), f) for f in FLAGS]
                           + [getattr(make(torch), f)() for f in CALLS])
        assert ours == [type(o)(v) for o, v in zip(ours, theirs)], (ours, theirs)


def test_is_cpu_is_false_on_webgpu(device):
    assert webgrad.ones(2, device=device).is_cpu == (device == "cpu")


TO_CALLS = [
    (("cpu", "float64", True, True), {}),
    (("cpu", "float64"), {"non_blocking": True}),
    (("float64",), {}),
    (("float64", False, True), {}),
    ((), {"dtype": "float64"}),
    ((), {"device": "cpu", "dtype": "float64", "copy": True}),
    (("cpu",), {}),
    (("cpu",), {"copy": True}),
    ((None, "int64"), {}),
    (("other",), {}),
    (("other", False, True), {}),
    (("float32",), {}),
    (("float32",), {"copy": True}),
]


@pytest.mark.parametrize("args,kwargs", TO_CALLS, ids=lambda v: repr(v))
def test_to_overloads_match_torch(args, kwargs, torch_ref):
    def call(lib, x):
        other = lib.zeros(1, dtype=lib.float64)
        convert = {"float64": lib.float64, "int64": lib.int64, "float32": lib.float32, "other": other}
        a = [convert.get(v, v) if isinstance(v, str) else v for v in args]
        kw = {k: convert.get(v, v) if k == "dtype" else v for k, v in kwargs.items()}
        y = x.to(*a, **kw)
        return str(y.dtype).split(".")[-1], y is x, y.numpy().tolist()

    x = webgrad.tensor([1.5, -2.0])
    dtype, same, values = call(webgrad, x)
    expected = torch_ref(lambda torch: call(torch, torch.tensor([1.5, -2.0])))
    assert (dtype, same, values) == (str(expected[0]), bool(expected[1]), np.asarray(expected[2]).tolist())


def test_to_python_float_is_float64_and_bad_arguments_raise():
    x = webgrad.ones(2)
    assert x.to(float).dtype is webgrad.float64 and x.to(int).dtype is webgrad.int64
    with pytest.raises(TypeError, match="positional"):
        x.to("cpu", webgrad.float64, True, True, 5)
    with pytest.raises(TypeError, match="dtype"):
        x.to("cpu", "cpu")
    with pytest.raises(TypeError, match="unexpected keyword"):
        x.to(devices="cpu")


def test_to_moves_to_webgpu_with_dtype(device):
    y = webgrad.tensor([1, 2]).to(device, webgrad.float32, False, True)
    assert y.device == device and y.dtype is webgrad.float32 and y.tolist() == [1.0, 2.0]


# -- a whole module through save/load --------------------------------------------------------
class TwoLayer(nn.Module):
    def __init__(self, n_in, hidden=5):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def test_save_whole_module_and_load_it_back():
    webgrad.manual_seed(0)
    model = TwoLayer(3)
    model.eval()
    model.fc1.weight.requires_grad_(False)
    buffer = io.BytesIO()
    webgrad.save({"model": model, "epoch": 4}, buffer)
    buffer.seek(0)
    loaded = webgrad.load(buffer, weights_only=False)
    again = loaded["model"]
    assert loaded["epoch"] == 4 and type(again).__name__ == "TwoLayer" and again is not model
    assert not again.training and not again.fc1.weight.requires_grad and again.fc2.weight.requires_grad
    x = webgrad.randn(4, 3)
    np.testing.assert_array_equal(again(x).detach().numpy(), model(x).detach().numpy())


def test_load_of_a_whole_module_is_refused_by_default_as_torch():
    buffer = io.BytesIO()
    webgrad.save(nn.Sequential(nn.Linear(2, 3), nn.Tanh()).double(), buffer)
    for weights_only in (None, True):
        buffer.seek(0)
        with pytest.raises(webgrad.serialize.UnpicklingError, match="weights_only=False"):
            webgrad.load(buffer, weights_only=weights_only)
    buffer.seek(0)
    model = webgrad.load(buffer, weights_only=False)
    assert isinstance(model, nn.Sequential) and model[0].weight.dtype is webgrad.float64


def test_torch_refuses_a_pickled_module_with_weights_only_too(torch_ref):
    def torch_side(torch):
        buffer = io.BytesIO()
        torch.save(torch.nn.Sequential(torch.nn.Linear(2, 3)), buffer)
        buffer.seek(0)
        try:
            torch.load(buffer)
        except Exception as exc:  # the kind of error webgrad mirrors
            return [type(exc).__name__, "weights_only" in str(exc)]
        return ["none", False]

    assert list(torch_ref(torch_side)) == ["UnpicklingError", "True"] or \
        [str(v) for v in torch_ref(torch_side)] == ["UnpicklingError", "True"]


def test_a_module_that_cannot_be_recorded_names_its_class():
    class Patched(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

    model = Patched()
    model.extra = nn.Linear(2, 2)  # added after construction: the record cannot rebuild it
    with pytest.raises(TypeError, match="Patched"):
        webgrad.save(model, io.BytesIO())


# -- samplers draw lazily ------------------------------------------------------------------
def test_random_sampler_with_huge_num_samples_does_not_allocate():
    tracemalloc.start()
    try:
        sampler = RandomSampler(range(10), replacement=True, num_samples=int(1e10))
        first = list(itertools.islice(iter(sampler), 1000))
        weighted = list(itertools.islice(iter(WeightedRandomSampler([0.0, 1.0], num_samples=int(1e10))), 100))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(sampler) == 10 ** 10 and all(0 <= i < 10 for i in first) and weighted == [1] * 100
    assert peak < 10_000_000


def test_samplers_reproduce_and_cover():
    webgrad.manual_seed(3)
    a = list(RandomSampler(range(7), replacement=True, num_samples=10_000))
    webgrad.manual_seed(3)
    assert a == list(RandomSampler(range(7), replacement=True, num_samples=10_000)) and set(a) == set(range(7))
    several = list(RandomSampler(range(5), num_samples=12))
    assert len(several) == 12 and sorted(several[:5]) == list(range(5)) and sorted(several[5:10]) == list(range(5))
    counts = np.bincount(list(WeightedRandomSampler([1.0, 3.0], num_samples=20_000)), minlength=2) / 20_000
    assert abs(counts[1] - 0.75) < 0.02


# -- torch.accelerator and torch.distributed ---------------------------------------------------
def test_accelerator_prefers_cpu_on_a_software_adapter(monkeypatch):
    from webgrad import accelerator

    monkeypatch.setattr(accelerator, "allow_software_adapter", None)
    monkeypatch.delenv(accelerator.ALLOW_SOFTWARE_ENV, raising=False)
    if not webgpu_available():
        assert not accelerator.is_available() and accelerator.current_accelerator() is None
        return
    software = accelerator.is_cpu_adapter(webgrad.webgpu.adapter_info())
    assert accelerator.is_available() == (not software)
    if software:
        assert accelerator.current_accelerator() is None and "CPU emulation" in accelerator.reason()
        with pytest.raises(RuntimeError, match="CPU emulation"):
            accelerator.synchronize()
    monkeypatch.setenv(accelerator.ALLOW_SOFTWARE_ENV, "1")
    assert accelerator.is_available() and accelerator.current_accelerator() == webgrad.device("webgpu")
    monkeypatch.setattr(accelerator, "allow_software_adapter", False)
    assert accelerator.is_available() == (not software)


def test_distributed_answers_for_one_process():
    import webgrad.distributed as dist

    assert webgrad.distributed is dist
    assert dist.is_initialized() is False  # is_available(): whether torch's c10d is installed
    with pytest.raises(ValueError, match="process group"):
        dist.get_rank()


def test_dataloader_over_a_huge_lazy_sampler():
    dataset = webgrad.utils.data.TensorDataset(webgrad.arange(10.0))
    sampler = RandomSampler(dataset, replacement=True, num_samples=int(1e10))
    loader = webgrad.utils.data.DataLoader(dataset, batch_size=4, sampler=sampler)
    (batch,) = next(iter(loader))
    assert len(loader) == 25 * 10 ** 8 and tuple(batch.shape) == (4,) and set(batch.tolist()) <= set(range(10))
