"""The package's import graph: no cycles (imports inside functions included), and its packages as layers.

Read from the sources (``ast``), so nothing is imported. Each package is a
layer, listed in :data:`LAYERS` from the ground up; a module imports its own
layer and those below it, never one above (DESIGN.md: front end -> op ->
rules -> plan -> engine, and no layer reaches back up).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "datamove"


def _modules() -> Dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    for stub in PACKAGE.rglob("*.pyi"):  # extension modules (the compiled core): leaves, known by their stubs
        found.setdefault(".".join(stub.relative_to(PACKAGE.parent).with_suffix("").parts), stub)
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Set[str]:
    """The package's modules that ``name`` imports, anywhere in its source (``from . import x`` is ``x``)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES]
            found.update(subs if len(subs) == len(node.names) else subs + ([base] if base in MODULES else []))
    found.discard(name)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles() -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


#: The layers from the ground up: (name, the modules and packages that form it). Every module is on one.
LAYERS = [
    ("the base", ["datamove.errors", "datamove._native"]),
    ("the rules", ["datamove.rules"]),
    ("the plans and the registry of the ops", ["datamove.plans", "datamove.opset"]),
    ("PyTorch's machinery", ["datamove.pytorch"]),
    ("the array libraries", ["datamove.arrays"]),
    ("the engines", ["datamove.engines"]),
    ("the dispatch", ["datamove.dispatch"]),
    ("the operations", ["datamove.ops"]),
    ("the front ends", ["datamove", "datamove.shapes", "datamove.typing", "datamove.nn", "datamove.keras",
                        "datamove.compat", "datamove.ir"]),
    ("the benchmarks", ["datamove.benchmarks"]),
    ("the command line", ["datamove.cli", "datamove.__main__"]),
]


def layer(module: str) -> int:
    """The index in :data:`LAYERS` of the layer that holds ``module`` (the longest prefix names it)."""
    best, found = -1, -1
    for i, (_, members) in enumerate(LAYERS):
        for member in members:
            if (module == member or module.startswith(member + ".")) and len(member) > best:
                best, found = len(member), i
    assert found >= 0, f"{module} is on no layer: add it to LAYERS"
    return found


def _climbs() -> List[str]:
    return [f"{name} ({LAYERS[layer(name)][0]}) imports {m} ({LAYERS[layer(m)][0]})"
            for name, imports in sorted(GRAPH.items()) for m in sorted(imports) if layer(m) > layer(name)]


def test_the_graph_is_read():
    assert {"datamove.ops", "datamove.rules.shapes", "datamove.engines.native.engine", "datamove.ir.reader"} <= set(GRAPH)
    assert "datamove.rules.shapes" in GRAPH["datamove.dispatch.numpy_calls"]
    assert "datamove.engines.call" in GRAPH["datamove.dispatch.calls"] and "datamove.plans.views" in GRAPH["datamove.engines.call"]


def test_no_import_cycles():
    assert _cycles() == []


def test_a_cycle_would_be_found(monkeypatch):
    monkeypatch.setitem(GRAPH, "datamove.rules.shapes", GRAPH["datamove.rules.shapes"] | {"datamove.ops"})
    assert any({"datamove.ops", "datamove.rules.shapes"} <= set(c) for c in _cycles())


def test_every_module_is_on_a_layer():
    for name in GRAPH:
        layer(name)


def test_no_import_climbs_to_a_layer_above():
    assert _climbs() == []


def test_a_climb_would_be_found(monkeypatch):
    monkeypatch.setitem(GRAPH, "datamove.engines.route", GRAPH["datamove.engines.route"] | {"datamove.dispatch.recipes"})
    assert _climbs() == ["datamove.engines.route (the engines) imports datamove.dispatch.recipes (the dispatch)"]


def test_the_benchmarks_are_outside_import_datamove():
    # only the command line (datamove bench) imports them; `import datamove` never does
    users = {name for name, imports in GRAPH.items() if any(m.startswith("datamove.benchmarks") for m in imports)}
    assert {u for u in users if not u.startswith(("datamove.benchmarks", "datamove.cli"))} == set()


def test_the_rules_import_only_the_base():
    for name, imports in GRAPH.items():
        if name.startswith("datamove.rules"):
            assert all(m.startswith("datamove.rules") or m == "datamove.errors" for m in imports), name


def test_custom_ops_import_no_engine():
    assert not {m for m in GRAPH["datamove.pytorch.custom_ops"] if m.startswith(("datamove.engines", "datamove.dispatch"))}
    assert "datamove.ops" not in GRAPH["datamove.pytorch.custom_ops"]


def _defined(tree: ast.Module) -> Set[str]:
    names: Set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.If):  # (TYPE_CHECKING blocks and the like)
            names.update(_defined(ast.Module(body=node.body + node.orelse, type_ignores=[])))
    return names


def test_every_name_a_module_exports_is_defined():
    # a module's __all__ names only what it defines or imports (a name moved away leaves no stale export)
    for name, path in MODULES.items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        exported = [node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)]
        if not exported or any(isinstance(n, ast.ImportFrom) and n.names[0].name == "*" for n in tree.body):
            continue
        listed = exported[0]
        if not isinstance(listed, (ast.List, ast.Tuple)):
            continue
        missing = [e.value for e in listed.elts if isinstance(e, ast.Constant) and e.value not in _defined(tree)]
        assert not missing, f"{name}.__all__ names what it does not define: {missing}"
