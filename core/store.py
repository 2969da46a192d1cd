"""``webgrad.store``: push trained models to a webgrad server and pull them back.

The same calls work natively (urllib) and in the browser page (Pyodide, through
``fetch``)::

    >>> import webgrad
    >>> from webgrad import nn
    >>> model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    >>> webgrad.store.push(model, "digits-mlp", metadata={"labels": list("0123456789")},
    ...                    input_size=(1, 64))
    >>> same = webgrad.store.pull("digits-mlp")          # an nn.Module, in eval mode
    >>> webgrad.store.list()                              # info dicts, sorted by name
    >>> webgrad.store.delete("digits-mlp")

The server is ``url``, else ``$WEBGRAD_STORE``, else (in a page) the page's own
server, else ``http://127.0.0.1:8000`` (``make serve``). A full model URL such as
``http://host/api/models/NAME`` works wherever a name does.

What is stored: the weights as a safetensors file, and the metadata JSON object
you give, plus one key ``"webgrad"`` that this module writes::

    {"version": 1, "architecture": <nn.arch record or null>, "input_shape": [1, 64] or null,
     "input_dtype": "float32", "output_shape": [1, 10] or null, "labels": [...] or null,
     "input": <what the input is, below> or null}

so ``pull`` (and the ``<webgrad-model>`` widget) can rebuild the module without
the code that built it. ``"input"`` tells the widget which UI to show; it is one of::

    {"kind": "image", "height": 8, "width": 8, "channels": 1}          # a drawing pad
    {"kind": "vector", "size": 4, "names": ["sepal length", ...] or null}  # number fields
    {"kind": "points", "dims": 2, "x_range": [-1, 1], "y_range": [-1, 1]}  # a plane to click
    {"kind": "points", "dims": 1, "x_range": [-1, 1], "y_range": null}     # a curve y = f(x)
    {"kind": "tokens", "vocab": ["a", "b", ...] or null, "vocab_size": 65, "context": 32 or null}

inferred from the input shape and dtype (integer ids are tokens; (1, C, H, W), or (1, N)
with N a square >= 64, an image; (1, 2) points on a plane; (1, 1) a curve; else a vector)
and the metadata hints ``"image"``, ``"vocab"`` (else ``"labels"`` when they match the
vocabulary size), ``"context"``, ``"x_range"``, ``"y_range"``. ``metadata["input"]``
(a dict as above) overrides the guess; fields it leaves out keep the inferred values.

With the input known (``input_size``, or guessed from a first Linear), ``push`` also exports
the model's web bundle (``webgrad.export``: model.json, weights, WGSL kernels; dynamic batch)
and stores it beside the model, at ``/api/models/NAME/lite/``: ``<webgrad-model>`` and
``load()`` from ``/widget.js`` run that in the page without Python. A model with an op the
bundle does not lower is pushed without one; ``info["lite_reason"]`` says which op, and the
widget rebuilds it in Python as before.

In a page, blocking calls need ``pyodide.ffi.run_sync``
(the webgrad worker enters Python so that it works); each call also has an
``*_async`` twin to ``await``.
"""
from __future__ import annotations

import builtins
import contextlib
import json
import os
import sys
import tempfile
import urllib.parse
from pathlib import Path

from . import _http as http
from . import serialize
from .nn import arch
from .autograd import no_grad
from .backend import default_device
from .dtypes import from_name, to_dtype
from .summary import _example_input, _shapes
from .tensor import Tensor

DEFAULT_URL = "http://127.0.0.1:8000"
RECORD_KEY = "webgrad"
RECORD_VERSION = 1


class StoreError(RuntimeError):
    """A store request failed; the message says what and how to fix it."""


class ModelNotFoundError(StoreError, LookupError):
    """No model of that name on the server."""


class StoreConnectionError(StoreError, ConnectionError):
    """The server could not be reached."""


# ----------------------------------------------------------------------------- URLs

def default_url() -> str:
    """``$WEBGRAD_STORE``, else the page's own server inside Pyodide, else ``http://127.0.0.1:8000``."""
    given = os.environ.get("WEBGRAD_STORE")
    if given:
        return given.rstrip("/")
    if sys.platform == "emscripten":
        with contextlib.suppress(Exception):
            import js

            origin = str(js.location.origin)  # window.location, or self.location in a worker
            if origin.startswith("http"):
                return origin
    return DEFAULT_URL


def _locate(name: str, url: str | None, call: str) -> tuple[str, str]:
    """``(server base URL, model name)`` from a name or a full model URL."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"webgrad.store.{call}: name must be a non-empty str, got {name!r}")
    if "/" in name:  # http://host/api/models/NAME[/weights], or /api/models/NAME in a page
        parts = urllib.parse.urlsplit(name)
        path = parts.path.rstrip("/")
        if path.endswith("/weights"):
            path = path[:-len("/weights")]
        head, _, model = path.rpartition("/api/models/")
        if not model or "/" in model:
            raise ValueError(f"webgrad.store.{call}: {name!r} is not a model URL; expected "
                             "http://HOST/api/models/NAME or a plain model name")
        base = f"{parts.scheme}://{parts.netloc}{head}" if parts.netloc else (url or default_url()).rstrip("/") + head
        return base, urllib.parse.unquote(model)
    return (url or default_url()).rstrip("/"), name


def _model_url(base: str, name: str) -> str:
    return f"{base}/api/models/{urllib.parse.quote(name, safe='')}"


# ----------------------------------------------------------------------------- running requests

def _failure(exc: Exception) -> StoreError:
    if isinstance(exc, http.Unreachable):
        base = exc.url.split("/api/", 1)[0]
        return StoreConnectionError(
            f"webgrad.store: cannot reach the model server at {base} ({exc.reason}); start one with `make serve` "
            "(or `python -m server`), or point WEBGRAD_STORE (or url=...) at a running one")
    return StoreError(f"webgrad.store: cannot wait for the network from synchronous Python here ({exc}); "
                      "use the async twin, e.g. `await webgrad.store.pull_async(...)`, or enter Python "
                      "through runPythonAsync as the webgrad worker does")


def _run(plan):
    try:
        return http.run(plan)
    except (http.Unreachable, http.CannotWait) as exc:
        raise _failure(exc) from None


async def _run_async(plan):
    try:
        return await http.run_async(plan)
    except (http.Unreachable, http.CannotWait) as exc:
        raise _failure(exc) from None


def _check(response: http.Response, call: str, name: str | None, url: str) -> http.Response:
    if 200 <= response.status < 300:
        return response
    try:
        message = json.loads(response.body)["error"]
    except (ValueError, KeyError, TypeError):
        message = response.body[:300].decode("utf-8", "replace") or f"HTTP {response.status}"
    where = url.split("/api/", 1)[0]
    if response.status == 404 and name is not None:
        raise ModelNotFoundError(f"webgrad.store.{call}: the server at {where} has no model named {name!r} "
                                 f"(see webgrad.store.list()); it said: {message}")
    raise StoreError(f"webgrad.store.{call}: the server at {where} refused the request "
                     f"(HTTP {response.status}): {message}")


def _json(response: http.Response, call: str, url: str):
    try:
        return json.loads(response.body)
    except ValueError:
        raise StoreError(f"webgrad.store.{call}: {url} did not answer with JSON; is it a webgrad server?") from None


# ----------------------------------------------------------------------------- plans

def _push_plan(model, name, metadata, url, input_size, input_data, dtypes, architecture, overwrite, lite):
    base, name = _locate(name, url, "push")
    weights, record, example = _prepare(model, metadata, input_size, input_data, dtypes, architecture)
    parts = [("weights", "model.safetensors", weights), ("metadata", None, _metadata_json(record))]
    bundle = _bundle(model, example, record) if lite else "pushed with lite=False (no web bundle asked for)"
    if isinstance(bundle, str):
        parts.append(("lite_reason", None, bundle.encode()))
    else:
        parts += [(f"lite/{path}", path.rpartition("/")[2], data) for path, data in bundle.items()]
    body, content_type = http.multipart(parts)
    target = _model_url(base, name)
    # If-None-Match: * makes the server refuse (412) instead of replacing, atomically.
    guard = None if overwrite else {"If-None-Match": "*"}
    response = yield http.Request("PUT", target, body, content_type, guard)
    if response.status == 412 and not overwrite:
        current = _json(response, "push", target).get("current") or {}
        raise StoreError(f"webgrad.store.push: the server at {base} already has a model named {name!r} "
                         f"(revision {current.get('revision')}, saved {current.get('updated')}); nothing was "
                         "changed. Choose another name, or push(..., overwrite=True) to replace it")
    answer = _json(_check(response, "push", None, target), "push", target)
    info = info_from_record(answer, base)
    info["replaced"] = answer.get("replaced")
    if info["replaced"]:
        # Say so: a push that silently replaced someone's model is how work gets lost.
        print(f"webgrad.store.push: replaced {name!r} revision {info['replaced'].get('revision')} "
              f"(saved {info['replaced'].get('updated')}) with revision {info['revision']}", file=sys.stderr)
    return info


def _pull_plan(name, url, trust_code, weights_only, device):
    base, name = _locate(name, url, "pull")
    target = _model_url(base, name)
    stored = _json(_check((yield http.Request("GET", target)), "pull", name, target), "pull", target)
    weights = _check((yield http.Request("GET", target + "/weights")), "pull", name, target).body
    state = serialize.load_bytes(weights, f"weights of model {name!r} from {base}")
    architecture = _own_record(stored.get("metadata")).get("architecture")
    if weights_only or architecture is None:
        if device is not None:
            state = {key: value.to(device) for key, value in state.items()}
        return state
    return _rebuild(architecture, state, name, trust_code, device)


def _list_plan(url):
    base = (url or default_url()).rstrip("/")
    target = base + "/api/models"
    models = _json(_check((yield http.Request("GET", target)), "list", None, target), "list", target)["models"]
    return [info_from_record(record, base) for record in models]


def _info_plan(name, url):
    base, name = _locate(name, url, "info")
    target = _model_url(base, name)
    response = _check((yield http.Request("GET", target)), "info", name, target)
    return info_from_record(_json(response, "info", target), base)


def _delete_plan(name, url):
    base, name = _locate(name, url, "delete")
    target = _model_url(base, name)
    _check((yield http.Request("DELETE", target)), "delete", name, target)
    return None


# ----------------------------------------------------------------------------- what gets stored

def _metadata_json(metadata: dict) -> bytes:
    """JSON bytes; numpy scalars, arrays and tensors become numbers and lists (``"accuracy": acc``)."""
    def plain(value):
        if hasattr(value, "detach"):
            value = value.detach().numpy()
        if hasattr(value, "tolist"):
            return value.tolist()
        raise TypeError(f"webgrad.store.push: metadata must hold JSON values (str, numbers, bools, None, "
                        f"lists, dicts); got a {type(value).__name__}")
    try:
        return json.dumps(metadata, default=plain, allow_nan=False).encode()
    except ValueError:
        raise ValueError("webgrad.store.push: metadata holds NaN or infinity, which JSON cannot carry; "
                         "store them as strings or None") from None


def _prepare(model, metadata, input_size, input_data, dtypes, architecture) -> tuple[bytes, dict, object]:
    """The safetensors bytes, the metadata object (with the ``"webgrad"`` record) and the example
    input (None when the input is unknown, or for a state dict) for a push."""
    from .nn import Module
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict) or not all(isinstance(k, str) for k in metadata):
        raise TypeError(f"webgrad.store.push: metadata must be a dict with str keys, got {type(metadata).__name__}")
    if RECORD_KEY in metadata:
        raise ValueError(f"webgrad.store.push: metadata key {RECORD_KEY!r} is reserved for webgrad's own record")
    labels = metadata.get("labels")
    if labels is not None and (not isinstance(labels, (builtins.list, tuple))
                               or not all(isinstance(v, (str, int, float)) for v in labels)):
        raise TypeError("webgrad.store.push: metadata['labels'] must be a list of class names, e.g. "
                        "list('0123456789')")
    if architecture not in ("auto", True, False):
        raise ValueError(f"webgrad.store.push: architecture must be 'auto', True or False, got {architecture!r}")
    record: dict = {"version": RECORD_VERSION, "architecture": None, "input_shape": None,
                    "input_dtype": "float32", "output_shape": None,
                    "labels": None if labels is None else builtins.list(labels)}
    state: dict
    example = None
    if isinstance(model, Module):
        state = dict(model.state_dict())
        if architecture is not False:
            try:
                record["architecture"] = arch.describe_checked(model)
            except arch.ArchitectureError as exc:
                if architecture is True:
                    raise
                import warnings
                warnings.warn(f"webgrad.store.push: pushing the weights only; pull() will return a state dict. "
                              f"The architecture cannot be recorded: {exc}", stacklevel=6)  # the caller of push()
        if input_size is not None or input_data is not None:
            example = _example_input(model, input_size, input_data, dtypes, None, "webgrad.store.push")
            output = _forward_eval(model, example)
            inputs = example if isinstance(example, (tuple, builtins.list)) else [example]
            record["input_shape"] = builtins.list(inputs[0].shape)
            record["input_dtype"] = inputs[0].dtype.name
            record["output_shape"] = _shapes(output)
        else:
            record["input_shape"], record["input_dtype"] = _guess_input(model)
            if record["input_shape"] is not None:
                example = _example_input(model, record["input_shape"], None, [record["input_dtype"]], None,
                                         "webgrad.store.push")
    elif hasattr(model, "keys") and hasattr(model, "items"):
        state = dict(model.items())
        bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, Tensor)]
        if bad:
            raise TypeError(f"webgrad.store.push: a state dict maps str to Tensor; bad entries: {bad[:5]}")
        if input_size is not None:
            record["input_shape"] = builtins.list(input_size)
        if dtypes is not None:
            record["input_dtype"] = to_dtype(builtins.list(dtypes)[0]).name
    else:
        raise TypeError(f"webgrad.store.push: expected an nn.Module or a state dict, got {type(model).__name__}")
    if metadata.get("input_shape") is not None and record["input_shape"] is None:
        record["input_shape"] = builtins.list(metadata["input_shape"])
    record["input"] = _input_record(record, metadata, model)
    return serialize.save_bytes(state), {**metadata, RECORD_KEY: record}, example


def _bundle(model, example, metadata: dict) -> dict | str:
    """The web bundle's files (path -> bytes, see ``webgrad.lite``) of the model, exported with a dynamic
    batch for ``example``; or, when there is none, why (the widget then runs the model in Python)."""
    from .lite import export
    from .onnx._traced import ExportError

    if example is None:
        return ("no input size was given, so the model could not be exported as a web bundle: push it with "
                "input_size=(1, ...) (and dtypes=[webgrad.int64] for token ids)" if hasattr(model, "forward")
                else "a state dict has no forward to export as a web bundle: push the nn.Module with input_size")
    own = metadata[RECORD_KEY]
    # The bundle's metadata: the author's, and what the input is; not the architecture (no code runs there).
    slim = {**metadata, RECORD_KEY: {key: value for key, value in own.items() if key != "architecture"}}
    try:
        with tempfile.TemporaryDirectory(prefix="webgrad-push-") as folder:
            exported = export(model, example if isinstance(example, tuple) else (example,), Path(folder) / "bundle",
                              labels=own["labels"], metadata=json.loads(_metadata_json(slim)))
            return {path: (Path(exported.path) / path).read_bytes() for path in exported.files}
    except ExportError as exc:  # its hint about the Python runtime is what happens anyway
        return str(exc).partition("; rewrite that part")[0]
    except Exception as exc:  # any other failure to export: the model still runs in Python, and we say why
        import warnings
        warnings.warn(f"webgrad.store.push: pushing without a web bundle; webgrad.export failed: "
                      f"{type(exc).__name__}: {exc}", stacklevel=2)
        return f"webgrad.export failed ({type(exc).__name__}: {exc})"


def _forward_eval(model, example):
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with no_grad():
            return model(*example) if isinstance(example, tuple) else model(example)
    finally:
        for module, mode in modes:
            object.__setattr__(module, "training", mode)


def _guess_input(model) -> tuple[builtins.list | None, str]:
    """(input shape, dtype) from the first layer with parameters: a Linear takes (1, in_features)
    floats, an Embedding token ids (length unknown); else (None, "float32"): give input_size."""
    from .nn import Embedding, Linear

    for module in model.modules():
        if isinstance(module, Linear):
            return [1, module.in_features], "float32"
        if isinstance(module, Embedding):
            return None, "int64"
        if module._parameters:
            break
    return None, "float32"


INPUT_KINDS = ("image", "vector", "points", "tokens")


def _vocab_size(model, output_shape) -> int | None:
    """The number of token ids: the first Embedding's rows, else the output's last dimension."""
    from .nn import Embedding, Module

    if isinstance(model, Module):
        embedding = next((m for m in model.modules() if isinstance(m, Embedding)), None)
        if embedding is not None:
            return int(embedding.num_embeddings)
    if output_shape and isinstance(output_shape[0], int):
        return int(output_shape[-1])
    return None


def _input_record(record: dict, metadata: dict, model) -> dict | None:
    """What the input is (see the module doc): guessed from shape, dtype and hints, then ``metadata["input"]``."""
    shape, dtype = record["input_shape"], record["input_dtype"]
    given = metadata.get("input")
    if given is not None and (not isinstance(given, dict) or given.get("kind") not in INPUT_KINDS):
        raise ValueError(f"webgrad.store.push: metadata['input'] must be a dict whose 'kind' is one of "
                         f"{', '.join(INPUT_KINDS)}, e.g. {{'kind': 'points', 'dims': 2, 'x_range': [-1, 1], "
                         f"'y_range': [-1, 1]}}; got {given!r}")
    guess = _guess_input_record(shape, dtype, metadata, record["output_shape"], model)
    if given is None:
        return guess
    base = guess if guess is not None and guess["kind"] == given["kind"] else _empty_input(given["kind"], shape)
    merged = {**base, **given}
    _check_input_record(merged)
    return merged


def _empty_input(kind: str, shape) -> dict:
    size = int(shape[-1]) if shape else None
    empty: dict[str, dict] = {"image": {"kind": "image", "height": None, "width": None, "channels": 1},
            "vector": {"kind": "vector", "size": size, "names": None},
            "points": {"kind": "points", "dims": size if size in (1, 2) else 2, "x_range": [-1.0, 1.0],
                       "y_range": [-1.0, 1.0] if size != 1 else None},
            "tokens": {"kind": "tokens", "vocab": None, "vocab_size": None, "context": None}}
    return empty[kind]


def _check_input_record(record: dict) -> None:
    def fail(what):
        raise ValueError(f"webgrad.store.push: metadata['input'] ({record['kind']}): {what}")

    def is_range(value):
        return (isinstance(value, (builtins.list, tuple)) and len(value) == 2
                and all(isinstance(v, (int, float)) for v in value) and value[0] < value[1])

    kind = record["kind"]
    if kind == "image" and not all(isinstance(record.get(k), int) and record[k] > 0
                                   for k in ("height", "width", "channels")):
        fail(f"height, width and channels must be positive ints, got {record}")
    if kind == "vector" and not (isinstance(record.get("size"), int) and record["size"] > 0):
        fail(f"size must be a positive int, got {record.get('size')!r}")
    if kind == "points":
        if record.get("dims") not in (1, 2):
            fail(f"dims must be 1 (a curve y = f(x)) or 2 (points on a plane), got {record.get('dims')!r}")
        if not is_range(record.get("x_range")) or not (record.get("y_range") is None or is_range(record["y_range"])):
            fail(f"x_range and y_range must be [low, high] with low < high, got {record.get('x_range')!r} "
                 f"and {record.get('y_range')!r}")
    if kind == "tokens" and record.get("vocab") is not None and not (
            isinstance(record["vocab"], (builtins.list, tuple)) and all(isinstance(v, str) for v in record["vocab"])):
        fail("vocab must be a list of strings (the text of each token id), e.g. list('abc')")


def _guess_input_record(shape, dtype, metadata, output_shape, model) -> dict | None:
    """The input record the shape, dtype and metadata hints point to (None when nothing does)."""
    image = metadata.get("image")
    if isinstance(image, dict) and image.get("height") and image.get("width"):
        return {"kind": "image", "height": int(image["height"]), "width": int(image["width"]),
                "channels": int(image.get("channels", 1))}
    is_integer = not from_name(dtype).is_floating_point if isinstance(dtype, str) else False
    if is_integer or metadata.get("vocab") is not None:
        vocab = metadata.get("vocab")
        size = _vocab_size(model, output_shape)
        labels = metadata.get("labels")
        if vocab is None and isinstance(labels, (builtins.list, tuple)) and len(labels) == size \
                and all(isinstance(v, str) for v in labels):
            vocab = labels  # a language model's classes are its next tokens
        context = metadata.get("context")  # not the example length: only the author knows how far it sees
        record = {"kind": "tokens", "vocab": None if vocab is None else builtins.list(vocab),
                  "vocab_size": len(vocab) if vocab is not None else size,
                  "context": int(context) if isinstance(context, (int, float)) else None}
        _check_input_record(record)
        return record
    if not shape:
        return None
    if len(shape) == 4:
        return {"kind": "image", "height": shape[2], "width": shape[3], "channels": shape[1]}
    if len(shape) == 3:
        return {"kind": "image", "height": shape[1], "width": shape[2], "channels": 1}
    if len(shape) != 2:
        return None
    size = int(shape[1])
    side = round(size ** 0.5)
    if side * side == size and side >= 8:  # (1, 64): 8 x 8 digits; (1, 784): 28 x 28
        return {"kind": "image", "height": side, "width": side, "channels": 1}
    if size in (1, 2):
        record = _empty_input("points", shape)
        for key in ("x_range", "y_range"):
            if metadata.get(key) is not None:
                record[key] = builtins.list(metadata[key])
        _check_input_record(record)
        return record
    return {"kind": "vector", "size": size, "names": None}


def _rebuild(architecture, state, name, trust_code, device):
    try:
        with arch.quiet_construction():
            model = arch.build(architecture, trust_code=trust_code)
    except arch.ArchitectureError as exc:
        raise arch.ArchitectureError(f"webgrad.store.pull: model {name!r}: {exc}"
                                     + ("; or pull(..., weights_only=True) for the weights alone"
                                        if not trust_code else "")) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a record this code did not write
        raise arch.ArchitectureError(f"webgrad.store.pull: model {name!r} has a malformed architecture record "
                                     f"({type(exc).__name__}: {exc}); pull(..., weights_only=True) still "
                                     "gives its weights") from None
    try:
        model.load_state_dict(state, assign=True)  # assign: keep the stored dtypes (a model.double() stays float64)
    except RuntimeError as exc:
        raise StoreError(f"webgrad.store.pull: model {name!r}: the stored weights do not fit the model rebuilt "
                         f"from its architecture record: {exc}") from None
    model.eval()
    return model.to(device if device is not None else default_device())


def _own_record(metadata) -> dict:
    """The ``"webgrad"`` entry of a model's metadata; ``{}`` when absent or not ours (uploaded by other tools)."""
    own = metadata.get(RECORD_KEY) if isinstance(metadata, dict) else None
    return own if isinstance(own, dict) else {}


def info_from_record(stored: dict, base: str) -> dict:
    """A flat description of a stored model (what the widget shows as ``model.info``)."""
    metadata = dict(stored.get("metadata") or {})
    own = _own_record(metadata)
    metadata.pop(RECORD_KEY, None)
    architecture = own.get("architecture")
    return {
        "name": stored.get("name"),
        "url": _model_url(base, stored["name"]) if stored.get("name") else None,
        "weights_url": base + stored["weights_url"] if stored.get("weights_url") else None,
        "size": stored.get("size"), "sha256": stored.get("sha256"), "revision": stored.get("revision"),
        "created": stored.get("created"), "updated": stored.get("updated"),
        "metadata": metadata,
        "labels": own.get("labels") if own.get("labels") is not None else metadata.get("labels"),
        "input_shape": own.get("input_shape"), "input_dtype": own.get("input_dtype", "float32"),
        "output_shape": own.get("output_shape"), "input": own.get("input"),
        "has_architecture": architecture is not None,
        "lite": stored.get("lite"), "lite_reason": stored.get("lite_reason"),
        "code": [e["name"] for e in (architecture or {}).get("code", []) if e.get("kind") == "class"],
    }


# ----------------------------------------------------------------------------- public calls

def push(model_or_state_dict, name: str, metadata: dict | None = None, url: str | None = None, *,
         input_size=None, input_data=None, dtypes=None, architecture="auto", overwrite: bool = True,
         lite: bool = True) -> dict:
    """Store a model (or a state dict) on the server under ``name``, replacing any older version
    (which it says on stderr) unless ``overwrite=False``. With the input known, the model's web
    bundle (``webgrad.export``) goes with it, and ``<webgrad-model>`` runs that without Python.

    Args:
        model_or_state_dict: an ``nn.Module`` (its architecture is recorded so ``pull`` can
            rebuild it) or a dict of str -> Tensor.
        name: 1-64 characters from ``A-Z a-z 0-9 _ . -`` (or a full ``.../api/models/NAME`` URL).
        metadata: a JSON object kept with the model; ``"labels"`` (class names) is shown by the widget;
            ``"input"``, ``"image"``, ``"vocab"``, ``"context"``, ``"x_range"``, ``"y_range"`` say what
            the input is (the module doc lists them).
        url: the server (see the module doc for the default).
        input_size: the input shape, batch included, e.g. ``(1, 64)``; recorded with the output
            shape (one forward pass in eval mode) so the widget knows what to feed the model.
        input_data: an example input instead of ``input_size``.
        dtypes: the input's dtype, as in ``webgrad.summary`` (default float32; ``[webgrad.int64]``
            for token ids): recorded so the widget sends the model what it takes.
        architecture: ``"auto"`` (record it, or warn and push the weights only if it cannot be),
            ``True`` (raise if it cannot be recorded) or ``False`` (weights only).
        overwrite: ``False`` raises ``StoreError`` (and changes nothing) when ``name`` is taken.
        lite: ``False`` pushes no web bundle (the widget then rebuilds the model in Python).

    Returns:
        the stored model's ``info`` dict, with ``"replaced"``: None for a new model, else the
        replaced version's ``{"revision", "updated", "size", "sha256"}``; ``"lite"``: the web
        bundle's ``{"files", "bytes", ...}``, or None and ``"lite_reason"`` saying why there is
        none (e.g. an op the bundle does not lower: the model still runs, in Python).

    Example:
        >>> webgrad.store.push(model, "digits-mlp", {"labels": list("0123456789")}, input_size=(1, 64))
        >>> webgrad.store.push(lm, "char-lm", {"vocab": chars, "context": 32}, input_size=(1, 32),
        ...                    dtypes=[webgrad.int64])
    """
    return _run(_push_plan(model_or_state_dict, name, metadata, url, input_size, input_data, dtypes, architecture,
                           overwrite, lite))


def pull(name: str, url: str | None = None, *, trust_code: bool = False, weights_only: bool = False, device=None):
    """Fetch a stored model: the ``nn.Module`` (in eval mode) when its architecture was pushed, else its state dict.

    Args:
        name: the model's name, or its URL ``http://HOST/api/models/NAME``.
        url: the server (see the module doc for the default).
        trust_code: allow running the model's own class source (needed for user-defined
            ``nn.Module`` subclasses; only for models from people you trust).
        weights_only: return the state dict even when the architecture is known.
        device: where to put the result (default: ``webgrad.get_default_device()`` for a module, cpu for weights).

    Example:
        >>> model = webgrad.store.pull("digits-mlp")
        >>> model(webgrad.randn(1, 64)).argmax(-1)
    """
    return _run(_pull_plan(name, url, trust_code, weights_only, device))


def info(name: str, url: str | None = None) -> dict:
    """What the server knows about a model: shapes, labels, metadata, size, revision (no weights)."""
    return _run(_info_plan(name, url))


def delete(name: str, url: str | None = None) -> None:
    """Remove a stored model; raises ``ModelNotFoundError`` if there is none of that name."""
    return _run(_delete_plan(name, url))


def list(url: str | None = None) -> builtins.list[dict]:  # noqa: A001 (the name the issue asks for)
    """Every stored model's ``info`` dict, sorted by name."""
    return _run(_list_plan(url))


async def push_async(model_or_state_dict, name: str, metadata: dict | None = None, url: str | None = None, *,
                     input_size=None, input_data=None, dtypes=None, architecture="auto",
                     overwrite: bool = True, lite: bool = True) -> dict:
    """``push`` for ``await`` (in a page where blocking calls are not possible)."""
    return await _run_async(_push_plan(model_or_state_dict, name, metadata, url, input_size, input_data, dtypes,
                                       architecture, overwrite, lite))


async def pull_async(name: str, url: str | None = None, *, trust_code: bool = False, weights_only: bool = False,
                     device=None):
    """``pull`` for ``await``."""
    return await _run_async(_pull_plan(name, url, trust_code, weights_only, device))


async def info_async(name: str, url: str | None = None) -> dict:
    return await _run_async(_info_plan(name, url))


async def delete_async(name: str, url: str | None = None) -> None:
    return await _run_async(_delete_plan(name, url))


async def list_async(url: str | None = None) -> builtins.list[dict]:
    return await _run_async(_list_plan(url))
