"""Every test that opens a store follows the backend switch (``--backend neo4j``), or says
why it cannot.

A test reaches the chosen backend through the ``backend``/``mem`` fixtures (the contract
suite) or the ``stores`` factory (API tests that open their own stores, tests/conftest.py).
A test that opens a store itself — ``GraphMemory.open(...)``, ``GraphMemory(NetworkXBackend(
...))``, ``AsyncGraphMemory.open(...)`` — tests the embedded store (its SQLite file, its
journal, several processes on one file) and carries ``@pytest.mark.embedded("why")``, on
the test or on the module (``pytestmark``). A test that already takes ``backend``/``mem``
may open a second store beside it (an export read back elsewhere): its first store follows
the switch.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
#: the switch's own machinery, and the Neo4j suite (which opens Neo4j stores on purpose)
EXEMPT = {"conftest.py", "neo4j_support.py"}  # tests/ itself; a folder's conftest is checked
FOLLOWING = {"backend", "mem", "stores", "store_mem"}


def _opens_a_store(node: ast.AST) -> bool:
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        f = call.func
        if isinstance(f, ast.Name) and f.id == "NetworkXBackend":
            return True
        if (
            isinstance(f, ast.Attribute)
            and f.attr == "open"
            and isinstance(f.value, ast.Name)
            and f.value.id in ("GraphMemory", "AsyncGraphMemory")
        ):
            return True
    return False


def _embedded_mark(decorators: list[ast.expr]) -> bool:
    """``pytest.mark.embedded("a reason")``: the mark, with a reason that says something."""
    for d in decorators:
        if (
            isinstance(d, ast.Call)
            and isinstance(d.func, ast.Attribute)
            and d.func.attr == "embedded"
            and d.args
            and isinstance(d.args[0], ast.Constant)
            and len(str(d.args[0].value)) > 15
        ):
            return True
    return False


def _module_marked(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            value = node.value
            marks = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
            if _embedded_mark(marks):
                return True
    return False


def _unswitched(source: str) -> list[str]:
    """The functions of a test module that open a store off the switch, unexplained: tests
    without the mark, and fixtures or helpers (which cannot carry one) of an unmarked
    module."""
    tree = ast.parse(source)
    if _module_marked(tree):
        return []
    found = []
    tops = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for node in [*tree.body, *(s for c in tops for s in c.body)]:
        # a function nested in a test belongs to that test
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not _opens_a_store(node):
            continue
        params = {a.arg for a in node.args.args + node.args.kwonlyargs}
        if params & FOLLOWING:
            continue
        if node.name.startswith("test_") and _embedded_mark(node.decorator_list):
            continue
        found.append(node.name)
    return found


def test_every_store_a_test_opens_follows_the_switch_or_says_why_not() -> None:
    paths = [
        p
        for p in sorted(TESTS.rglob("*.py"))
        if p.relative_to(TESTS).as_posix() not in EXEMPT
        and p.parent.name != "neo4j"
        and (p.name.startswith("test_") or p.name == "conftest.py")
    ]
    assert len(paths) > 50
    unswitched = [
        f"{p.relative_to(TESTS.parent)}::{name}"
        for p in paths
        for name in _unswitched(p.read_text(encoding="utf-8"))
    ]
    assert not unswitched, "\n".join(unswitched)


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ("def test_a(tmp_path):\n    GraphMemory.open(str(tmp_path / 'x.db'))\n", True),
        ("def test_a(stores):\n    stores.open()\n", False),
        ("def test_a(mem):\n    GraphMemory.open('memory://')\n", False),
        ("@pytest.fixture\ndef mem():\n    return GraphMemory.open('memory://')\n", True),
        (
            "@pytest.mark.embedded('reopens the SQLite file')\n"
            "def test_a(tmp_path):\n    NetworkXBackend(tmp_path / 'x.db')\n",
            False,
        ),
        ("@pytest.mark.embedded('x')\ndef test_a(tmp_path):\n    NetworkXBackend(p)\n", True),
        (
            "pytestmark = pytest.mark.embedded('the journal of one SQLite file')\n"
            "def test_a(tmp_path):\n    GraphMemory.open(p)\n",
            False,
        ),
    ],
)
def test_the_check_tells_switched_from_unswitched(source: str, flagged: bool) -> None:
    assert bool(_unswitched(source)) is flagged
