"""A run's chain (bare NEXT edges) is stored as row-id pairs in ``next_edges``, any other
edge in ``edges``: every handle and every open sees the same edges, an edge moves between
the two tables when it gains or loses properties, a deleted memory's edges go, and a store
whose NEXT edges are all in ``edges`` (schema version 4 and older) reads the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.backends.base import WriteBatch
from graphmem.backends.embedded.backend import NetworkXBackend
from graphmem.models import Edge, EdgeType, Memory, NodeLabel, NodeRef
from tests.unit.test_change_log import _view

pytestmark = pytest.mark.embedded("the embedded store's NEXT edges in its SQLite file")


def _items(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"content": f"turn {i}", "agent_id": "x", "run_id": f"r{i % 2}"}
        for i in range(start, start + n)
    ]


def _tables(path: Path) -> tuple[int, int]:
    """(NEXT rows in ``edges``, rows in ``next_edges``)."""
    with sqlite3.connect(path) as db:
        [(keyed,)] = db.execute("SELECT count(*) FROM edges WHERE type = 'NEXT'")
        [(pairs,)] = db.execute("SELECT count(*) FROM next_edges")
    return keyed, pairs


def _same_as_an_open(b: Any, path: Path) -> None:
    fresh = NetworkXBackend(path)
    try:
        assert _view(b) == _view(fresh)
    finally:
        fresh.close()


def _next(a: str, b: str, **props: Any) -> Edge:
    ref = NodeRef(NodeLabel.MEMORY, a), NodeRef(NodeLabel.MEMORY, b)
    return Edge(type=EdgeType.NEXT, src=ref[0], dst=ref[1], props=props)


def test_chains_are_row_id_pairs_and_every_handle_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with (
        GraphMemory.open(str(path), embedder=None) as a,
        GraphMemory.open(str(path), embedder=None) as b,
    ):
        a.remember_many(_items(10))
        b.count()
        a.remember_many(_items(10, 10))
        assert _tables(path) == (0, 18)  # two runs of ten: nine links each
        # b catches up: the new memories and the ones they follow are logged
        assert b.count() == 20
        assert _view(b.backend) == _view(a.backend)
        # a memory changed while the one after it did not: the link between them stays
        first = a.list(limit=None, run_id="r0")[-1]
        a.update(first.id, content="turn 0, corrected")
        b.count()
        assert _view(b.backend) == _view(a.backend)
        _same_as_an_open(a.backend, path)


def test_an_edge_moves_with_its_properties_and_goes_with_its_memory(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with (
        GraphMemory.open(str(path), embedder=None) as a,
        GraphMemory.open(str(path), embedder=None) as b,
    ):
        ids = [m.id for m in a.remember_many(_items(6))]  # r0: 0, 2, 4; r1: 1, 3, 5
        b.count()
        a.backend.write(WriteBatch(edges=[_next(ids[0], ids[2], why="kept")]))
        assert _tables(path) == (1, 3)
        b.count()
        assert _view(b.backend) == _view(a.backend)
        a.backend.write(WriteBatch(edges=[_next(ids[0], ids[2])]))
        assert _tables(path) == (0, 4)
        a.forget(ids[2])  # the middle of r0's chain: both its links go
        with sqlite3.connect(path) as db:
            rids = {r for (r,) in db.execute("SELECT rid FROM nodes")}
            held = db.execute("SELECT dst, src FROM next_edges").fetchall()
        assert all(d in rids and s in rids for d, s in held)
        b.count()
        assert _view(b.backend) == _view(a.backend)
        _same_as_an_open(a.backend, path)


def test_a_store_with_its_chains_in_edges_reads_the_same_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember_many(_items(8))
        before = _view(mem.backend)
    # as an older graphmem left it: every NEXT edge a keyed row of ``edges``
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO edges(src, type, dst, props) SELECT s.label || ':' || s.id, 'NEXT', "
            "d.label || ':' || d.id, '{}' FROM next_edges "
            "JOIN nodes s ON s.rid = next_edges.src JOIN nodes d ON d.rid = next_edges.dst"
        )
        db.execute("DROP TABLE next_edges")
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    with (
        GraphMemory.open(str(path), embedder=None) as a,
        GraphMemory.open(str(path), embedder=None) as b,
    ):
        assert _view(a.backend) == before
        a.remember_many(_items(4, 8))
        assert _tables(path) == (6, 4)
        assert b.count() == 12
        assert _view(b.backend) == _view(a.backend)
        _same_as_an_open(a.backend, path)


def test_a_delete_of_links_the_store_does_not_hold_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        ids = [m.id for m in mem.remember_many(_items(4))]
        before = _view(mem.backend)
        mem.backend.write(WriteBatch(delete_edges=[_next("nope", "nor"), _next(ids[0], "nor")]))
        assert _view(mem.backend) == before
        # a link made and unmade by one write, to a memory that write makes
        new = Memory(content="later", agent_id="x")
        mem.backend.write(
            WriteBatch(
                nodes=[new],
                edges=[_next(ids[3], new.id)],
                delete_edges=[_next(ids[3], new.id)],
            )
        )
        assert len(mem.get([new.id])) == 1
        _same_as_an_open(mem.backend, path)
