"""``webgrad.onnx.export``: write a model as an ONNX file, as ``torch.onnx.export`` does.

The model runs once on the example ``args`` (in eval mode) under the graph tracer
that ``webgrad.compile`` uses, and each node of the traced graph is lowered through
its op's emitter (``webgrad/onnx/_emitters.py``): elementwise ops, reductions,
softmax, layer norm, matmul, convolution, max pooling, reshapes, permutes, slices,
cat, and indexing (``x[ints, slices, index tensors]``, gather, index_put, scatter_add).
So any model built from those exports, whatever its layers: MLPs, CNNs, LSTM/GRU,
attention and Transformer layers. An op with no emitter stops the export with an
error naming the op and the module where it runs. The graph is built with the
``onnx`` package, which must be installed (``pip install onnx``); Pyodide has no
``onnx`` wheel, so there ``export`` raises an ImportError saying so.

Example:
    >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> webgrad.onnx.export(model, (webgrad.randn(1, 4),), "mlp.onnx", input_names=["x"],
    ...                     output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
"""
from __future__ import annotations

from ..tensor import Tensor
from ._emitters import elem_type
from ._lower import Lowering, lower
from ._traced import ExportError, parameter_names, trace

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


def _value_info(helper, name, dtype, shape, axes):
    """An input's or output's type; a dim named in ``axes`` or following a dynamic axis is symbolic."""
    dims: list = [d if isinstance(d, int) else str(d) for d in shape]
    for d, label in axes.items():
        dims[d % len(dims)] = label
    return helper.make_tensor_value_info(name, elem_type(dtype), dims)


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
    restored after. With ``dynamic_axes`` it is traced once more per label, that axis one
    longer, to learn which sizes in the graph follow it. Raises ExportError for ops the
    exporter does not cover, naming the op and the module it runs in.
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

    labels: dict = {}  # dynamic label -> [(argument index, dim)]
    for i, (name, a) in enumerate(zip(input_names, args)):
        for d, label in _axes(dynamic_axes, name, a.ndim).items():
            labels.setdefault(label, []).append((i, d % a.ndim))
    was_training = getattr(model, "training", False)
    if hasattr(model, "train"):
        model.train(bool(training)) if training is not None and str(training) != "TrainingMode.EVAL" \
            else model.eval()
    try:
        traced, outputs = trace(model, args, labels)
    finally:
        if hasattr(model, "train"):
            model.train(was_training)

    output_names = list(output_names or [f"output_{i}" for i in range(len(outputs))])
    if len(output_names) != len(outputs):
        raise ValueError(f"onnx.export: {len(output_names)} output_names for {len(outputs)} outputs")
    low = Lowering(traced, helper, numpy_helper, opset,
                   axes={label: (input_names[dims[0][0]], dims[0][1]) for label, dims in labels.items()},
                   param_names=parameter_names(model))
    for v in traced.graph.inputs_of_kind("arg"):
        low.names[v.id] = input_names[v.index]
    lower(traced, low)
    for name, v in zip(output_names, traced.graph.outputs):
        low.nodes.append(helper.make_node("Identity", [low.value(v)], [name], name=f"{name}_identity"))
    graph = helper.make_graph(
        low.nodes, type(model).__name__,
        [_value_info(helper, n, x.dtype, x.shape, _axes(dynamic_axes, n, x.ndim)) for n, x in zip(input_names, args)],
        [_value_info(helper, n, v.dtype, traced.shapes[v.id], _axes(dynamic_axes, n, len(v.shape)))
         for n, v in zip(output_names, traced.graph.outputs)],
        initializer=low.initializers)
    # ir_version 9 at most: readable by onnxruntime releases of the last years
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="webgrad",
                              ir_version=min(onnx.IR_VERSION, 9))
    onnx.checker.check_model(proto)
    onnx.save_model(proto, f)
    if verbose:
        print(helper.printable_graph(graph))
    return None
