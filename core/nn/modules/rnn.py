"""RNN, LSTM and GRU layers and their single-step cells, with PyTorch's maths, shapes and parameter names.

Parameters are named ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``,
``bias_hh_l{k}`` (``_reverse`` for the backward direction of a bidirectional
layer; ``weight_hr_l{k}`` for an LSTM with ``proj_size``), with the gates stacked
in PyTorch's order (LSTM: i, f, g, o; GRU: r, z, n), so torch state dicts load
unchanged. Each layer projects the whole input sequence at once (one matmul) and
then steps through time with one small matmul per step.
"""
from __future__ import annotations

import math

from ... import creation, ops
from ...ops._helpers import describe
from ...ops.registry import OpError
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_step(mode, gi, h, w_hh, b_hh):
    """One step of an RNN/GRU given ``gi`` = x W_ihᵀ + b_ih (already computed); returns h'."""
    gh = F.linear(h, w_hh, b_hh)
    if mode == "RNN_TANH":
        return ops.tanh(gi + gh)
    if mode == "RNN_RELU":
        return ops.relu(gi + gh)
    # GRU: the reset gate multiplies the hidden part of the candidate, bias included.
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r = ops.sigmoid(i_r + h_r)
    z = ops.sigmoid(i_z + h_z)
    n = ops.tanh(i_n + r * h_n)
    return n + z * (h - n)


def _lstm_step(gi, h, c, w_hh, b_hh, w_hr):
    gates = gi + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
    h = ops.sigmoid(o) * ops.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


class RNNBase(Module):
    """The shared machinery of ``RNN``, ``LSTM`` and ``GRU`` (parameters, shapes, layers, directions)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        for option, value in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}: {option} must be a positive int, got {value!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout should be a number in [0, 1] representing the probability of an "
                             f"element being zeroed, got {dropout!r}")
        if proj_size < 0 or (proj_size and mode != "LSTM"):
            raise ValueError(f"{name}: proj_size must be 0 (or, for LSTM only, a positive int), got {proj_size!r}")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size ({proj_size}) has to be smaller than hidden_size ({hidden_size})")
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size
        directions = 2 if bidirectional else 1
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = {"weight_ih": (gate_size, layer_input), "weight_hh": (gate_size, real_hidden)}
                if bias:
                    shapes.update({"bias_ih": (gate_size,), "bias_hh": (gate_size,)})
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                for key, shape in shapes.items():
                    setattr(self, key + suffix, Parameter(creation.empty(*shape, dtype=dtype, device=device)))
                    self._flat_weights_names.append(key + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self) -> None:
        """Nothing to do here (PyTorch packs weights for cuDNN); kept so scripts that call it run."""

    @property
    def all_weights(self):
        """The parameters, one list per layer and direction, in PyTorch's order."""
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional else 1))
        weights = [getattr(self, n) for n in self._flat_weights_names]
        return [weights[i:i + per] for i in range(0, len(weights), per)]

    def _weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        return (getattr(self, "weight_ih" + suffix), getattr(self, "weight_hh" + suffix),
                getattr(self, "bias_ih" + suffix, None), getattr(self, "bias_hh" + suffix, None),
                getattr(self, "weight_hr" + suffix, None))

    def _run_direction(self, x, layer, direction, h, c):
        """One direction of one layer over (L, N, H_in) input; returns (outputs (L, N, H), h, c)."""
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
        gi_all = F.linear(x, w_ih, b_ih)  # every step's input projection in one matmul
        steps = range(x.shape[0] - 1, -1, -1) if direction else range(x.shape[0])
        outputs = [None] * x.shape[0]
        for t in steps:
            if self.mode == "LSTM":
                h, c = _lstm_step(gi_all[t], h, c, w_hh, b_hh, w_hr)
            else:
                h = _rnn_step(self.mode, gi_all[t], h, w_hh, b_hh)
            outputs[t] = h
        return ops.stack(outputs), h, c

    def _check_state(self, state, what, shape):
        if tuple(state.shape) != shape:
            raise OpError(f"{type(self).__name__}: expected {what} of shape {shape} "
                          f"(num_layers * num_directions, batch, hidden), got {describe(state)}")

    def forward(self, input, hx=None):
        name = type(self).__name__
        if input.ndim not in (2, 3):
            raise OpError(f"{name}: expected a 2-D (unbatched) or 3-D input, got {describe(input)}")
        if input.shape[-1] != self.input_size:
            raise OpError(f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                          f"got {describe(input)}")
        batched = input.ndim == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        batch = x.shape[1]
        directions = 2 if self.bidirectional else 1
        out_hidden = self.proj_size or self.hidden_size
        h_shape = (self.num_layers * directions, batch, out_hidden)
        c_shape = (self.num_layers * directions, batch, self.hidden_size)
        h0 = c0 = None
        if hx is not None:
            if self.mode == "LSTM":
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"{name}: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
                h0, c0 = hx
                if not batched:
                    h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
                self._check_state(c0, "c_0", c_shape)
            else:
                h0 = hx if batched else hx.unsqueeze(1)
            self._check_state(h0, "h_0", h_shape)
        if h0 is None:
            h0 = creation.zeros(*h_shape, dtype=x.dtype, device=x.device)
        if c0 is None and self.mode == "LSTM":
            c0 = creation.zeros(*c_shape, dtype=x.dtype, device=x.device)

        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                out, h, c = self._run_direction(x, layer, direction, h0[k], None if c0 is None else c0[k])
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if directions == 1 else ops.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout)
        output = x
        if batched and self.batch_first:
            output = output.transpose(0, 1)
        h_n = ops.stack(h_n)
        c_n = ops.stack(c_n) if self.mode == "LSTM" else None
        if not batched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
            c_n = None if c_n is None else c_n.squeeze(1)
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity!r}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh)`` (or relu), stacked, optionally bidirectional.

    Shapes: input (L, N, H_in), or (N, L, H_in) with ``batch_first``, or (L, H_in)
    unbatched; returns ``(output, h_n)`` with output (L, N, D * H_out) and h_n
    (D * num_layers, N, H_out), D = 2 if bidirectional else 1.

    Example:
        >>> rnn = nn.RNN(10, 20, num_layers=2, batch_first=True)
        >>> out, h = rnn(webgrad.randn(3, 5, 10))
        >>> out.shape, h.shape
        (webgrad.Size([3, 5, 20]), webgrad.Size([2, 3, 20]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; choose 'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)


class LSTM(RNNBase):
    """Long short-term memory, gates i, f, g, o as in PyTorch; ``proj_size`` projects h (LSTMP).

    Takes ``(h_0, c_0)`` (zeros when omitted) and returns ``(output, (h_n, c_n))``.

    Example:
        >>> lstm = nn.LSTM(8, 16, batch_first=True, bidirectional=True)
        >>> out, (h, c) = lstm(webgrad.randn(4, 7, 8))
        >>> out.shape, h.shape
        (webgrad.Size([4, 7, 32]), webgrad.Size([2, 4, 16]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit, gates r, z, n as in PyTorch: ``h' = (1 - z) * n + z * h``.

    Example:
        >>> gru = nn.GRU(8, 16, num_layers=2)
        >>> out, h = gru(webgrad.randn(7, 4, 8))
        >>> out.shape, h.shape
        (webgrad.Size([7, 4, 16]), webgrad.Size([2, 4, 16]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


class RNNCellBase(Module):
    """One time step: parameters ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh`` as in PyTorch."""

    _mode = "RNN_TANH"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        for option, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}: {option} must be a positive int, got {value!r}")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gate_size = _GATES[self._mode] * hidden_size
        factory = {"dtype": dtype, "device": device}
        self.weight_ih = Parameter(creation.empty(gate_size, input_size, **factory))
        self.weight_hh = Parameter(creation.empty(gate_size, hidden_size, **factory))
        if bias:
            self.bias_ih = Parameter(creation.empty(gate_size, **factory))
            self.bias_hh = Parameter(creation.empty(gate_size, **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def _prepare(self, input, state):
        """(input as (N, H_in), state as (N, H) or None, batched?) with the shapes checked."""
        name = type(self).__name__
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise OpError(f"{name}: expected input of shape (batch, {self.input_size}) or ({self.input_size},), "
                          f"got {describe(input)}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if state is not None:
            state = state if batched else state.unsqueeze(0)
            if tuple(state.shape) != (x.shape[0], self.hidden_size):
                raise OpError(f"{name}: expected hidden state of shape ({x.shape[0]}, {self.hidden_size}), "
                              f"got {describe(state)}")
        return x, state, batched

    def _zeros(self, x):
        return creation.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity!r}"
        return text


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)`` (or relu).

    Example:
        >>> cell = nn.RNNCell(10, 20)
        >>> cell(webgrad.randn(3, 10)).shape
        webgrad.Size([3, 20])
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; choose 'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        x, h, batched = self._prepare(input, hx)
        h = self._zeros(x) if h is None else h
        out = _rnn_step(self._mode, F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; takes ``(h, c)`` (zeros when omitted) and returns ``(h', c')``.

    Example:
        >>> cell = nn.LSTMCell(10, 20)
        >>> h, c = cell(webgrad.randn(3, 10))
        >>> h.shape, c.shape
        (webgrad.Size([3, 20]), webgrad.Size([3, 20]))
    """

    _mode = "LSTM"

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTMCell: hx must be a tuple (h, c), got {type(hx).__name__}")
        x, h, batched = self._prepare(input, None if hx is None else hx[0])
        _, c, _ = self._prepare(input, None if hx is None else hx[1])
        h = self._zeros(x) if h is None else h
        c = self._zeros(x) if c is None else c
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh, None)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: ``h' = (1 - z) * n + z * h`` with gates r, z, n as in PyTorch.

    Example:
        >>> cell = nn.GRUCell(10, 20)
        >>> cell(webgrad.randn(3, 10)).shape
        webgrad.Size([3, 20])
    """

    _mode = "GRU"

    def forward(self, input, hx=None):
        x, h, batched = self._prepare(input, hx)
        h = self._zeros(x) if h is None else h
        out = _rnn_step("GRU", F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return out if batched else out.squeeze(0)
