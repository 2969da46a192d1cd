"""The Python half of the ``<webgrad-model>`` widget (``web/widget/``).

The widget's page side boots the runtime and calls, through ``runtime.run``::

    from webgrad.web import widget
    await widget.load(key, url, trust_code)   # -> the model's info dict (webgrad.store.info)
    widget.predict(key, data_b64, shape)      # -> {"outputs": base64 float32, "shape": [...]}
    widget.dispose(key)

Tensors cross the boundary as base64 of little-endian float32 bytes: compact, and
exact (the page gets the very float32 values the model computed). It also runs
natively (tests call it against a live store).
"""
from __future__ import annotations

import base64

import numpy as np

_models: dict = {}


class WidgetError(ValueError):
    """A model the widget cannot use, or an input that does not fit it."""


async def load(key: str, url: str, trust_code: bool = False) -> dict:
    """Pull the model stored at ``url`` (rebuilt from its architecture record) under ``key``."""
    from .. import store

    try:
        model = await store.pull_async(url, trust_code=bool(trust_code))
    except store.arch.ArchitectureError as exc:
        hint = ("; if you trust its author, load it with trust-code (the element's `trust-code` attribute, "
                "or load(url, {trustCode: true}))") if "trust_code" in str(exc) and not trust_code else ""
        raise WidgetError(f"{exc}{hint}") from None
    if not hasattr(model, "forward"):
        raise WidgetError(f"{url} holds weights only (no architecture record), so the widget cannot rebuild "
                          "the model; push the nn.Module itself: webgrad.store.push(model, name, input_size=...)")
    _models[key] = model
    info = await store.info_async(url)
    info["device"] = str(next((p.device for p in model.parameters()), "cpu"))  # where predict() runs
    return info


def predict(key: str, data_b64: str, shape) -> dict:
    """Run the model on one batch (float32 values, row-major, of ``shape``)."""
    from ..autograd import no_grad
    from ..creation import tensor

    model = _models.get(key)
    if model is None:
        raise WidgetError(f"widget.predict: no model loaded under {key!r} (disposed, or the runtime restarted)")
    shape = [int(s) for s in shape]
    raw = base64.b64decode(data_b64)
    if len(raw) != 4 * int(np.prod(shape)):
        raise WidgetError(f"widget.predict: {len(raw)} bytes are not the {int(np.prod(shape))} float32 values "
                          f"of shape {shape}")
    values = np.frombuffer(raw, dtype="<f4")
    device = next((p.device for p in model.parameters()), None)
    with no_grad():
        output = model(tensor(values.reshape(shape).copy(), device=device))
    if isinstance(output, (tuple, list)):
        output = output[0]
    result = np.ascontiguousarray(output.detach().cpu().numpy(), dtype="<f4")
    return {"outputs": base64.b64encode(result.tobytes()).decode("ascii"), "shape": list(result.shape)}


def dispose(key: str) -> None:
    _models.pop(key, None)
