"""What the embedded store does with a path that does not hold one of its stores: another
application's SQLite file, a store of a version it does not know, a store whose creation was
cut short. A file graphmem does not open is left exactly as it was, nothing written beside
it."""

from __future__ import annotations

import gc
import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from graphmem.backends.embedded.rows import SCHEMA
from graphmem.errors import BackendUnavailable, InvalidInput
from graphmem.memory import GraphMemory

pytestmark = pytest.mark.embedded(
    "the embedded store's SQLite file: what an open does to a file that is not one of its stores"
)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _other_app(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO users VALUES (1, 'alice')")


@pytest.mark.parametrize("meta", [None, "other shape", "key-value"])
def test_another_applications_sqlite_file_is_refused_and_left_as_it_was(
    tmp_path: Path, meta: str | None
) -> None:
    """An open of another program's database raised nothing: it added graphmem's tables,
    switched the file to WAL and took writes (a meta table of another shape left it with
    graphmem's tables and a typed error after)."""
    path = tmp_path / "app.db"
    _other_app(path)
    if meta is not None:
        with closing(sqlite3.connect(path)) as db, db:
            if meta == "other shape":
                db.execute("CREATE TABLE meta (a, b, c)")
            else:  # the same shape as graphmem's, without its rows
                db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                db.execute("INSERT INTO meta VALUES ('owner', 'app')")
    before = _digest(path)
    with pytest.raises(BackendUnavailable, match="not a graphmem store") as info:
        GraphMemory.open(str(path), embedder=None)
    assert str(path) in str(info.value)
    del info
    gc.collect()  # a connection the refusal left open would checkpoint what it wrote
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert db.execute("SELECT name FROM users").fetchall() == [("alice",)]


def test_a_store_of_an_unknown_version_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember("kept", agent_id="a")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    db.execute("DELETE FROM memory_fts_config WHERE k = 'automerge'")
    db.execute("DROP INDEX edges_by_dst")
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()
    before, beside = _digest(path), sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(BackendUnavailable, match="schema version 9"):
        GraphMemory.open(str(path), embedder=None)
    gc.collect()  # a connection the refusal left open would checkpoint what it wrote
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == beside
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


@pytest.mark.parametrize("start", ["empty file", "empty database", "cut short"])
def test_an_empty_file_or_a_store_whose_creation_was_cut_short_opens(
    tmp_path: Path, start: str
) -> None:
    path = tmp_path / "s.db"
    if start == "empty file":
        path.write_bytes(b"")
    elif start == "empty database":
        with closing(sqlite3.connect(path)) as db:
            db.execute("PRAGMA user_version = 1")  # a database file without tables
    else:  # the tables made, the process gone before the store's version was recorded
        with closing(sqlite3.connect(path)) as db:
            db.executescript(SCHEMA)
    with GraphMemory.open(str(path), embedder=None) as mem:
        m = mem.remember("a first memory", agent_id="a")
    with GraphMemory.open(str(path), embedder=None) as mem:
        assert mem.get(m.id) is not None


@pytest.mark.parametrize("target", ["store", "symlink", "wal", "shm", "lock", "state", "graph"])
def test_an_export_onto_the_stores_own_files_is_refused_and_the_store_kept(
    tmp_path: Path, target: str
) -> None:
    """``graphmem export graphmem.db`` (the default store's own name) truncated the store
    it was reading: every memory lost, the file left 43 bytes of export header."""
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        ids = {m.id for m in mem.remember_many([{"content": f"kept {i}"} for i in range(20)])}
        dest = {
            "store": path,
            "symlink": tmp_path / "link.jsonl",
            "wal": tmp_path / "s.db-wal",
            "shm": tmp_path / "s.db-shm",
            "lock": tmp_path / "s.db.lock",
            "state": tmp_path / "s.db-state.bin",
            "graph": tmp_path / "s.db-hnsw.json",
        }[target]
        if target == "symlink":
            dest.symlink_to(path)
        for spelled in (dest, str(dest), str(tmp_path / "." / dest.name)):
            with pytest.raises(InvalidInput, match="the store's own"):
                mem.transfer.export(spelled)
        assert {m.id for m in mem.list(limit=None)} == ids
    with GraphMemory.open(str(path), embedder=None) as mem:
        assert {m.id for m in mem.list(limit=None)} == ids


def test_the_cli_export_onto_its_store_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from graphmem.cli import app

    monkeypatch.chdir(tmp_path)
    env = {"GRAPHMEM_EMBEDDER": "none", "GRAPHMEM_CONFIG": "", "GRAPHMEM_URL": None}
    runner = CliRunner()
    assert runner.invoke(app, ["remember", "kept"], env=env).exit_code == 0
    result = runner.invoke(app, ["export", "graphmem.db"], env=env)  # the default store
    assert result.exit_code == 1 and "the store's own" in result.stderr
    with GraphMemory.open(str(tmp_path / "graphmem.db"), embedder=None) as mem:
        assert [m.content for m in mem.list(limit=None)] == ["kept"]
