"""torch's answers, live where torch is installed and recorded where it is not (Pyodide).

A test that compares against torch asks for the ``torch_ref`` fixture and hands it the
torch side as a function of the torch module::

    expected = torch_ref(lambda torch: torch.sigmoid(torch.tensor(x)).numpy())

Shared helpers reach the current test's reference through ``torch_value(compute)``, and a
file can name torch at import time through ``lazy_torch()`` (``TF = torch.nn.functional``
in a parametrize list): torch itself where installed; where it is missing, a call into it
outside ``torch_value`` skips that test like ``need_module("torch")`` does.

- Natively, with torch: the function runs (torch stays the live oracle) and its result
  is compared with the recorded one, so a stale recording fails here, not in the page.
- Without torch (inside Pyodide): the recorded value is returned.
- ``python tests/record_torch_reference.py`` runs the converted files with
  WEBGRAD_TORCH_REFERENCE=record and writes tests/data/torch_reference/<file>.npz.

A value is keyed by test name and parameters (the ``device`` parameter left out: torch
runs on the cpu whatever device webgrad uses) and by call order within the test.
Results are arrays (anything np.asarray takes: numbers, lists), or tuples of them.
"""
from __future__ import annotations

import importlib
import os
import pathlib

import numpy as np
import pytest

DATA = pathlib.Path(__file__).resolve().parent / "data" / "torch_reference"
RECORDING = os.environ.get("WEBGRAD_TORCH_REFERENCE") == "record"
RECORDED: dict[str, dict[str, np.ndarray]] = {}  # file stem -> npz entries, filled when recording
_loaded: dict[str, dict[str, np.ndarray]] = {}
# A recording must equal a live run up to torch's own run-to-run rounding.
STALE_RTOL, STALE_ATOL = 1e-5, 1e-6


def optional_torch():
    """The torch module, or None where it is not installed (in Pyodide)."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


class _LazyTorch:
    def __init__(self, path: tuple[str, ...] = ()):
        self._path = path

    def __getattr__(self, name: str):
        if name.startswith("__"):  # introspection (pytest, inspect) must not see a fake attribute
            raise AttributeError(name)
        child = self.__dict__[name] = _LazyTorch((*self._path, name))  # so `lib is torch.nn` holds
        return child

    def _resolve(self):
        from conftest import need_module  # here: conftest imports this module

        target = need_module("torch")  # skips the test where torch is missing
        for name in self._path:
            target = getattr(target, name)
        return target

    def __call__(self, *args, **kwargs):
        return self._resolve()(*args, **kwargs)

    def __mro_entries__(self, bases):  # `class Net(torch.nn.Module)` inside a test
        return (self._resolve(),)


def lazy_torch():
    """``torch`` for module level: the module itself where it is installed (so native runs are
    unchanged); elsewhere a stand-in whose attributes can be named, and whose calls skip."""
    return optional_torch() or _LazyTorch()


def _recording(stem: str) -> dict[str, np.ndarray]:
    if stem not in _loaded:
        path = DATA / f"{stem}.npz"
        _loaded[stem] = dict(np.load(path)) if path.exists() else {}
    return _loaded[stem]


def _entries(key: str, value) -> dict[str, np.ndarray]:
    if isinstance(value, tuple):
        return {f"{key}#{i}": np.asarray(v) for i, v in enumerate(value)}
    return {key: np.asarray(value)}


def _from_entries(key: str, stored: dict[str, np.ndarray]):
    if key in stored:
        return stored[key]
    parts = []
    while f"{key}#{len(parts)}" in stored:
        parts.append(stored[f"{key}#{len(parts)}"])
    return tuple(parts) if parts else None


class TorchReference:
    def __init__(self, request):
        node = request.node
        self.stem = pathlib.Path(str(node.fspath)).stem
        name = node.originalname if hasattr(node, "originalname") else node.name
        callspec = getattr(node, "callspec", None)
        if callspec is not None:
            device = callspec.params.get("device")
            ids = [part for part in callspec.id.split("-") if part != device]
            name += "[" + "-".join(ids) + "]"
        self.name = name.replace("/", "_")
        self.calls = 0

    def __call__(self, compute, *, rtol=STALE_RTOL, atol=STALE_ATOL):
        """torch's result of ``compute(torch)``: live (checked against the recording within
        ``rtol``/``atol``) where torch is installed, else the recording. Loosen the tolerances only
        for chaotic computations: torch's own float32 sums change with the CPU's vector width."""
        key = f"{self.name}@{self.calls}"
        self.calls += 1
        torch = optional_torch()
        stored = _from_entries(key, _recording(self.stem))
        if torch is None:
            if stored is None:
                message = (f"{self.stem}: no recorded torch value for {key} and torch is not installed; "
                           f"run `python tests/record_torch_reference.py` where torch is")
                from conftest import IN_CI  # here: conftest imports this module

                if IN_CI:
                    pytest.fail(message, pytrace=False)
                pytest.skip(message)
            return stored
        live = compute(torch)
        if RECORDING:
            RECORDED.setdefault(self.stem, {}).update(_entries(key, live))
        elif stored is None:
            pytest.fail(f"{self.stem}: no recorded torch value for {key} (Pyodide would have to skip it); "
                        f"run `python tests/record_torch_reference.py`", pytrace=False)
        else:
            expected = _entries(key, stored)
            got = _entries(key, live)
            assert expected.keys() == got.keys(), f"{key}: recorded {sorted(expected)}, live {sorted(got)}"
            for entry, value in got.items():
                stale = (f"{self.stem}: recorded torch value {entry} is stale; "
                         f"run `python tests/record_torch_reference.py`")
                if value.dtype.kind in "biufc":
                    np.testing.assert_allclose(expected[entry], value, rtol=rtol, atol=atol, err_msg=stale)
                else:  # names (an optimizer's state keys)
                    np.testing.assert_array_equal(expected[entry], value, err_msg=stale)
        return live


_current: TorchReference | None = None


@pytest.fixture(autouse=True)
def torch_ref(request) -> TorchReference:
    global _current
    _current = TorchReference(request)
    yield _current
    _current = None


def torch_value(compute):
    """``torch_ref(compute)`` of the running test, for helpers shared by many tests."""
    assert _current is not None, "torch_value() is for use inside a test"
    return _current(compute)


def write_recorded() -> list[pathlib.Path]:
    """Write what a recording run collected, one .npz per test file."""
    DATA.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, entries in sorted(RECORDED.items()):
        path = DATA / f"{stem}.npz"
        np.savez_compressed(path, **dict(sorted(entries.items())))
        written.append(path)
    return written
