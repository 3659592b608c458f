"""The embedded store's change log: one row a write, positions that count changed keys,
and stores written before that form (schema version 2, one row a key) read the same."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded import journal as journal_module
from graphmem.backends.embedded.rows import SCHEMA_VERSION
from graphmem.errors import BackendUnavailable
from tests.unit.test_state_file import _open_both
from tests.unit.test_state_file import _view as _whole_view

pytestmark = pytest.mark.embedded("the embedded store's change log in its SQLite file")


def _items(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"content": f"note {i} about tea", "agent_id": "a", "run_id": f"r{i % 3}", "tags": ["t"]}
        for i in range(start, start + n)
    ]


def _view(b: Any) -> dict[str, Any]:
    """What an open builds (see test_state_file), less where this handle would put its next
    row: a handle that caught up learns that from the file at its next write."""
    view = _whole_view(b)
    del view["next_rid"]
    return view


def _log(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT seq, key FROM changes ORDER BY seq").fetchall()


def _as_version_2(path: Path) -> None:
    """Rewrite the store's change log as graphmem wrote it before version 3: a row a key,
    each at its position."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT seq, key FROM changes ORDER BY seq").fetchall()
        db.execute("DELETE FROM changes")
        for end, text in rows:
            keys = json.loads(text) if text.startswith("[") else [text]
            db.executemany(
                "INSERT INTO changes(seq, key) VALUES (?, ?)",
                [(end - len(keys) + 1 + i, k) for i, k in enumerate(keys)],
            )
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def test_a_write_logs_one_row_whose_position_counts_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        made = mem.remember_many(_items(30))
        rows = _log(path)
        assert len(rows) == 1
        seq, text = rows[0]
        keys = json.loads(text)
        # the memories, their runs, the agent and the tag, each once
        assert {f"Memory:{m.id}" for m in made} <= set(keys)
        assert {"Run:r0", "Run:r1", "Run:r2"} <= set(keys)
        assert len(keys) == len(set(keys)) == seq
        mem.remember("one more", agent_id="a")
        seq2, _ = _log(path)[-1]
        assert seq2 > seq


def test_another_handle_catches_up_through_rows_of_many_keys(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    with (
        GraphMemory.open(path, embedder=None) as writer,
        GraphMemory.open(path, embedder=None) as reader,
    ):
        writer.remember_many(_items(20))
        assert reader.count() == 20
        writer.remember_many(_items(20, 20))
        first = writer.list(limit=1, run_id="r1")[0]
        writer.forget(first.id)
        assert reader.count() == 39
        assert _view(reader.backend) == _view(writer.backend)


def test_a_store_of_version_2_opens_the_same_and_its_handles_sync(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember_many(_items(40))
        mem.remember("alone", agent_id="b")
        before = _view(mem.backend)
    _as_version_2(path)
    old_log = _log(path)
    assert len(old_log) > 2 and all(not k.startswith("[") for _s, k in old_log)

    with (
        GraphMemory.open(str(path), embedder=None) as a,
        GraphMemory.open(str(path), embedder=None) as b,
    ):
        assert _view(a.backend) == before
        with sqlite3.connect(path) as db:
            [(version,)] = db.execute("SELECT value FROM meta WHERE key = 'schema_version'")
        assert version == SCHEMA_VERSION
        # b saw the old rows; a logs new ones after them; b catches up from the mix
        a.remember_many(_items(10, 40))
        assert b.count() == 51
        assert _view(b.backend) == _view(a.backend)
    assert _log(path)[: len(old_log)] == old_log


def test_a_state_file_made_at_a_version_2_position_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "STATE_MIN_NODES", 20)
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        for b in range(3):
            mem.remember_many(_items(15, 15 * b))
    # the same positions and keys, a row each: the position the file recorded still holds
    _as_version_2(path)
    used, via_state, via_rows = _open_both(path)
    assert used
    assert via_state == via_rows


def test_a_store_of_an_unknown_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    GraphMemory.open(str(path), embedder=None).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    with pytest.raises(BackendUnavailable, match="schema version 9"):
        GraphMemory.open(str(path), embedder=None)
