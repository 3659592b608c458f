"""Where a run's chain ends is a row of its own in the store (``run_heads``), overriding
the run's row: every handle and every open sees the chain end last set, a run written whole
says its own, a deleted run's head goes with it, and a store without such rows (schema
version 3 and older) opens the same and its chains go on without a fork."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from graphmem import GraphMemory
from graphmem.backends.base import WriteBatch
from graphmem.backends.embedded.backend import NetworkXBackend
from graphmem.models import Run
from tests.unit.test_change_log import _as_version_2, _view

pytestmark = pytest.mark.embedded("the embedded store's run heads in its SQLite file")


def _chain(mem: GraphMemory, run_id: str) -> list[str]:
    """The run's memories in NEXT order from its first, checking that none forks."""
    b = mem.backend
    g = b.graph  # type: ignore[attr-defined]
    ids = {m.id for m in mem.list(limit=None, run_id=run_id)}
    firsts = [
        i for i in ids if not any(t == "NEXT" for _s, _d, t in g.in_edges(f"Memory:{i}", keys=True))
    ]
    assert len(firsts) == 1
    out = [firsts[0]]
    while True:
        nxt = [d for _s, d, t in g.out_edges(f"Memory:{out[-1]}", keys=True) if t == "NEXT"]
        assert len(nxt) <= 1
        if not nxt:
            return out
        out.append(nxt[0][len("Memory:") :])


def _heads_in_rows(path: Path) -> dict[int, tuple[int, str | None]]:
    with sqlite3.connect(path) as db:
        return {r: (c, last) for r, c, last in db.execute("SELECT * FROM run_heads")}


def test_appends_set_the_head_row_and_every_handle_and_open_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with (
        GraphMemory.open(str(path), embedder=None) as a,
        GraphMemory.open(str(path), embedder=None) as b,
    ):
        a.remember_many([{"content": f"a{i}", "agent_id": "x", "run_id": "r"} for i in range(3)])
        a.remember_many([{"content": f"b{i}", "agent_id": "x", "run_id": "r"} for i in range(3)])
        chain = _chain(a, "r")
        assert len(chain) == 6
        [run] = a.backend.get(Run, ["r"])
        assert run.last_event_id == chain[-1]
        assert len(_heads_in_rows(path)) == 1  # set in place once the run was stored
        with sqlite3.connect(path) as db:
            [(props,)] = db.execute("SELECT props FROM nodes WHERE label = 'Run'")
        assert chain[-1] not in props  # the run's own row was not rewritten
        # the other handle appends after the end it reads from the head row
        b.remember("c0", agent_id="x", run_id="r")
        assert b.backend.get(Run, ["r"]) == a.backend.get(Run, ["r"])
        assert _chain(a, "r") == [*chain, _chain(b, "r")[-1]]
        view = _view(a.backend)
    fresh = NetworkXBackend(path)
    try:
        assert _view(fresh) == view
    finally:
        fresh.close()


def test_a_run_written_whole_says_its_own_end_and_a_deleted_runs_head_goes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.runs.start(run_id="r", agent_id="x")
        mem.remember_many([{"content": f"a{i}", "agent_id": "x", "run_id": "r"} for i in range(2)])
        assert len(_heads_in_rows(path)) == 1
        ended = mem.runs.end("r")  # the run's row written whole, its end in it
        assert _heads_in_rows(path) == {}
        assert mem.backend.get(Run, ["r"]) == [ended]
        mem.runs.start(run_id="s", agent_id="x")
        mem.remember_many([{"content": f"b{i}", "agent_id": "x", "run_id": "s"} for i in range(2)])
        assert len(_heads_in_rows(path)) == 1
        mem.backend.write(WriteBatch(delete_nodes=[("Run", "s")]))
        assert _heads_in_rows(path) == {}
        view = _view(mem.backend)
    fresh = NetworkXBackend(path)
    try:
        assert _view(fresh) == view
        assert fresh.get(Run, ["r"]) == [ended]
    finally:
        fresh.close()


def test_a_store_of_version_2_keeps_its_chains_and_goes_on_without_a_fork(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember_many([{"content": f"a{i}", "agent_id": "x", "run_id": "r"} for i in range(4)])
        mem.remember_many([{"content": f"b{i}", "agent_id": "x", "run_id": "r"} for i in range(4)])
        chain = _chain(mem, "r")
        [run] = mem.backend.get(Run, ["r"])
    # as an older graphmem left it: the head in the run's row, no head rows
    with sqlite3.connect(path) as db:
        for rid, count, last in db.execute("SELECT * FROM run_heads").fetchall():
            db.execute(
                "UPDATE nodes SET props = json_set(props, '$.event_count', ?, "
                "'$.last_event_id', ?) WHERE rid = ?",
                (count, last, rid),
            )
        db.execute("DROP TABLE run_heads")
    _as_version_2(path)
    with GraphMemory.open(str(path), embedder=None) as mem:
        assert mem.backend.get(Run, ["r"]) == [run]
        assert _chain(mem, "r") == chain
        mem.remember_many([{"content": f"c{i}", "agent_id": "x", "run_id": "r"} for i in range(2)])
        assert _chain(mem, "r")[:8] == chain and len(_chain(mem, "r")) == 10
