"""RNN, LSTM, GRU and their cells against torch with the same weights: outputs, final states, gradients."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import assert_close
from torch_reference import lazy_torch
from webgrad import nn

torch = lazy_torch()  # live natively; in Pyodide only what torch_ref recorded


def _copy_weights(tm, wm, device):
    assert list(tm.state_dict()) == list(wm.state_dict())
    wm.load_state_dict({k: webgrad.tensor(v.detach().numpy(), device=device) for k, v in tm.state_dict().items()})
    return wm.to(device)


def _np(t):
    return t.detach().numpy() if type(t).__module__.startswith("torch") else t.detach().cpu().numpy()


def _flatten_states(out):
    output, state = out
    return [output, *state] if isinstance(state, tuple) else [output, state]


CASES = [
    ("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {}),
    ("LSTM", {"proj_size": 3}), ("GRU", {"bias": False}),
]


@pytest.mark.parametrize("name,kwargs", CASES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_layer_matches_torch(device, name, kwargs, batch_first, bidirectional):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(4, 5, num_layers=2, batch_first=batch_first, bidirectional=bidirectional, **kwargs)
    wm = _copy_weights(tm, getattr(nn, name)(4, 5, num_layers=2, batch_first=batch_first,
                                            bidirectional=bidirectional, **kwargs), device)
    x = np.random.default_rng(1).standard_normal((3, 6, 4)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    wx = webgrad.tensor(x, device=device, requires_grad=True)
    t_outs, w_outs = _flatten_states(tm(tx)), _flatten_states(wm(wx))
    for t, w in zip(t_outs, w_outs):
        assert_close(w, _np(t), rtol=1e-4, atol=1e-5)
    weights = [np.random.default_rng(i).standard_normal(t.shape).astype(np.float32) for i, t in enumerate(t_outs)]
    sum(((t * torch.tensor(r)).sum() for t, r in zip(t_outs, weights))).backward()
    sum(((w * webgrad.tensor(r, device=device)).sum() for w, r in zip(w_outs, weights))).backward()
    assert_close(wx.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    w_params = dict(wm.named_parameters())
    for key, p in tm.named_parameters():
        assert_close(w_params[key].grad, p.grad.numpy(), rtol=1e-4, atol=1e-4, msg=key)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_initial_state_and_unbatched(device, name):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(3, 4, num_layers=2, bidirectional=True)
    wm = _copy_weights(tm, getattr(nn, name)(3, 4, num_layers=2, bidirectional=True), device)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((4, 2, 4)).astype(np.float32)
    c0 = rng.standard_normal((4, 2, 4)).astype(np.float32)

    def state(lib, batch_slice, dev=None):
        make = (lambda a: torch.tensor(a)) if lib is torch else (lambda a: webgrad.tensor(a, device=dev))
        h, c = make(h0[batch_slice]), make(c0[batch_slice])
        return (h, c) if name == "LSTM" else h
    for t, w in zip(_flatten_states(tm(torch.tensor(x), state(torch, np.s_[:]))),
                    _flatten_states(wm(webgrad.tensor(x, device=device), state(webgrad, np.s_[:], device)))):
        assert_close(w, _np(t), rtol=1e-4, atol=1e-5)
    # Unbatched: (L, H_in) input and (D * layers, H) states.
    for t, w in zip(_flatten_states(tm(torch.tensor(x[:, 0]), state(torch, np.s_[:, 0]))),
                    _flatten_states(wm(webgrad.tensor(x[:, 0], device=device),
                                       state(webgrad, np.s_[:, 0], device)))):
        assert tuple(w.shape) == tuple(t.shape)
        assert_close(w, _np(t), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_torch(device, name):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(3, 4)
    wm = _copy_weights(tm, getattr(nn, name)(3, 4), device)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    h = rng.standard_normal((2, 4)).astype(np.float32)
    t_state = (torch.tensor(h), torch.tensor(h * 0.5)) if name == "LSTMCell" else torch.tensor(h)
    w_state = ((webgrad.tensor(h, device=device), webgrad.tensor(h * 0.5, device=device)) if name == "LSTMCell"
               else webgrad.tensor(h, device=device))
    tx, wx = torch.tensor(x, requires_grad=True), webgrad.tensor(x, device=device, requires_grad=True)
    for t_in, w_in in ((None, None), (t_state, w_state)):
        t_out, w_out = tm(tx, t_in), wm(wx, w_in)
        t_out = t_out if isinstance(t_out, tuple) else (t_out,)
        w_out = w_out if isinstance(w_out, tuple) else (w_out,)
        for t, w in zip(t_out, w_out):
            assert_close(w, _np(t), rtol=1e-4, atol=1e-5)
        sum(t.sum() * (i + 1) for i, t in enumerate(t_out)).backward()
        sum(w.sum() * (i + 1) for i, w in enumerate(w_out)).backward()
        assert_close(wx.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
        assert_close(wm.weight_hh.grad, tm.weight_hh.grad.numpy(), rtol=1e-4, atol=1e-5)
    # Unbatched
    t_out, w_out = tm(torch.tensor(x[0])), wm(webgrad.tensor(x[0], device=device))
    t_out = t_out[0] if isinstance(t_out, tuple) else t_out
    w_out = w_out[0] if isinstance(w_out, tuple) else w_out
    assert tuple(w_out.shape) == (4,)
    assert_close(w_out, _np(t_out), rtol=1e-4, atol=1e-5)


def test_dropout_between_layers_only_in_training():
    webgrad.manual_seed(0)
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = webgrad.randn(5, 2, 3)
    lstm.eval()
    first, second = lstm(x)[0], lstm(x)[0]
    assert np.array_equal(first.detach().numpy(), second.detach().numpy())
    lstm.train()
    a, b = lstm(x)[0], lstm(x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    # One layer: dropout has nothing to act between, so training output equals eval output.
    single = nn.GRU(3, 4, dropout=0.5)
    assert np.allclose(single(x)[0].detach().numpy(), single.eval()(x)[0].detach().numpy())


def test_default_init_range_and_repr():
    gru = nn.GRU(3, 16, num_layers=2, batch_first=True)
    bound = 1 / 4
    for p in gru.parameters():
        values = p.detach().numpy()
        assert values.min() >= -bound and values.max() <= bound and values.std() > bound / 4
    assert repr(gru) == "GRU(3, 16, num_layers=2, batch_first=True)"
    assert len(gru.all_weights) == 2 and len(gru.all_weights[0]) == 4
    gru.flatten_parameters()


def test_bad_input_errors():
    lstm = nn.LSTM(3, 4)
    with pytest.raises(webgrad.OpError, match="input_size. Expected 3"):
        lstm(webgrad.randn(5, 2, 7))
    with pytest.raises(webgrad.OpError, match=r"h_0 of shape \(1, 2, 4\)"):
        lstm(webgrad.randn(5, 2, 3), (webgrad.zeros(1, 3, 4), webgrad.zeros(1, 2, 4)))
    with pytest.raises(TypeError, match="tuple"):
        lstm(webgrad.randn(5, 2, 3), webgrad.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(webgrad.OpError, match="GRUCell"):
        nn.GRUCell(3, 4)(webgrad.randn(2, 5))
