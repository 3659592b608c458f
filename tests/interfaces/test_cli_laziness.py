"""A cold ``graphmem`` command loads only what it uses (issue 21: cold recall ≤ 1 s).

Each check runs a new interpreter and lists the heavy modules it ended up with; the time
itself is measured by benchmarks/cold_start.py, never here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
    "hnswlib",
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
