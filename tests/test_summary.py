"""webgrad.summary: layer rows, output shapes and parameter counts (checked against the same
model in PyTorch), exact FLOPs for Linear and Conv2d, and the text / HTML renderings."""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from webgrad import nn

from conftest import need_module


def mlp():
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, stride=2, bias=False), nn.Flatten(), nn.Linear(16, 10))


def torch_rows(model, shape):
    """(name, class, output shape, parameter count) per module call, in call order, from PyTorch."""
    torch = need_module("torch")
    rows, handles = [], []
    for name, module in model.named_modules():
        def hook(module, args, output, name=name):
            rows.append((name, type(module).__name__, list(output.shape), sum(p.numel() for p in module.parameters())))
        handles.append(module.register_forward_hook(hook))
    with torch.no_grad():
        model.eval()(torch.zeros(shape))
    for handle in handles:
        handle.remove()
    return rows


def as_torch(model):
    torch = need_module("torch")
    layers = []
    for layer in model:
        name = type(layer).__name__
        if name == "Linear":
            layers.append(torch.nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None))
        elif name == "Conv2d":
            layers.append(torch.nn.Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride,
                                          layer.padding, bias=layer.bias is not None))
        elif name == "BatchNorm2d":
            layers.append(torch.nn.BatchNorm2d(layer.num_features))
        elif name == "MaxPool2d":
            layers.append(torch.nn.MaxPool2d(layer.kernel_size))
        else:
            layers.append(getattr(torch.nn, name)())
    return torch.nn.Sequential(*layers)


@pytest.mark.parametrize("build, shape", [(mlp, (2, 64)), (cnn, (2, 1, 8, 8))])
def test_rows_match_pytorch(build, shape, device):
    model = build().to(device)
    result = webgrad.summary(model, input_size=shape)
    expected = torch_rows(as_torch(model), shape)
    # PyTorch's forward hooks fire children first; order both by name for the comparison.
    ours = sorted((r.name, r.class_name, r.output_shape, r.params) for r in result.rows)
    assert ours == sorted(expected)
    assert result.total_params == sum(p.numel() for p in as_torch(model).parameters())
    assert result.trainable_params == result.total_params and result.non_trainable_params == 0
    assert [r.depth for r in result.rows] == [0] + [1] * len(model)
    assert result.input_shapes == [list(shape)]


def test_linear_and_conv_flops_are_exact():
    batch = 2
    linear = webgrad.summary(mlp(), input_size=(batch, 64))
    first, second = 2 * batch * 64 * 32 + batch * 32, 2 * batch * 32 * 10 + batch * 10
    assert [r.flops for r in linear.rows] == [first + second, first, 0, second]
    assert linear.total_flops == first + second

    conv = webgrad.summary(cnn(), input_size=(batch, 1, 8, 8))
    flops = {r.name: r.flops for r in conv.rows}
    conv1 = 2 * (batch * 8 * 8 * 8) * (1 * 3 * 3) + batch * 8 * 8 * 8   # out (2, 8, 8, 8), with bias
    conv2 = 2 * (batch * 16 * 1 * 1) * (8 * 3 * 3)                       # out (2, 16, 1, 1), no bias
    fc = 2 * batch * 16 * 10 + batch * 10
    assert (flops["0"], flops["4"], flops["6"]) == (conv1, conv2, fc)
    assert flops["1"] == flops["2"] == flops["3"] == flops["5"] == 0
    assert conv.total_flops == conv1 + conv2 + fc


def test_grouped_conv_and_attention_flops():
    grouped = webgrad.summary(nn.Conv2d(4, 8, 3, groups=2), input_size=(1, 4, 5, 5))
    assert grouped.total_flops == 2 * (8 * 3 * 3) * (2 * 3 * 3) + 8 * 3 * 3

    e, length, batch = 8, 5, 3
    attention = webgrad.summary(nn.MultiheadAttention(e, 2, batch_first=True),
                                input_data=[webgrad.randn(batch, length, e)] * 3)
    projections = 2 * batch * 3 * length * e * e + batch * 3 * length * e
    products = 2 * 2 * batch * length * length * e
    out_proj = 2 * batch * length * e * e + batch * length * e
    assert attention.rows[1].name == "out_proj" and attention.rows[1].flops == out_proj
    assert attention.total_flops == projections + products + out_proj


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.head = nn.Linear(4, 2)
        self.head.weight.requires_grad_(False)

    def forward(self, x):
        return self.head(x + self.body(x))


def test_nesting_depth_trainable_counts_and_state_restored():
    model = Residual()
    model.train()
    webgrad.manual_seed(3)
    expected_next = webgrad.randn(2).numpy()
    webgrad.manual_seed(3)
    result = webgrad.summary(model, input_size=(1, 4))
    assert [(r.name, r.depth) for r in result.rows] == [("", 0), ("body", 1), ("body.0", 2), ("body.1", 2),
                                                         ("head", 1)]
    assert result.total_params == 4 * 4 + 4 + 4 * 2 + 2
    assert result.non_trainable_params == 8 and result.trainable_params == 22
    assert result.rows[1].flops == 2 * 16 + 4  # the parent row sums its children
    assert model.training and all(m.training for m in model.modules())
    assert not model._forward_hooks and not model.body[0]._forward_pre_hooks
    np.testing.assert_array_equal(webgrad.randn(2).numpy(), expected_next)  # the user's seed did not move

    folded = str(webgrad.summary(model, input_size=(1, 4), depth=1))
    assert "Linear (body.0)" not in folded and "Sequential (body)" in folded


def test_text_and_html_renderings():
    result = webgrad.summary(mlp(), input_size=(1, 64))
    text = str(result)
    assert repr(result) == text
    for piece in ("Linear (0)", "[1, 32]", "2,080", "Total params: 2,410", "Trainable params: 2,410",
                  "Forward FLOPs: 4,778", "multiply-add = 2"):
        assert piece in text, piece
    page = result._repr_html_()
    assert page.startswith('<table class="webgrad-summary">') and page.count("<tr>") >= 5 and "2,410" in page
    assert "<script" not in webgrad.summary(nn.Sequential(nn.Linear(1, 1)), input_size=(1, 1))._repr_html_()


def test_without_input_lists_parameters_only():
    result = webgrad.summary(mlp())
    assert result.total_params == 2410 and result.input_shapes is None
    assert [r.output_shape for r in result.rows] == [None] * 4
    assert "Forward FLOPs" not in str(result)


def test_integer_inputs_and_bad_arguments():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2))
    result = webgrad.summary(model, input_size=(1, 6), dtypes=[webgrad.int64])
    assert result.rows[-1].output_shape == [1, 6, 2]
    with pytest.raises(TypeError, match="expected an nn.Module"):
        webgrad.summary("model")
    with pytest.raises(ValueError, match="input_size must be a shape"):
        webgrad.summary(mlp(), input_size=(1, -64))
    with pytest.raises(ValueError, match="2 input shapes but 1 dtypes"):
        webgrad.summary(mlp(), input_size=[(1, 64), (1, 64)], dtypes=[webgrad.float32])


def test_recurrent_flops_match_the_gate_products():
    steps, batch, features, hidden = 5, 2, 3, 4
    lstm = webgrad.summary(nn.LSTM(features, hidden, num_layers=2, bidirectional=True, batch_first=True),
                           input_size=(batch, steps, features))
    gates = 4 * hidden
    layer0 = 2 * gates * (features + hidden) + 2 * gates
    layer1 = 2 * gates * (2 * hidden + hidden) + 2 * gates
    assert lstm.total_flops == 2 * steps * batch * (layer0 + layer1)
    assert lstm.rows[0].output_shape == [batch, steps, 2 * hidden]

    gru = webgrad.summary(nn.GRUCell(features, hidden, bias=False), input_size=(batch, features))
    assert gru.total_flops == batch * 2 * (3 * hidden) * (features + hidden)


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(3, 3)

    def forward(self, x, scale=1.0):
        return self.shared(self.shared(x)) * scale


def test_a_layer_called_twice_gives_two_rows_and_counts_its_parameters_once():
    result = webgrad.summary(Twice(), input_size=(2, 3), scale=2.0)  # keyword arguments reach forward
    assert [r.name for r in result.rows] == ["", "shared", "shared"]
    assert result.total_params == 12
    one_call = 2 * 2 * 3 * 3 + 2 * 3
    assert result.total_flops == 2 * one_call


def test_prints_in_a_script_like_torchinfo_and_returns_the_same_value(tmp_path):
    """verbose=None prints the table in a script (torchinfo's default); 0 is quiet; 1 prints anywhere."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text("import webgrad\nfrom webgrad import nn\n"
                      "model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))\n"
                      "result = webgrad.summary(model, input_size=(1, 64))\n"
                      "quiet = webgrad.summary(model, input_size=(1, 64), verbose=0)\n"
                      "print('returned', result.total_flops, quiet.total_flops)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.count("Total params: 2,410") == 1, out.stdout
    assert out.stdout.index("Linear (0)") < out.stdout.index("returned 4778 4778")


def test_an_interactive_cell_displays_the_value_instead_of_printing_it(capsys):
    """In a page cell (the worker registers its filename) the value is shown richly: no printed table
    as well, unless verbose=1 asks; a function defined in a script file still prints."""
    from webgrad import display

    cell = "<summary-test-cell>"
    display.register_interactive_cell(cell)
    scope = {"webgrad": webgrad, "model": mlp()}
    value = eval(compile("webgrad.summary(model, input_size=(1, 64))", cell, "eval"), scope)
    assert capsys.readouterr().out == "" and value.total_params == 2410
    eval(compile("webgrad.summary(model, input_size=(1, 64), verbose=1)", cell, "eval"), scope)
    assert capsys.readouterr().out.count("Total params: 2,410") == 1
    webgrad.summary(scope["model"], input_size=(1, 64))  # called from this test file: a script's frame
    assert "Total params: 2,410" in capsys.readouterr().out
    with pytest.raises(ValueError, match="verbose must be None, 0, 1 or 2"):
        webgrad.summary(scope["model"], verbose=3)
