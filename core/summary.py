"""``webgrad.summary``: a table of a model's layers, output shapes, parameters and FLOPs, like torchinfo.

FLOPs convention: one multiply-add is 2 FLOPs. Counted are the matrix products
of ``Linear``, ``Conv1d``/``Conv2d``, the recurrent layers and cells (RNN, LSTM,
GRU: input and hidden products of every gate) and ``MultiheadAttention`` (its
input projections and both attention products; its ``out_proj`` is a ``Linear``
row of its own) plus their bias additions (1 FLOP per output element). Elementwise
layers (activations, norms, pooling, dropout) and code in a custom ``forward``
outside these layers count 0: they are small next to the products.
"""
from __future__ import annotations

import html
import math
import sys
from dataclasses import dataclass, field

import numpy as np

from .tensor import Tensor
from . import dtypes as dtypes_module
from .autograd import no_grad
from .creation import from_numpy


@dataclass
class LayerRow:
    """One call of one module during the forward pass."""
    name: str                 # dotted path in the model, e.g. "features.0"; "" for the model itself
    class_name: str
    depth: int                # 0 for the model, 1 for its children, ...
    output_shape: list | None = None
    params: int = 0           # parameters of this module and its submodules
    trainable_params: int = 0
    flops: int = 0            # this module's own FLOPs plus those of the calls made inside it
    children_called: list = field(default_factory=list)


class ModelSummary:
    """What ``summary`` returns: ``str()`` is a text table, ``_repr_html_()`` an HTML table (as in Jupyter)."""

    def __init__(self, model, rows, input_shapes, depth):
        self.model_name = type(model).__name__
        self.rows: list[LayerRow] = rows
        self.input_shapes = input_shapes
        self.depth = depth
        unique = {id(p): p for p in model.parameters()}.values()
        self.total_params = sum(p.numel() for p in unique)
        self.trainable_params = sum(p.numel() for p in unique if p.requires_grad)
        self.non_trainable_params = self.total_params - self.trainable_params
        self.params_size_bytes = sum(p.numel() * p.dtype.itemsize for p in unique)
        self.total_flops = rows[0].flops if rows and rows[0].depth == 0 else 0

    def _table(self) -> list[list[str]]:
        out = []
        for row in self.rows:
            if row.depth == 0 or row.depth > self.depth:
                continue
            shape = "--" if row.output_shape is None else str(row.output_shape)
            label = f"{row.class_name} ({row.name})" if row.name else row.class_name
            out.append(["  " * (row.depth - 1) + label, shape, _count(row.params) if row.params else "--",
                        _count(row.flops) if row.flops else "--"])
        return out

    def _totals(self) -> list[tuple[str, str]]:
        totals = [("Total params", f"{self.total_params:,}"),
                  ("Trainable params", f"{self.trainable_params:,}"),
                  ("Non-trainable params", f"{self.non_trainable_params:,}"),
                  ("Params size (MB)", f"{self.params_size_bytes / 1e6:.2f}")]
        if self.input_shapes is not None:
            totals += [("Input shape", ", ".join(str(s) for s in self.input_shapes)),
                       ("Forward FLOPs", f"{self.total_flops:,} ({_human(self.total_flops)}; multiply-add = 2)")]
        return totals

    def __str__(self) -> str:
        header = ["Layer (type (name))", "Output Shape", "Param #", "FLOPs"]
        body = [[self.model_name, "--" if not self.rows or self.rows[0].output_shape is None
                 else str(self.rows[0].output_shape), _count(self.total_params), _count(self.total_flops)]]
        body += self._table()
        widths = [max(len(r[i]) for r in [header] + body) for i in range(4)]
        line = "=" * (sum(widths) + 6)

        def fmt(r):
            return f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:>{widths[3]}}".rstrip()
        lines = [line, fmt(header), line] + [fmt(r) for r in body] + [line]
        lines += [f"{k}: {v}" for k, v in self._totals()] + [line]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        esc = html.escape
        cells = "".join(f"<th>{esc(h)}</th>" for h in ["Layer (type (name))", "Output Shape", "Param #", "FLOPs"])
        rows = [f"<tr><td><b>{esc(self.model_name)}</b></td><td>"
                f"{esc(str(self.rows[0].output_shape) if self.rows and self.rows[0].output_shape else '--')}</td>"
                f"<td>{esc(_count(self.total_params))}</td><td>{esc(_count(self.total_flops))}</td></tr>"]
        for name, shape, params, flops in self._table():
            indent = (len(name) - len(name.lstrip(" "))) // 2
            rows.append(f'<tr><td style="padding-left:{0.4 + 1.2 * indent:.1f}em">{esc(name.strip())}</td>'
                        f"<td>{esc(shape)}</td><td>{esc(params)}</td><td>{esc(flops)}</td></tr>")
        totals = "".join(f"<tr><th>{esc(k)}</th><td colspan=\"3\">{esc(v)}</td></tr>" for k, v in self._totals())
        return ('<table class="webgrad-summary">'
                f"<thead><tr>{cells}</tr></thead><tbody>{''.join(rows)}</tbody><tfoot>{totals}</tfoot></table>")


def _count(n: int) -> str:
    return f"{n:,}"


def _human(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return str(int(n))


def _shapes(output):
    """The output shape as a list; for a tuple of outputs, the first tensor's (as torchinfo shows)."""
    if isinstance(output, Tensor):
        return list(output.shape)
    if isinstance(output, (tuple, list)):
        for item in output:
            if isinstance(item, Tensor):
                return list(item.shape)
    return None


def _example_input(model, input_size, input_data, dtypes, device, caller: str):
    """A tensor (or a tuple of tensors) to run the model on."""
    if device is None:
        first = next(iter(model.parameters()), None)
        device = first.device if first is not None else None
    if input_data is not None:
        items = input_data if isinstance(input_data, (tuple, list)) else [input_data]
        tensors = []
        for item in items:
            tensor = item if isinstance(item, Tensor) else from_numpy(np.asarray(item))
            tensors.append(tensor.to(device) if device is not None else tensor)
        return tensors[0] if len(tensors) == 1 and not isinstance(input_data, (tuple, list)) else tuple(tensors)
    if input_size is None:
        raise TypeError(f"{caller}: give input_size (e.g. (1, 64), batch included) or input_data")
    sizes = input_size
    single = all(isinstance(s, (int, np.integer)) for s in sizes)
    if single:
        sizes = [sizes]
    if not all(isinstance(s, (tuple, list)) and all(isinstance(d, (int, np.integer)) and d > 0 for d in s)
               for s in sizes):
        raise ValueError(f"{caller}: input_size must be a shape like (1, 64) or a list of shapes, "
                         f"with positive ints; got {input_size!r}")
    dtype_list = list(dtypes) if dtypes is not None else [dtypes_module.float32] * len(sizes)
    if len(dtype_list) != len(sizes):
        raise ValueError(f"{caller}: {len(sizes)} input shapes but {len(dtype_list)} dtypes")
    generator = np.random.default_rng(0)  # a private stream: summarising must not move the user's seed
    tensors = []
    for shape, dtype in zip(sizes, dtype_list):
        dtype = dtypes_module.to_dtype(dtype)
        array = (generator.standard_normal(tuple(shape)) if dtype.is_floating_point
                 else np.zeros(tuple(shape))).astype(dtype.np)
        tensor = from_numpy(array)
        tensors.append(tensor.to(device) if device is not None else tensor)
    return tensors[0] if single else tuple(tensors)


def layer_flops(module, args, output) -> int:
    """Forward FLOPs of one call of ``module`` itself (not of the modules it calls); see the module doc."""
    from .nn import Conv1d, Conv2d, Linear, MultiheadAttention
    from .nn.modules.rnn import RNNBase, RNNCellBase

    out = output[0] if isinstance(output, (tuple, list)) else output
    if not isinstance(out, Tensor):
        return 0
    if isinstance(module, Linear):
        rows = out.numel() // module.out_features
        return 2 * rows * module.in_features * module.out_features + (out.numel() if module.bias is not None else 0)
    if isinstance(module, (Conv1d, Conv2d)):
        per_output = (module.in_channels // module.groups) * math.prod(module.kernel_size)
        return 2 * out.numel() * per_output + (out.numel() if module.bias is not None else 0)
    if isinstance(module, (RNNBase, RNNCellBase)):
        return _recurrent_flops(module, args)
    if isinstance(module, MultiheadAttention):
        query, key = args[0], args[1] if len(args) > 1 else args[0]
        batch_axis = 0 if module.batch_first else 1
        squeeze = query.dim() == 2  # unbatched (L, E)
        length, source = query.shape[0 if squeeze else 1 - batch_axis], key.shape[0 if squeeze else 1 - batch_axis]
        batch = 1 if squeeze else query.shape[batch_axis]
        e = module.embed_dim
        projections = 2 * batch * (length * e * e + source * module.kdim * e + source * module.vdim * e)
        biases = batch * (length + 2 * source) * e if module.in_proj_bias is not None else 0
        attention = 2 * 2 * batch * length * source * e  # scores q k^T, then weights v
        return projections + biases + attention
    return 0


def _recurrent_flops(module, args) -> int:
    """Per step and direction: the input and hidden products of every gate, plus both biases
    (and LSTM's projection). Gate nonlinearities count 0, as elsewhere."""
    from .nn.modules.rnn import _GATES, RNNCellBase

    x = args[0]
    if isinstance(module, RNNCellBase):
        steps, batch = 1, (x.shape[0] if x.dim() == 2 else 1)
        layers, directions, hidden_out, mode = 1, 1, module.hidden_size, module._mode
    else:
        batched = x.dim() == 3
        steps = x.shape[1 if batched and module.batch_first else 0]
        batch = x.shape[0 if module.batch_first else 1] if batched else 1
        layers, directions, mode = module.num_layers, 2 if module.bidirectional else 1, module.mode
        hidden_out = module.proj_size or module.hidden_size
    gates = _GATES[mode] * module.hidden_size
    total = 0
    for layer in range(layers):
        width = module.input_size if layer == 0 else directions * hidden_out
        per_step = 2 * gates * (width + hidden_out) + (2 * gates if module.bias else 0)
        if getattr(module, "proj_size", 0):
            per_step += 2 * module.hidden_size * module.proj_size
        total += directions * steps * batch * per_step
    return total


def summary(model, input_size=None, input_data=None, dtypes=None, device=None, depth: int = 3,
            verbose: int | None = None, **kwargs):
    """Summarise ``model``: one row per layer call with output shape, parameters and forward FLOPs.

    Prints the table and returns it, as torchinfo does: in a script the table appears; where the
    value shows itself (the playground's cell, a ``python`` prompt, Jupyter) it is not printed
    too, unless ``verbose=1`` asks for it.

    Args:
        model: an ``nn.Module``.
        input_size: the input shape with the batch dimension, e.g. ``(1, 1, 8, 8)``, or a list of
            shapes for several inputs. Without it (and without ``input_data``) only parameters are listed.
        input_data: example input(s) instead of ``input_size``.
        dtypes: one dtype per input (default float32; use ``webgrad.int64`` for token ids).
        device: where to run the pass (default: where the model's parameters are).
        depth: rows deeper than this are folded into their parent.
        verbose: 0 prints nothing, 1 (or 2) prints the table; None (default): 1 in a script, 0 when
            called from an interactive cell or prompt (``webgrad.display.called_interactively``).
        **kwargs: passed to ``model.forward``.

    The pass runs in eval mode under ``no_grad``; training flags and the random seed are left as they were.

    Example:
        >>> model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        >>> webgrad.summary(model, input_size=(1, 64), verbose=0).total_flops
        4778
    """
    from .display import called_interactively
    from .nn import Module

    if not isinstance(model, Module):
        raise TypeError(f"webgrad.summary: expected an nn.Module, got {type(model).__name__}")
    if verbose not in (None, 0, 1, 2):
        raise ValueError(f"webgrad.summary: verbose must be None, 0, 1 or 2, got {verbose!r}")
    result = _summarize(model, input_size, input_data, dtypes, device, depth, kwargs)
    if verbose is None:
        verbose = 0 if called_interactively(sys._getframe(1)) else 1
    if verbose:
        print(result)
    return result


def _summarize(model, input_size, input_data, dtypes, device, depth, kwargs) -> ModelSummary:
    names = {id(m): name for name, m in model.named_modules()}
    counts = {id(m): (sum(p.numel() for p in m.parameters()),
                      sum(p.numel() for p in m.parameters() if p.requires_grad)) for m in model.modules()}
    if input_size is None and input_data is None:
        listed = [LayerRow(name, type(m).__name__, 0 if name == "" else name.count(".") + 1, None, *counts[id(m)])
                  for name, m in model.named_modules()]
        return ModelSummary(model, listed, None, depth)

    example = _example_input(model, input_size, input_data, dtypes, device, "webgrad.summary")
    inputs = example if isinstance(example, tuple) else (example,)
    rows: list[LayerRow] = []
    stack: list[LayerRow] = []

    def before(module, args):
        name = names.get(id(module), "?")
        row = LayerRow(name, type(module).__name__, len(stack), None, *counts.get(id(module), (0, 0)))
        rows.append(row)
        stack.append(row)

    def after(module, args, output):
        row = stack.pop()
        row.output_shape = _shapes(output)
        row.flops += layer_flops(module, args, output)
        if stack:
            stack[-1].flops += row.flops

    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(before))
        handles.append(module.register_forward_hook(after))
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with no_grad():
            model(*inputs, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
        for module, mode in modes:
            object.__setattr__(module, "training", mode)
    return ModelSummary(model, rows, [list(t.shape) for t in inputs], depth)
