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
     "input_dtype": "float32", "output_shape": [1, 10] or null, "labels": [...] or null}

so ``pull`` (and the ``<webgrad-model>`` widget) can rebuild the module without
the code that built it. In a page, blocking calls need ``pyodide.ffi.run_sync``
(the webgrad worker enters Python so that it works); each call also has an
``*_async`` twin to ``await``.
"""
from __future__ import annotations

import builtins
import contextlib
import json
import os
import sys
import urllib.parse

from . import _http as http
from . import serialize
from .nn import arch

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

def _push_plan(model, name, metadata, url, input_size, input_data, architecture):
    base, name = _locate(name, url, "push")
    weights, record = _prepare(model, metadata, input_size, input_data, architecture)
    body, content_type = http.multipart([("weights", "model.safetensors", weights),
                                         ("metadata", None, _metadata_json(record))])
    target = _model_url(base, name)
    response = _check((yield http.Request("PUT", target, body, content_type)), "push", None, target)
    return info_from_record(_json(response, "push", target), base)


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


def _prepare(model, metadata, input_size, input_data, architecture) -> tuple[bytes, dict]:
    """The safetensors bytes and the metadata object (with the ``"webgrad"`` record) for a push."""
    from .nn import Module
    from .tensor import Tensor

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
            from .summary import _example_input, _shapes

            example = _example_input(model, input_size, input_data, None, None, "webgrad.store.push")
            output = _forward_eval(model, example)
            inputs = example if isinstance(example, (tuple, builtins.list)) else [example]
            record["input_shape"] = builtins.list(inputs[0].shape)
            record["input_dtype"] = inputs[0].dtype.name
            record["output_shape"] = _shapes(output)
        else:
            record["input_shape"] = _guess_input_shape(model)
    elif hasattr(model, "keys") and hasattr(model, "items"):
        state = dict(model.items())
        bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, Tensor)]
        if bad:
            raise TypeError(f"webgrad.store.push: a state dict maps str to Tensor; bad entries: {bad[:5]}")
        if input_size is not None:
            record["input_shape"] = builtins.list(input_size)
    else:
        raise TypeError(f"webgrad.store.push: expected an nn.Module or a state dict, got {type(model).__name__}")
    if metadata.get("input_shape") is not None and record["input_shape"] is None:
        record["input_shape"] = builtins.list(metadata["input_shape"])
    return serialize.save_bytes(state), {**metadata, RECORD_KEY: record}


def _forward_eval(model, example):
    from .autograd import no_grad

    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with no_grad():
            return model(*example) if isinstance(example, tuple) else model(example)
    finally:
        for module, mode in modes:
            object.__setattr__(module, "training", mode)


def _guess_input_shape(model):
    """(1, in_features) when the first layer is a Linear, else None (give input_size to record it)."""
    from .nn import Linear

    for module in model.modules():
        if isinstance(module, Linear):
            return [1, module.in_features]
        if module._parameters:
            return None
    return None


def _rebuild(architecture, state, name, trust_code, device):
    from .backend import default_device

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
        "output_shape": own.get("output_shape"),
        "has_architecture": architecture is not None,
        "code": [e["name"] for e in (architecture or {}).get("code", []) if e.get("kind") == "class"],
    }


# ----------------------------------------------------------------------------- public calls

def push(model_or_state_dict, name: str, metadata: dict | None = None, url: str | None = None, *,
         input_size=None, input_data=None, architecture="auto") -> dict:
    """Store a model (or a state dict) on the server under ``name``, replacing any older version.

    Args:
        model_or_state_dict: an ``nn.Module`` (its architecture is recorded so ``pull`` can
            rebuild it) or a dict of str -> Tensor.
        name: 1-64 characters from ``A-Z a-z 0-9 _ . -`` (or a full ``.../api/models/NAME`` URL).
        metadata: a JSON object kept with the model; ``"labels"`` (class names) is shown by the widget.
        url: the server (see the module doc for the default).
        input_size: the input shape, batch included, e.g. ``(1, 64)``; recorded with the output
            shape (one forward pass in eval mode) so the widget knows what to feed the model.
        input_data: an example input instead of ``input_size``.
        architecture: ``"auto"`` (record it, or warn and push the weights only if it cannot be),
            ``True`` (raise if it cannot be recorded) or ``False`` (weights only).

    Returns:
        the stored model's ``info`` dict.

    Example:
        >>> webgrad.store.push(model, "digits-mlp", {"labels": list("0123456789")}, input_size=(1, 64))
    """
    return _run(_push_plan(model_or_state_dict, name, metadata, url, input_size, input_data, architecture))


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
                     input_size=None, input_data=None, architecture="auto") -> dict:
    """``push`` for ``await`` (in a page where blocking calls are not possible)."""
    return await _run_async(_push_plan(model_or_state_dict, name, metadata, url, input_size, input_data,
                                       architecture))


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
