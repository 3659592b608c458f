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
from typing import Any

import pytest

from graphmem.backends.embedded.rows import SCHEMA
from graphmem.errors import BackendUnavailable, InvalidInput, NotFound
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


@pytest.mark.parametrize("meta", [None, "other shape", "key-value", "only meta", "graph app"])
def test_another_applications_sqlite_file_is_refused_and_left_as_it_was(
    tmp_path: Path, meta: str | None
) -> None:
    """An open of another program's database raised nothing: it added graphmem's tables,
    switched the file to WAL and took writes (a meta table of another shape left it with
    graphmem's tables and a typed error after)."""
    path = tmp_path / "app.db"
    if meta == "only meta":  # no other table: the name alone is graphmem's
        with closing(sqlite3.connect(path)) as db, db:
            db.execute("CREATE TABLE meta (a, b, c)")
            db.execute("INSERT INTO meta VALUES (1, 2, 3)")
    elif meta == "graph app":  # tables of graphmem's names, made by another program
        with closing(sqlite3.connect(path)) as db, db:
            db.execute("CREATE TABLE nodes (id INTEGER PRIMARY KEY, name TEXT)")
            db.execute("CREATE TABLE edges (a INTEGER, b INTEGER)")
            db.execute("INSERT INTO nodes VALUES (1, 'x')")
    else:
        _other_app(path)
    if meta in ("other shape", "key-value"):
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
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        assert not tables & {"vectors", "changes"}
        if meta not in ("only meta", "graph app"):
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
    env = {
        "GRAPHMEM_EMBEDDER": "none",
        "GRAPHMEM_CONFIG": "",
        "GRAPHMEM_URL": None,
        "NEO4J_URI": None,
    }
    runner = CliRunner()
    assert runner.invoke(app, ["remember", "kept"], env=env).exit_code == 0
    result = runner.invoke(app, ["export", "graphmem.db"], env=env)  # the default store
    assert result.exit_code == 1 and "the store's own" in result.stderr
    with GraphMemory.open(str(tmp_path / "graphmem.db"), embedder=None) as mem:
        assert [m.content for m in mem.list(limit=None)] == ["kept"]


def _cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from graphmem.cli import app

    env = {
        "GRAPHMEM_EMBEDDER": "none",
        "GRAPHMEM_CONFIG": "",
        "GRAPHMEM_URL": None,
        "NEO4J_URI": None,
    }
    return CliRunner().invoke(app, list(args), env=env)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("spelling", ["path", "file:", "file:///", "sqlite:///", "home"])
def test_every_spelling_of_a_store_url_names_the_one_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """A URL names the same file for the CLI's checks and for the open: ``file:s.db`` was
    "no store" to a read command though s.db was there, and ``~/s.db`` (in GRAPHMEM_URL or
    a settings file) made a folder named ``~`` in the working directory."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    path = home / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember("kept")
    url = {
        "path": str(path),
        "file:": f"file:{path}",
        "file:///": f"file://{path}",
        "sqlite:///": f"sqlite:///{path}",
        "home": "~/s.db",
    }[spelling]
    before = _tree(tmp_path)
    result = _cli("list", "--db", url)
    assert result.exit_code == 0, result.output
    assert "kept" in result.output
    with GraphMemory.open(url, embedder=None) as mem:
        assert [m.content for m in mem.list(limit=None)] == ["kept"]
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("url", ["file:x.db", "sqlite:///x.db", "~/x.db"])
def test_a_read_command_creates_no_store_whatever_the_url_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """``stats --db sqlite:///x.db`` made a new empty store: the check that a read command
    needs an existing store skipped any URL with ``://``."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = _cli("stats", "--db", url)
    assert result.exit_code == 2 and "no store at" in result.output
    assert _tree(tmp_path) == set()


@pytest.mark.parametrize("url", ["file://s.db", "sqlite://s.db", "networkx://s.db"])
def test_a_file_url_with_a_host_or_too_few_slashes_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """``file://s.db`` opened ``/s.db`` at the file system's root (the CLI's check looked
    at ``./s.db``); ``sqlite://s.db`` made a folder ``sqlite:`` in the working directory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="file path"):
        GraphMemory.open(url, embedder=None)
    assert _tree(tmp_path) == set()
    assert not Path("/s.db").exists()


def test_a_migration_from_a_store_that_does_not_exist_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``graphmem migrate typo.db new.db`` made an empty source and an empty destination
    and said "copied 0 nodes ... verified"."""
    from graphmem.migrate import migrate

    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotFound, match="no store at"):
        migrate("typo.db", "new.db")
    result = _cli("migrate", "typo.db", "new.db")
    assert result.exit_code == 1 and "no store at" in result.output
    assert _tree(tmp_path) == set()


def test_a_migration_onto_its_own_source_spelled_another_way_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphmem.migrate import migrate

    monkeypatch.chdir(tmp_path)
    with GraphMemory.open("s.db", embedder=None) as mem:
        mem.remember("kept")
    for other in ("./s.db", str(tmp_path / "s.db"), "file:s.db"):
        with pytest.raises(InvalidInput, match="same store"):
            migrate("s.db", other)


_FIRST_MEMORY = "(SELECT min(rid) FROM nodes WHERE label = 'Memory')"
_SET = "UPDATE nodes SET props = json_set(props, "


@pytest.mark.parametrize(
    "damage",
    [
        f"UPDATE nodes SET props = '{{bad' WHERE rid = {_FIRST_MEMORY}",
        f"UPDATE nodes SET props = '[1, 2]' WHERE rid = {_FIRST_MEMORY}",
        f"{_SET}'$.created_at', 'x') WHERE rid = {_FIRST_MEMORY}",
        f"UPDATE nodes SET label = 'Zzz' WHERE rid = {_FIRST_MEMORY}",
        f"{_SET}'$.status', 'zombie') WHERE rid = {_FIRST_MEMORY}",
        f"{_SET}'$.category', 'x') WHERE rid = {_FIRST_MEMORY}",
        "UPDATE vectors SET vec = x'0000' WHERE rid = (SELECT min(rid) FROM vectors)",
        "UPDATE meta SET value = 'abc' WHERE key = 'embedding_dim'",
        "UPDATE meta SET value = '16' WHERE key = 'embedding_dim'",
        "DROP TABLE nodes",
        "DROP TABLE memory_fts",
    ],
    ids=[
        "json",
        "not-object",
        "time",
        "label",
        "status",
        "category",
        "vector",
        "dim-text",
        "dim-other",
        "no-nodes",
        "no-index",
    ],
)
def test_a_store_with_damaged_rows_or_tables_is_a_typed_error_at_open(
    tmp_path: Path, damage: str
) -> None:
    """Each raised what the damaged row made the reader raise (orjson's JSONDecodeError,
    TypeError, KeyError, ValueError), and the handle's connection stayed open (an unknown
    status opened, then every list and recall raised KeyError); a store that
    had lost its nodes or its text index opened as an empty store, or without lexical
    search, silently."""
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        mem.remember_many([{"content": f"note {i}", "agent_id": "a1"} for i in range(20)])
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(damage)
    beside = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(BackendUnavailable, match=str(path)):
        GraphMemory.open(str(path), embedder="hash:32")
    gc.collect()
    assert sorted(p.name for p in tmp_path.iterdir()) == beside  # no -wal or -shm held


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a full disk)")
def test_an_export_onto_a_full_disk_is_a_typed_error(tmp_path: Path) -> None:
    """The OSError of a write that found no space went out as it was (a traceback from
    ``graphmem export``)."""
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember_many([{"content": f"kept {i}"} for i in range(300)])  # past a buffer
        with pytest.raises(InvalidInput, match="No space left"):
            mem.transfer.export("/dev/full")
    result = _cli("export", "/dev/full", "--db", str(path))
    assert result.exit_code == 1 and "No space left" in result.stderr
