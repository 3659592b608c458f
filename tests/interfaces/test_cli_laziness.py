"""A cold ``graphmem`` command loads only what it uses (issue 21: cold recall ≤ 1 s).

Each check runs a new interpreter and lists the heavy modules it ended up with; the time
itself is measured by benchmarks/cold_start.py, never here.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem import GraphMemory

#: never needed to run a command on an embedded store (networkx: only ``mem.graph``)
HEAVY = (
    "networkx",
    "torch",
    "sentence_transformers",
    "anthropic",
    "neo4j",
    "fastapi",
    "mcp",
    "uvicorn",
    "rich",
    "faiss",
    "onnx",
)


def _loaded(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=300
    )
    return list(ast.literal_eval(out.stdout.strip().splitlines()[-1]))


def _cli(*argv: str) -> str:
    return (
        "import sys\n"
        f"sys.argv = ['graphmem', *{list(argv)!r}]\n"
        "from graphmem.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
    )


def test_import_cli_loads_no_heavy_module() -> None:
    assert _loaded("import graphmem.cli") == []


@pytest.mark.embedded("a fresh interpreter runs the CLI on a store file named by --db")
def test_cold_recall_loads_no_heavy_module(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    with GraphMemory.open(db, embedder="hash") as mem:
        mem.remember("Alice met Bob in Lisbon", agent_id="a")
    assert (
        _loaded(_cli("recall", "where did Alice meet Bob?", "--db", db, "--embedder", "hash")) == []
    )


def test_the_graph_view_still_brings_networkx(tmp_path: Path) -> None:
    """networkx is imported by ``mem.graph`` only, and the view sees the stored memory."""
    db = str(tmp_path / "m.db")
    code = (
        "from graphmem import GraphMemory\n"
        f"with GraphMemory.open({db!r}, embedder=None) as mem:\n"
        "    mem.remember('Alice met Bob', agent_id='a')\n"
        "    import sys\n"
        "    assert 'networkx' not in sys.modules\n"
        "    g = mem.graph\n"
        "    assert sum(1 for _, d in g.nodes(data=True) if d['label'] == 'Memory') == 1\n"
    )
    assert _loaded(code) == ["networkx"]


def test_a_command_leaves_the_heap_to_the_exit_uncollected(tmp_path: Path) -> None:
    """The interpreter's teardown collections would walk the whole heap the imports built
    (0.1-0.3 s of CPU after the answer was printed); the command freezes it at exit, once
    per process however often ``main`` runs."""
    db = str(tmp_path / "m.db")
    code = (
        "import atexit, gc\n"
        # registered before main's hook, so it runs after it (atexit is last-in first-out)
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, flush=True))\n"
        "hooks = []\n"
        "register = atexit.register\n"
        "atexit.register = lambda fn, *a, **k: (hooks.append(fn), register(fn, *a, **k))[1]\n"
        + _cli("--version")
        + _cli("remember", "Alice met Bob", "--db", db, "--embedder", "hash")
        + "print('hooks', [f.__name__ for f in hooks if 'collection' in f.__name__])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    ).stdout.splitlines()
    assert out[-2:] == ["hooks ['_no_final_collections']", "frozen True"]


def test_the_collector_does_not_walk_what_the_cli_imports() -> None:
    """The objects ``import graphmem.cli`` builds (~40k, none garbage) end in the oldest
    generation without a collection walking them: left young, the first collections after
    the import (young, then middle generation) walked them all, ~50 ms each per command."""
    code = (
        "import gc\n"
        "import graphmem.cli\n"
        "young = len(gc.get_objects(0)) + len(gc.get_objects(1))\n"
        "print(young, len(gc.get_objects(2)), gc.get_freeze_count())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    ).stdout.split()
    young, old, frozen = map(int, out[-3:])
    assert young < 5_000 < old, (young, old)
    assert frozen == 0  # nothing is kept from the collector for good


@pytest.mark.parametrize(("given", "seen"), [(None, "4"), ("9", "9")])
def test_numpy_arrives_with_openblas_workers_that_sleep(given: str | None, seen: str) -> None:
    """OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when numpy is imported: the command line sets a
    short spin (its workers busy-waited ~0.1 s, 35-45 ms of CPU per cold command) before
    that import, and keeps a value the user set."""
    code = (
        "import os, sys\n"
        "seen = []\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'numpy':\n"
        "            seen.append(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))\n"
        "sys.meta_path.insert(0, Watch())\n"
        "import graphmem.cli\n"
        "print(seen[:1])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if given is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = given
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        env=env,
    ).stdout
    assert ast.literal_eval(out.strip().splitlines()[-1]) == [seen]
