"""webgrad.nn modules: registration, state dicts, modes, moving, printing, init,
and numbers equal to torch.nn modules holding the same weights."""
import copy
import math

import numpy as np
import pytest

import webgrad
from webgrad import nn
from webgrad.ops.registry import OpError
from torch_reference import lazy_torch

torch = lazy_torch()  # live natively; in Pyodide only what torch_ref recorded


def _np(t):
    return t.detach().numpy()


def load_from_torch(ours, theirs):
    """Copy a torch module's state_dict into ours (keys must match exactly)."""
    state = {k: webgrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    result = ours.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


def snapshot(module):
    return {k: v.numpy().copy() for k, v in module.state_dict().items()}


def assert_same_state(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


# -- Parameter ---------------------------------------------------------------------
def test_parameter_shares_data_and_requires_grad():
    data = webgrad.zeros(3)
    p = nn.Parameter(data)
    assert isinstance(p, webgrad.Tensor) and p.requires_grad and p.is_leaf
    data.fill_(2.0)
    np.testing.assert_array_equal(p.detach().numpy(), [2.0, 2.0, 2.0])
    assert repr(p).startswith("Parameter containing:\ntensor([2., 2., 2.], requires_grad=True)")
    assert not nn.Parameter(webgrad.ones(2), requires_grad=False).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(webgrad.tensor([1, 2]))
    clone = copy.deepcopy(p)
    assert isinstance(clone, nn.Parameter) and clone.requires_grad
    clone.detach().fill_(5.0)
    np.testing.assert_array_equal(p.detach().numpy(), [2.0, 2.0, 2.0])


# -- registration and iteration ------------------------------------------------------
def make_net(lib):
    """The same small model built from webgrad.nn or torch.nn."""
    zeros, ones = (torch.zeros, torch.ones) if lib is torch.nn else (webgrad.zeros, webgrad.ones)

    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.features = lib.Sequential(lib.Conv2d(1, 4, 3, padding=1), lib.BatchNorm2d(4), lib.ReLU(),
                                           lib.MaxPool2d(2))
            self.head = lib.ModuleDict({"fc": lib.Linear(4 * 3 * 3, 5), "act": lib.GELU()})
            self.blocks = lib.ModuleList([lib.Linear(5, 5, bias=False) for _ in range(2)])
            self.scale = lib.Parameter(ones(1))
            self.register_buffer("steps", zeros(1))
            self.register_buffer("scratch", zeros(2), persistent=False)

        def forward(self, x):
            x = self.head["act"](self.head["fc"](self.features(x).flatten(1)))
            for block in self.blocks:
                x = x + block(x)
            return x * self.scale
    return Net()


def test_names_and_counts_match_torch():
    ours, theirs = make_net(nn), make_net(torch.nn)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    assert len(list(ours.parameters(recurse=False))) == 1
    assert "scratch" not in ours.state_dict() and "steps" in ours.state_dict()


def test_same_outputs_as_torch_with_copied_weights():
    ours, theirs = make_net(nn), make_net(torch.nn)
    load_from_torch(ours, theirs)
    ours.eval(), theirs.eval()
    x = np.random.default_rng(0).standard_normal((2, 1, 6, 6)).astype(np.float32)
    with torch.no_grad():
        ref = theirs(torch.tensor(x)).numpy()
    np.testing.assert_allclose(_np(ours(webgrad.tensor(x))), ref, atol=1e-5)


MODULE_PAIRS = [
    ("Linear", lambda lib: lib.Linear(6, 4), (3, 6)),
    ("LinearNoBias", lambda lib: lib.Linear(6, 4, bias=False), (2, 5, 6)),
    ("Conv1d", lambda lib: lib.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 9)),
    ("Conv2d", lambda lib: lib.Conv2d(3, 4, (3, 2), padding="same", dilation=2), (2, 3, 6, 5)),
    ("BatchNorm1d", lambda lib: lib.BatchNorm1d(4), (5, 4, 3)),
    ("BatchNorm2d", lambda lib: lib.BatchNorm2d(3, affine=False), (2, 3, 4, 4)),
    ("LayerNorm", lambda lib: lib.LayerNorm((3, 4)), (2, 3, 4)),
    ("LayerNormNoBias", lambda lib: lib.LayerNorm(6, bias=False), (2, 3, 6)),
    ("LayerNormNoAffine", lambda lib: lib.LayerNorm(6, elementwise_affine=False), (2, 3, 6)),
    ("Embedding", lambda lib: lib.Embedding(7, 3, padding_idx=1), None),
    ("MaxPool2d", lambda lib: lib.MaxPool2d(3, 2, 1), (1, 2, 7, 7)),
    ("AvgPool2d", lambda lib: lib.AvgPool2d(2, ceil_mode=True, count_include_pad=False), (1, 2, 5, 5)),
    ("AdaptiveAvgPool2d", lambda lib: lib.AdaptiveAvgPool2d((3, 2)), (1, 2, 7, 5)),
    ("Softplus", lambda lib: lib.Softplus(beta=2.0), (3, 4)),
    ("LogSoftmax", lambda lib: lib.LogSoftmax(dim=1), (3, 4)),
    ("Unflatten", lambda lib: lib.Unflatten(1, (2, 2)), (3, 4)),
    ("TransformerEncoderLayer", lambda lib: lib.TransformerEncoderLayer(8, 2, 16, batch_first=True), (2, 5, 8)),
    ("TransformerEncoderLayerPreNormGelu",
     lambda lib: lib.TransformerEncoderLayer(8, 2, 16, activation="gelu", norm_first=True), (5, 2, 8)),
    ("TransformerEncoder", lambda lib: lib.TransformerEncoder(lib.TransformerEncoderLayer(8, 2, 16), 2,
                                                              norm=lib.LayerNorm(8)), (5, 2, 8)),
]


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("name,make,shape", MODULE_PAIRS, ids=[m[0] for m in MODULE_PAIRS])
def test_module_matches_torch(name, make, shape):
    torch.manual_seed(0)
    theirs, ours = make(torch.nn).eval(), make(nn).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (n1, p1), (n2, p2) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert (n1, tuple(p1.shape)) == (n2, tuple(p2.shape))
    load_from_torch(ours, theirs)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 7, (2, 5)) if shape is None else rng.standard_normal(shape).astype(np.float32)
    with torch.no_grad():
        ref = theirs(torch.tensor(x)).numpy()
    with webgrad.no_grad():
        out = ours(webgrad.tensor(x)).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-5)


def test_transformer_layer_gradients_match_torch_in_float64():
    torch.manual_seed(1)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double()
    ours = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double()
    load_from_torch(ours, theirs)
    x = np.random.default_rng(0).standard_normal((2, 4, 8))
    mask = np.triu(np.ones((4, 4), bool), 1)
    theirs(torch.tensor(x), src_mask=torch.tensor(mask)).pow(2).sum().backward()
    ours(webgrad.tensor(x), src_mask=webgrad.tensor(mask)).pow(2).sum().backward()
    their_grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), their_grads[name].grad.numpy(), atol=1e-10, err_msg=name)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_torch(batch_first):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    ours = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    assert list(ours.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    load_from_torch(ours, theirs)
    rng = np.random.default_rng(0)
    n, lq, s = 3, 4, 5
    q = rng.standard_normal((n, lq, 8) if batch_first else (lq, n, 8)).astype(np.float32)
    kv = rng.standard_normal((n, s, 8) if batch_first else (s, n, 8)).astype(np.float32)
    padding = np.zeros((n, s), bool)
    padding[1, 3:] = True
    attn_mask = rng.standard_normal((lq, s)).astype(np.float32)
    for avg in (True, False):
        ref, ref_w = theirs(torch.tensor(q), torch.tensor(kv), torch.tensor(kv), key_padding_mask=torch.tensor(padding),
                            attn_mask=torch.tensor(attn_mask), average_attn_weights=avg)
        out, w = ours(webgrad.tensor(q), webgrad.tensor(kv), webgrad.tensor(kv),
                      key_padding_mask=webgrad.tensor(padding), attn_mask=webgrad.tensor(attn_mask),
                      average_attn_weights=avg)
        np.testing.assert_allclose(_np(out), ref.detach().numpy(), atol=1e-5)
        np.testing.assert_allclose(_np(w), ref_w.detach().numpy(), atol=1e-6)
    out, w = ours(webgrad.tensor(q), webgrad.tensor(q), webgrad.tensor(q), need_weights=False, is_causal=True)
    causal = torch.triu(torch.ones(lq, lq, dtype=torch.bool), 1)
    ref, _ = theirs(torch.tensor(q), torch.tensor(q), torch.tensor(q), need_weights=False, attn_mask=causal)
    assert w is None
    np.testing.assert_allclose(_np(out), ref.detach().numpy(), atol=1e-5)
    # unbatched input
    ref, ref_w = theirs(torch.tensor(q[0]), torch.tensor(kv[0]), torch.tensor(kv[0]))
    out, w = ours(webgrad.tensor(q[0]), webgrad.tensor(kv[0]), webgrad.tensor(kv[0]))
    np.testing.assert_allclose(_np(out), ref.detach().numpy(), atol=1e-5)
    assert tuple(w.shape) == tuple(ref_w.shape)


def test_multihead_attention_gradient_matches_torch():
    torch.manual_seed(0)
    theirs, ours = torch.nn.MultiheadAttention(6, 3).double(), nn.MultiheadAttention(6, 3).double()
    load_from_torch(ours, theirs)
    x = np.random.default_rng(0).standard_normal((4, 2, 6))
    tx, wx = torch.tensor(x, requires_grad=True), webgrad.tensor(x, requires_grad=True)
    theirs(tx, tx, tx)[0].sin().sum().backward()
    ours(wx, wx, wx)[0].sin().sum().backward()
    np.testing.assert_allclose(wx.grad.numpy(), tx.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(ours.in_proj_weight.grad.numpy(), theirs.in_proj_weight.grad.numpy(), atol=1e-10)


# -- state dict ------------------------------------------------------------------------
def test_state_dict_round_trip():
    webgrad.manual_seed(0)
    a, b = make_net(nn), make_net(nn)
    state = a.state_dict()
    assert list(state)[:3] == ["scale", "steps", "features.0.weight"]
    assert all(not v.requires_grad for v in state.values())
    b.load_state_dict(state)
    assert_same_state(snapshot(a), snapshot(b))
    a.eval(), b.eval()
    x = webgrad.randn(2, 1, 6, 6)
    np.testing.assert_array_equal(_np(a(x)), _np(b(x)))
    # values share memory with the model, like PyTorch
    with webgrad.no_grad():
        a.scale.fill_(3.0)
    assert state["scale"].item() == 3.0


def test_load_state_dict_reports_every_problem_and_changes_nothing():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    before = snapshot(model)
    state = {k: v.clone() + 1 for k, v in model.state_dict().items()}
    del state["2.bias"]
    state["0.weight"] = webgrad.zeros(5, 3)
    state["extra.weight"] = webgrad.zeros(1)
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(state)
    message = str(info.value)
    assert "Error(s) in loading state_dict for Sequential" in message
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in message
    assert 'Missing key(s) in state_dict: "2.bias"' in message
    assert "size mismatch for 0.weight: copying a param with shape (5, 3) from checkpoint, " \
           "the shape in current model is (4, 3)" in message
    assert_same_state(before, snapshot(model))
    # strict=False tolerates missing/unexpected keys but never a wrong shape
    with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
        model.load_state_dict(state, strict=False)
    assert_same_state(before, snapshot(model))
    state["0.weight"] = webgrad.zeros(4, 3)
    result = model.load_state_dict(state, strict=False)
    assert result.missing_keys == ["2.bias"] and result.unexpected_keys == ["extra.weight"]
    np.testing.assert_array_equal(model[0].weight.detach().numpy(), 0.0)
    np.testing.assert_array_equal(model[1].num_batches_tracked.numpy(), 1)
    with pytest.raises(RuntimeError, match='"1.bias", expected a Tensor but got str'):
        model.load_state_dict(dict(model.state_dict(), **{"1.bias": "oops"}))


def test_load_state_dict_keeps_parameter_objects_and_casts():
    model = nn.Linear(2, 2)
    weight = model.weight
    model.load_state_dict({"weight": webgrad.ones(2, 2, dtype=webgrad.float64), "bias": webgrad.zeros(2)})
    assert model.weight is weight and weight.dtype is webgrad.float32 and weight.requires_grad
    np.testing.assert_array_equal(weight.detach().numpy(), 1.0)


# -- modes -------------------------------------------------------------------------------
def test_train_eval_switch_dropout_and_batch_norm():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4))
    assert model.training and all(m.training for m in model.modules())
    x = webgrad.randn(16, 4)
    webgrad.manual_seed(0)
    a = model(x)
    webgrad.manual_seed(1)
    b = model(x)
    assert not np.allclose(_np(a), _np(b))  # dropout masks differ
    model.eval()
    assert not any(m.training for m in model.modules())
    running_mean = model[2].running_mean.numpy().copy()
    np.testing.assert_array_equal(_np(model(x)), _np(model(x)))
    np.testing.assert_array_equal(model[2].running_mean.numpy(), running_mean)  # eval does not update
    expected = (_np(model[0](x)) - running_mean) / np.sqrt(model[2].running_var.numpy() + 1e-5)
    np.testing.assert_allclose(_np(model(x)), expected, atol=1e-5)
    model.train()
    assert model[1].training


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5)])
def test_batch_norm_running_stats_match_torch(momentum, shape):
    ours, theirs = nn.BatchNorm1d(3, momentum=momentum), torch.nn.BatchNorm1d(3, momentum=momentum)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
        out, ref = ours(webgrad.tensor(x)), theirs(torch.tensor(x))
        np.testing.assert_allclose(_np(out), ref.detach().numpy(), atol=1e-5)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(), rtol=1e-5)
    ours.eval(), theirs.eval()
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(_np(ours(webgrad.tensor(x))), theirs(torch.tensor(x)).detach().numpy(), atol=1e-5)


def test_batch_norm_without_running_stats_and_bad_input():
    bn = nn.BatchNorm2d(2, track_running_stats=False).eval()
    assert bn.running_mean is None and list(bn.state_dict()) == ["weight", "bias"]
    x = webgrad.randn(3, 2, 2, 2)
    np.testing.assert_allclose(_np(bn(x)).mean(axis=(0, 2, 3)), 0.0, atol=1e-5)
    with pytest.raises(OpError, match="expected 2 channels"):
        bn(webgrad.randn(3, 4, 2, 2))
    with pytest.raises(OpError, match="expected 4D input"):
        bn(webgrad.randn(3, 2))


# -- zero_grad, to, apply -----------------------------------------------------------------
def test_zero_grad():
    model = nn.Linear(3, 2)
    model(webgrad.randn(4, 3)).sum().backward()
    model.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(model.weight.grad.numpy(), 0.0)
    model.zero_grad()
    assert model.weight.grad is None and model.bias.grad is None


def test_to_dtype_keeps_parameter_objects():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    params = list(model.parameters())
    model(webgrad.randn(5, 3)).sum().backward()
    assert model.double() is model
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    assert all(p.dtype is webgrad.float64 and p.requires_grad for p in params)
    assert all(p.grad.dtype is webgrad.float64 for p in params)
    assert model[1].running_mean.dtype is webgrad.float64
    assert model[1].num_batches_tracked.dtype is webgrad.int64  # integer buffers keep their dtype
    out = model(webgrad.randn(5, 3, dtype=webgrad.float64))
    assert out.dtype is webgrad.float64
    model.to(webgrad.float32)
    assert model[0].weight.dtype is webgrad.float32
    with pytest.raises(TypeError, match="floating point"):
        model.to(webgrad.int64)


def test_apply_and_reset_parameters_use_torch_defaults():
    webgrad.manual_seed(0)
    linear = nn.Linear(300, 200)
    bound = 1 / math.sqrt(300)
    w, b = linear.weight.detach().numpy(), linear.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert np.abs(b).max() <= bound and abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    conv = nn.Conv2d(4, 8, 3)
    assert np.abs(conv.weight.detach().numpy()).max() <= 1 / math.sqrt(36)
    seen = []
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    model.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "Sequential"]
    model.apply(lambda m: nn.init.zeros_(m.weight) if isinstance(m, nn.Linear) else None)
    np.testing.assert_array_equal(model[0].weight.detach().numpy(), 0.0)
    webgrad.manual_seed(4)
    first = nn.Linear(3, 3).weight.detach().numpy()
    webgrad.manual_seed(4)
    np.testing.assert_array_equal(nn.Linear(3, 3).weight.detach().numpy(), first)


# -- init -------------------------------------------------------------------------------
def test_init_functions():
    for name, param in [("linear", None), ("relu", None), ("tanh", None), ("leaky_relu", 0.2), ("selu", None)]:
        assert nn.init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))
    w = nn.Parameter(webgrad.empty(40, 30, 3))
    assert nn.init._calculate_fan_in_and_fan_out(w) == torch.nn.init._calculate_fan_in_and_fan_out(
        torch.empty(40, 30, 3))
    webgrad.manual_seed(0)
    nn.init.xavier_uniform_(w, gain=2.0)
    bound = 2.0 * math.sqrt(6.0 / (90 + 120))
    assert np.abs(w.detach().numpy()).max() <= bound
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert w.detach().numpy().std() == pytest.approx(math.sqrt(2.0 / 120), rel=0.05)
    nn.init.xavier_normal_(w)
    assert w.detach().numpy().std() == pytest.approx(math.sqrt(2.0 / 210), rel=0.05)
    nn.init.kaiming_uniform_(w, a=0.1)
    assert np.abs(w.detach().numpy()).max() <= math.sqrt(3) * math.sqrt(2 / 1.01) / math.sqrt(90)
    nn.init.trunc_normal_(w, mean=0.5, std=1.0, a=0.0, b=1.0)
    values = w.detach().numpy()
    assert values.min() >= 0.0 and values.max() <= 1.0 and values.std() > 0.2
    nn.init.constant_(w, 0.25)
    np.testing.assert_array_equal(w.detach().numpy(), 0.25)
    nn.init.ones_(w)
    assert w.requires_grad and w.detach().numpy().min() == 1.0
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(webgrad.empty(3))
    with pytest.raises(ValueError, match="mode"):
        nn.init.kaiming_uniform_(w, mode="fan_middle")


# -- containers ----------------------------------------------------------------------------
def test_sequential_container():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(model) == 3 and isinstance(model[-1], nn.Linear)
    head = model[1:]
    assert isinstance(head, nn.Sequential) and list(head._modules) == ["1", "2"]
    model.append(nn.Sigmoid())
    assert len(model) == 4 and isinstance(list(model)[-1], nn.Sigmoid)
    del model[1]
    assert list(model._modules) == ["0", "1", "2"]
    assert model(webgrad.randn(5, 2)).shape == (5, 1)
    with pytest.raises(IndexError):
        model[7]
    from collections import OrderedDict
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert list(named.state_dict()) == ["fc.weight", "fc.bias"] and named.fc is named[0]


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2)])
    layers.append(nn.Linear(2, 2))
    layers.extend([nn.ReLU()])
    assert len(layers) == 3 and len(list(layers.parameters())) == 4
    assert isinstance(layers[1:], nn.ModuleList) and len(layers[1:]) == 2
    heads = nn.ModuleDict({"a": nn.Linear(2, 1)})
    heads["b"] = nn.Linear(2, 3)
    assert list(heads.keys()) == ["a", "b"] and "b" in heads
    assert list(heads.state_dict()) == ["a.weight", "a.bias", "b.weight", "b.bias"]


def test_attribute_rules():
    model = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'weight'"):
        model.weight = webgrad.ones(2, 2)
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nothing'"):
        _ = model.nothing
    model.extra = nn.Parameter(webgrad.ones(1))
    assert "extra" in dict(model.named_parameters())
    del model.extra
    assert "extra" not in dict(model.named_parameters())


def test_get_submodule_and_get_parameter():
    model = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 1, bias=False)))
    assert model.get_submodule("1.0") is model[1][0]
    assert model.get_parameter("1.0.weight") is model[1][0].weight
    with pytest.raises(AttributeError, match=r"Linear has no parameter `bias` \(it is None\)"):
        model.get_parameter("1.0.bias")  # declared but absent, as PyTorch refuses it
    with pytest.raises(AttributeError, match="Linear has no parameter `nothing`"):
        model.get_parameter("0.nothing")


def test_forward_hooks():
    model = nn.Linear(2, 2)
    calls = []
    handle = model.register_forward_hook(lambda m, args, out: calls.append(tuple(out.shape)) or out * 0)
    assert _np(model(webgrad.ones(3, 2))).max() == 0.0 and calls == [(3, 2)]
    handle.remove()
    model(webgrad.ones(1, 2))
    assert calls == [(3, 2)]


# -- printing ---------------------------------------------------------------------------------
def _small_model(lib):
    return lib.Sequential(lib.Conv2d(1, 8, 3, padding=1), lib.BatchNorm2d(8), lib.ReLU(), lib.MaxPool2d(2),
                          lib.Flatten(), lib.Dropout(0.25), lib.Linear(128, 10), lib.GELU(), lib.LayerNorm(10),
                          lib.Softmax(dim=-1))


def test_repr_matches_torch():
    assert repr(_small_model(nn)) == repr(_small_model(torch.nn))
    for make in (lambda lib: lib.ModuleList([lib.Linear(2, 2) for _ in range(3)] + [lib.ReLU()]),
                 lambda lib: lib.MultiheadAttention(8, 2),
                 lambda lib: lib.Embedding(10, 3, padding_idx=0), lambda lib: lib.LeakyReLU(0.2),
                 lambda lib: lib.Softplus(), lambda lib: lib.AvgPool2d(2), lambda lib: lib.AdaptiveAvgPool2d((2, 3)),
                 lambda lib: lib.Conv1d(2, 4, 3, stride=2, bias=False, groups=2),
                 lambda lib: lib.Conv2d(2, 4, 3, padding="same"), lambda lib: lib.Unflatten(1, (2, 5)),
                 lambda lib: lib.CrossEntropyLoss(), lambda lib: lib.TransformerEncoderLayer(8, 2, 16)):
        assert repr(make(nn)) == repr(make(torch.nn))


# -- losses, embedding, utils ------------------------------------------------------------------
def test_loss_modules_match_torch():
    rng = np.random.default_rng(0)
    logits, target = rng.standard_normal((4, 3)).astype(np.float32), rng.integers(0, 3, 4)
    weight = np.array([0.2, 1.0, 3.0], np.float32)
    ours = nn.CrossEntropyLoss(weight=webgrad.tensor(weight), label_smoothing=0.1)
    theirs = torch.nn.CrossEntropyLoss(weight=torch.tensor(weight), label_smoothing=0.1)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert ours(webgrad.tensor(logits), webgrad.tensor(target)).item() == pytest.approx(
        theirs(torch.tensor(logits), torch.tensor(target)).item(), rel=1e-6)
    probs, labels = rng.random((4, 3)).astype(np.float32), rng.random((4, 3)).round().astype(np.float32)
    pairs = [(nn.MSELoss(), torch.nn.MSELoss()), (nn.L1Loss(reduction="sum"), torch.nn.L1Loss(reduction="sum")),
             (nn.BCELoss(), torch.nn.BCELoss()), (nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5)),
             (nn.BCEWithLogitsLoss(pos_weight=webgrad.tensor([1.0, 2.0, 3.0])),
              torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.0, 2.0, 3.0])))]
    for a, b in pairs:
        assert a(webgrad.tensor(probs), webgrad.tensor(labels)).item() == pytest.approx(
            b(torch.tensor(probs), torch.tensor(labels)).item(), rel=1e-5)
    nll = nn.NLLLoss(ignore_index=0)
    assert nll(webgrad.tensor(logits), webgrad.tensor(target)).item() == pytest.approx(
        torch.nn.NLLLoss(ignore_index=0)(torch.tensor(logits), torch.tensor(target)).item(), rel=1e-6)


def test_embedding_module_padding_row():
    webgrad.manual_seed(0)
    emb = nn.Embedding(5, 3, padding_idx=2)
    np.testing.assert_array_equal(emb.weight.detach().numpy()[2], 0.0)
    emb(webgrad.tensor([[2, 1], [2, 2]])).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy()[2], 0.0)
    np.testing.assert_array_equal(emb.weight.grad.numpy()[1], 1.0)
    frozen = nn.Embedding.from_pretrained(webgrad.eye(3))
    assert not frozen.weight.requires_grad and frozen(webgrad.tensor([1])).tolist() == [[0.0, 1.0, 0.0]]


def test_clip_grad_norm_and_value_match_torch():
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    for norm_type in (2.0, 1.0, float("inf")):
        ours = [nn.Parameter(webgrad.zeros(*g.shape, dtype=webgrad.float64)) for g in grads]
        theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
        for p, q, g in zip(ours, theirs, grads):
            p.grad, q.grad = webgrad.tensor(g), torch.tensor(g)
        total = nn.utils.clip_grad_norm_(ours, 0.5, norm_type)
        ref = torch.nn.utils.clip_grad_norm_(theirs, 0.5, norm_type)
        assert total.item() == pytest.approx(ref.item())
        for p, q in zip(ours, theirs):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), atol=1e-12)
    p = nn.Parameter(webgrad.zeros(4))
    p.grad = webgrad.tensor([-2.0, -0.1, 0.3, 5.0])
    nn.utils.clip_grad_value_([p], 0.5)
    np.testing.assert_array_equal(p.grad.numpy(), np.float32([-0.5, -0.1, 0.3, 0.5]))
    model = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(model.parameters())
    assert vec.shape == (8,)
    nn.utils.vector_to_parameters(webgrad.arange(8.0), model.parameters())
    assert model.bias.tolist() == [6.0, 7.0]


@pytest.mark.parametrize("cls, args, fan_in", [(nn.Linear, (100, 50), 100), (nn.Conv2d, (4, 50, 3), 36)])
def test_default_init_bounds_are_one_over_sqrt_fan_in(cls, args, fan_in):
    """PyTorch's default init: weight and bias uniform in +-1/sqrt(fan_in). With this many draws the
    largest magnitude lies within 20% of the bound (a smaller bound would be visible at once)."""
    webgrad.manual_seed(0)
    layer = cls(*args)
    bound = 1 / math.sqrt(fan_in)
    for tensor in (layer.weight, layer.bias):
        largest = float(tensor.detach().abs().max())
        assert 0.8 * bound < largest <= bound, (tensor.shape, largest, bound)
