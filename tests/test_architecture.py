"""The package's import graph: no cycles (imports inside functions included), and the layers' one-way flow.

Read from the sources (``ast``), so nothing is imported. The rules are
``../shared/DESIGN.md``'s: shapes -> plans -> engines -> ops; engines import
no operation, front end, command line or IR module; the custom ops' module
imports no engine but the PyTorch layout helper.
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


def test_the_graph_is_read():
    assert {"datamove.ops", "datamove.shapes", "datamove.engines.native_engine", "datamove.ir.reader"} <= set(GRAPH)
    assert "datamove.shapes" in GRAPH["datamove.ops"]
    assert "datamove.call" in GRAPH["datamove.ops"] and "datamove.plans" in GRAPH["datamove.call"]


def test_no_import_cycles():
    assert _cycles() == []


def test_a_cycle_would_be_found(monkeypatch):
    monkeypatch.setitem(GRAPH, "datamove.shapes", GRAPH["datamove.shapes"] | {"datamove.ops"})
    assert any({"datamove.ops", "datamove.shapes"} <= set(c) for c in _cycles())


def test_engines_import_no_layer_above_them():
    above = {"datamove.ops", "datamove.arrays", "datamove.recipes", "datamove.cli", "datamove.cli_common",
             "datamove.nn", "datamove.bench", "datamove.bench_gpu"}
    for name, imports in GRAPH.items():
        if name.startswith("datamove.engines"):
            bad = {m for m in imports if m in above or m.startswith(("datamove.compat", "datamove.ir"))}
            assert not bad, f"{name} imports {sorted(bad)}"


def test_the_rules_import_nothing_above_them():
    for name in ("datamove.dims", "datamove.params", "datamove.shapes", "datamove.plans", "datamove.formulas",
                 "datamove.opset", "datamove.errors", "datamove.typing"):
        allowed = {"datamove.dims", "datamove.params", "datamove.shapes", "datamove.plans", "datamove.errors",
                   "datamove.typing"}
        assert GRAPH[name] <= allowed, f"{name} imports {sorted(GRAPH[name] - allowed)}"


def test_custom_ops_import_no_engine_but_the_layout_helper():
    engines = {m for m in GRAPH["datamove.torch_ops"] if m.startswith("datamove.engines")}
    assert engines <= {"datamove.engines.torch_layout"}
    assert "datamove.ops" not in GRAPH["datamove.torch_ops"]
