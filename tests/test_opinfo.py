"""torch's OpInfo database run through webgrad: every entry webgrad has, every sample, every device.

The library is tests/opinfo.py (how entries resolve, the caps, the tolerances). This file
reads tests/data/opinfo/status.json, which names the entries webgrad does not have
("missing") and the samples known to fail per entry and config ("failing"), and
tests/data/opinfo/cases.npz, the recorded cases, replayed everywhere. Natively, with torch,
torch reruns each recorded case and must give the recorded outputs and gradients (a stale
recording fails here, not in the page); in Pyodide the recording alone is used.

- test_entry[<entry>-<device>-<dtype>]: all samples pass, except the listed ones, which must
  still fail (a fixed sample fails the test until it is removed from the list).
- test_missing_entries_do_not_resolve: a missing entry that webgrad now has fails the test,
  so the missing list can only shrink.
- test_status_matches_op_db (native): the recorded entries are exactly the ones that resolve.

Regenerate after adding ops: ``python tests/opinfo.py --update`` (then commit tests/data/opinfo
and README.md).
"""
from __future__ import annotations

import pytest

import opinfo
from conftest import DEVICES, IN_CI, float16_stored_as, need_module
from torch_reference import optional_torch

TORCH = optional_torch()

STATUS = opinfo.load_status()
INDEX, _ = opinfo.load_recording()


def _in_pyodide() -> bool:
    import sys

    return sys.platform == "emscripten"


def _params():
    params = []
    for key in sorted(INDEX):
        for dtype_name in INDEX[key]:
            for device in (["cpu"] if dtype_name == "float64" else ["cpu", "webgpu"]):
                if device in DEVICES:
                    params.append(pytest.param(key, device, dtype_name, None, id=f"{key}-{device}-{dtype_name}"))
            if dtype_name == "float16" and "webgpu" in DEVICES:  # as on an adapter without 'shader-f16'
                params.append(pytest.param(key, "webgpu", dtype_name, "f16p", id=f"{key}-webgpu-float16-packed"))
    return params


_live: dict = {}


def _live_ops() -> dict:
    if "ops" not in _live:
        _live["ops"] = {opinfo.entry_key(op): op for op in opinfo.op_db()}
    return _live["ops"]


def _cases(key: str, dtype_name: str) -> list:
    """The recorded cases of an entry; natively torch reruns them first and must agree."""
    recorded = opinfo.recorded_cases(key, dtype_name)
    if TORCH is None:
        if IN_CI and not _in_pyodide():
            need_module("torch")  # natively under CI=true torch must be there
        return recorded
    if (key, dtype_name) not in _live:  # torch reruns each recorded case once (webgpu reuses cpu's check)
        op = _live_ops()[key]
        live = [opinfo.torch_rerun(op, case) for case in recorded]
        _live[(key, dtype_name)] = opinfo.stale_reason(live, recorded)
    stale = _live[(key, dtype_name)]
    if stale is not None:
        pytest.fail(f"{key} {dtype_name}: the recording in tests/data/opinfo is stale ({stale}); "
                    f"run python tests/opinfo.py --update", pytrace=False)
    return recorded


@pytest.mark.parametrize("key, device, dtype_name, float16_kind", _params())
def test_entry(key, device, dtype_name, float16_kind):
    """``float16_kind`` 'f16p': WebGPU float16 stored packed, computed in f32 kernels; the same
    samples must pass (and fail) as with f16 storage."""
    if float16_kind is None:
        _check_entry(key, device, dtype_name)
    else:
        from webgrad.backend.webgpu import geometry

        if geometry.KIND["float16"] == float16_kind:  # e.g. SwiftShader in the page: the column above ran it
            pytest.skip(f"float16 is already stored as {float16_kind} on this adapter")
        with float16_stored_as(float16_kind):
            _check_entry(key, device, dtype_name)


def _check_entry(key, device, dtype_name):
    fn = opinfo.resolve_key(key, STATUS)
    assert fn is not None, f"{key} no longer resolves in webgrad; run python tests/opinfo.py --update"
    cases = _cases(key, dtype_name)
    config = opinfo.config_name(device, dtype_name)
    expected = STATUS.get("failing", {}).get(key, {}).get(config, {})
    problems = []
    for case in cases:
        reason = opinfo.case_failure(fn, case, device)
        listed = str(case.index) in expected
        if reason is not None and not listed:
            problems.append(opinfo.failure_message(key, case, device, reason))
        elif reason is None and listed:
            problems.append(f"{key} sample {case.index} on {config} passes now: remove it from the list "
                            f"(python tests/opinfo.py --update rewrites tests/data/opinfo/status.json)")
    assert not problems, "\n".join(problems)


def test_missing_entries_do_not_resolve():
    now_present = [key for key in STATUS["missing"] if opinfo.resolve_key(key, STATUS) is not None]
    assert not now_present, (f"webgrad now has {now_present}: run python tests/opinfo.py --update so they "
                             f"leave the missing list and their samples are tested")


def test_status_covers_every_entry():
    """Every op_db entry is either recorded (present) or listed missing, and counted once."""
    recorded, missing = set(INDEX), set(STATUS["missing"])
    assert not recorded & missing, f"both recorded and missing: {sorted(recorded & missing)}"
    assert len(recorded) + len(missing) == STATUS["total"], \
        f"{len(recorded)} recorded + {len(missing)} missing != {STATUS['total']} entries"


def test_status_matches_op_db():
    """Natively: the entries that resolve now are exactly the recorded ones."""
    if TORCH is None:
        if not _in_pyodide():
            need_module("torch")  # skips outside CI, fails under CI=true
        return  # in Pyodide there is no op_db: the recording stands in for it
    present, missing = opinfo.present_entries()
    assert len(present) + len(missing) == STATUS["total"], "torch's op_db changed size: run --update"
    unrecorded = sorted(set(present) - set(INDEX))
    assert not unrecorded, f"{unrecorded} resolve but are not recorded: run python tests/opinfo.py --update"
    gone = sorted(set(INDEX) - set(present))
    assert not gone, f"{gone} are recorded but no longer resolve: run python tests/opinfo.py --update"
