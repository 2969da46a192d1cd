"""Core's import graph: one intended circle, few imports hidden inside functions.

A module-level import says what a module stands on; an import inside a function usually
dodges a circle. The one circle core keeps by design is tensor <-> ops <-> autograd <->
creation (a Tensor's methods are ops, ops make Tensors, autograd records ops). Every other
circle is a layering mistake: the device registry and the random state sit below the
backends, nn's constructor recording lives with Module, the scheduler classes live apart
from torch's ``lr_scheduler`` name.

Counting: the ``ops`` package is one module; importing the top-level ``webgrad`` package
is not an edge; ``from package import submodule`` is an edge to the submodule (Python runs
a parent package's ``__init__`` for any submodule import, so it adds no dependency).
"""
import ast
from pathlib import Path

import webgrad

CORE = Path(webgrad.__file__).parent
ALLOWED_CIRCLE = {"webgrad.tensor", "webgrad.ops", "webgrad.autograd", "webgrad.creation"}
MAX_FUNCTION_IMPORTS = 60


def _module_name(path: Path, root: Path) -> str:
    parts = ["webgrad", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _collapse(name: str) -> str:
    return "webgrad.ops" if name.startswith("webgrad.ops.") else name


def _imported(node, package: list, modules: set) -> list:
    """The webgrad modules an import statement depends on."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = package[:len(package) - node.level + 1] if node.level else []
        module = ".".join(base + ([node.module] if node.module else []))
        subs = [f"{module}.{a.name}" for a in node.names]
        names = subs if all(s in modules for s in subs) else [module, *subs]
    found = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != "webgrad":
            found.append(_collapse(name))
    return found


def import_graph(root: Path = CORE) -> dict:
    """Module -> the modules it imports (anywhere in the file), for every module under root."""
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    modules = set(paths)
    graph: dict[str, set] = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = graph.setdefault(_collapse(name), set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(d for d in _imported(node, package, modules) if d != _collapse(name))
    return graph


def circles(graph: dict) -> list:
    """The strongly connected components with more than one module (Tarjan), largest first."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found: list = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in list(graph):
        if v not in index:
            visit(v)
    return sorted(found, key=len, reverse=True)


def function_imports(root: Path = CORE) -> dict:
    """File -> how many imports of webgrad modules sit inside its functions."""
    counts: dict = {}
    for path in root.rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                internal = (
                    isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("webgrad"))
                    or isinstance(node, ast.Import) and any(a.name.startswith("webgrad") for a in node.names))
                if internal:
                    name = path.relative_to(root).as_posix()
                    counts[name] = counts.get(name, 0) + 1
    return counts


def test_the_only_import_circle_is_tensor_ops_autograd_creation():
    found = circles(import_graph())
    assert all(c <= ALLOWED_CIRCLE for c in found), [sorted(c) for c in found if not c <= ALLOWED_CIRCLE]


def test_few_imports_hide_inside_functions():
    counts = function_imports()
    assert sum(counts.values()) <= MAX_FUNCTION_IMPORTS, sorted(counts.items(), key=lambda kv: -kv[1])


def test_the_census_sees_a_circle_and_a_hidden_import(tmp_path):
    """The checks can fail: a planted two-module circle and an import inside a function are counted."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    (package / "c.py").write_text("from . import a\n")
    assert [sorted(c) for c in circles(import_graph(package))] == [["webgrad.a", "webgrad.b"]]
    assert function_imports(package) == {"b.py": 1}
