"""The Python half of the ``<webgrad-model>`` widget (``web/widget/``).

The widget's page side boots the runtime and calls these by name, with
``runtime.call("webgrad.web.widget", name, args)`` (no Python source is built)::

    await load(key, url, trust_code)            # -> the model's info dict (webgrad.store.info)
    predict(key, values, shape, dtype)          # -> {"outputs": float32 values, "shape": [...]}
    generate(key, prompt, length, temperature, seed)  # -> {"text": ..., "tokens": [...]}
    dispose(key)

Tensors cross the boundary as raw little-endian bytes, a typed array's buffer moved to
the worker (a memoryview here) and a flat float32 array moved back (a Float32Array
there): float32 for real-valued inputs and outputs, int32 for token ids (an embedding
takes integer indices, never floats; the model gets them as its recorded input dtype,
e.g. int64). Exact: the page gets the very float32 values the model computed. It also
runs natively (tests call it against a live store, with bytes).
"""
from __future__ import annotations

import numpy as np

_models: dict = {}  # key -> (model, info)
WIRE_DTYPES = {"float32": "<f4", "int32": "<i4"}  # what the page sends, by the name it sends


class WidgetError(ValueError):
    """A model the widget cannot use, or an input that does not fit it."""


async def load(key: str, url: str, trust_code: bool = False) -> dict:
    """Pull the model stored at ``url`` (rebuilt from its architecture record) under ``key``."""
    from .. import store

    info = await store.info_async(url)
    if info["code"] and not trust_code:
        # Said in the page's terms (an attribute, a load() option), not pull()'s trust_code=True.
        raise WidgetError(f"{url} is built by its author's own Python classes ({', '.join(info['code'])}), which "
                          "the widget runs only when asked to: add the trust-code attribute to <webgrad-model> "
                          "(or load(url, {trustCode: true})) if you trust the model's author")
    try:
        model = await store.pull_async(url, trust_code=bool(trust_code))
    except store.arch.ArchitectureError as exc:
        raise WidgetError(str(exc)) from None
    if not hasattr(model, "forward"):
        raise WidgetError(f"{url} holds weights only (no architecture record), so the widget cannot rebuild "
                          "the model; push the nn.Module itself: webgrad.store.push(model, name, input_size=...)")
    info["device"] = str(next((p.device for p in model.parameters()), "cpu"))  # where predict() runs
    _models[key] = (model, info)
    return info


def _loaded(key: str, call: str):
    if key not in _models:
        raise WidgetError(f"widget.{call}: no model loaded under {key!r} (disposed, or the runtime restarted)")
    return _models[key]


def _run(model, values: np.ndarray):
    """The model's first output for ``values`` (on the model's device, no autograd)."""
    from ..autograd import no_grad
    from ..creation import tensor

    device = next((p.device for p in model.parameters()), None)
    with no_grad():
        output = model(tensor(values, device=device))
    return output[0] if isinstance(output, (tuple, list)) else output


def predict(key: str, data, shape, dtype: str = "float32") -> dict:
    """Run the model on one batch: ``data`` holds ``shape`` values, row-major, as little-endian
    ``dtype`` ("float32" or "int32") bytes (bytes, a memoryview, any buffer). Returns the first
    output as flat float32 values (``outputs``) and its ``shape``.

    Integer values are given to the model as its recorded input dtype (int64 for most token
    models), floats as float32.
    """
    model, info = _loaded(key, "predict")
    if dtype not in WIRE_DTYPES:
        raise WidgetError(f"widget.predict: values come as {' or '.join(WIRE_DTYPES)}, not {dtype!r}")
    shape = [int(s) for s in shape]
    try:
        raw = memoryview(data).cast("B")
    except TypeError:
        raise WidgetError(f"widget.predict: values come as bytes (a typed array's buffer), not "
                          f"{type(data).__name__}") from None
    count = int(np.prod(shape))
    if len(raw) != 4 * count:
        raise WidgetError(f"widget.predict: {len(raw)} bytes are not the {count} {dtype} values of shape {shape}")
    values = np.frombuffer(raw, dtype=WIRE_DTYPES[dtype]).reshape(shape)
    wanted = info.get("input_dtype") or "float32"
    if dtype == "int32" and wanted in ("int64", "int32", "int16", "int8", "uint8"):
        values = values.astype(wanted)
    elif dtype == "int32":
        values = values.astype(np.float32)  # integers typed into a float model's fields
    output = _run(model, values.copy())
    result = np.ascontiguousarray(output.detach().cpu().numpy(), dtype="<f4")
    return {"outputs": result.reshape(-1), "shape": list(result.shape)}


def _tokenizer(record: dict):
    """(encode, decode) for a tokens input record: characters when every vocabulary entry is
    one character, words (split on spaces) otherwise, and ids typed as numbers without a vocabulary."""
    vocab = record.get("vocab")
    if vocab is None:
        def encode_ids(text):
            try:
                return [int(part) for part in text.split()]
            except ValueError:
                raise WidgetError(f"widget.generate: this model has no recorded vocabulary, so the prompt must be "
                                  f"token ids separated by spaces (e.g. '3 14 15'), not {text[:40]!r}") from None
        return encode_ids, lambda ids: " ".join(str(i) for i in ids)
    index = {token: i for i, token in enumerate(vocab)}
    if all(len(token) == 1 for token in vocab):
        return (lambda text: [index[c] for c in text if c in index]), (lambda ids: "".join(vocab[i] for i in ids))
    return (lambda text: [index[w] for w in text.split() if w in index]), (lambda ids: " ".join(vocab[i] for i in ids))


def generate(key: str, prompt: str, length: int, temperature: float = 0.8, seed: int | None = None) -> dict:
    """Continue ``prompt`` by ``length`` tokens, sampled one at a time from the model's
    last-position logits (divided by ``temperature``); the window is the last ``context``
    tokens when the model records how far it sees. Returns the new text and token ids."""
    from .. import random as webgrad_random
    from ..autograd import no_grad

    model, info = _loaded(key, "generate")
    record = info.get("input") or {}
    if record.get("kind") != "tokens":
        raise WidgetError(f"widget.generate: this model's input is {record.get('kind') or 'unknown'}, not "
                          "tokens; generate() is for language models (push them with dtypes=[webgrad.int64])")
    length = int(length)
    if not 0 < length <= 10_000:
        raise WidgetError(f"widget.generate: length must be between 1 and 10000 tokens, got {length}")
    temperature = float(temperature)
    if not temperature > 0:
        raise WidgetError(f"widget.generate: temperature must be > 0, got {temperature}")
    encode, decode = _tokenizer(record)
    tokens = encode(prompt)
    size = record.get("vocab_size")
    if not tokens:
        # An empty prompt (or none of its characters in the vocabulary): start from a newline
        # when the model knows one, as demos/char_lm.py does, else from token 0.
        tokens = [record["vocab"].index("\n") if "\n" in (record.get("vocab") or []) else 0]
    if size is not None and any(not 0 <= t < size for t in tokens):
        raise WidgetError(f"widget.generate: token ids must be in 0..{size - 1}, got {tokens[:10]}")
    if seed is not None:
        webgrad_random.manual_seed(int(seed))
    context = record.get("context")
    dtype = info.get("input_dtype") or "int64"
    start = len(tokens)
    with no_grad():
        for _ in range(length):
            window = np.asarray([tokens[-context:] if context else tokens], dtype=dtype)
            logits = _run(model, window)
            if len(logits.shape) != 3:
                raise WidgetError(f"widget.generate: a language model gives (batch, length, vocab) logits; this one "
                                  f"gave shape {tuple(logits.shape)}")
            probabilities = (logits[0, -1] / temperature).softmax(dim=0)
            tokens.append(int(probabilities.multinomial(1).item()))
    new = tokens[start:]
    return {"text": decode(new), "tokens": new}


def dispose(key: str) -> None:
    """Forget the model (the page's Model.dispose())."""
    _models.pop(key, None)
