"""torch's OpInfo database as webgrad's op yardstick: resolve, convert, compare, record, replay.

torch keeps one record per op (``op_db``, 702 entries) with sample inputs that its own tests
run. This module finds which entries webgrad has, runs their samples through webgrad on each
device and compares outputs and gradients with torch. tests/test_opinfo.py is the test;
``python tests/opinfo.py --update`` reruns everything and rewrites the status file and the
recording; ``python tests/opinfo.py --report`` prints the counts per entry.

Entries. The key is ``op.name`` plus ``"." + variant_test_name`` when set (``max.reduction_with_dim``).
An entry is present when its name resolves the way torch's does: ``nn.functional.X`` ->
``webgrad.nn.functional.X``, ``linalg.X`` / ``fft.X`` / ``special.X`` likewise, plain ``X`` ->
``webgrad.X``, else the Tensor method or property ``X`` (``__radd__``, ``T``, ``byte``). Where
torch's entry wraps its op in a lambda that reorders arguments (``where``, ``einsum``,
``polygamma``), ``WRAPPERS`` writes the same lambda over webgrad.

Cases. For each present entry: samples for float64 and float32, and float16 where torch's cpu
has it (or, for an entry with no float dtype, its first of int64/int32/bool), from ``op.sample_inputs("cpu", dtype,
requires_grad=op.supports_autograd)`` seeded per entry. Caps (so the test stays within minutes
on two cores): the first ``MAX_SAMPLES`` (8) samples among the first ``SCAN_SAMPLES`` (24) that
hold at most ``MAX_ELEMENTS`` (5 000) elements in all, inputs and outputs each; reference inputs are not used. Configs:
cpu/float64, cpu/float32, webgpu/float32, cpu/float16, webgpu/float16 (WGSL has no f64: float64
tensors and dtype arguments of a float32 sample, like ``softmax(x, dtype=torch.float64)``, run as
float32 there and torch's float64 outputs are expected as float32); integer entries run on both
devices.

Comparing. Every output (tensors, tuples, namedtuples, lists, Python scalars) is compared with
torch's in structure, shape, dtype (webgrad names) and value (torch.testing's default rtol/atol
per dtype; webgpu looser, ``TOLERANCES``). Outputs of random ops (found by running torch
twice under different seeds) and of ``empty*`` ops are compared in shape and dtype only.
Where torch's float32 or float16 answer is itself off from the same sample run in float64
(polygamma near its poles, logcumsumexp's gradient, half-precision sums), a value also passes
when it is no further from the float64 answer than torch's is (``_add_float64_answers``).
Gradients: where the entry supports autograd and an output is float, the scalar
sum_k <w_k, out_k> (w_k seeded normal weights) is differentiated with respect to every tensor
of the sample that requires grad, in webgrad and in torch, and the two compared.

Recording. ``--update`` takes the cases live from op_db and torch and records them (inputs,
torch's outputs and gradients) in tests/data/opinfo/cases.npz (a JSON index and one buffer per
dtype); the test replays them everywhere. Natively torch reruns every recorded case
(``torch_rerun``) and must give the recorded answers, so a stale recording fails natively, not
in the page (Pyodide has no torch).

Status. tests/data/opinfo/status.json lists the entries webgrad does not have ("missing": the
test checks each still does not resolve, so the list can only shrink) and, per entry and config,
the samples that fail with a one-line reason ("failing": strict, a listed sample that passes
fails the test until it is removed). ``--update`` rewrites both files and the README table.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import pathlib
import random
import sys
import time
import zlib
from dataclasses import dataclass, field

import numpy as np

import webgrad

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "data" / "opinfo"
STATUS = DATA / "status.json"
CASES = DATA / "cases.npz"
README = HERE.parent / "README.md"
BEGIN_MARK, END_MARK = "<!-- opinfo-coverage:begin -->", "<!-- opinfo-coverage:end -->"

MAX_SAMPLES = 8
SCAN_SAMPLES = 24
MAX_ELEMENTS = 5_000
FLOAT_CONFIGS = (("cpu", "float64"), ("cpu", "float32"), ("webgpu", "float32"), ("cpu", "float16"),
                 ("webgpu", "float16"))
# (rtol, atol): torch.testing's defaults; webgpu looser (other summation orders, fast math; a
# float16 result one rounding away is 2**-11 off)
TOLERANCES = {("cpu", "float64"): (1e-7, 1e-7), ("cpu", "float32"): (1.3e-6, 1e-5),
              ("webgpu", "float32"): (1e-4, 1e-4), ("cpu", "float16"): (1e-3, 1e-5),
              ("webgpu", "float16"): (2e-3, 1e-3)}
# gradients sum many products: a little looser than the forward values
GRAD_TOLERANCES = {("cpu", "float64"): (1e-6, 1e-7), ("cpu", "float32"): (1e-4, 1e-4),
                   ("webgpu", "float32"): (1e-3, 1e-3), ("cpu", "float16"): (1e-2, 1e-3),
                   ("webgpu", "float16"): (1e-2, 1e-2)}
NO_FLOAT64 = {"webgpu"}
TRUTH = "~float64"  # suffix of a float32 answer's float64 twin (see _add_float64_answers)
NAMESPACES = ("nn.functional.", "linalg.", "fft.", "special.")


# -- resolving an entry to a webgrad callable ------------------------------------------------
def _method(name):
    def call(x, *args, **kwargs):
        attribute = getattr(x, name)
        return attribute(*args, **kwargs) if callable(attribute) else attribute
    call.__name__ = f"Tensor.{name}"
    return call


def _attr(path: str):
    target = webgrad
    for part in path.split("."):
        try:
            target = getattr(target, part, None)
        except ImportError:  # webgrad's lazy submodules (webgrad.linalg) import on first use
            return None
        if target is None:
            return None
    return target


def _tensor_has(name: str) -> bool:
    # the class's own attributes only: `hasattr(Tensor, "__ror__")` finds type.__ror__ (int | str)
    return any(name in klass.__dict__ for klass in webgrad.Tensor.__mro__ if klass is not object)


# torch's entries whose op is a lambda with another argument order, written the same way over
# webgrad. Each is present only when what it calls exists.
WRAPPERS = {
    "where": (lambda: _attr("where"), lambda self, condition, other, **kw: webgrad.where(condition, self, other, **kw)),
    "einsum": (lambda: _attr("einsum"), lambda tensors, equation: webgrad.einsum(equation, tensors)),
    "nn.functional.embedding": (lambda: _attr("nn.functional.embedding"),
                                lambda weight, idx, **kw: webgrad.nn.functional.embedding(idx, weight, **kw)),
    "nn.functional.embedding_bag": (lambda: _attr("nn.functional.embedding_bag"),
                                    lambda weight, idx, **kw: webgrad.nn.functional.embedding_bag(idx, weight, **kw)),
    "linalg.lstsq.grad_oriented": (lambda: _attr("linalg.lstsq"),
                                   lambda a, b, driver: tuple(webgrad.linalg.lstsq(a, b, driver=driver)[:2])),
    "linalg.pinv.singular": (lambda: _attr("linalg.pinv"), lambda a, b: webgrad.linalg.pinv(a @ b.mT)),
    "svd_lowrank": (lambda: _attr("svd_lowrank"), lambda a, b, **kw: webgrad.svd_lowrank(a @ b.mT, **kw)),
    "pca_lowrank": (lambda: _attr("pca_lowrank"), lambda a, b, **kw: webgrad.pca_lowrank(a @ b.mT, **kw)),
    "resize_": (lambda: _tensor_has("resize_"), lambda x, shape: x.clone().resize_(shape)),
    "resize_as_": (lambda: _tensor_has("resize_as_"), lambda x, other: x.clone().resize_as_(other)),
    "zero_": (lambda: _tensor_has("zero_"), lambda x: x.clone().zero_()),
    "normal.in_place": (lambda: _tensor_has("normal_"), lambda x, *a, **kw: x.clone().normal_(*a, **kw)),
    "normal.number_mean": (lambda: _attr("normal"), lambda std, mean, *a, **kw: webgrad.normal(mean, std, *a, **kw)),
}
for _n in range(5):
    WRAPPERS[f"polygamma.polygamma_n_{_n}"] = (lambda: _attr("polygamma"),
                                               lambda x, n, **kw: webgrad.polygamma(n, x, **kw))
WRAPPERS["special.polygamma.special_polygamma_n_0"] = (
    lambda: _attr("special.polygamma"), lambda x, n, **kw: webgrad.special.polygamma(n, x, **kw))

# Entries whose outputs torch defines only up to sign (eigenvectors): both sides' outputs go
# through the samples' own output_process_fn_grad, written here once for torch and webgrad.
PROCESS_OUTPUTS = {"linalg.eigh": lambda out: (out[0], abs(out[1]))}


def _processed(key: str, out):
    return PROCESS_OUTPUTS[key](out) if key in PROCESS_OUTPUTS else out


def entry_key(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def resolve(key: str, name: str | None = None):
    """The webgrad callable for an entry (called like torch's ``op(input, *args, **kwargs)``),
    or None where webgrad does not have it. ``name`` is op.name (the key minus its variant)."""
    if key in WRAPPERS:
        exists, call = WRAPPERS[key]
        return call if exists() else None
    name = name or key
    if name.startswith(NAMESPACES):
        target = _attr(name)
        return target if callable(target) else None
    if "." in name:  # masked.*, signal.windows.*, sparse.*, torch.ops.*: namespaces webgrad lacks
        target = _attr(name)
        return target if callable(target) else None
    target = _attr(name)
    if callable(target) and not isinstance(target, (webgrad.DType, type)):
        return target
    if _tensor_has(name):
        return _method(name)
    return None


# -- portable cases: torch sample -> JSON + arrays -> webgrad objects -------------------------
@dataclass
class Case:
    """One sample of one entry at one dtype, with torch's answers, in a form JSON + npz can hold."""
    key: str
    dtype: str
    index: int
    sample: dict  # {"input": enc, "args": enc, "kwargs": enc}
    out: object  # encoded outputs
    grads: list  # per input that requires grad (in traversal order): array name or None
    random: bool
    arrays: dict = field(default_factory=dict)

    def describe(self) -> str:
        parts = []
        for what in ("input", "args", "kwargs"):
            text = _describe(self.sample[what], self.arrays)
            if text not in ("[]", "{}"):
                parts.append(f"{what} {text}")
        return ", ".join(parts)


def _describe(enc, arrays) -> str:
    if isinstance(enc, dict) and "tensor" in enc:
        shape = "x".join(map(str, arrays[enc["tensor"]].shape)) or "scalar"
        return f"{shape} {enc['dtype']}"
    if isinstance(enc, dict) and "tuple" in enc:
        return "(" + ", ".join(_describe(e, arrays) for e in enc["tuple"]) + ")"
    if isinstance(enc, list):
        return "[" + ", ".join(_describe(e, arrays) for e in enc) + "]"
    if isinstance(enc, dict) and "dict" in enc:
        return "{" + ", ".join(f"{k}: {_describe(v, arrays)}" for k, v in enc["dict"].items()) + "}"
    if isinstance(enc, dict):
        return str(next(iter(enc.values())))
    return repr(enc)


class Unsupported(Exception):
    """A sample holds something the recording cannot carry (complex, memory formats...)."""


def _np_dtype_name(torch_dtype) -> str:
    return str(torch_dtype).split(".")[-1]


def encode(obj, arrays: dict, prefix: str, memo: dict):
    """A torch sample value as JSON, tensors stored in ``arrays`` under fresh names."""
    import torch

    if isinstance(obj, torch.Tensor):
        if id(obj) in memo:
            return memo[id(obj)]
        if obj.is_complex() or obj.layout != torch.strided:
            raise Unsupported(f"{obj.dtype} {obj.layout} tensor")
        name = f"{prefix}{len(arrays)}"
        value = obj.detach()
        if value.dtype in (torch.bfloat16, torch.float16):
            value = value.float()
        arrays[name] = value.contiguous().numpy().copy()
        enc = {"tensor": name, "dtype": _np_dtype_name(obj.dtype), "grad": bool(obj.requires_grad)}
        memo[id(obj)] = enc
        return enc
    if isinstance(obj, torch.dtype):
        return {"dtype": _np_dtype_name(obj)}
    if isinstance(obj, torch.device):
        return {"device": str(obj)}
    if isinstance(obj, torch.Size):
        return {"tuple": list(obj)}
    if isinstance(obj, (bool, int, str)) or obj is None:
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"float": repr(obj)}
    if isinstance(obj, tuple):
        return {"tuple": [encode(o, arrays, prefix, memo) for o in obj]}
    if isinstance(obj, list):
        return [encode(o, arrays, prefix, memo) for o in obj]
    if isinstance(obj, dict):
        return {"dict": {str(k): encode(v, arrays, prefix, memo) for k, v in obj.items()}}
    if isinstance(obj, slice):
        return {"slice": [obj.start, obj.stop, obj.step]}
    if obj is Ellipsis:
        return {"ellipsis": True}
    raise Unsupported(type(obj).__name__)


def _wg_dtype(name: str, device: str = "cpu"):
    if name == "float64" and device.split(":")[0] in NO_FLOAT64:
        name = "float32"  # WGSL has no f64: float64 cases run as float32 there
    dtype = getattr(webgrad, name, None)
    if not isinstance(dtype, webgrad.DType):
        raise Unsupported(f"webgrad has no dtype {name}")
    return dtype


def decode(enc, arrays: dict, device: str, leaves: list, memo: dict):
    """The webgrad value of an encoded sample value; tensors that require grad go to ``leaves``."""
    if isinstance(enc, list):
        return [decode(e, arrays, device, leaves, memo) for e in enc]
    if not isinstance(enc, dict):
        return enc
    if "tensor" in enc:
        if enc["tensor"] not in memo:
            tensor = webgrad.tensor(arrays[enc["tensor"]], dtype=_wg_dtype(enc["dtype"], device), device=device,
                                    requires_grad=enc["grad"])
            if enc["grad"]:
                leaves.append(tensor)
            memo[enc["tensor"]] = tensor
        return memo[enc["tensor"]]
    if "dtype" in enc:
        return _wg_dtype(enc["dtype"], device)
    if "device" in enc:
        return device
    if "tuple" in enc:
        return tuple(decode(e, arrays, device, leaves, memo) for e in enc["tuple"])
    if "dict" in enc:
        return {k: decode(v, arrays, device, leaves, memo) for k, v in enc["dict"].items()}
    if "slice" in enc:
        return slice(*enc["slice"])
    if "ellipsis" in enc:
        return Ellipsis
    if "float" in enc:
        return float(enc["float"])
    raise ValueError(f"cannot decode {enc}")


def _grad_tensors(sample) -> list:
    """The tensors of a torch sample that require grad, in encode's traversal order, once each."""
    import torch

    found, seen = [], set()

    def walk(obj):
        if isinstance(obj, torch.Tensor):
            if obj.requires_grad and id(obj) not in seen:
                seen.add(id(obj))
                found.append(obj)
        elif isinstance(obj, (list, tuple)):
            for o in obj:
                walk(o)
        elif isinstance(obj, dict):
            for o in obj.values():
                walk(o)
    walk(sample.input)
    walk(list(sample.args))
    walk(sample.kwargs)
    return found


def _flat_outputs(out) -> list:
    if isinstance(out, (tuple, list)):
        return [o for item in out for o in _flat_outputs(item)]
    return [out]


def _weights(out_arrays: list, index: int) -> list:
    rng = np.random.default_rng(1000 + index)
    return [rng.standard_normal(a.shape) for a in out_arrays]


# -- live cases from torch ---------------------------------------------------------------------
_op_db = None


def op_db():
    global _op_db
    if _op_db is None:
        _op_db = importlib.import_module("torch.testing._internal.common_methods_invocations").op_db
    return _op_db


def case_dtypes(op) -> list[str]:
    import torch

    supported = op.dtypes
    if torch.float32 in supported or torch.float64 in supported:
        return ["float64", "float32"] + (["float16"] if torch.float16 in supported else [])
    for dtype in (torch.int64, torch.int32, torch.bool):
        if dtype in supported:
            return [_np_dtype_name(dtype)]
    return []


def configs(dtypes: list[str]) -> list[tuple[str, str]]:
    if dtypes and dtypes[0] == "float64":
        return [config for config in FLOAT_CONFIGS if config[1] in dtypes]
    return [(device, d) for d in dtypes for device in ("cpu", "webgpu")]


def _seed(text: str) -> None:
    import torch

    seed = zlib.crc32(text.encode())
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


@contextlib.contextmanager
def _unseeded_wrappers():
    """torch's random entries reseed to 42 inside ``wrapper_set_seed``; to find out whether an op
    is random, run it twice under different seeds with that reseeding turned off."""
    patched = [m for m in list(sys.modules.values())
               if m is not None and m.__name__.startswith("torch.testing") and hasattr(m, "wrapper_set_seed")]
    saved = [m.wrapper_set_seed for m in patched]
    for m in patched:
        m.wrapper_set_seed = lambda op, *a, **k: op(*a, **k)
    try:
        yield
    finally:
        for m, s in zip(patched, saved):
            m.wrapper_set_seed = s


def _same(a, b) -> bool:
    import torch

    fa, fb = _flat_outputs(a), _flat_outputs(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.equal(torch.nan_to_num(x.detach()), torch.nan_to_num(y.detach())):
                return False
        elif x != y and not (isinstance(x, float) and math.isnan(x)):
            return False
    return True


def _is_random(op, sample) -> bool:
    import torch

    if "empty" in op.name:
        return True
    with _unseeded_wrappers(), torch.no_grad():
        try:
            torch.manual_seed(1)
            first = op(_cloned(sample.input), *_cloned(sample.args), **_cloned(sample.kwargs))
            torch.manual_seed(2)
            second = op(_cloned(sample.input), *_cloned(sample.args), **_cloned(sample.kwargs))
        except Exception:
            return False
    return not _same(first, second)


def _cloned(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, tuple):
        return tuple(_cloned(o) for o in obj)
    if isinstance(obj, list):
        return [_cloned(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _cloned(v) for k, v in obj.items()}
    return obj


def _numel(sample) -> int:
    import torch

    total = 0
    for part in (sample.input, sample.args, sample.kwargs):
        stack = [part]
        while stack:
            obj = stack.pop()
            if isinstance(obj, torch.Tensor):
                total += obj.numel()
            elif isinstance(obj, (list, tuple)):
                stack.extend(obj)
            elif isinstance(obj, dict):
                stack.extend(obj.values())
    return total


def live_cases(op, dtype_name: str) -> list[Case]:
    """Up to MAX_SAMPLES cases of ``op`` at ``dtype_name``, with torch's outputs and gradients."""
    import torch

    key = entry_key(op)
    _seed(f"{key}/{dtype_name}")
    dtype = getattr(torch, dtype_name)
    requires_grad = bool(op.supports_autograd) and dtype.is_floating_point
    cases = []
    try:
        samples = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
        for position, sample in enumerate(samples):
            if position >= SCAN_SAMPLES or len(cases) >= MAX_SAMPLES:
                break
            if _numel(sample) > MAX_ELEMENTS:
                continue
            case = _live_case(op, key, dtype_name, len(cases), sample)
            if case is not None:
                cases.append(case)
    except Exception:  # a sample generator that fails on this torch build: the cases so far
        pass
    return cases


def mark_random(cases_by_dtype: dict) -> None:
    """An entry with one random sample is random in all (two seeds can agree by chance)."""
    if any(case.random for cases in cases_by_dtype.values() for case in cases):
        for cases in cases_by_dtype.values():
            for case in cases:
                case.random = True
                case.grads = [None] * len(case.grads)


def _live_case(op, key, dtype_name, index, sample, random_op=None) -> Case | None:
    import torch

    arrays: dict = {}
    memo: dict = {}
    try:
        enc = {"input": encode(sample.input, arrays, "i", memo), "args": encode(list(sample.args), arrays, "i", memo),
               "kwargs": encode(dict(sample.kwargs), arrays, "i", memo)}
    except Unsupported:
        return None
    if random_op is None:
        random_op = _is_random(op, sample)
    wrt = _grad_tensors(sample)
    try:
        out = _processed(key, op(sample.input, *sample.args, **sample.kwargs))
    except Exception:
        return None
    if sum(o.numel() for o in _flat_outputs(out) if isinstance(o, torch.Tensor)) > MAX_ELEMENTS:
        return None  # the recording stays small: outputs are capped like inputs
    try:
        out_enc = encode(out, arrays, "o", {})
    except Unsupported:
        return None
    grads: list = []
    flat = [o for o in _flat_outputs(out) if isinstance(o, torch.Tensor) and o.dtype.is_floating_point]
    if wrt and flat and not random_op and any(o.requires_grad for o in flat):
        for g in _torch_grads(flat, wrt, index):
            if g is None:
                grads.append(None)
            else:
                name = f"g{len(arrays)}"
                arrays[name] = g.detach().contiguous().numpy().copy()
                grads.append(name)
    if random_op:  # as mark_random leaves them
        grads = [None] * len(wrt)
    elif dtype_name in ("float32", "float16"):
        _add_float64_answers(op, key, dtype_name, sample, index, out_enc, grads, arrays)
    return Case(key, dtype_name, index, enc, out_enc, grads, random_op, arrays)


def _torch_grads(flat, wrt, index) -> list:
    """torch's gradients of sum_k <w_k, out_k> (seeded weights) with respect to ``wrt``; None
    for each where torch has none (or cannot)."""
    import torch

    weights = _weights([o.detach().numpy() for o in flat], index)
    total = sum((o * torch.tensor(w, dtype=o.dtype)).sum() for o, w in zip(flat, weights) if o.requires_grad)
    try:
        return list(torch.autograd.grad(total, wrt, allow_unused=True))
    except Exception:
        return [None] * len(wrt)


def _add_float64_answers(op, key, dtype_name, sample, index, out_enc, grads, arrays) -> None:
    """Where torch's own float32 (float16) answer is off from the same sample computed in float64 by
    more than half the cpu tolerance of its dtype (two answers within half of it pass against each other),
    keep the float64 answer too (as ``name + TRUTH``): there a webgrad value passes when it is no
    further from it than torch's is, plus the tolerance (as accurate as torch, not equal to
    torch's rounding)."""
    import torch

    memo: dict = {}

    def widen(obj):
        if isinstance(obj, torch.Tensor):
            if id(obj) not in memo:
                value = obj.detach().double() if obj.dtype in (torch.float32, torch.float16) else obj.detach()
                memo[id(obj)] = value.requires_grad_(obj.requires_grad)
            return memo[id(obj)]
        if isinstance(obj, (tuple, list)):
            return type(obj)(widen(o) for o in obj)
        if isinstance(obj, dict):
            return {k: widen(v) for k, v in obj.items()}
        return obj
    try:
        out = _processed(key, op(widen(sample.input), *widen(list(sample.args)), **widen(dict(sample.kwargs))))
    except Exception:
        return
    flat = [o for o in _flat_outputs(out) if isinstance(o, torch.Tensor)]
    names: list = []
    _collect_ordered(out_enc, names)
    if len(names) != len(flat):
        return
    rtol, atol = TOLERANCES[("cpu", dtype_name)]
    answers = list(zip(names, flat, [(rtol, atol)] * len(flat)))
    floats = [o for o in flat if o.dtype.is_floating_point]
    wrt = [memo[id(t)] for t in _grad_tensors(sample)]
    if any(g is not None for g in grads) and len(wrt) == len(grads) and any(o.requires_grad for o in floats):
        answers += [(name, g, GRAD_TOLERANCES[("cpu", dtype_name)])
                    for name, g in zip(grads, _torch_grads(floats, wrt, index)) if name is not None and g is not None]
    for name, wide, (rtol, atol) in answers:
        truth = wide.detach().numpy()
        if (truth.dtype == np.float64 and truth.shape == arrays[name].shape
                and not np.isclose(arrays[name], truth, rtol=rtol / 2, atol=atol / 2, equal_nan=True).all()):
            arrays[name + TRUTH] = truth.copy()


# -- running a case through webgrad ------------------------------------------------------------
class Mismatch(Exception):
    pass


def _to_float64(value):
    return np.asarray(value).astype(np.float64)


def _compare_array(what, got, expected, dtype_name, rtol, atol, *, values=True, truth=None) -> None:
    if not isinstance(got, webgrad.Tensor):
        raise Mismatch(f"{what}: expected a tensor, got {type(got).__name__}")
    if tuple(got.shape) != expected.shape:
        raise Mismatch(f"{what}: shape {tuple(got.shape)} != torch's {expected.shape}")
    if dtype_name is not None and got.dtype.name != dtype_name:
        raise Mismatch(f"{what}: dtype {got.dtype.name} != torch's {dtype_name}")
    if not values or expected.size == 0:
        return
    actual = got.detach().numpy()
    if expected.dtype.kind in "biu" and actual.dtype.kind in "biu":
        if not np.array_equal(actual, expected):
            raise Mismatch(f"{what}: {int(np.sum(actual != expected))} of {expected.size} values differ")
        return
    a, e = _to_float64(actual), _to_float64(expected)
    close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if truth is not None:  # as close to the float64 answer as torch's float32 is
        close |= np.abs(a - truth) <= np.abs(e - truth) + atol + rtol * np.abs(truth)
    if not close.all():
        finite = np.isfinite(a) & np.isfinite(e)
        diff = float(np.max(np.abs(a - e)[finite])) if finite.any() else float("nan")
        raise Mismatch(f"{what} differs by {diff:.3g} ({int((~close).sum())} of {e.size} values)")


def _compare(what, got, enc, arrays, rtol, atol, values, device) -> None:
    if isinstance(enc, dict) and "tensor" in enc:
        dtype_name = enc["dtype"]
        if dtype_name == "float64" and device.split(":")[0] in NO_FLOAT64:
            dtype_name = "float32"
        _compare_array(what, got, arrays[enc["tensor"]], dtype_name, rtol, atol, values=values,
                       truth=arrays.get(enc["tensor"] + TRUTH))
        return
    items = enc["tuple"] if isinstance(enc, dict) and "tuple" in enc else enc if isinstance(enc, list) else None
    if items is not None:
        if not isinstance(got, (tuple, list)):
            raise Mismatch(f"{what}: expected a sequence of {len(items)}, got {type(got).__name__}")
        if len(got) != len(items):
            raise Mismatch(f"{what}: {len(got)} outputs != torch's {len(items)}")
        for i, (g, e) in enumerate(zip(got, items)):
            _compare(f"{what}[{i}]", g, e, arrays, rtol, atol, values, device)
        return
    expected = decode(enc, arrays, "cpu", [], {})
    if isinstance(got, webgrad.Tensor):
        raise Mismatch(f"{what}: expected a Python {type(expected).__name__}, got a tensor")
    if not values:
        return
    if isinstance(expected, float) and isinstance(got, (int, float)):
        both_nan = math.isnan(got) and math.isnan(expected)
        if not math.isclose(got, expected, rel_tol=rtol, abs_tol=atol) and not both_nan:
            raise Mismatch(f"{what}: {got!r} != torch's {expected!r}")
    elif got != expected or type(got) is not type(expected):
        raise Mismatch(f"{what}: {got!r} != torch's {expected!r}")


def run_case(fn, case: Case, device: str) -> None:
    """Run one case through webgrad on ``device``; raise Mismatch (or the op's own error)."""
    leaves: list = []
    memo: dict = {}
    arrays = case.arrays
    x = decode(case.sample["input"], arrays, device, leaves, memo)
    args = decode(case.sample["args"], arrays, device, leaves, memo)
    kwargs = decode(case.sample["kwargs"], arrays, device, leaves, memo)
    out = _processed(case.key, fn(x, *args, **kwargs))
    rtol, atol = TOLERANCES[(device, case.dtype)] if (device, case.dtype) in TOLERANCES else (0, 0)
    _compare("output", out, case.out, arrays, rtol, atol, not case.random, device)
    if not any(g is not None for g in case.grads):
        return
    flat = [o for o in _flat_outputs(out) if isinstance(o, webgrad.Tensor) and o.dtype.is_floating_point]
    weights = _weights([np.zeros(tuple(o.shape)) for o in flat], case.index)
    used = [(o, w) for o, w in zip(flat, weights) if o.requires_grad]
    total = None
    for o, w in used:
        term = (o * webgrad.tensor(w, dtype=o.dtype, device=o.device)).sum()
        total = term if total is None else total + term
    # an output that does not depend on the inputs in webgrad (matrix_power(x, 0)) has zero
    # gradients, which torch's must then be
    grads = webgrad.autograd.grad(total, leaves, allow_unused=True) if total is not None else [None] * len(leaves)
    grtol, gatol = GRAD_TOLERANCES.get((device, case.dtype), (rtol, atol))
    names = _leaf_names(case)
    for i, (leaf, g, expected) in enumerate(zip(leaves, grads, case.grads)):
        if expected is None and g is None:
            continue
        want = arrays[expected] if expected is not None else np.zeros(tuple(leaf.shape))
        if g is None:
            g = webgrad.zeros(tuple(leaf.shape), dtype=leaf.dtype, device=leaf.device)
        _compare_array(f"grad of {names[i]}", g, want, None, grtol, gatol,
                       truth=None if expected is None else arrays.get(expected + TRUTH))


def _leaf_names(case: Case) -> list[str]:
    names: list[str] = []
    seen: set = set()

    def walk(enc, where):
        if isinstance(enc, dict) and "tensor" in enc:
            if enc["grad"] and enc["tensor"] not in seen:
                seen.add(enc["tensor"])
                names.append(where)
        elif isinstance(enc, list):
            for i, e in enumerate(enc):
                walk(e, f"{where}[{i}]")
        elif isinstance(enc, dict) and "tuple" in enc:
            for i, e in enumerate(enc["tuple"]):
                walk(e, f"{where}[{i}]")
        elif isinstance(enc, dict) and "dict" in enc:
            for k, e in enc["dict"].items():
                walk(e, k)
    walk(case.sample["input"], "input")
    for i, e in enumerate(case.sample["args"]):
        walk(e, f"args[{i}]")
    for k, e in case.sample["kwargs"]["dict"].items():
        walk(e, k)
    return names + [f"tensor {i}" for i in range(len(names), 64)]


def case_failure(fn, case: Case, device: str) -> str | None:
    """None when the case passes on ``device``, else a one-line reason."""
    try:
        run_case(fn, case, device)
    except Mismatch as err:
        return str(err)
    except Exception as err:  # the op's own error is a failure of this sample, named in one line
        text = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return f"{type(err).__name__}: {text}"[:200]
    return None


def failure_message(key: str, case: Case, device: str, reason: str) -> str:
    return f"{key} sample {case.index} ({case.describe()}) on {device}/{case.dtype}: {reason}"


# -- recording ---------------------------------------------------------------------------------
def save_recording(cases_by_entry: dict[str, dict[str, list[Case]]]) -> None:
    index: dict = {}
    arrays: dict = {}
    for key in sorted(cases_by_entry):
        index[key] = {}
        for dtype_name, cases in cases_by_entry[key].items():
            rows = []
            for case in cases:
                prefix = f"{key}/{dtype_name}/{case.index}/"
                rename = {name: prefix + name for name in case.arrays}
                arrays.update({rename[n]: a for n, a in case.arrays.items()})
                rows.append(json.loads(json.dumps({"sample": case.sample, "out": case.out, "grads": case.grads,
                                                   "random": case.random}, default=str)))
                _rename_in(rows[-1], rename)
            index[key][dtype_name] = rows
    # One buffer per dtype, each array a slice of it: 17 000 small npz members would cost more
    # in zip headers than in data. Random ops' outputs are compared in shape only: stored as zeros.
    zeroed = set()
    for key in index:
        for rows in index[key].values():
            for row in rows:
                if row["random"]:
                    _collect_names(row["out"], zeroed)
    layout: dict = {}
    buffers: dict = {}
    for name in sorted(arrays):
        array = np.zeros_like(arrays[name]) if name in zeroed else np.asarray(arrays[name])  # keeps 0-d
        chunks = buffers.setdefault(array.dtype.str, [])
        offset = sum(c.size for c in chunks)
        chunks.append(array.reshape(-1))
        layout[name] = [array.dtype.str, offset, list(array.shape)]
    stored = {f"data{dtype}": np.concatenate(chunks) for dtype, chunks in buffers.items()}
    # not sort_keys: the order of a sample's tensors (input, args, kwargs as given) is the order
    # of its gradients
    text = json.dumps({"cases": index, "layout": layout}, separators=(",", ":"))
    stored["index"] = np.frombuffer(text.encode(), dtype=np.uint8)
    DATA.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(CASES, **stored)


def _rename_in(obj, rename: dict) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "tensor" and isinstance(v, str):
                obj[k] = rename[v]
            elif k == "grads":
                obj[k] = [rename[g] if g is not None else None for g in v]
            else:
                _rename_in(v, rename)
    elif isinstance(obj, list):
        for v in obj:
            _rename_in(v, rename)


_recording: tuple[dict, dict] | None = None


def load_recording() -> tuple[dict, dict]:
    """(index, arrays): the recorded cases per entry and dtype, and their arrays (lazy npz)."""
    global _recording
    if _recording is None:
        index: dict = {}
        arrays: dict = {}
        if CASES.exists():
            with np.load(CASES) as stored:
                data = json.loads(stored["index"].tobytes().decode())
                buffers = {name[4:]: stored[name] for name in stored.files if name.startswith("data")}
            index = data["cases"]
            for name, (dtype, offset, shape) in data["layout"].items():
                size = int(np.prod(shape, dtype=np.int64))
                arrays[name] = buffers[dtype][offset:offset + size].reshape(tuple(shape))
        _recording = (index, arrays)
    return _recording


def recorded_cases(key: str, dtype_name: str) -> list[Case]:
    index, arrays = load_recording()
    cases = []
    for i, row in enumerate(index.get(key, {}).get(dtype_name, [])):
        names = set()
        _collect_names(row, names)
        names |= {n + TRUTH for n in names if n + TRUTH in arrays}
        cases.append(Case(key, dtype_name, i, row["sample"], row["out"], row["grads"], row["random"],
                          {n: arrays[n] for n in names}))
    return cases


def _collect_names(obj, names: set) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "tensor" and isinstance(v, str):
                names.add(v)
            elif k == "grads":
                names.update(g for g in v if g is not None)
            else:
                _collect_names(v, names)
    elif isinstance(obj, list):
        for v in obj:
            _collect_names(v, names)


def torch_decode(enc, arrays: dict, memo: dict):
    """The torch value of an encoded sample value (tensors that require grad as leaves)."""
    import torch

    if isinstance(enc, list):
        return [torch_decode(e, arrays, memo) for e in enc]
    if not isinstance(enc, dict):
        return enc
    if "tensor" in enc:
        if enc["tensor"] not in memo:
            value = torch.from_numpy(np.array(arrays[enc["tensor"]])).to(getattr(torch, enc["dtype"]))
            memo[enc["tensor"]] = value.requires_grad_(enc["grad"])
        return memo[enc["tensor"]]
    if "dtype" in enc:
        return getattr(torch, enc["dtype"])
    if "device" in enc:
        return torch.device(enc["device"])
    if "tuple" in enc:
        return tuple(torch_decode(e, arrays, memo) for e in enc["tuple"])
    if "dict" in enc:
        return {k: torch_decode(v, arrays, memo) for k, v in enc["dict"].items()}
    return decode(enc, arrays, "cpu", [], {})


def torch_rerun(op, case: Case) -> Case | None:
    """torch's answers for a recorded case's own inputs: what the recording must hold. (Samples
    are not regenerated: some of op_db's sample functions iterate over sets of strings, so their
    order changes with Python's hash seed from one process to the next.)"""
    memo: dict = {}
    sample = argparse.Namespace(input=torch_decode(case.sample["input"], case.arrays, memo),
                                args=torch_decode(case.sample["args"], case.arrays, memo),
                                kwargs=torch_decode(case.sample["kwargs"], case.arrays, memo))
    return _live_case(op, case.key, case.dtype, case.index, sample, random_op=case.random)


def stale_reason(live: list, recorded: list[Case]) -> str | None:
    """Why a recording differs from torch's answers now (None when it matches)."""
    if len(live) != len(recorded):
        return f"{len(recorded)} recorded samples, {len(live)} live"
    for a, b in zip(live, recorded):
        if a is None:
            return f"sample {b.index}: torch now fails on it or its output is too large"
        if a.describe() != b.describe() or len(a.grads) != len(b.grads):
            return f"sample {a.index}: live ({a.describe()}) != recorded ({b.describe()})"
        if [g is None for g in a.grads] != [g is None for g in b.grads]:
            return f"sample {a.index}: torch's gradients now exist for other inputs"
        (left, left_twins, inputs), (right, right_twins, _) = _named_values(a), _named_values(b)
        if len(left) != len(right):
            return f"sample {a.index}: torch now gives {len(left)} values, {len(right)} recorded"
        # A float64 twin is kept where torch's float32 answer is off by half the tolerance or more:
        # another CPU's rounding can put a borderline answer on the other side, so only the twins
        # both have are compared (webgrad is checked against the recorded ones)
        twins = [(left_twins[i], right_twins[i]) for i in left_twins if i in right_twins]
        for k, (x, y) in enumerate([*zip(left, right), *twins]):
            # float32 sums come out in another order on another CPU (oneDNN picks kernels by the ISA:
            # on an AMD EPYC conv_transpose3d is 2e-5 off the recording); its float16 convolutions
            # accumulate differently, several percent (of the largest sum) off on an Intel Xeon. A stale
            # recording (another torch, another sample) has other inputs, compared as tightly as ever
            if b.dtype == "float16" and k >= inputs:
                rtol, atol = 0.1, 0.01 * max(1.0, float(np.nanmax(np.abs(_to_float64(y)), initial=0.0)))
            else:
                rtol, atol = (1e-5, 1e-6) if x.dtype == np.float64 else (1e-4, 1e-5)
            if x.shape != y.shape or not np.allclose(_to_float64(x), _to_float64(y), rtol=rtol, atol=atol,
                                                     equal_nan=True):
                return f"sample {a.index}: recorded values differ from torch's live ones"
    return None


def _named_values(case: Case) -> tuple[list, dict, int]:
    """The case's arrays in order (inputs, outputs, gradients), their float64 twins by the
    position of the value each twins, and how many inputs lead."""
    names: list = []
    for part in ("input", "args", "kwargs"):
        _collect_ordered(case.sample[part], names)
    inputs = len(names)
    if not case.random:
        _collect_ordered(case.out, names)
        names.extend(g for g in case.grads if g is not None)
    twins = {i: case.arrays[n + TRUTH] for i, n in enumerate(names) if n + TRUTH in case.arrays}
    return [case.arrays[n] for n in names], twins, inputs


def _collect_ordered(obj, names: list) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "tensor" and isinstance(v, str):
                names.append(v)
            else:
                _collect_ordered(v, names)
    elif isinstance(obj, list):
        for v in obj:
            _collect_ordered(v, names)


# -- status file -------------------------------------------------------------------------------
def load_status() -> dict:
    if not STATUS.exists():
        return {"total": 0, "missing": [], "failing": {}}
    return json.loads(STATUS.read_text())


def save_status(status: dict) -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    STATUS.write_text(json.dumps(status, indent=1, sort_keys=True) + "\n")


def resolve_key(key: str, status: dict):
    """``resolve`` for a key alone (in Pyodide there is no op_db to give op.name)."""
    return resolve(key, status.get("names", {}).get(key, key))


def config_name(device: str, dtype_name: str) -> str:
    return f"{device}/{dtype_name}"


# -- the whole run -----------------------------------------------------------------------------
def present_entries() -> dict:
    """{key: (op, fn)} for every op_db entry webgrad has; and the missing keys, sorted."""
    present, missing = {}, []
    for op in op_db():
        key = entry_key(op)
        fn = resolve(key, op.name)
        if fn is None:
            missing.append(key)
        else:
            present[key] = (op, fn)
    return present, sorted(missing)


def update(devices: list[str], write_readme: bool = True) -> dict:
    """Rerun every present entry: rewrite the recording, status.json and the README table."""
    present, missing = present_entries()
    cases_by_entry: dict = {}
    failing: dict = {}
    counts: dict = {}
    started = time.time()
    for n, (key, (op, fn)) in enumerate(sorted(present.items())):
        dtypes = case_dtypes(op)
        cases_by_entry[key] = {d: live_cases(op, d) for d in dtypes}
        mark_random(cases_by_entry[key])
        counts[key] = {}
        for device, dtype_name in configs(dtypes):
            if device not in devices:
                continue
            cases = cases_by_entry[key][dtype_name]
            failed = {}
            for case in cases:
                reason = case_failure(fn, case, device)
                if reason is not None:
                    failed[str(case.index)] = reason
            name = config_name(device, dtype_name)
            counts[key][name] = [len(cases) - len(failed), len(cases)]
            if failed:
                failing.setdefault(key, {})[name] = failed
        print(f"[{n + 1}/{len(present)} {time.time() - started:.0f}s] {key}: "
              + ", ".join(f"{c} {p}/{t}" for c, (p, t) in counts[key].items()), flush=True)
    save_recording(cases_by_entry)
    names = {entry_key(op): op.name for op in op_db() if op.variant_test_name}
    status = {"total": len(op_db()), "missing": missing, "failing": failing, "counts": counts,
              "devices": devices, "names": names}
    save_status(status)
    if write_readme:
        write_readme_table(status)
    return status


def namespace_of(key: str) -> str:
    for prefix in NAMESPACES:
        if key.startswith(prefix):
            return prefix[:-1]
    for prefix in ("masked.", "signal.", "sparse.", "torch."):
        if key.startswith(prefix):
            return prefix[:-1]
    return "torch / Tensor"


def coverage_table(status: dict) -> str:
    groups: dict = {}
    for key in status["missing"]:
        groups.setdefault(namespace_of(key), {"present": 0, "total": 0, "pass": {}, "all": {}})["total"] += 1
    for key, per_config in status.get("counts", {}).items():
        group = groups.setdefault(namespace_of(key), {"present": 0, "total": 0, "pass": {}, "all": {}})
        group["present"] += 1
        group["total"] += 1
        for name, (passed, total) in per_config.items():
            device, dtype_name = name.split("/")
            column = f"{device}, float16" if dtype_name == "float16" else device
            group["pass"][column] = group["pass"].get(column, 0) + passed
            group["all"][column] = group["all"].get(column, 0) + total
    devices = status.get("devices", ["cpu", "webgpu"])
    devices = devices + [f"{d}, float16" for d in devices]  # columns
    lines = ["| namespace | entries present | " + " | ".join(f"samples passing ({d})" for d in devices) + " |",
             "|---|---|" + "---|" * len(devices)]
    totals = {"present": 0, "total": 0, "pass": {}, "all": {}}
    order = sorted(groups, key=lambda g: (g != "torch / Tensor", g))
    for name in order:
        group = groups[name]
        cells = [f"{group['pass'].get(d, 0)} / {group['all'].get(d, 0)}" for d in devices]
        lines.append(f"| {name} | {group['present']} / {group['total']} | " + " | ".join(cells) + " |")
        totals["present"] += group["present"]
        totals["total"] += group["total"]
        for d in devices:
            totals["pass"][d] = totals["pass"].get(d, 0) + group["pass"].get(d, 0)
            totals["all"][d] = totals["all"].get(d, 0) + group["all"].get(d, 0)
    cells = [f"**{totals['pass'][d]} / {totals['all'][d]}**" for d in devices]
    lines.append(f"| **all** | **{totals['present']} / {totals['total']}** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_readme_table(status: dict) -> None:
    text = README.read_text()
    if BEGIN_MARK not in text or END_MARK not in text:
        print("README.md has no opinfo-coverage markers; table not written", file=sys.stderr)
        return
    head, rest = text.split(BEGIN_MARK, 1)
    _, tail = rest.split(END_MARK, 1)
    README.write_text(head + BEGIN_MARK + "\n" + coverage_table(status) + "\n" + END_MARK + tail)


def report(status: dict) -> None:
    for key, per_config in sorted(status.get("counts", {}).items()):
        cells = ", ".join(f"{name} {p}/{t}" for name, (p, t) in per_config.items())
        print(f"{key:55s} {cells}")
    print(f"\nmissing ({len(status['missing'])}): " + " ".join(status["missing"]))
    print()
    print(coverage_table(status))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true", help="rerun every entry; rewrite status, recording, README")
    parser.add_argument("--report", action="store_true", help="print the counts per entry from status.json")
    parser.add_argument("--devices", default=None, help="comma-separated devices for --update (default cpu,webgpu)")
    options = parser.parse_args(argv)
    if options.update:
        devices = options.devices.split(",") if options.devices else ["cpu", "webgpu"]
        status = update(devices)
        report(status)
    elif options.report:
        report(load_status())
    else:
        parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
