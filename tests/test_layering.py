"""Layers point down: ops -> backends. The WebGPU backend works on its arrays only;
what it needs from above (positions, views, kernel records) the op computes and
passes in. So no module under backend/webgpu imports webgrad's ops, tensor or
creation modules, or makes a Tensor (a compiled step's replay too: the plan hands it
what makes Tensors).

And the graph layer is device-neutral: graph/ reaches a backend only through
``get_backend(device)`` and the ``Backend`` protocol (backend/protocol.py), never by a
device's name."""
import ast
import re
from pathlib import Path

import pytest

import webgrad

BACKEND = Path(webgrad.__file__).parent / "backend"
GRAPH = Path(webgrad.__file__).parent / "graph"
FORBIDDEN = ("ops", "tensor", "creation")
FILES = sorted(BACKEND.glob("webgpu/*.py")) + sorted(BACKEND.glob("numpy/**/*.py")) + [BACKEND / "protocol.py"]
GRAPH_FILES = sorted(GRAPH.rglob("*.py"))
# What graph/ may import of backend/: the lookup, the protocol, and numpy's out= helpers (a fused
# node carries a numpy kernel made from its steps' own, passes/fuse.py).
GRAPH_MAY_IMPORT = ("webgrad.backend", "webgrad.backend.get_backend", "webgrad.backend.protocol",
                    "webgrad.backend.numpy.arrays")
DEVICES = ("cpu", "webgpu")


def _imports(tree, path):
    """Absolute module names imported by ``path`` (relative imports resolved)."""
    package = ["webgrad", *path.relative_to(BACKEND.parent).parts[:-1]]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield module
            yield from (f"{module}.{a.name}" for a in node.names)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_backend_does_not_reach_up(path):
    tree = ast.parse(path.read_text())
    bad = [m for m in _imports(tree, path)
           if any(m == f"webgrad.{name}" or m.startswith(f"webgrad.{name}.") for name in FORBIDDEN)]
    assert not bad, f"{path.name} imports {bad}: compute it in webgrad.ops and pass arrays down"
    made = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "_make"
            or isinstance(n, ast.Name) and n.id == "Tensor"]
    assert not made, f"{path.name} builds Tensors (lines {made})"


def test_the_check_sees_a_relative_import(tmp_path):
    path = BACKEND / "webgpu" / "example.py"
    tree = ast.parse("from ...ops.indexing import getitem\nfrom . import views\n")
    assert "webgrad.ops.indexing.getitem" in set(_imports(tree, path))
    assert "webgrad.backend.webgpu.views" in set(_imports(tree, path))


def _graph_reaches(tree, path) -> list:
    return [m for m in _imports(tree, path) if m.startswith("webgrad.backend")
            and not any(m == ok or m.startswith(ok + ".") and ok != "webgrad.backend" for ok in GRAPH_MAY_IMPORT)]


def _device_names(tree) -> list:
    """Lines comparing something with a device's name (``graph.device == "webgpu"``)."""
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare)
            and any(isinstance(c, ast.Constant) and c.value in DEVICES for c in [n.left, *n.comparators])]


@pytest.mark.parametrize("path", GRAPH_FILES, ids=lambda p: str(p.relative_to(GRAPH)))
def test_graph_goes_through_the_backend_protocol(path):
    tree = ast.parse(path.read_text())
    bad = _graph_reaches(tree, path)
    assert not bad, f"{path.name} imports {bad}: ask get_backend(graph.device) (backend/protocol.py)"
    branches = _device_names(tree)
    assert not branches, f"{path.name} branches on a device name (lines {branches}): make it a Backend hook"


def test_the_graph_check_sees_a_backend_module_and_a_device_branch():
    path = GRAPH / "passes" / "example.py"
    tree = ast.parse("from ...backend import get_backend\nfrom ...backend.protocol import Unfit\n"
                     "from ...backend.webgpu import optim_group\nfrom ...backend.numpy.backend import takes_out\n"
                     "from ...backend.numpy import replay\nif graph.device != 'webgpu':\n    pass\n")
    assert _graph_reaches(tree, path) == ["webgrad.backend.webgpu", "webgrad.backend.webgpu.optim_group",
                                          "webgrad.backend.numpy.backend", "webgrad.backend.numpy.backend.takes_out",
                                          "webgrad.backend.numpy", "webgrad.backend.numpy.replay"]
    assert _device_names(tree) == [6]


def test_both_backends_implement_the_protocol():
    from webgrad.backend.numpy import NumpyBackend
    from webgrad.backend.protocol import Backend
    from webgrad.backend.webgpu.backend import WebGPUBackend

    wanted = {name for name in [*vars(Backend), *Backend.__annotations__] if not name.startswith("_")}
    assert {"passes", "can_fuse", "record", "run"} <= wanted
    for backend in (NumpyBackend, WebGPUBackend):
        missing = sorted(name for name in wanted if not hasattr(backend, name))
        assert not missing, f"{backend.__name__} lacks {missing} of backend/protocol.py's Backend"
    from webgrad.graph.passes import PASSES
    for backend in (NumpyBackend, WebGPUBackend):
        assert set(backend.passes) <= set(PASSES), backend.__name__


CORE = BACKEND.parent
# An op is classified by its kind (op.kind) or compared as a record, never by its WGSL record
# or its name: reading either above the backends is how passes drifted apart before.
WGSL_READ = re.compile(r"""impls\s*(\[\s*["']wgsl["']\s*\]|\.get\(\s*["']wgsl["'])""")
NAME_TEST = re.compile(r"""\bop\.name\s*(==|!=|\bin\b)|\.name\s*==\s*["'](?!float|int|bool|uint)""")


def _matches(pattern, files):
    return [f"{path.name}:{n}" for path in files
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


def test_no_layer_above_the_backends_reads_wgsl_records_or_tests_op_names():
    above = [p for p in CORE.rglob("*.py") if BACKEND not in p.parents]
    found = _matches(WGSL_READ, above)
    assert not found, f"{found}: classify ops by op.kind; the kernel record is the backend's"
    classifying = [*GRAPH.rglob("*.py"), *(CORE / "profiler").rglob("*.py"), *BACKEND.glob("numpy/*.py")]
    found = _matches(NAME_TEST, classifying)
    assert not found, f"{found}: compare ops as records (op is MATMUL) or by kind, not by name"


def test_the_op_checks_see_a_wgsl_read_and_a_name_test(tmp_path):
    path = tmp_path / "example.py"
    path.write_text('x = node.op.impls.get("wgsl")\nif node.op.name == "matmul":\n    pass\n'
                    'y = node.op.impls["wgsl"]\nz = v.dtype.name == "float32"\n')
    assert _matches(WGSL_READ, [path]) == ["example.py:1", "example.py:4"]
    assert _matches(NAME_TEST, [path]) == ["example.py:2"]
