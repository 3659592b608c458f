"""No import cycle in the package: the modules form layers, each importing only those below.

The graph is built from the source, not by importing: an edge for every import a module
runs when it is imported (module level, including inside ``if``/``try``), and none for
imports inside functions (deliberately lazy) or under ``if TYPE_CHECKING`` (annotations
only). ``from pkg import sub`` where ``sub`` is a module is an edge to ``pkg`` as well:
it reads the package's namespace, so it needs the package's ``__init__`` first.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "graphmem"


def _module_names() -> dict[str, Path]:
    names = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _imports_at_import_time(path: Path, modules: set[str]) -> set[str]:
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module in modules:
                    found.add(node.module)
                    found.update(
                        f"{node.module}.{a.name}"
                        for a in node.names
                        if f"{node.module}.{a.name}" in modules
                    )
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def _import_graph() -> dict[str, set[str]]:
    modules = _module_names()
    # a package's __init__ importing its own submodules (``from pkg import sub``) is no cycle
    return {
        name: _imports_at_import_time(path, set(modules)) - {name} for name, path in modules.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
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
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_the_checker_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_the_package() -> None:
    graph = _import_graph()
    assert "graphmem.memory" in graph and "graphmem.backends.embedded.backend" in graph
    assert "graphmem.runs" in graph["graphmem.memory"]


def test_no_import_cycle_in_graphmem() -> None:
    assert _cycles(_import_graph()) == []
