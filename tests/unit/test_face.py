"""The face of the house: a thin GraphMemory, one Protocol, no pass-through facades."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from graphmem.aio import AsyncGraphMemory
from graphmem.memory import GraphMemory
from graphmem.null import NullMemory
from graphmem.protocol import MemoryAPI

PKG = Path(__file__).resolve().parents[2] / "graphmem"


def _class_body(module: str, name: str) -> list[ast.stmt]:
    tree = ast.parse((PKG / module).read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name).body


def _is_stub(f: ast.FunctionDef) -> bool:
    body = f.body[1:] if isinstance(f.body[0], ast.Expr) and len(f.body) > 1 else f.body
    return all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) for s in body)


def _graph_memory_methods() -> list[ast.FunctionDef]:
    # GraphMemory's own defs, and the verbs it takes whole from MemoryAPI (``get``'s one
    # dispatch of an id or a list, with its overloads), not the Protocol's stubs
    inherited = [
        f
        for f in _class_body("protocol.py", "MemoryAPI")
        if isinstance(f, ast.FunctionDef) and not _is_stub(f)
    ]
    taken = {f.name for f in inherited}
    inherited += [
        f
        for f in _class_body("protocol.py", "MemoryAPI")
        if isinstance(f, ast.FunctionDef) and f.name in taken and _is_stub(f)
    ]
    return [
        f
        for f in [*_class_body("memory.py", "GraphMemory"), *inherited]
        if isinstance(f, ast.FunctionDef)
        and not f.name.startswith("_")
        and not any(
            (isinstance(d, ast.Name) and d.id == "property")
            or (isinstance(d, ast.Attribute) and d.attr == "setter")
            for d in f.decorator_list
        )
    ]


def test_graph_memory_keeps_at_most_twenty_public_methods() -> None:
    # counted as the before-stop hook counts them: every public def, @overload stubs too
    methods = _graph_memory_methods()
    assert {"open", "remember", "recall", "context", "get", "forget"} <= {f.name for f in methods}
    assert len(methods) <= 20, sorted(f.name for f in methods)


def test_no_public_method_is_a_one_line_delegate_to_a_sub_object() -> None:
    delegates = []
    for f in _graph_memory_methods():
        body = f.body[1:] if isinstance(f.body[0], ast.Expr) else f.body
        if (
            len(body) == 1
            and isinstance(body[0], ast.Return | ast.Expr)
            and isinstance(body[0].value, ast.Call)
            and isinstance(body[0].value.func, ast.Attribute)
            and isinstance(body[0].value.func.value, ast.Attribute)
        ):
            delegates.append(f.name)
    assert not delegates


@pytest.mark.parametrize("cls", [NullMemory, AsyncGraphMemory])
def test_facades_answer_no_unknown_name(cls: type) -> None:
    assert "__getattr__" not in vars(cls)
    source = inspect.getsource(inspect.getmodule(cls))  # type: ignore[arg-type]
    assert "__getattr__" not in source


def test_null_memory_is_a_memory_api_and_refuses_typos() -> None:
    null = NullMemory()
    assert isinstance(null, MemoryAPI)
    with pytest.raises(AttributeError):
        null.remmeber("x")  # type: ignore[attr-defined]


def test_runs_no_longer_import_the_memory_module() -> None:
    tree = ast.parse((PKG / "runs.py").read_text(encoding="utf-8"))
    imported = {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module is not None
    }
    assert "graphmem.memory" not in imported
    assert "_run_lock" not in (PKG / "runs.py").read_text(encoding="utf-8")


def test_graph_memory_sub_objects_are_those_of_the_face(tmp_path: Path) -> None:
    with GraphMemory.open(str(tmp_path / "f.db"), embedder=None) as mem:
        parts = "runs agents org namespaces lifecycle knowledge log vectors transfer writes"
        for part in parts.split():
            assert getattr(mem, part) is not None
            assert type(getattr(NullMemory(), part)).__name__.startswith("Null")
            assert type(getattr(AsyncGraphMemory(mem), part)).__name__.startswith("Async")
        assert mem.vectors.background is False and mem.writes.last_reconcile is None
