"""Layers point down: ops -> backends. The WebGPU backend works on its arrays only;
what it needs from above (positions, views, kernel records) the op computes and
passes in. So no module under backend/webgpu imports webgrad's ops, tensor or
creation modules, or makes a Tensor."""
import ast
from pathlib import Path

import pytest

import webgrad

BACKEND = Path(webgrad.__file__).parent / "backend"
FORBIDDEN = ("ops", "tensor", "creation")
FILES = sorted(BACKEND.glob("webgpu/*.py")) + [BACKEND / "numpy_backend.py"]


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
