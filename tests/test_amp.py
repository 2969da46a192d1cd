"""webgrad.amp: autocast casts as torch's lists say (checked against torch on cpu), GradScaler follows torch's cpu
scaler step by step."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import webgrad
from conftest import assert_close, need_module

torch = need_module("torch")


# Calls on torch's cpu autocast lists and off them: (name, function of (lib, F, x, w, labels)).
CALLS = [
    ("linear", lambda lib, F, x, w, y: F.linear(x, w)),
    ("matmul", lambda lib, F, x, w, y: x @ w.t()),
    ("bmm", lambda lib, F, x, w, y: lib.bmm(x.unsqueeze(0), w.t().unsqueeze(0))),
    ("addmm", lambda lib, F, x, w, y: lib.addmm(x[:, :5], x, w.t())),
    ("conv1d", lambda lib, F, x, w, y: F.conv1d(x.t().unsqueeze(0), w.unsqueeze(-1))),
    ("conv2d", lambda lib, F, x, w, y: F.conv2d(x.reshape(1, 1, 4, 8), w[:3, :4].reshape(3, 1, 2, 2))),
    ("softmax", lambda lib, F, x, w, y: F.softmax(x, dim=-1)),
    ("log_softmax", lambda lib, F, x, w, y: x.log_softmax(-1)),
    ("cross_entropy", lambda lib, F, x, w, y: F.cross_entropy(F.linear(x, w), y)),
    ("mse_loss", lambda lib, F, x, w, y: F.mse_loss(F.linear(x, w), x[:, :5])),
    ("nll_loss", lambda lib, F, x, w, y: F.nll_loss(F.linear(x, w).log_softmax(-1), y)),
    ("exp", lambda lib, F, x, w, y: lib.exp(F.linear(x, w))),
    ("layer_norm", lambda lib, F, x, w, y: F.layer_norm(F.linear(x, w), (5,))),
    ("gelu", lambda lib, F, x, w, y: F.gelu(F.linear(x, w))),
    ("sum", lambda lib, F, x, w, y: F.linear(x, w).sum()),
    ("prod", lambda lib, F, x, w, y: lib.prod(F.linear(x, w), 1)),
    ("cat", lambda lib, F, x, w, y: lib.cat([F.linear(x, w), x[:, :5]])),
    ("add", lambda lib, F, x, w, y: F.linear(x, w) + x[:, :5]),
    ("sdpa", lambda lib, F, x, w, y: F.scaled_dot_product_attention(x[None], x[None], x[None])),
]


def _inputs(lib, device="cpu"):
    rng = np.random.default_rng(3)
    x = lib.tensor(rng.standard_normal((4, 8)).astype(np.float32), device=device, requires_grad=True)
    w = lib.tensor(rng.standard_normal((5, 8)).astype(np.float32) * 0.3, device=device, requires_grad=True)
    return x, w, lib.tensor([0, 1, 2, 3], device=device)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
def test_autocast_cpu_casts_as_torch(name, call, dtype):
    """Under autocast("cpu"), each call returns torch's dtype and values, and backward gives
    float32 gradients close to torch's."""
    results = {}
    for lib, F in ((torch, torch.nn.functional), (webgrad, webgrad.nn.functional)):
        x, w, y = _inputs(lib)
        with lib.autocast("cpu", dtype=getattr(lib, dtype)):
            out = call(lib, F, x, w, y)
        out.float().sum().backward()
        results[lib.__name__] = (out, x.grad, w.grad)
    (theirs, *their_grads), (ours, *our_grads) = results["torch"], results["webgrad"]
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), name
    tolerance = 2.0 ** -6 if dtype == "bfloat16" else 2.0 ** -9
    assert_close(ours.float(), theirs.detach().float().numpy(), rtol=4 * tolerance, atol=4 * tolerance)
    for g, t in zip(our_grads, their_grads):
        if t is None:
            assert g is None
            continue
        assert g.dtype is webgrad.float32
        assert_close(g, t.numpy(), rtol=8 * tolerance, atol=8 * tolerance)


def test_autocast_webgpu_follows_torchs_gpu_lists(device):
    """autocast("webgpu") casts by torch's CUDA lists: products in float16, softmax, layer_norm,
    losses, exp and sums in float32, gelu in its input's dtype; tensors on another device, and
    blocks for another device, change nothing. Values agree with the cpu doing the same casts."""
    other = "cpu" if device == "webgpu" else "webgpu"
    x, w, y = _inputs(webgrad, device)
    with webgrad.autocast(device, dtype=webgrad.float16):
        h = webgrad.nn.functional.linear(x, w)
        got = {"linear": h, "softmax": h.softmax(-1), "layer_norm": webgrad.nn.functional.layer_norm(h, (5,)),
               "cross_entropy": webgrad.nn.functional.cross_entropy(h, y), "exp": h.exp(), "sum": h.sum(),
               "gelu": webgrad.nn.functional.gelu(h), "add": h + 1, "addcmul": webgrad.addcmul(x, h[:, :1], x)}
        with webgrad.autocast(device, enabled=False):
            assert (x @ x.t()).dtype is webgrad.float32
        with webgrad.autocast(other, dtype=webgrad.bfloat16):  # a block for the other device adds nothing
            assert (x @ x.t()).dtype is webgrad.float16
    want = {"cpu": {"linear": "bfloat16", "softmax": "bfloat16", "layer_norm": "bfloat16", "cross_entropy": "float32",
                    "exp": "bfloat16", "sum": "bfloat16", "gelu": "bfloat16", "add": "bfloat16", "addcmul": "float32"},
            "webgpu": {"linear": "float16", "softmax": "float32", "layer_norm": "float32", "cross_entropy": "float32",
                       "exp": "float32", "sum": "float32", "gelu": "float16", "add": "float16", "addcmul": "float32"}}
    if device == "cpu":  # torch's cpu list runs these in bfloat16, its default there; asked float16 here
        want["cpu"] = {k: v.replace("bfloat16", "float16") for k, v in want["cpu"].items()}
    assert {k: v.dtype.name for k, v in got.items()} == want[device]
    half = webgrad.nn.functional.linear(x.detach().cpu().half(), w.detach().cpu().half())
    assert_close(got["linear"].float(), half.float().numpy(), rtol=2.0 ** -9, atol=2.0 ** -9)
    assert_close(got["softmax"].float(), half.float().softmax(-1).numpy(), rtol=1e-3, atol=1e-3)
    with webgrad.autocast(other, dtype=webgrad.float16):  # no block for this device: float32 throughout
        assert (x @ x.t()).dtype is webgrad.float32
    got["cross_entropy"].backward()
    assert x.grad.dtype is w.grad.dtype is webgrad.float32


def test_autocast_devices_and_bad_dtype():
    with pytest.warns(UserWarning, match="no CUDA"):
        with webgrad.amp.autocast("cuda"):
            assert not webgrad.amp.is_autocast_enabled("cuda")
    with pytest.raises(RuntimeError, match="target dtype is not supported"):
        webgrad.amp.autocast("cpu", dtype=webgrad.int64)
    with pytest.raises(RuntimeError, match="device_type 'tpu'"):
        webgrad.amp.autocast("tpu")


def test_grad_scaler_matches_torch_cpu():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(3).astype(np.float32)
    grads = [rng.standard_normal(3).astype(np.float32) for _ in range(6)]
    grads[2] = np.array([np.inf, 1.0, 0.0], np.float32)  # a step that must be skipped
    grads[4] = np.array([np.nan, 1.0, 0.0], np.float32)

    def run(lib):
        w = lib.tensor(w0, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
        scales, results = [], []
        for g in grads:
            opt.zero_grad()
            loss = scaler.scale((w * lib.tensor(g)).sum())
            loss.backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            results.append(w.detach().numpy().copy())
        return scales, results, scaler.state_dict()
    t_scales, t_w, t_state = run(torch)
    w_scales, w_w, w_state = run(webgrad)
    assert w_scales == t_scales
    assert np.allclose(np.array(w_w), np.array(t_w), atol=1e-6)
    assert w_state == {k: (v if not hasattr(v, "item") else v.item()) for k, v in t_state.items()}


def test_grad_scaler_disabled_and_cuda_pass_through():
    w = webgrad.tensor([1.0, 2.0], requires_grad=True)
    opt = webgrad.optim.SGD([w], lr=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = webgrad.amp.GradScaler(enabled=False)
    with pytest.warns(UserWarning, match="no CUDA"):
        cuda = webgrad.amp.GradScaler()  # PyTorch's default device is "cuda"
    with pytest.warns(UserWarning, match="no CUDA"):  # torch.cuda.amp.* as scripts spell them
        with webgrad.cuda.amp.autocast(dtype=webgrad.float16):
            assert not webgrad.amp.is_autocast_enabled()
        assert not webgrad.cuda.amp.GradScaler(enabled=True).is_enabled()
    for scaler in (off, cuda):
        loss = (w * w).sum()
        assert scaler.scale(loss) is loss
        loss.backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        assert scaler.state_dict() == {} and scaler.get_scale() == 1.0 and not scaler.is_enabled()
    assert np.allclose(w.detach().numpy(), [0.0, 0.0])


def test_grad_scaler_unscale_then_clip_and_errors():
    w = webgrad.tensor([3.0, 4.0], requires_grad=True)
    opt = webgrad.optim.SGD([w], lr=1.0)
    scaler = webgrad.amp.GradScaler("webgpu", init_scale=1024.0)
    scaler.scale((w * w).sum()).backward()
    scaler.unscale_(opt)
    assert np.allclose(w.grad.numpy(), [6.0, 8.0])
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    restored = webgrad.amp.GradScaler("cpu")
    restored.load_state_dict(scaler.state_dict())
    assert restored.get_scale() == 1024.0


def _kept(out) -> list:
    """The tensors ``out``'s graph keeps for backward (inputs and outputs its nodes hold)."""
    from webgrad.autograd import LEAF, _Meta

    kept, seen, stack = [], set(), [out._node]
    while stack:
        node = stack.pop()
        if node is None or node is LEAF or id(node) in seen:
            continue
        seen.add(id(node))
        kept += [t for t in (*node.inputs, node.out) if not isinstance(t, _Meta)]
        stack.extend(node.edges)
    return kept


def test_attention_without_weights_runs_in_the_autocast_dtype(device):
    """As torch: MultiheadAttention(need_weights=False) (TransformerEncoderLayer's call) is one
    scaled_dot_product_attention, on the lower list, so under autocast("webgpu") its scores and
    softmax stay float16 (no float32 copy of the (N, H, L, S) scores kept for backward); with the
    weights asked for, softmax is float32 as on torch's list."""
    webgrad.manual_seed(0)
    attention = webgrad.nn.MultiheadAttention(16, 4, batch_first=True).to(device)
    x = webgrad.randn(2, 8, 16, device=device, requires_grad=True)

    def kept_scores(out):  # dtypes of the (2, 4, 8, 8) tensors the graph keeps
        return {t.dtype.name for t in _kept(out) if tuple(t.shape) == (2, 4, 8, 8)}

    half = "float16" if device == "webgpu" else "bfloat16"  # the device's autocast default
    with webgrad.autocast(device):
        out, weights = attention(x, x, x, need_weights=False, is_causal=True,
                                 attn_mask=webgrad.nn.Transformer.generate_square_subsequent_mask(8, device=device))
        assert weights is None and out.dtype.name == half
        assert kept_scores(out) == {half}
        out_weighted, weights = attention(x, x, x)
    assert kept_scores(out_weighted) == ({"float32", half} if device == "webgpu" else {half})
    plain, _ = attention(x, x, x, need_weights=False)  # float32, against the weights path's result
    assert_close(out.float(), attention(x, x, x, attn_mask=webgrad.nn.Transformer.generate_square_subsequent_mask(
        8, device=device))[0], rtol=3e-2, atol=3e-2)
    assert_close(plain, attention(x, x, x)[0], rtol=1e-5, atol=1e-5)
    out.float().sum().backward()
    assert x.grad.dtype is webgrad.float32


def test_self_attention_casts_and_keeps_its_input_once(device):
    """As torch: self-attention (query, key and value one tensor) projects with the packed
    in_proj_weight in one product, so under autocast the graph keeps one float16 copy of the
    input, not one per projection; cross-attention (key is value) uses two products."""
    webgrad.manual_seed(0)
    attention = webgrad.nn.MultiheadAttention(16, 4, batch_first=True).to(device)
    x = webgrad.randn(2, 8, 16, device=device, requires_grad=True)
    memory = webgrad.randn(2, 5, 16, device=device)
    half = webgrad.amp.get_autocast_dtype(device)

    def kept_copies(out, source):  # tensors the graph keeps that hold source, sequence first, in half
        wanted = source.detach().transpose(0, 1).to(half).float().cpu().numpy()
        return len({id(t) for t in _kept(out) if t.dtype is half and tuple(t.shape) == wanted.shape
                    and np.array_equal(t.detach().float().cpu().numpy(), wanted)})

    with webgrad.autocast(device):
        out, _ = attention(x, x, x, need_weights=False)
        assert kept_copies(out, x) == 1
        cross, _ = attention(x, memory.requires_grad_(), memory, need_weights=False)
        assert kept_copies(cross, x) == 1 and kept_copies(cross, memory) == 1
    with webgrad.no_grad():  # the packed products give the separate products' results
        wq, wk, wv = attention.in_proj_weight.chunk(3)
        bq, bk, bv = attention.in_proj_bias.chunk(3)
        F = webgrad.nn.functional
        q, k, v = (F.linear(t.transpose(0, 1), w, b) for t, w, b in ((x, wq, bq), (memory, wk, bk), (memory, wv, bv)))
        heads = [t.reshape(t.shape[0], 2, 4, 4).permute(1, 2, 0, 3) for t in (q, k, v)]
        expected = attention.out_proj(F.scaled_dot_product_attention(*heads).permute(2, 0, 1, 3).reshape(8, 2, 16))
        assert_close(attention(x, memory, memory)[0], expected.transpose(0, 1), rtol=1e-5, atol=1e-5)
