"""The notebooks in notebooks/ run top to bottom without errors, on the embedded backend;
the README's code tour runs as printed and its notebook table matches notebooks/.

Each notebook is executed by nbclient with the ``python3`` kernel in a temporary working
directory (so nothing it writes lands in the repository) and with matplotlib's
non-interactive Agg backend. Besides "no cell raised", each test checks a few things the
notebook must show: its pictures, and the results a reader is told to expect.

Notebook 04 needs no server: without a Neo4j URL in the environment (``GRAPHMEM_URL``, else
``NEO4J_URI``) every cell that would talk to Neo4j says how to start one and is skipped. With
one it runs against that server (it
only writes to an empty database, or to any one when ``GRAPHMEM_NEO4J_ALLOW_WIPE=1``).
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from graphmem.config import neo4j_from_env

nbformat = pytest.importorskip(
    "nbformat", reason="the notebook tests need the notebooks extra: pip install -e '.[notebooks]'"
)
nbclient = pytest.importorskip(
    "nbclient", reason="the notebook tests need the notebooks extra: pip install -e '.[notebooks]'"
)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ALL = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.slow


def _kernel_available() -> str | None:
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        KernelSpecManager().get_kernel_spec("python3")
    except Exception as e:  # no jupyter_client, or no python3 kernel installed
        return f"no 'python3' Jupyter kernel ({e}); pip install ipykernel"
    return None


def run_notebook(name: str, workdir: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    """Execute a notebook in ``workdir`` and return the executed notebook."""
    reason = _kernel_available()
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.delenv("GRAPHMEM_NOTEBOOK_ANTHROPIC", raising=False)  # never call the API
    monkeypatch.delenv("GRAPHMEM_NOTEBOOK_DATA", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    before = sorted(p.name for p in NOTEBOOKS.iterdir())
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()
    assert sorted(p.name for p in NOTEBOOKS.iterdir()) == before, "a notebook wrote into the repo"
    return nb


def text_of(nb: Any) -> str:
    """Everything the notebook printed or displayed as text."""
    parts: list[str] = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out["text"])
            elif "data" in out:
                parts.append(out["data"].get("text/plain", ""))
    return "\n".join(parts)


def pngs(nb: Any) -> list[bytes]:
    """The PNG pictures the notebook displayed."""
    return [
        base64.b64decode(out["data"]["image/png"])
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if "data" in out and "image/png" in out["data"]
    ]


def errors(nb: Any) -> list[str]:
    return [
        f"{out['ename']}: {out['evalue']}"
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]


# -- the committed files ------------------------------------------------------------------


def test_the_four_notebooks_exist() -> None:
    assert ALL == [
        "01_quickstart.ipynb",
        "02_explore_memory_graph.ipynb",
        "03_consolidation_and_lifecycle.ipynb",
        "04_neo4j.ipynb",
    ]


@pytest.mark.parametrize("name", ALL)
def test_committed_without_outputs(name: str) -> None:
    """Committed notebooks are valid, use the python3 kernel, and carry no outputs."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "a notebook without code"
    for cell in code:
        assert cell.get("outputs") == [], f"{name}: a cell was committed with outputs"
        assert cell.get("execution_count") is None, f"{name}: a cell was committed executed"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


# -- executing them -----------------------------------------------------------------------


def test_01_quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = run_notebook("01_quickstart.ipynb", tmp_path, monkeypatch)
    out = text_of(nb)
    assert not errors(nb)
    assert (tmp_path / "quickstart.db").is_file()  # the embedded store, in the working dir
    assert "history survives: ['superseded', 'superseded', 'active']" in out
    assert "InvalidInput: item 0" in out and "memories stored: 6" in out
    assert "Conflict: memory" in out
    assert "['Alice prefers tea, never coffee.']" in out  # recall as_of the first version
    assert "would delete 3 memories" in out
    assert "Booked Prado for two on Friday at 20:00." in out
    assert all(p.startswith(PNG_MAGIC) for p in pngs(nb)) and len(pngs(nb)) >= 1


@pytest.mark.parametrize("data", ["auto", "team"])
def test_02_explore_memory_graph(
    data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs on LoCoMo when ../shared/data/locomo_dev.json is there ("auto"), and on the
    generated team scenario (the fallback when the file is absent)."""
    nb = run_notebook(
        "02_explore_memory_graph.ipynb", tmp_path, monkeypatch, GRAPHMEM_NOTEBOOK_DATA=data
    )
    out = text_of(nb)
    assert not errors(nb)
    if data == "team":
        assert "data: generated team scenario" in out
    # neighbourhood, timelines, provenance tree, tag co-occurrence, centrality
    images = pngs(nb)
    assert len(images) >= 5 and all(p.startswith(PNG_MAGIC) for p in images)
    assert "merged memories written: 0" not in out
    html = tmp_path / "memory_graph.html"
    assert html.is_file()
    page = html.read_text(encoding="utf-8")
    assert "vis-network" in page or "vis.Network" in page  # the library is inlined
    nodes, _ = json.JSONDecoder().raw_decode(page.split("nodes = new vis.DataSet(", 1)[1])
    assert {n["group"] for n in nodes} >= {"Memory", "Run", "Agent"}


def test_03_consolidation_and_lifecycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = run_notebook("03_consolidation_and_lifecycle.ipynb", tmp_path, monkeypatch)
    out = text_of(nb)
    assert not errors(nb)
    assert len(pngs(nb)) >= 4  # decay curves, relevance bars, before/after, status bars
    assert "dry run: {'expire:archive': 1" in out
    assert "newer memory says 'alice' lives in 'bergen', not 'oslo'" in out
    assert "unmerge would restore 2 sources" in out
    assert "Not calling Claude" in out
    assert list(tmp_path.iterdir()) == []  # memory:// only


def test_04_neo4j(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # with a live server the notebook removes what it migrated into an empty database
    nb = run_notebook("04_neo4j.ipynb", tmp_path, monkeypatch, GRAPHMEM_NOTEBOOK_NEO4J_CLEANUP="1")
    out = text_of(nb)
    assert not errors(nb)
    assert "migration verified: True" in out  # embedded -> embedded always runs
    if neo4j_from_env() is None:
        assert "skipped: no Neo4j server" in out


# -- the README's walk-through ------------------------------------------------------------

README = NOTEBOOKS.parent / "README.md"


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def test_readme_lists_every_notebook() -> None:
    section = _section("Notebooks")
    listed = sorted(set(re.findall(r"`(\d\d_[a-z0-9_]+\.ipynb)`", section)))
    assert listed == ALL


def test_readme_python_tour_runs_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The "Python API in 20 lines" block, executed verbatim in an empty directory."""
    section = _section("The Python API in 20 lines")
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) <= 20
    monkeypatch.chdir(tmp_path)
    for key in list(os.environ):  # as a new user runs it: no store named by the environment
        if key.startswith(("GRAPHMEM_", "NEO4J_")):
            monkeypatch.delenv(key)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    # recalled (the current version, never the superseded one), then in the context block
    assert out.count("Alice prefers green tea") >= 2 and "Alice prefers tea" not in out
    assert (tmp_path / "graphmem.db").is_file() and (tmp_path / "backup.jsonl").is_file()
    lines = (tmp_path / "backup.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "graphmem-jsonl"


def test_readme_lists_every_browser_query() -> None:
    # the Neo4j guide moved from the README to docs/neo4j.md
    guide = (NOTEBOOKS.parent / "docs" / "neo4j.md").read_text(encoding="utf-8")
    section = guide[guide.index("\n## Neo4j and Neo4j Browser\n") :]
    listed = sorted(set(re.findall(r"`([a-z_]+\.cypher)`", section)))
    files = sorted(p.name for p in (NOTEBOOKS.parent / "cypher" / "browser").glob("*.cypher"))
    assert listed == files
