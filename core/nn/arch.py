"""Architecture records: enough to rebuild a module without the code that built it.

Every ``Module`` subclass remembers the arguments of its outermost constructor call
(``record_init_args``, installed by ``Module.__init_subclass__``). ``describe(model)``
turns a model into a JSON-able record and ``build(record)`` constructs it again::

    {"format": "webgrad.arch", "version": 1,
     "module": {"class": "nn.Sequential", "children": [["0", {"class": "nn.Linear",
                "args": [64, 10], "kwargs": {}}], ...]},
     "code": [{"name": "Net", "kind": "class", "source": "class Net(nn.Module): ..."}, ...],
     "imports": {"np": "numpy", ...}}

Classes from ``webgrad`` are named (``"nn.Linear"``, ``"webgrad.nn.modules.conv:Conv2d"``).
A class defined elsewhere (the user's own ``Net``) is named ``"code:Net"`` and its
source travels in ``"code"``, with the functions, classes, constants and imports it
uses. Building such a record executes that source, so ``build`` refuses unless
``trust_code=True``. Containers (Sequential, ModuleList, ModuleDict) are recorded by
their current children, so ``append`` or ``model[i] = ...`` after construction are kept.
Argument values are tagged JSON: tuples ``{"tuple": [...]}``, dicts ``{"dict": {...}}``,
modules ``{"module": node}``, dtypes ``{"dtype": "float32"}``, webgrad functions
``{"function": "webgrad.nn.functional.relu"}``; ``device`` arguments are dropped.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import inspect
import json
import linecache
import math
import re
import sys
import textwrap
import types
from typing import Any

from .modules.module import class_functions
from .. import dtypes
from .. import nn
from .. import random
from ..backend import default_device, set_default_device

FORMAT = "webgrad.arch"
VERSION = 1
CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")


class ArchitectureError(ValueError):
    """A model whose architecture cannot be recorded or rebuilt; the message says why."""


# ----------------------------------------------------------------------------- describe

def describe(model) -> dict:
    """The architecture record of ``model`` (raises ``ArchitectureError`` saying what cannot be recorded)."""
    code: dict[str, dict] = {}
    imports: dict[str, str] = {}
    node = _describe_module(model, "model", code, imports)
    return {"format": FORMAT, "version": VERSION, "module": node, "code": list(code.values()),
            "imports": imports}


def _class_name(cls: type, code: dict, imports: dict) -> str:
    if getattr(nn, cls.__name__, None) is cls:
        return "nn." + cls.__name__
    if cls.__module__ == "webgrad" or cls.__module__.startswith("webgrad."):
        return f"{cls.__module__}:{cls.__qualname__}"
    _add_code(cls, code, imports)
    return "code:" + cls.__name__


def _describe_module(module, where: str, code: dict, imports: dict) -> dict:
    from .modules.module import Module

    cls = type(module)
    node: dict[str, Any] = {"class": _class_name(cls, code, imports)}
    if node["class"] in tuple("nn." + name for name in CONTAINERS):
        children = [[name, _describe_module(child, f"{where}.{name}", code, imports)]
                    for name, child in module._modules.items() if isinstance(child, Module)]
        node["children"] = children
        return node
    args, kwargs = module.__dict__.get("_init_args", ((), {}))
    node["args"] = [_encode(a, f"{where}: argument {i} of {cls.__name__}", code, imports)
                    for i, a in enumerate(args)]
    node["kwargs"] = {k: _encode(v, f"{where}: argument {k}= of {cls.__name__}", code, imports)
                      for k, v in kwargs.items() if k != "device"}
    return node


def _encode(value, where: str, code: dict, imports: dict):
    from .modules.module import Module

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return {"float": repr(value)}
        return value
    if hasattr(value, "item") and type(value).__module__ == "numpy" and getattr(value, "ndim", 1) == 0:
        return value.item()
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, where, code, imports) for v in value]}
    if isinstance(value, list):
        return [_encode(v, where, code, imports) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ArchitectureError(f"{where}: a dict with non-string keys cannot be recorded")
        return {"dict": {k: _encode(v, where, code, imports) for k, v in value.items()}}
    if isinstance(value, Module):
        return {"module": _describe_module(value, where, code, imports)}
    if isinstance(value, dtypes.DType):
        return {"dtype": value.name}
    module_name = getattr(value, "__module__", None) or ""
    if callable(value) and _is_layer_module(module_name):
        target = importlib.import_module(module_name)
        name = getattr(value, "__name__", "")
        if getattr(target, name, None) is value:
            return {"function": f"{module_name}.{name}"}
    raise ArchitectureError(
        f"{where}: a value of type {type(value).__name__} cannot be recorded (only numbers, strings, "
        "tuples, lists, dicts, dtypes, webgrad ops and nn functions and modules can); pass plain values to the "
        "constructor, or push the state dict only (architecture=False)")


# ----------------------------------------------------------------------------- source of user code

def class_source(cls) -> str:
    """The source of ``cls``: via ``inspect``, else found through its methods in ``linecache``
    (code run from a string, e.g. the playground, has no file that ``inspect`` can open)."""
    try:
        return textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        pass
    for function in class_functions(cls):
        code = function.__code__
        lines = cls.__dict__.get("_webgrad_source_lines") or linecache.getlines(code.co_filename)
        pattern = re.compile(rf"\s*class\s+{re.escape(cls.__name__)}\b")
        for start in range(min(code.co_firstlineno, len(lines)) - 1, -1, -1):
            if pattern.match(lines[start]):
                return textwrap.dedent("".join(inspect.getblock(lines[start:])))
    raise ArchitectureError(
        f"the source of class {cls.__qualname__} is not available (it was not defined in a file, and "
        "its code was not registered in linecache); define it in a .py file, or push the state dict "
        "only (architecture=False)")


def _add_code(obj, code: dict, imports: dict) -> None:
    """Add ``obj``'s source to ``code``, after everything it uses (its bases, helpers, constants)."""
    name = obj.__name__
    if name in code:
        if code[name].get("object") is not obj and code[name]["kind"] != "pending":
            raise ArchitectureError(f"two different definitions are both named {name!r}; rename one")
        return
    code[name] = {"name": name, "kind": "pending"}
    if isinstance(obj, type):
        source = class_source(obj)
        namespace = next((f.__globals__ for f in class_functions(obj)), None)
    else:
        try:
            source = textwrap.dedent(inspect.getsource(obj))
        except (OSError, TypeError):
            raise ArchitectureError(f"the source of function {name} (used by the model's code) is not "
                                    "available") from None
        namespace = obj.__globals__
    if namespace is None:
        namespace = vars(sys.modules.get(obj.__module__, builtins))
    for used in sorted(_free_names(source) - {name}):
        if hasattr(builtins, used) or used not in namespace:
            continue
        value = namespace[used]
        if isinstance(value, types.ModuleType):
            imports[used] = value.__name__
        elif isinstance(value, (bool, int, float, str)):
            code.setdefault(used, {"name": used, "kind": "constant", "value": value})
        elif isinstance(value, (type, types.FunctionType)):
            # Code from the same place as the model travels as source; anything else is imported.
            owner = getattr(value, "__module__", "") or ""
            if owner == namespace.get("__name__", obj.__module__):
                _add_code(value, code, imports)
            else:
                imports[used] = f"{owner}:{value.__qualname__}"
    code.pop(name)  # re-insert after its dependencies, so definitions run in order
    code[name] = {"name": name, "kind": "class" if isinstance(obj, type) else "function",
                  "source": source, "object": obj}


def _free_names(source: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


def public(record: dict) -> dict:
    """The record without the live objects ``describe`` keeps for checking (JSON-able)."""
    return {**record, "code": [{k: v for k, v in entry.items() if k != "object"} for entry in record["code"]]}


# ----------------------------------------------------------------------------- check

def describe_checked(model) -> dict:
    """Describe ``model`` and rebuild it from the record (with the live classes, then from the
    stored source) to be sure ``pull`` will get the same structure back; raises ArchitectureError."""
    record = describe(model)
    stored = json.loads(json.dumps(public(record)))
    live = {entry["name"]: entry["object"] for entry in record["code"] if "object" in entry}
    with quiet_construction():
        for classes in ([live, None] if record["code"] else [None]):
            try:
                rebuilt = build(stored, trust_code=True, classes=classes)
            except ArchitectureError:
                raise
            except Exception as exc:
                raise ArchitectureError(f"rebuilding it failed: {type(exc).__name__}: {exc}") from exc
            _compare(model, rebuilt)
    return stored


def _compare(model, rebuilt) -> None:
    if repr(rebuilt) != repr(model):
        raise ArchitectureError(
            "the model was changed after it was constructed in a way the record does not capture "
            f"(rebuilt as {type(rebuilt).__name__}, but its layers differ from the model's)")
    # Shapes only: dtypes may differ (model.double()); pull loads the stored dtypes as they are.
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in rebuilt.state_dict().items()}
    if ours != theirs:
        differ = sorted(set(ours.items()) ^ set(theirs.items()), key=lambda item: item[0])[:4]
        raise ArchitectureError(f"a model rebuilt from the record has different weights: {differ}")


@contextlib.contextmanager
def quiet_construction():
    """Build throw-away models on the CPU without moving the user's random stream."""
    generator = random.numpy_generator()
    saved_state, saved_device = generator.bit_generator.state, default_device()
    set_default_device("cpu")
    try:
        yield
    finally:
        generator.bit_generator.state = saved_state
        set_default_device(saved_device)


# ----------------------------------------------------------------------------- build

def build(record: dict, trust_code: bool = False, classes: dict | None = None):
    """Construct the module a record describes (fresh parameters; load the weights afterwards).

    Args:
        record: from ``describe`` (or its JSON).
        trust_code: allow running the source of user-defined classes stored in the record.
        classes: live objects to use instead of running the stored source (name -> object).
    """
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ArchitectureError(f"not a webgrad architecture record (expected format {FORMAT!r})")
    if record.get("version") != VERSION:
        raise ArchitectureError(f"architecture record version {record.get('version')!r} is not supported "
                                f"by this webgrad (it reads version {VERSION}); upgrade webgrad")
    namespace = classes
    if namespace is None:
        namespace = {}
        if record.get("code"):
            names = ", ".join(e["name"] for e in record["code"] if e["kind"] == "class")
            if not trust_code:
                raise ArchitectureError(
                    f"this model's architecture includes its own code (classes: {names}); rebuilding it runs "
                    "that code, so pass trust_code=True if you trust whoever saved it (or ask for the "
                    "state dict only)")
            namespace = _run_code(record)
    return _build_node(record["module"], namespace, "model")


def main_definitions(record: dict) -> dict | None:
    """The live classes and functions of ``__main__`` named as the record's own code, when all are
    there (as pickle finds a module's class by name); else None (build runs the stored source)."""
    main = vars(sys.modules.get("__main__", sys))
    wanted = [entry["name"] for entry in record.get("code", []) if entry.get("kind") in ("class", "function")]
    found = {name: main[name] for name in wanted if isinstance(main.get(name), (type, types.FunctionType))}
    return found if wanted and len(found) == len(wanted) else None


def _run_code(record: dict) -> dict:
    import numpy

    from . import functional

    webgrad = importlib.import_module("webgrad")

    namespace: dict[str, Any] = {"__name__": "webgrad_model_code", "webgrad": webgrad, "nn": nn,
                                 "F": functional, "math": math, "np": numpy}
    for alias, target in record.get("imports", {}).items():
        module_name, _, attribute = target.partition(":")
        value = importlib.import_module(module_name)
        for part in attribute.split(".") if attribute else ():
            value = getattr(value, part)
        namespace[alias] = value
    for entry in record["code"]:
        if entry["kind"] == "constant":
            namespace[entry["name"]] = entry["value"]
            continue
        filename = f"<model code: {entry['name']}>"
        # Registered so tracebacks show it and describe() finds it when the model is pushed again.
        linecache.cache[filename] = (len(entry["source"]), None, entry["source"].splitlines(True), filename)
        try:
            exec(compile(entry["source"], filename, "exec"), namespace)
        except Exception as exc:
            raise ArchitectureError(f"running the stored source of {entry['name']} failed: "
                                    f"{type(exc).__name__}: {exc}") from exc
    return namespace


def _resolve_class(name: str, namespace: dict, where: str):
    if name.startswith("nn."):
        cls = getattr(nn, name[3:], None)
    elif name.startswith("code:"):
        cls = namespace.get(name[5:])
    else:
        module_name, _, qualname = name.partition(":")
        if not _is_layer_module(module_name):
            raise ArchitectureError(f"{where}: class {name!r} is outside webgrad's layers")
        cls = _import(module_name, where)
        for part in qualname.split("."):
            cls = getattr(cls, part, None)
    from .modules.module import Module

    if not isinstance(cls, type):
        raise ArchitectureError(f"{where}: unknown class {name!r} (saved by a newer webgrad?)")
    if not issubclass(cls, Module) and not name.startswith("code:"):
        raise ArchitectureError(f"{where}: class {name!r} is not an nn.Module")
    return cls


def _is_layer_module(name: str) -> bool:
    """Where records may name classes and functions: webgrad's layers and ops (nothing that does I/O)."""
    return name == "webgrad" or name.startswith(("webgrad.nn", "webgrad.ops"))


def _import(module_name: str, where: str):
    try:
        return importlib.import_module(module_name)
    except ImportError:
        raise ArchitectureError(f"{where}: no module {module_name!r} in this webgrad (saved by a newer one?)") from None


def _build_node(node: dict, namespace: dict, where: str):
    cls = _resolve_class(node["class"], namespace, where)
    if "children" in node:
        from collections import OrderedDict
        children = [(name, _build_node(child, namespace, f"{where}.{name}")) for name, child in node["children"]]
        if cls.__name__ == "Sequential":
            return cls(OrderedDict(children))
        if cls.__name__ == "ModuleList":
            return cls([module for _, module in children])
        return cls(OrderedDict(children))
    args = [_decode(a, namespace, where) for a in node.get("args", [])]
    kwargs = {k: _decode(v, namespace, where) for k, v in node.get("kwargs", {}).items()}
    try:
        return cls(*args, **kwargs)
    except Exception as exc:
        raise ArchitectureError(f"{where}: constructing {cls.__name__} failed: {type(exc).__name__}: {exc}") from exc


def _decode(value, namespace: dict, where: str):
    if isinstance(value, list):
        return [_decode(v, namespace, where) for v in value]
    if not isinstance(value, dict):
        return value
    (tag, inner), = value.items()
    if tag == "tuple":
        return tuple(_decode(v, namespace, where) for v in inner)
    if tag == "dict":
        return {k: _decode(v, namespace, where) for k, v in inner.items()}
    if tag == "module":
        return _build_node(inner, namespace, where)
    if tag == "float":
        return float(inner)
    if tag == "dtype":
        return dtypes.from_name(inner)
    if tag == "function":
        module_name, _, attribute = inner.rpartition(".")
        if not _is_layer_module(module_name):
            raise ArchitectureError(f"{where}: function {inner!r} is outside webgrad's ops and nn functions")
        function = getattr(_import(module_name, where), attribute, None)
        if not callable(function):
            raise ArchitectureError(f"{where}: unknown function {inner!r} (saved by a newer webgrad?)")
        return function
    raise ArchitectureError(f"{where}: unknown value tag {tag!r} in the architecture record")
