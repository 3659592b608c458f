"""The full-text index's merge setting: given to new stores and to older files at open, and
without effect on what a search finds or how it scores it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded.rows import FTS_AUTOMERGE
from graphmem.models import Filter, TextQuery

pytestmark = pytest.mark.embedded("the embedded store's FTS5 settings in its SQLite file")

_WORDS = "tea kettle green oolong leaf water boil cup steep pot jasmine milk honey lemon".split()


def _automerge(path: Path) -> Any:
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT v FROM memory_fts_config WHERE k = 'automerge'").fetchone()
    return None if row is None else row[0]


def _segments(mem: GraphMemory) -> bytes:
    """The index's structure record (its segments by level)."""
    db = mem.backend._db  # type: ignore[attr-defined]
    block: bytes = db.execute("SELECT block FROM memory_fts_data WHERE id = 10").fetchone()[0]
    return block


def _items(batch: int) -> list[dict[str, Any]]:
    out = []
    for i in range(20):
        n = batch * 20 + i
        words = [_WORDS[(n * 7 + j * j) % len(_WORDS)] for j in range(3 + n % 9)]
        out.append({"content": " ".join(words) + f" note{n % 37}", "agent_id": f"a{n % 3}"})
    return out


def test_a_new_store_merges_its_index_by_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    GraphMemory.open(str(path), embedder=None).close()
    assert _automerge(path) == FTS_AUTOMERGE != 4  # FTS5's own default is 4


def test_an_older_file_gets_the_setting_at_open(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember("green tea", agent_id="a")
    with sqlite3.connect(path) as db:  # as graphmem made the file before the setting
        db.execute("DELETE FROM memory_fts_config WHERE k = 'automerge'")
    assert _automerge(path) is None
    with GraphMemory.open(str(path), embedder=None) as mem:
        assert _automerge(path) == FTS_AUTOMERGE
        assert [h.node.content for h in mem.backend.search_text(TextQuery(text="tea", k=5))] == [
            "green tea"
        ]


def test_the_setting_changes_no_hit_and_no_score(tmp_path: Path) -> None:
    """Two stores of the same memories written by the same batches, one index merged by
    FTS5's default: their segments differ, every search's hits and BM25 scores do not."""
    mems = []
    for name, setting in (("ours", None), ("default", 4)):
        mem = GraphMemory.open(str(tmp_path / f"{name}.db"), embedder=None)
        if setting is not None:
            mem.backend._db.execute(  # type: ignore[attr-defined]
                "INSERT INTO memory_fts(memory_fts, rank) VALUES ('automerge', ?)", (setting,)
            )
        for b in range(40):
            mem.remember_many(_items(b))
        mems.append(mem)
    ours, default = mems
    try:
        assert _segments(ours) != _segments(default)
        queries = [*_WORDS, "green tea", "milk honey lemon", "note3 pot", "boil water cup"]
        found: set[str] = set()
        for q in queries:
            for k in (3, 10, 50):
                query = TextQuery(text=q, k=k, filter=Filter.for_memories())
                got = [(h.node.content, h.score) for h in ours.backend.search_text(query)]
                want = [(h.node.content, h.score) for h in default.backend.search_text(query)]
                assert got == want, q
                found.update(c for c, _s in got)
        assert len(found) > 200
    finally:
        for mem in mems:
            mem.close()
