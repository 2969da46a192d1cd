"""Kernels are data: every WebGPU kernel record names its launcher by import path
(``launch``), and the backend imports that path directly (``launcher_of``). No
registry is filled by importing modules for their side effects, so a record leads
to its launcher in a fresh interpreter that imported nothing but webgrad."""
import inspect
import json
import pkgutil
import subprocess
import sys
from importlib import import_module

import webgrad  # noqa: F401  (declares every op)
from webgrad.backend import webgpu
from webgrad.backend.webgpu.backend import launcher_of
from webgrad.kernels import Elementwise, Epilogue, Fused, Grouped, Reduction, View
from webgrad.ops.registry import OPS

SIGNATURE = ["backend", "op", "record", "arrays", "attrs", "shape", "dtype"]


def _is_launcher(fn) -> bool:
    try:
        return inspect.isfunction(fn) and list(inspect.signature(fn).parameters)[:7] == SIGNATURE
    except (TypeError, ValueError):
        return False


def test_every_record_resolves_in_a_fresh_interpreter():
    """Only ``import webgrad``: each op's record (and each graph record type) finds its launcher."""
    script = (
        "import json, sys, webgrad\n"
        "from webgrad.ops.registry import OPS\n"
        "from webgrad.kernels import Elementwise, Epilogue, Fused, Grouped, Reduction, View\n"
        "from webgrad.backend.webgpu.backend import launcher_of\n"
        "class Named: name = 'graph node'\n"
        "found = {op.name: launcher_of(op, op.impls['wgsl']).__qualname__ for op in OPS.values()\n"
        "         if op.impls.get('wgsl') is not None}\n"
        "for t in (Elementwise, View, Fused, Epilogue, Reduction, Grouped):\n"
        "    found[t.__name__] = launcher_of(Named, t).__qualname__\n"
        "print(json.dumps(found))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["sum"] == "reduce" and found["add"] == "run" and found["Grouped"] == "optim_group"
    with_wgsl = [op for op in OPS.values() if op.impls.get("wgsl") is not None]
    assert len(found) == len(with_wgsl) + 6


def test_every_launcher_has_the_launcher_signature():
    records = [op.impls["wgsl"] for op in OPS.values() if op.impls.get("wgsl") is not None]
    for record in records + [Elementwise, View, Fused, Epilogue, Reduction, Grouped]:
        fn = launcher_of(OPS["add"], record)
        assert _is_launcher(fn), f"{record.launch} is not function({', '.join(SIGNATURE)})"


def test_no_string_keyed_launcher_registry():
    """No module of the WebGPU backend keeps a dict (or other mapping) of launchers: a launcher
    is found from its record alone. Fails if a name -> launcher table comes back."""
    for info in pkgutil.iter_modules(webgpu.__path__):
        module = import_module(f"{webgpu.__name__}.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, dict):
                found = [k for k, v in value.items() if _is_launcher(v)]
                assert not found, f"{info.name}.{name} maps {found} to launchers: name it in the record's launch"
    assert not hasattr(webgpu, "LAUNCHERS") and not hasattr(webgpu, "kernels_registry")


def test_an_unknown_launch_path_names_the_op_and_the_path():
    class Broken:
        launch = "reduce.no_such_launcher"

    try:
        launcher_of(OPS["sum"], Broken())
    except NotImplementedError as err:
        assert "sum" in str(err) and "reduce.no_such_launcher" in str(err)
    else:
        raise AssertionError("an unknown launcher resolved")
