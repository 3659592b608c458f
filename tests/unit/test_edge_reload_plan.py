"""A handle catching up reads each changed node's stored edges by an index, both ends.

The reload asks for the edges whose source or target is a changed node; without an index on
the target SQLite answers that by scanning the whole edges table once per changed key, so a
store with many stored edges (summaries, versions, the knowledge layer's) made every
catch-up after another process's batch cost keys x edges.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from graphmem.backends.embedded import journal
from graphmem.memory import GraphMemory

pytestmark = pytest.mark.embedded("the embedded store's SQLite file and its query plans")


def plan_of(db: sqlite3.Connection) -> list[str]:
    rows = db.execute("EXPLAIN QUERY PLAN " + journal.EDGES_OF_NODE, ("Memory:a", "Memory:a"))
    return [r[-1] for r in rows]


def test_the_edges_of_a_changed_node_are_found_by_index_at_both_ends(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    GraphMemory.open(str(path), embedder=None).close()
    with sqlite3.connect(path) as db:
        plan = plan_of(db)
    assert not any(step.startswith("SCAN edges") for step in plan), plan


def test_a_store_made_without_that_index_gets_it_at_open(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    mem = GraphMemory.open(str(path), embedder=None)
    a, b = mem.remember_many([{"content": "the first"}, {"content": "the second"}])
    mem.writes.link(b.id, [a.id], pass_name="summary")
    mem.close()
    with sqlite3.connect(path) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")]
        for name in names:
            if "dst" in name:
                db.execute(f"DROP INDEX {name}")
        assert any(s.startswith("SCAN edges") for s in plan_of(db))
    again = GraphMemory.open(str(path), embedder=None)
    try:
        with sqlite3.connect(path) as db:
            plan = plan_of(db)
        assert not any(step.startswith("SCAN edges") for step in plan), plan
        assert [m.id for m in again.get([a.id, b.id])] == [a.id, b.id]
    finally:
        again.close()
