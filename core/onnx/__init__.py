"""``webgrad.onnx.export``: write a model as an ONNX file, as ``torch.onnx.export`` does.

The model runs once on the example ``args`` (in eval mode) while a tracer records a
node per layer and per function call (see ``webgrad.onnx._trace`` for what is
covered: Linear, Conv1d/2d, Max/AvgPool2d, global AdaptiveAvgPool2d, BatchNorm1d/2d,
LayerNorm, Embedding, ReLU/GELU/Tanh/Sigmoid/LeakyReLU, Softmax/LogSoftmax, Dropout,
Flatten, Identity, any nesting of Sequential and custom modules, and between layers
F.relu/gelu/sigmoid/tanh/softmax, + - * /, @, view/reshape/flatten, permute/transpose,
cat). Anything else stops the export with an error naming the op. The graph is built
with the ``onnx`` package, which must be installed (``pip install onnx``); Pyodide
has no ``onnx`` wheel, so there ``export`` raises an ImportError saying so.

Example:
    >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> webgrad.onnx.export(model, (webgrad.randn(1, 4),), "mlp.onnx", input_names=["x"],
    ...                     output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
"""
from __future__ import annotations

import contextlib
import importlib

from ..autograd import enable_grad
from ..tensor import Tensor
from ._trace import FUNCTIONS, LAYERS, ExportError, Tracer, elem_type

__all__ = ["export", "ExportError"]

DEFAULT_OPSET = 17


def _import_onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError as err:
        raise ImportError("webgrad.onnx.export needs the 'onnx' package: pip install onnx (it is not available "
                          "in Pyodide; export natively and load the .onnx file in the page)") from err
    return onnx, helper, numpy_helper


@contextlib.contextmanager
def _patched_functions(tracer):
    """Wrap the covered functions in webgrad, webgrad.ops and webgrad.nn.functional while tracing."""
    from .. import ops
    from ..nn import functional

    webgrad = importlib.import_module("..", __package__)  # the top-level names (webgrad.flatten, webgrad.cat)
    originals = []

    def wrap(name, original, emit):
        def traced(*args, **kwargs):
            tracer.depth += 1
            try:
                out = original(*args, **kwargs)
            finally:
                tracer.depth -= 1
            inputs = list(args[0]) if name == "cat" else args[:2]
            if tracer.depth == 0 and isinstance(out, Tensor) and any(tracer.traced(v) for v in inputs):
                emit(tracer, args, kwargs, out)
            return out
        return traced

    wrapped = {}
    for namespace in (webgrad, ops, functional):
        for name, emit in FUNCTIONS.items():
            original = namespace.__dict__.get(name)
            if original is None:
                continue
            if id(original) not in wrapped:
                wrapped[id(original)] = wrap(name, original, emit)
            originals.append((namespace, name, original))
            setattr(namespace, name, wrapped[id(original)])
    try:
        yield
    finally:
        for namespace, name, original in originals:
            setattr(namespace, name, original)


@contextlib.contextmanager
def _patched_layers(model, tracer):
    """Give each covered layer an instance ``forward`` that records one node for the whole layer."""
    patched = []
    for module in model.modules():
        emit = LAYERS.get(type(module))
        if emit is None or "forward" in module.__dict__:
            continue
        original = module.forward

        def forward(*args, _original=original, _module=module, _emit=emit, **kwargs):
            tracer.depth += 1
            try:
                out = _original(*args, **kwargs)
            finally:
                tracer.depth -= 1
            if tracer.depth == 0 and args and tracer.traced(args[0]):
                _emit(tracer, _module, args[0], out)
            return out
        module.__dict__["forward"] = forward
        patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.__dict__["forward"]


def _flatten_outputs(out):
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _flatten_outputs(item)]
    if isinstance(out, dict):
        return [t for item in out.values() for t in _flatten_outputs(item)]
    raise ExportError(f"onnx.export: the model returned {type(out).__name__}; expected Tensors (or tuples, lists "
                      f"or dicts of them)")


def _value_info(helper, name, tensor, axes):
    shape: list = list(tensor.shape)
    for d, label in axes.items():
        shape[d % tensor.ndim] = label
    return helper.make_tensor_value_info(name, elem_type(tensor.dtype), shape)


def _axes(dynamic_axes, name, ndim):
    spec = (dynamic_axes or {}).get(name)
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return {int(d): str(label) for d, label in spec.items()}
    return {int(d): f"{name}_dynamic_axes_{int(d) % ndim + 1}" for d in spec}


def export(model, args, f, export_params=True, verbose=False, training=None, input_names=None, output_names=None,
           operator_export_type=None, opset_version=None, do_constant_folding=True, dynamic_axes=None,
           keep_initializers_as_inputs=None, custom_opsets=None, export_modules_as_functions=False,
           autograd_inlining=True, *, kwargs=None, dynamo=False, **unused):
    """Trace ``model(*args)`` and write it to ``f`` (a path or a binary file object) as an ONNX model.

    Args:
        args: a Tensor or a tuple of Tensors (the example inputs).
        input_names / output_names: names of the graph's inputs and outputs (default input_0..., output_0...).
        dynamic_axes: ``{name: {dim: label}}`` or ``{name: [dims]}``: dims left free (e.g. the batch).
        opset_version: ONNX opset (default 17; LayerNorm needs >= 17).

    The model is put in eval mode while tracing (as PyTorch does by default) and
    restored after. Raises ExportError for layers or ops the exporter does not cover.
    """
    onnx, helper, numpy_helper = _import_onnx()
    if isinstance(args, Tensor):
        args = (args,)
    args = tuple(args)
    if args and isinstance(args[-1], dict):
        kwargs, args = {**(kwargs or {}), **args[-1]}, args[:-1]
    if kwargs:
        raise ExportError(f"onnx.export: keyword inputs {sorted(kwargs)} are not exported; pass inputs "
                          f"positionally")
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise TypeError(f"onnx.export: input {i} must be a Tensor, got {type(a).__name__}")
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if opset < 13:
        raise ValueError(f"onnx.export: opset_version must be >= 13, got {opset}")
    input_names = list(input_names or [f"input_{i}" for i in range(len(args))])
    if len(input_names) != len(args):
        raise ValueError(f"onnx.export: {len(input_names)} input_names for {len(args)} inputs")

    tracer = Tracer(helper, numpy_helper, opset)
    inputs = []
    for name, a in zip(input_names, args):
        x = a.detach()
        if a.dtype.is_floating_point:
            x = x.clone().requires_grad_(True)  # everything computed from it gets an autograd node
        tracer.bind(x, name)
        inputs.append(x)
    was_training = getattr(model, "training", False)
    if hasattr(model, "train"):
        model.train(bool(training)) if training is not None and str(training) != "TrainingMode.EVAL" \
            else model.eval()
    try:
        with enable_grad(), _patched_functions(tracer), _patched_layers(model, tracer):
            outputs = _flatten_outputs(model(*inputs))
    finally:
        if hasattr(model, "train"):
            model.train(was_training)

    output_names = list(output_names or [f"output_{i}" for i in range(len(outputs))])
    if len(output_names) != len(outputs):
        raise ValueError(f"onnx.export: {len(output_names)} output_names for {len(outputs)} outputs")
    for name, out in zip(output_names, outputs):
        tracer.nodes.append(helper.make_node("Identity", [tracer.name_of(out)], [name], name=f"{name}_identity"))
    graph = helper.make_graph(
        tracer.nodes, type(model).__name__,
        [_value_info(helper, n, x, _axes(dynamic_axes, n, x.ndim)) for n, x in zip(input_names, inputs)],
        [_value_info(helper, n, o, _axes(dynamic_axes, n, o.ndim)) for n, o in zip(output_names, outputs)],
        initializer=tracer.initializers)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="webgrad")
    proto.ir_version = min(proto.ir_version, 9)  # readable by onnxruntime releases of the last years
    onnx.checker.check_model(proto)
    onnx.save_model(proto, f)
    if verbose:
        print(helper.printable_graph(graph))
    return None
