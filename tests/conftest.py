"""Shared test setup: the device list and the numeric helpers every test uses.

Devices: ``DEVICES`` is the one place a backend is switched on. Tests that take
the ``device`` fixture run once per entry. Set ``WEBGRAD_TEST_DEVICES=cpu,webgpu``
to choose from the command line.

Helpers (import them with ``from conftest import gradcheck, assert_close``):
``assert_close`` compares a tensor with a numpy reference (values, shape, dtype);
``gradcheck`` and ``gradgradcheck`` compare webgrad's first and second derivatives
with float64 central finite differences.
"""
from __future__ import annotations

import contextlib
import importlib
import os

import numpy as np
import pytest

import webgrad
from torch_reference import torch_ref  # noqa: F401  (the fixture: torch live, or recorded in Pyodide)


IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(autouse=True)
def _verify_graphs_after_each_pass(monkeypatch):
    """Every graph a test compiles is checked by graph/verify.py after each pass (JAX checks
    its jaxprs the same way in tests), so a pass that breaks the IR fails where it broke."""
    monkeypatch.setattr(webgrad.graph.passes, "VERIFY", True)


def need_module(name: str):
    """Import a test peer (torch, safetensors). Missing, it skips the test (or module)
    outside CI and fails under CI=true, where .ci/run installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        if IN_CI:
            pytest.fail(f"{name} is not installed ({err}); under CI=true tests may not skip", pytrace=False)
        pytest.skip(f"{name} is not installed", allow_module_level=True)


def run_async(coroutine):
    """``asyncio.run`` in a thread of its own: browser tests earlier in the session leave
    Playwright's event loop running in this thread, where asyncio.run refuses to start."""
    import asyncio
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def webgpu_available() -> bool:
    try:
        return bool(webgrad.webgpu.is_available())
    except Exception:  # no wgpu, no adapter, or the backend is not there yet
        return False


def _devices() -> list[str]:
    chosen = os.environ.get("WEBGRAD_TEST_DEVICES")
    if chosen:
        return [d.strip() for d in chosen.split(",") if d.strip()]
    if webgpu_available():
        return ["cpu", "webgpu"]
    if os.environ.get("CI") == "true":  # in CI a missing adapter is a failure, never a skip
        raise RuntimeError("CI=true but no WebGPU adapter: install mesa-vulkan-drivers and wgpu "
                           "(scripts/install-deps does both)")
    return ["cpu"]


DEVICES = _devices()

# For tests that only make sense on WebGPU. Outside CI they skip without an adapter;
# under CI=true a missing adapter has already failed the run in _devices().
requires_webgpu = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter here")


@contextlib.contextmanager
def float16_stored_as(kind: str):
    """WebGPU float16 tensors made inside are stored as ``kind``: 'f16' (an adapter with
    'shader-f16', as llvmpipe has) or 'f16p' (packed two to a word: an adapter without it, as
    SwiftShader in Chromium)."""
    from webgrad.backend.webgpu import geometry

    def forget_cached_scalars():  # made in one storage, they must not meet the other
        webgrad.creation.SCALARS.clear()
        webgrad.backend.get_backend("webgpu").scalars.clear()

    before = geometry.KIND["float16"]
    geometry.KIND["float16"] = kind
    forget_cached_scalars()
    try:
        yield
    finally:
        geometry.KIND["float16"] = before
        forget_cached_scalars()


# WGSL has no f64: float64 tensors stay on the cpu, and a webgpu op asked for one
# raises a TypeError that names float64. The op table checks exactly that there.
_NO_FLOAT64 = {"webgpu"}


def supports_dtype(device: str, dtype) -> bool:
    return not (dtype is webgrad.float64 and device.split(":")[0] in _NO_FLOAT64)


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


@pytest.fixture
def fake_device():
    """A second device for tests: the numpy backend registered under another name.
    Running ops on it finds any op that makes a tensor on the default device instead
    of its input's (mixing devices then raises), long before a real second backend
    runs here; it also lets the mixed-device errors be tested."""
    from webgrad import backend as backends
    from webgrad.backend.numpy import NumpyBackend

    backends.register("fake", NumpyBackend())
    yield "fake"
    backends._BACKENDS.pop("fake", None)


@pytest.fixture(autouse=True)
def _fresh_global_state():
    """Every test starts with grad mode on, float32 as default and a known seed."""
    webgrad.manual_seed(0)
    yield
    webgrad.set_default_dtype(webgrad.float32)
    webgrad.set_grad_enabled(True)


# -- comparing ----------------------------------------------------------------------
def to_numpy(x) -> np.ndarray:
    return x.detach().numpy() if isinstance(x, webgrad.Tensor) else np.asarray(x)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, *, dtype=None, msg="") -> None:
    """``actual`` (a Tensor) matches ``expected`` (array-like) in shape, value and,
    when given, dtype (a webgrad dtype or its name). NaNs must match too."""
    assert isinstance(actual, webgrad.Tensor), f"{msg}: expected a Tensor, got {type(actual).__name__}"
    expected = np.asarray(expected)
    if dtype is not None:
        dtype = webgrad.dtypes.to_dtype(dtype)
        assert actual.dtype is dtype, f"{msg}: dtype {actual.dtype} != expected {dtype}"
    assert tuple(actual.shape) == expected.shape, f"{msg}: shape {tuple(actual.shape)} != expected {expected.shape}"
    got = to_numpy(actual)
    if got.dtype == np.bool_ or expected.dtype == np.bool_ or (got.dtype.kind in "iu" and expected.dtype.kind in "iu"):
        np.testing.assert_array_equal(got, expected, err_msg=msg)
    else:
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=msg)


# -- finite differences ---------------------------------------------------------------
def _float_outputs(out) -> list:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o for o in outs if isinstance(o, webgrad.Tensor) and o.dtype.is_floating_point]


def _weighted_sum(out, weights):
    """sum_k <w_k, out_k>: one scalar that depends on every float output."""
    total = None
    for o, w in zip(_float_outputs(out), weights):
        term = (o * w).sum()
        total = term if total is None else total + term
    return total


def _with_values(inputs, position, array):
    """``inputs`` with the one at ``position`` replaced by a fresh tensor holding ``array``."""
    new = list(inputs)
    new[position] = webgrad.tensor(array, dtype=inputs[position].dtype, device=inputs[position].device)
    return new


def _scalar(fn, inputs, weights) -> float:
    with webgrad.no_grad():
        return float(_weighted_sum(fn(*inputs), weights).item())


def _check(analytic, numeric, atol, rtol, what):
    analytic, numeric = np.asarray(analytic, np.float64), np.asarray(numeric, np.float64)
    if not np.allclose(analytic, numeric, atol=atol, rtol=rtol):
        raise AssertionError(f"{what}: analytic and finite-difference derivatives differ\n"
                             f"analytic: {analytic}\nnumeric:  {numeric}\n"
                             f"max abs diff {np.max(np.abs(analytic - numeric)):.3g}")


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, *, elementwise_limit=48, seed=0) -> None:
    """Check d fn / d inputs by float64 central finite differences.

    ``inputs`` are webgrad tensors (and anything else ``fn`` takes); the float64
    ones with ``requires_grad`` are checked. ``fn`` may return a tensor or a tuple
    of tensors; non-float outputs (indices) are ignored. The check runs along a
    random direction, and element by element when the inputs are small.
    """
    rng = np.random.default_rng(seed)
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, webgrad.Tensor) and t.requires_grad]
    assert wrt, "gradcheck: no input requires grad"
    for i in wrt:
        assert inputs[i].dtype is webgrad.float64, "gradcheck: differentiate float64 inputs only"
    out = fn(*inputs)
    outs = _float_outputs(out)
    assert outs, "gradcheck: fn returned no floating point output"
    weights = [webgrad.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype, device=o.device) for o in outs]
    total = _weighted_sum(out, weights)
    grads = webgrad.autograd.grad(total, [inputs[i] for i in wrt], allow_unused=True)
    analytic = [np.zeros(tuple(inputs[i].shape)) if g is None else to_numpy(g) for i, g in zip(wrt, grads)]
    for i, g in zip(wrt, analytic):
        assert g.shape == tuple(inputs[i].shape), f"gradcheck: gradient shape {g.shape} for input {i} " \
                                                  f"of shape {tuple(inputs[i].shape)}"
    base = [to_numpy(inputs[i]).astype(np.float64) for i in wrt]

    # Along one random direction through all inputs at once.
    directions = [rng.standard_normal(b.shape) for b in base]
    plus, minus = list(inputs), list(inputs)
    for k, i in enumerate(wrt):
        plus = _with_values(plus, i, base[k] + eps * directions[k])
        minus = _with_values(minus, i, base[k] - eps * directions[k])
    numeric = (_scalar(fn, plus, weights) - _scalar(fn, minus, weights)) / (2 * eps)
    directional = sum(float(np.sum(g * d)) for g, d in zip(analytic, directions))
    _check(directional, numeric, atol, rtol, "gradcheck (random direction)")

    # Element by element for small inputs.
    if sum(b.size for b in base) > elementwise_limit:
        return
    for k, i in enumerate(wrt):
        numeric = np.zeros(base[k].shape)
        for j in range(base[k].size):
            step = np.zeros(base[k].size)
            step[j] = eps
            step = step.reshape(base[k].shape)
            up = _scalar(fn, _with_values(inputs, i, base[k] + step), weights)
            down = _scalar(fn, _with_values(inputs, i, base[k] - step), weights)
            numeric.reshape(-1)[j] = (up - down) / (2 * eps)
        _check(analytic[k], numeric, atol, rtol, f"gradcheck (input {i}, element by element)")


def gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, *, seed=0) -> None:
    """Check second derivatives: differentiate the first gradient (computed with
    ``create_graph=True``) and compare with finite differences of that gradient."""
    rng = np.random.default_rng(seed)
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, webgrad.Tensor) and t.requires_grad]
    outs = _float_outputs(fn(*inputs))
    weights = [webgrad.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]
    cotangents = [rng.standard_normal(tuple(inputs[i].shape)) for i in wrt]

    def first_grad_dot(values, create_graph):
        """<u, d(sum w * fn)/dx> evaluated at ``values`` (one float per wrt input)."""
        current = list(inputs)
        for k, i in enumerate(wrt):
            current[i] = values[k]
        total = _weighted_sum(fn(*current), weights)
        grads = webgrad.autograd.grad(total, [current[i] for i in wrt], create_graph=create_graph,
                                      allow_unused=True)
        result = None
        for g, u in zip(grads, cotangents):
            if g is None:
                continue
            term = (g * webgrad.tensor(u, dtype=g.dtype)).sum()
            result = term if result is None else result + term
        return result

    leaves = [inputs[i] for i in wrt]
    inner = first_grad_dot(leaves, create_graph=True)
    second = webgrad.autograd.grad(inner, leaves, allow_unused=True)
    analytic = [np.zeros(tuple(t.shape)) if g is None else to_numpy(g) for t, g in zip(leaves, second)]
    base = [to_numpy(t).astype(np.float64) for t in leaves]
    directions = [rng.standard_normal(b.shape) for b in base]

    def at(sign):
        values = [webgrad.tensor(b + sign * eps * d, dtype=webgrad.float64, requires_grad=True)
                  for b, d in zip(base, directions)]
        return float(first_grad_dot(values, create_graph=False).item())

    numeric = (at(+1) - at(-1)) / (2 * eps)
    directional = sum(float(np.sum(g * d)) for g, d in zip(analytic, directions))
    _check(directional, numeric, atol, rtol, "gradgradcheck (random direction)")


class _WebGPUErrorLog:
    """Collects errors wgpu-py reports asynchronously (uncaptured device errors go
    to its logger, not to the call that caused them)."""

    def __init__(self):
        import logging

        try:  # wgpu installs its own logger class for "wgpu" on import: let it, before we touch that logger
            import wgpu  # noqa: F401
        except ImportError:
            pass
        self.records = []
        self.handler = logging.Handler(level=logging.ERROR)
        self.handler.emit = self.records.append
        logging.getLogger("wgpu").addHandler(self.handler)


_webgpu_errors = _WebGPUErrorLog()


@pytest.fixture(autouse=True)
def _fail_on_uncaptured_webgpu_errors():
    """An uncaptured WebGPU error anywhere fails the test that caused it."""
    _webgpu_errors.records.clear()
    yield
    if _webgpu_errors.records:
        messages = "\n".join(r.getMessage() for r in _webgpu_errors.records)
        _webgpu_errors.records.clear()
        pytest.fail(f"uncaptured WebGPU error during this test:\n{messages}")
