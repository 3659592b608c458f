"""How an embedded write reaches the file (graphmem.backends.embedded.commit): a small
write's statements run at its commit on the writing thread; a big write's run on a thread of
their own while the writing thread applies the write in memory, and a failure there leaves
the handle holding what the file holds."""

from __future__ import annotations

import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded import commit
from graphmem.backends.embedded.commit import Checkpointer, Committer, Pending
from graphmem.errors import Conflict, GraphMemError

pytestmark = pytest.mark.embedded("the embedded store's commit: its SQLite file and connection")


@pytest.fixture
def committer() -> Iterator[Committer]:
    c = Committer()
    yield c
    c.close()


def _db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT)")
    return db


def _noting(db: sqlite3.Connection) -> list[str]:
    """The names of the threads that inserted into t, one per row (a SQLite callback)."""
    seen: list[str] = []

    def note(_a: int) -> int:
        seen.append(threading.current_thread().name)
        return 0

    db.create_function("note", 1, note)
    db.execute("CREATE TEMP TRIGGER noted AFTER INSERT ON t BEGIN SELECT note(new.a); END")
    return seen


def _rows(n: int, start: int = 0) -> list[tuple[int, str]]:
    return [(i, f"row {i}") for i in range(start, start + n)]


def test_a_small_write_runs_its_statements_at_the_commit_on_the_writing_thread(
    tmp_path: Path, committer: Committer
) -> None:
    db = _db(tmp_path / "s.db")
    seen = _noting(db)
    db.execute("BEGIN IMMEDIATE")
    tx = Pending(db, committer)
    tx.insert("INSERT INTO t(a, b)", _rows(3))
    assert seen == []  # held until the commit
    order: list[str] = []
    tx.commit(lambda: order.append(f"applied after {len(seen)} rows"))
    assert seen == [threading.current_thread().name] * 3
    assert order == ["applied after 3 rows"]
    assert not db.in_transaction
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 3


def test_a_big_write_runs_its_statements_on_a_thread_of_their_own_beside_the_apply(
    tmp_path: Path, committer: Committer
) -> None:
    db = _db(tmp_path / "s.db")
    seen = _noting(db)
    inserted = threading.Event()
    db.create_function("arrived", 1, lambda _a: inserted.set() or 0)
    db.execute("CREATE TEMP TRIGGER arrived AFTER INSERT ON t BEGIN SELECT arrived(new.a); END")
    interval = sys.getswitchinterval()
    db.execute("BEGIN IMMEDIATE")
    tx = Pending(db, committer)
    n = commit._THREAD_ROWS + 5
    tx.insert("INSERT INTO t(a, b)", _rows(n))
    during: list[float] = []

    def apply() -> None:
        # only statements running while the apply runs can set this: were they run
        # after it, the wait would time out
        assert inserted.wait(10)
        during.append(sys.getswitchinterval())

    tx.commit(apply)
    assert set(seen) == {"graphmem-commit"} and len(seen) == n
    assert tx.committed and not db.in_transaction
    assert during == [pytest.approx(min(interval, commit._BRISK))]
    assert sys.getswitchinterval() == pytest.approx(interval)  # the caller's again
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] == n


def test_statements_run_a_row_at_a_time_wait_until_the_apply_has_ended(
    tmp_path: Path, committer: Committer
) -> None:
    # each row of an executemany gives the GIL up and must win it back: beside the apply
    # (Python) that is a switch interval a row, so they run once the writer waits
    db = _db(tmp_path / "s.db")
    db.executemany("INSERT INTO t(a, b) VALUES (?, ?)", _rows(50, start=10**6))
    applying = threading.Event()
    seen: list[bool] = []
    db.create_function("updated", 1, lambda _a: seen.append(applying.is_set()) or 0)
    db.execute("CREATE TEMP TRIGGER upd AFTER UPDATE ON t BEGIN SELECT updated(new.a); END")
    db.execute("BEGIN IMMEDIATE")
    tx = Pending(db, committer)
    tx.insert("INSERT INTO t(a, b)", _rows(commit._THREAD_ROWS))  # on the thread from here
    tx.executemany("UPDATE t SET b = 'y' WHERE a = ?", [(10**6 + i,) for i in range(50)])

    def apply() -> None:
        applying.set()
        threading.Event().wait(0.2)  # time enough for the rows, were they not held back
        applying.clear()

    tx.commit(apply)
    assert seen == [False] * 50
    assert db.execute("SELECT count(*) FROM t WHERE b = 'y'").fetchone()[0] == 50


def test_a_failed_statement_on_the_thread_is_raised_after_the_apply_and_nothing_is_kept(
    tmp_path: Path, committer: Committer
) -> None:
    db = _db(tmp_path / "s.db")
    db.execute("INSERT INTO t(a, b) VALUES (-1, 'kept')")
    db.execute("BEGIN IMMEDIATE")
    tx = Pending(db, committer)
    tx.insert("INSERT INTO t(a, b)", _rows(commit._THREAD_ROWS))
    tx.insert("INSERT INTO t(a, b)", [(-1, "a clash")])  # the primary key taken
    tx.insert("INSERT INTO t(a, b)", [(10**6, "never run")])
    applied: list[bool] = []
    with pytest.raises(sqlite3.IntegrityError):
        tx.commit(lambda: applied.append(True))
    assert applied == [True] and tx.applying and not tx.committed
    db.execute("ROLLBACK")
    assert db.execute("SELECT a, b FROM t").fetchall() == [(-1, "kept")]


def test_an_update_that_changes_another_number_of_rows_is_a_conflict(
    tmp_path: Path, committer: Committer
) -> None:
    db = _db(tmp_path / "s.db")
    db.executemany("INSERT INTO t(a, b) VALUES (?, ?)", _rows(2))
    db.execute("BEGIN IMMEDIATE")
    tx = Pending(db, committer)
    tx.executemany("UPDATE t SET b = 'x' WHERE a = ?", [(0,), (1,), (7,)], changes=3)
    with pytest.raises(Conflict):
        tx.commit(lambda: None)
    assert not tx.applying
    db.execute("ROLLBACK")


@pytest.mark.parametrize("n", [2, commit._THREAD_ROWS + 1])
def test_a_read_sees_the_statements_given_before_it(
    tmp_path: Path, n: int, committer: Committer
) -> None:
    db = _db(tmp_path / "s.db")
    db.execute("BEGIN IMMEDIATE")
    tx = Pending(db, committer)
    tx.insert("INSERT INTO t(a, b)", _rows(n))
    assert tx.read("SELECT count(*) FROM t") == [(n,)]
    tx.insert("INSERT INTO t(a, b)", _rows(n, start=n))
    tx.commit(lambda: None)
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 2 * n


def test_a_write_given_up_runs_nothing_more(tmp_path: Path, committer: Committer) -> None:
    db = _db(tmp_path / "s.db")
    gate = threading.Event()
    db.create_function("gate", 1, lambda _a: gate.wait(10) and 0)
    db.execute("CREATE TEMP TRIGGER gated AFTER INSERT ON t BEGIN SELECT gate(new.a); END")
    db.execute("BEGIN IMMEDIATE")
    tx = Pending(db, committer)
    tx.insert("INSERT INTO t(a, b)", _rows(commit._THREAD_ROWS))  # the thread starts
    tx.insert("INSERT INTO t(a, b)", [(10**6, "given up")])

    def release() -> None:  # the first statement goes on once the write is given up
        while not tx._failed:
            time.sleep(0.001)
        gate.set()

    threading.Thread(target=release).start()
    tx.stop()
    db.execute("COMMIT")  # what ran before the stop, to see that the rest did not
    assert db.execute("SELECT count(*) FROM t WHERE a = ?", (10**6,)).fetchone()[0] == 0


@pytest.mark.parametrize("n", [1, commit._CHUNK + 3])
def test_rows_given_a_column_at_a_time_are_the_rows_given_a_row_at_a_time(
    tmp_path: Path, n: int, committer: Committer
) -> None:
    by_rows, by_columns = _db(tmp_path / "r.db"), _db(tmp_path / "c.db")
    rows = _rows(n)
    for db, give in (
        (by_rows, lambda tx: tx.insert("INSERT INTO t(a, b)", rows)),
        (
            by_columns,
            lambda tx: tx.insert_columns("INSERT INTO t(a, b)", list(zip(*rows, strict=True))),
        ),
    ):
        db.execute("BEGIN IMMEDIATE")
        tx = Pending(db, committer)
        give(tx)
        tx.commit(lambda: None)
    read = "SELECT a, b FROM t ORDER BY a"
    assert by_columns.execute(read).fetchall() == by_rows.execute(read).fetchall() == rows


def test_a_handle_keeps_one_committing_thread_until_it_closes(tmp_path: Path) -> None:
    # by identity: other tests' handles' threads may end meanwhile (see _IDLE)
    def committing() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "graphmem-commit"}

    before = committing()
    mem = GraphMemory.open(tmp_path / "store.db", embedder=None)
    mem.remember_many(_items(3, "small"))
    assert not committing() - before  # none for an open, nor for a small write
    mine = set()
    for tag in ("big", "bigger"):
        mem.remember_many(_items(commit._THREAD_ROWS, tag))
        mine |= committing() - before
        assert len(mine) == 1  # the same thread for both
    mem.close()
    assert not mine & committing()


def test_a_checkpoint_runs_on_a_thread_and_a_connection_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = _db(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")  # the frames stay in the WAL
    db.executemany("INSERT INTO t(a, b) VALUES (?, ?)", [(i, "x" * 1000) for i in range(1000)])
    assert path.stat().st_size < 100_000
    checkpoints = Checkpointer(str(path), 10.0)
    checkpoints.written()  # the first: due (how many frames a write makes is not known)
    deadline = time.monotonic() + 30
    while path.stat().st_size < 1_000_000 and time.monotonic() < deadline:
        time.sleep(0.01)
    checkpoints.close()
    assert path.stat().st_size > 1_000_000  # the pages copied into the file
    assert checkpoints.per_write is not None and checkpoints.per_write > 200  # learnt
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 1000
    db.close()


def test_a_checkpoint_is_due_once_the_writes_since_the_last_made_enough_frames(
    tmp_path: Path,
) -> None:
    checkpoints = Checkpointer(str(tmp_path / "s.db"), 10.0)
    checkpoints.per_write = commit._CHECKPOINT_FRAMES / 2 - 1
    checkpoints.written()
    checkpoints.written()
    assert checkpoints._thread is None  # not due: no thread asked to run one
    checkpoints.written()
    assert checkpoints._thread is not None
    checkpoints.close()


def test_idle_threads_end_and_the_next_write_starts_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a handle dropped without close keeps no thread for long
    monkeypatch.setattr(commit, "_IDLE", 0.1)

    def running() -> set[str]:
        names = {"graphmem-commit", "graphmem-checkpoint"}
        return {t.name for t in threading.enumerate() if t.name in names}

    def gone() -> bool:
        deadline = time.monotonic() + 30
        while running() and time.monotonic() < deadline:
            time.sleep(0.02)
        return not running()

    assert gone()  # (none left by the tests before)
    mem = GraphMemory.open(tmp_path / "store.db", embedder=None)
    first = mem.remember_many(_items(commit._THREAD_ROWS, "first"))
    assert gone()
    second = mem.remember_many(_items(commit._THREAD_ROWS, "second"))
    assert mem.count() == len(first) + len(second)
    assert gone()
    mem.close()
    reopened = GraphMemory.open(tmp_path / "store.db", embedder=None)
    assert reopened.count() == len(first) + len(second)
    reopened.close()


def _items(n: int, tag: str) -> list[dict[str, object]]:
    return [
        {"content": f"{tag} note {i} about herons", "agent_id": "a1", "run_id": f"{tag}-r{i % 7}"}
        for i in range(n)
    ]


@pytest.mark.parametrize("n", [3, 400])
def test_a_failed_commit_leaves_the_handle_holding_what_the_file_holds(
    tmp_path: Path, n: int
) -> None:
    path = tmp_path / "store.db"
    mem = GraphMemory.open(path, embedder=None)
    kept = {m.id for m in mem.remember_many(_items(n, "kept"))}

    def held(m: GraphMemory) -> tuple[object, ...]:
        stats = m.backend.stats()
        ids = {x.id for x in m.list(limit=None)}
        found = {r.memory.id for r in m.recall("lost note about herons", k=5)}
        return stats.nodes, stats.edges, ids, found

    before = held(mem)
    assert before[2] == kept
    other = sqlite3.connect(path)
    # the last of a write's statements: after its nodes, texts and chain rows
    other.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON changes BEGIN SELECT RAISE(ABORT, 'boom'); END"
    )
    other.commit()
    with pytest.raises(GraphMemError):
        mem.remember_many(_items(n, "lost"))
    assert held(mem) == before
    other.execute("DROP TRIGGER boom")
    other.commit()
    other.close()
    again = {m.id for m in mem.remember_many(_items(n, "again"))}
    now = held(mem)
    mem.close()
    reopened = GraphMemory.open(path, embedder=None)
    assert held(reopened) == now
    assert now[2] == kept | again
    assert now[0]["Memory"] == before[0]["Memory"] + n
    reopened.close()


@contextmanager
def _no_new_threads() -> Iterator[None]:
    """No thread can be started meanwhile (their stacks cannot be had): as at interpreter
    shutdown from Python 3.12 on (an ``atexit`` handler), or in a process out of threads."""
    before = threading.stack_size(2**40)
    try:
        with pytest.raises(RuntimeError):
            threading.Thread(target=lambda: None).start()
        yield
    finally:
        threading.stack_size(before)


@pytest.mark.timeout(60)
def test_a_big_write_without_a_thread_to_be_had_runs_on_the_writing_thread(
    tmp_path: Path,
) -> None:
    # the write once hung for good (its statements queued for a thread that never ran);
    # and a committed write whose checkpoint thread did not start raised all the same
    mem = GraphMemory.open(tmp_path / "store.db", embedder=None)
    with _no_new_threads():
        first = mem.remember_many(_items(commit._THREAD_ROWS, "first"))
        second = mem.remember_many(_items(commit._THREAD_ROWS, "second"))
    assert mem.count() == len(first) + len(second) == 2 * commit._THREAD_ROWS
    third = mem.remember_many(_items(commit._THREAD_ROWS, "third"))  # on its thread again
    assert {t.name for t in threading.enumerate()} >= {"graphmem-commit"}
    mem.close()
    with GraphMemory.open(tmp_path / "store.db", embedder=None) as again:
        assert {m.id for m in again.list(limit=None)} == {m.id for m in [*first, *second, *third]}


def test_a_checkpoint_thread_that_cannot_start_is_skipped(tmp_path: Path) -> None:
    checkpoints = Checkpointer(str(tmp_path / "s.db"), 10.0)
    with _no_new_threads():
        checkpoints.written()  # due (the first), but advisory: no error
    assert checkpoints._thread is None
    checkpoints.close()
    checkpoints.written()  # a thread again once one can be had
    assert checkpoints._thread is not None
    checkpoints.close()


def test_statements_go_on_on_the_writing_thread_when_an_ended_thread_cannot_be_restarted(
    tmp_path: Path, committer: Committer
) -> None:
    # the handle's thread ended (idle) in the middle of a long write, and none can be
    # started again: what is left runs on the writing thread, in order
    db = _db(tmp_path / "s.db")
    seen = _noting(db)
    db.execute("BEGIN IMMEDIATE")
    tx = Pending(db, committer)
    tx.insert("INSERT INTO t(a, b)", _rows(commit._THREAD_ROWS))  # on the thread
    assert tx.read("SELECT count(*) FROM t") == [(commit._THREAD_ROWS,)]
    tx.insert("INSERT INTO t(a, b)", _rows(1, start=10**6))
    committer.close()  # as the idle thread does
    with _no_new_threads():
        tx.insert("INSERT INTO t(a, b)", _rows(3, start=2 * 10**6))
        tx.executemany("UPDATE t SET b = 'late' WHERE a = ?", [(2 * 10**6,)], changes=1)
        tx.commit(lambda: None)
    assert tx.committed and not db.in_transaction
    assert seen.count(threading.current_thread().name) == 3
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] == commit._THREAD_ROWS + 4
    assert db.execute("SELECT b FROM t WHERE a = ?", (2 * 10**6,)).fetchone()[0] == "late"


def _in_function(thread: threading.Thread, name: str) -> bool:
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == name:
            return True
        frame = frame.f_back
    return False


def test_a_big_write_interrupted_while_it_waits_for_its_statements_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C (KeyboardInterrupt) in the writing thread while the committing thread still
    # ran the write's statements: the writer rolled back under it, the statements left ran
    # outside any transaction (edges committed without their nodes) and the handle's
    # reload failed, closing it
    path = tmp_path / "store.db"
    mem = GraphMemory.open(path, embedder=None)
    kept = {m.id for m in mem.remember_many(_items(commit._THREAD_ROWS, "kept"))}

    def rows() -> list[int]:
        other = sqlite3.connect(path)
        counts = [
            other.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("nodes", "edges", "next_edges", "run_heads", "changes")
        ]
        other.close()
        return counts

    before = rows()
    writer = threading.current_thread()
    armed = [True]
    made: list[Pending] = []  # the writes' transactions, to see when the writer gave up
    plain_init = Pending.__init__

    def init(self: Pending, *args: object) -> None:
        plain_init(self, *args)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(Pending, "__init__", init)

    def held(_rid: int) -> int:
        # on the committing thread, inside the write: interrupt the writer once it waits
        if armed[0]:
            armed[0] = False
            deadline = time.monotonic() + 10
            while not _in_function(writer, "_join") and time.monotonic() < deadline:
                time.sleep(0.001)
            signal.pthread_kill(writer.ident or 0, signal.SIGINT)
            # until the writer has taken the interrupt in (a fixed pause was too short on a
            # loaded machine: the statements and the COMMIT ran before it had, and the
            # write was whole, as an interrupt after the COMMIT leaves it); the statements
            # after this one then do not run
            deadline = time.monotonic() + 10
            while not made[-1]._failed and time.monotonic() < deadline:  # type: ignore[attr-defined]
                time.sleep(0.001)
        return 0

    mem.backend._db.create_function("held", 1, held)  # type: ignore[attr-defined]
    mem.backend._db.execute(  # type: ignore[attr-defined]
        "CREATE TEMP TRIGGER held AFTER INSERT ON nodes BEGIN SELECT held(new.rid); END"
    )
    with pytest.raises(KeyboardInterrupt):
        mem.remember_many(_items(2 * commit._THREAD_ROWS, "interrupted"))
    assert rows() == before  # given up whole (the COMMIT had not run)
    assert {m.id for m in mem.list(limit=None)} == kept
    again = {m.id for m in mem.remember_many(_items(commit._THREAD_ROWS, "again"))}
    mem.close()
    with GraphMemory.open(path, embedder=None) as reopened:
        assert {m.id for m in reopened.list(limit=None)} == kept | again
