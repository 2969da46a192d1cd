"""nn.Transformer and the decoder stack against torch (eval mode) with copied weights, masks included."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import assert_close
from torch_reference import lazy_torch
from webgrad import nn

torch = lazy_torch()  # live natively; in Pyodide only what torch_ref recorded


def _copy(tm, wm, device):
    assert list(tm.state_dict()) == list(wm.state_dict())
    wm.load_state_dict({k: webgrad.tensor(v.detach().numpy(), device=device) for k, v in tm.state_dict().items()})
    return wm.to(device)


def _data(*shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_matches_torch(device, batch_first, norm_first):
    kwargs = {"d_model": 8, "nhead": 2, "num_encoder_layers": 2, "num_decoder_layers": 2, "dim_feedforward": 16,
              "batch_first": batch_first, "norm_first": norm_first, "activation": "gelu"}
    torch.manual_seed(0)
    tm = torch.nn.Transformer(**kwargs).eval()
    wm = _copy(tm, nn.Transformer(**kwargs), device).eval()
    src, tgt = _data((2, 5, 8) if batch_first else (5, 2, 8), (2, 4, 8) if batch_first else (4, 2, 8))
    padding = np.array([[False] * 5, [False, False, False, True, True]])
    t_mask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    w_mask = nn.Transformer.generate_square_subsequent_mask(4, device=device)
    assert_close(w_mask, t_mask.numpy())
    expected = tm(torch.tensor(src), torch.tensor(tgt), tgt_mask=t_mask,
                  src_key_padding_mask=torch.tensor(padding), memory_key_padding_mask=torch.tensor(padding))
    got = wm(webgrad.tensor(src, device=device), webgrad.tensor(tgt, device=device), tgt_mask=w_mask,
             src_key_padding_mask=webgrad.tensor(padding, device=device),
             memory_key_padding_mask=webgrad.tensor(padding, device=device))
    assert_close(got, expected.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_decoder_layer_masks_and_gradients(device):
    torch.manual_seed(1)
    tl = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    wl = _copy(tl, nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), device)
    tgt, memory = _data((4, 3, 8), (6, 3, 8))
    memory_mask = np.triu(np.ones((4, 6), bool), 3)  # bool: True = may not attend
    tt = torch.tensor(tgt, requires_grad=True)
    wt = webgrad.tensor(tgt, device=device, requires_grad=True)
    out_t = tl(tt, torch.tensor(memory), tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4),
               memory_mask=torch.tensor(memory_mask))
    out_w = wl(wt, webgrad.tensor(memory, device=device),
               tgt_mask=nn.Transformer.generate_square_subsequent_mask(4, device=device),
               memory_mask=webgrad.tensor(memory_mask, device=device))
    assert_close(out_w, out_t.detach().numpy(), rtol=1e-4, atol=1e-4)
    out_t.pow(2).sum().backward()
    out_w.pow(2).sum().backward()
    assert_close(wt.grad, tt.grad.numpy(), rtol=1e-3, atol=1e-4)
    assert_close(wl.multihead_attn.in_proj_weight.grad, tl.multihead_attn.in_proj_weight.grad.numpy(),
                 rtol=1e-3, atol=1e-4)


def test_is_causal_equals_causal_mask(device):
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0).to(device)
    tgt, memory = (webgrad.tensor(a, device=device) for a in _data((4, 2, 8), (5, 2, 8)))
    with_mask = layer(tgt, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4, device=device))
    with_flag = layer(tgt, memory, tgt_is_causal=True)
    assert_close(with_flag, with_mask.detach().cpu().numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(layer(tgt, memory).detach().cpu().numpy(), with_mask.detach().cpu().numpy())


def test_structure_subclass_and_custom_parts():
    class Seq2Seq(nn.Transformer):
        def __init__(self):
            super().__init__(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)
            self.head = nn.Linear(8, 3)

    model = Seq2Seq()
    assert len(model.encoder.layers) == 1 and isinstance(model.decoder.norm, nn.LayerNorm)
    expected = list(torch.nn.Transformer(8, 2, 1, 1, 16).state_dict())
    assert [k for k in model.state_dict() if not k.startswith("head")] == expected
    # Every matrix starts from xavier_uniform_: bound sqrt(6 / (fan_in + fan_out)).
    w = model.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(w).max() <= np.sqrt(6 / 24)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 1)
    custom = nn.Transformer(8, 2, custom_encoder=encoder, num_decoder_layers=1, dim_feedforward=16)
    assert custom.encoder is encoder


def test_shape_errors():
    model = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(webgrad.OpError, match="batch number of src and tgt"):
        model(webgrad.randn(5, 2, 8), webgrad.randn(4, 3, 8))
    with pytest.raises(webgrad.OpError, match="d_model"):
        model(webgrad.randn(5, 2, 6), webgrad.randn(4, 2, 6))
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerDecoderLayer(8, 2, activation="swish")


# -- the other nn additions: channel dropout, parallel wrappers -------------------------------------------

@pytest.mark.parametrize("cls,shape", [("Dropout1d", (4, 6, 5)), ("Dropout1d", (6, 5)), ("Dropout2d", (4, 6, 3, 3)),
                                       ("Dropout3d", (6, 3, 3, 2))])
def test_channel_dropout_drops_whole_channels(device, cls, shape):
    webgrad.manual_seed(0)
    layer = getattr(nn, cls)(0.5)
    x = webgrad.ones(*shape, device=device)
    out = layer(x).cpu().numpy()
    spatial = {"Dropout1d": 1, "Dropout2d": 2, "Dropout3d": 3}[cls]
    per_channel = out.reshape(*shape[:-spatial], -1)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(-1) == per_channel.max(-1)).all()  # a channel is all kept or all dropped
    assert 0 < (per_channel[..., 0] == 0).mean() < 1
    assert np.array_equal(layer.eval()(x).cpu().numpy(), np.ones(shape, np.float32))
    wrong_rank = webgrad.ones(*([2] * (len(shape) + 2)), device=device)
    if cls == "Dropout1d":
        with pytest.raises(RuntimeError, match="dropout1d"):
            layer.train()(wrong_rank)
    else:  # PyTorch warns and drops per (dim 0, dim 1) entry
        with pytest.warns(UserWarning, match=cls.lower()):
            assert layer.train()(wrong_rank).shape == wrong_rank.shape


def test_parallel_wrappers_single_process(monkeypatch):
    from webgrad.nn.parallel import DistributedDataParallel as DDP

    inner = nn.Linear(4, 2)
    for wrapper in (DDP(inner), nn.DataParallel(inner)):
        assert wrapper.module is inner
        assert list(wrapper.state_dict()) == ["module.weight", "module.bias"]
        x = webgrad.randn(3, 4)
        assert np.array_equal(wrapper(x).detach().numpy(), inner(x).detach().numpy())
    with DDP(inner).no_sync():
        pass
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="multi-process"):
        DDP(inner)
    with pytest.raises(RuntimeError, match="several devices"):
        nn.DataParallel(inner, device_ids=[0, 1])
