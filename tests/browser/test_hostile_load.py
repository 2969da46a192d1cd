"""The malformed-file corpus (tests/hostile/test_load_corpus.py) through
``webgrad.load`` inside Pyodide: every file refused with the same message as
natively, and the page still working afterwards."""
from __future__ import annotations

import json

import pytest

import webgrad
from hostile.test_load_corpus import MALFORMED

from .conftest import install_files_code

PAGE_DIR = "/tmp/webgrad-hostile-load"

LOAD_ALL = f"""
import json, os, webgrad
results = {{}}
for name in sorted(os.listdir({PAGE_DIR!r})):
    path = os.path.join({PAGE_DIR!r}, name)
    try:
        webgrad.load(path)
        results[name] = None
    except Exception as error:
        results[name] = [type(error).__name__, str(error).replace(path, "<file>")]
json.dumps(results)
"""

STILL_WORKS = """
import os, webgrad
x = webgrad.ones(3, device="webgpu") * 2
# A save to a path where a killed save left a temporary (no os.kill here: the age rule applies).
stale = "/tmp/.ckpt.safetensors.0badc0de-12345.abcd1234.tmp"
open(stale, "wb").close()
os.utime(stale, (1, 1))
webgrad.save({"x": x, "step": 4}, "/tmp/ckpt.safetensors")
back = webgrad.load("/tmp/ckpt.safetensors", map_location="webgpu")
[x.sum().item(), back["x"].tolist(), back["step"], str(back["x"].device), os.path.exists(stale)]
"""


def native_refusals(tmp_path) -> tuple[dict, dict]:
    files, messages = {}, {}
    for case_id, make_bytes, _ in MALFORMED:
        name = f"{len(files):03d}.safetensors"  # plain names: the ids hold odd characters
        files[name] = make_bytes()
        path = tmp_path / name
        path.write_bytes(files[name])
        with pytest.raises(ValueError) as info:
            webgrad.load(path)
        messages[name] = (case_id, ["ValueError", str(info.value).replace(str(path), "<file>")])
    return files, messages


def test_corpus_is_refused_in_pyodide_with_the_native_messages(webgpu_runtime, tmp_path):
    files, native = native_refusals(tmp_path)
    webgpu_runtime.ok(install_files_code(files, target=PAGE_DIR))
    out = webgpu_runtime.ok(LOAD_ALL, timeout_s=300)
    in_page = json.loads(out["result"])
    assert sorted(in_page) == sorted(native)
    mismatches = [(case_id, in_page[name], expected) for name, (case_id, expected) in native.items()
                  if in_page[name] != expected]
    assert not mismatches, "\n".join(f"{c}:\n  page:   {p}\n  native: {n}" for c, p, n in mismatches)
    assert len(in_page) == len(MALFORMED) >= 60

    result = webgpu_runtime.ok(STILL_WORKS)["result"]
    assert list(result) == [6.0, [2.0, 2.0, 2.0], 4, "webgpu", False]
