"""Kernels are data: every WebGPU kernel record names its launcher by import path
(``launch``), and the backend imports that path directly (``launcher_of``). No
registry is filled by importing modules for their side effects, so a record leads
to its launcher in a fresh interpreter that imported nothing but webgrad. Shader text
is made in two ways only: templates filled by ``source.fill`` (the optimizer's single
and grouped updates, one template calling optim.wgsl's functions) and fused hooks
spliced by ``source.splice`` (elementwise chains, matmul epilogues, reduction hooks)."""
import ast
import inspect
import json
import pkgutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path

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
        "import json, sys, webgrad, webgrad.optim  # webgrad.optim declares the optimizer ops\n"
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
    assert found["adam_step"] == "optim_step" and len(found) > 60


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


WEBGPU_FILES = sorted(Path(webgpu.__file__).parent.glob("*.py"))


def _tree(path):
    return ast.parse(path.read_text())


def test_only_source_edits_shader_text():
    """No regular expression or str.replace on WGSL outside source.py (whose one use types an
    op's own expression): templates are filled by source.fill."""
    for path in WEBGPU_FILES:
        if path.name == "source.py":
            continue
        tree = _tree(path)
        imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        calls = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in ("replace", "sub", "subn")]
        assert "re" not in imports and not calls, f"{path.name} edits text (lines {calls}): fill a template"


def test_only_splice_reads_a_chains_steps():
    """Every fused hook is spliced by source.splice: no other module reads a chain's per-step kernels."""
    for path in WEBGPU_FILES:
        found = [n.lineno for n in ast.walk(_tree(path)) if isinstance(n, ast.Attribute) and n.attr == "kernels"]
        assert path.name == "source.py" or not found, f"{path.name} lines {found} splice a chain: call source.splice"


def _chain():
    """relu(a * b) as graph.passes.fuse records it."""
    steps = (("mul", (("in", 0), ("in", 1)), ("float32", "float32"), "float32", ()),
             ("relu", (("t", 0),), ("float32",), "float32", ()))
    return Fused(steps, 2, tuple(OPS[name].impls["wgsl"] for name, *_ in steps))


def test_the_three_fused_hooks_are_the_same_splice():
    from webgrad.backend.webgpu import fused, source

    chain = _chain()
    assert source.splice("fn op(a: A, b: A) -> O", chain, "ab") in source.assemble(
        "binary.wgsl", (("A", "f32"), ("O", "f32")), chain=chain)
    assert source.splice("fn chain(v: T, batch: u32, row: u32, col: u32) -> T", chain,
                         ["v", "ext0_at(batch, row, col)"]) in fused.matmul_epilogue_source(
                             chain, (("T", "f32"), ("A", "f32"), ("B", "f32"), ("O", "f32")))
    types = (("X", "f32"), ("T", "f32"), ("O", "f32"), ("S0", "f32"))
    code = fused.reduction_source(chain, None, types)
    assert source.splice("fn prologue(v: X) -> T", chain, ["v", "s0_value()"]) in code
    assert "fn epilogue(v: T) -> O { return O(v); }" in code


def test_single_and_grouped_updates_call_the_same_function():
    """optim.wgsl holds each update once, as a function; a single update is a group of one."""
    from webgrad.backend.webgpu import optim, source

    member = ("f32",) * 4  # the gradient's kind, then the parameter's and its two states'
    single, group = optim.step_source("adam_step", (member,)), optim.step_source("adam_step", (member,) * 3)
    for code, count in ((single, 1), (group, 3)):
        assert code.startswith(source.read("optim.wgsl")) and "@compute" not in source.read("optim.wgsl")
        assert code.count("v = adam_step(u.p, g, v)") == count and code.count("@compute") == 1
        assert code.count("var<storage, read_write>") == 3 * count
