"""How an embedded write reaches the file: writers of several processes take turns
(:func:`writer_turn`), and a write's statements run in order on the connection, a big
write's on a thread of their own beside the in-memory apply (:class:`Pending`)."""

from __future__ import annotations

import queue
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from typing import Any

from graphmem.errors import Conflict

if sys.platform != "win32":
    import fcntl


@contextmanager
def writer_turn(fd: int | None, timeout: float) -> Iterator[None]:
    """Writers of several processes take turns on a lock file beside the store (``fd``;
    None: SQLite's own locking only) before SQLite's write lock: a waiter gets the lock
    within a fraction of a millisecond of its release, where SQLite's own busy handler
    sleeps 1, 2, 5, 10 ... ms between tries (p50 ~25 ms per write with three writer
    processes). A :class:`Conflict` after ``timeout`` seconds."""
    if fd is None:
        yield
        return
    deadline = time.monotonic() + timeout
    delay = 0.0001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise Conflict("the store is locked by another writer") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.001)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


#: rows one INSERT statement carries at most (SQLite takes up to 250,000 bound values)
_CHUNK = 4096
#: rows a write's statements insert from which they run on a thread of their own
_THREAD_ROWS = 200
_COMMIT = "COMMIT"
_STOP = ("", (), None)


class Pending:
    """The statements of one write transaction, run in order on the connection: a small
    write's at its commit; a big write's, once it has given :data:`_THREAD_ROWS` rows, on
    a thread of their own as they come, with the COMMIT.

    Meanwhile the writing thread works out the rest of the write and applies it to the
    in-memory state: SQLite lets go of the GIL while it runs a statement, so the two use
    both cores. Rows are inserted many to a statement, since the committing thread must win
    the GIL back after each statement (a per-row ``executemany`` would ask for it once a
    row, and wait for the writing thread each time)."""

    __slots__ = ("_failed", "_queue", "_worker", "applying", "committed", "db", "ops", "rows")

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        #: (SQL, parameters, for executemany the row count it must change or -1; None
        #: for a single statement), held until run
        self.ops: list[tuple[str, Any, int | None]] = []
        self.rows = 0
        #: the in-memory apply has begun; the COMMIT went through
        self.applying = self.committed = False
        self._queue: queue.SimpleQueue[tuple[str, Any, Any]] | None = None
        self._worker: threading.Thread | None = None
        self._failed: list[BaseException] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._add(sql, params, None)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]], *, changes: int = -1) -> None:
        """Run ``sql`` for each row; ``changes``: how many rows it must change in all (a
        :class:`Conflict` when it changes another number)."""
        if rows:
            self.rows += len(rows)
            self._add(sql, rows, changes)

    def insert(self, head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        """``head`` (``INSERT INTO t(a, b)``) VALUES the rows (tuples of one width), up to
        :data:`_CHUNK` to a statement, then ``tail`` (an ON CONFLICT clause)."""
        if not rows:
            return
        self.rows += len(rows)
        one = "(" + ",".join("?" * len(rows[0])) + ")"
        for i in range(0, len(rows), _CHUNK):
            part = rows[i : i + _CHUNK]
            sql = f"{head} VALUES {','.join([one] * len(part))} {tail}"
            self._add(sql, list(chain.from_iterable(part)), None)

    def _add(self, sql: str, params: Any, changes: int | None) -> None:
        if self._queue is not None:
            self._queue.put((sql, params, changes))
            return
        self.ops.append((sql, params, changes))
        if self.rows >= _THREAD_ROWS:
            self._start()

    def _start(self) -> None:
        self._queue = queue.SimpleQueue()
        for op in self.ops:
            self._queue.put(op)
        self.ops = []
        self._worker = threading.Thread(target=self._work, name="graphmem-commit", daemon=True)
        _Brisk.enter()
        self._worker.start()

    def _work(self) -> None:
        assert self._queue is not None
        get, db = self._queue.get, self.db
        while True:
            op = get()
            if op is _STOP:
                return
            if self._failed:
                continue  # the transaction is lost: the rest is not run
            try:
                _run(db, *op)
            except BaseException as e:  # raised by the writing thread (see _join)
                self._failed.append(e)

    def _join(self) -> None:
        """Wait for the statements given so far (raising the first failure)."""
        if self._queue is not None:
            assert self._worker is not None
            self._queue.put(_STOP)
            try:
                self._worker.join()
            finally:
                _Brisk.leave()
                self._queue = self._worker = None
        if self._failed:
            raise self._failed[0]

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows ``sql`` reads, after the statements given so far."""
        self.run()
        return self.db.execute(sql, params).fetchall()

    def run(self) -> None:
        """Run the statements given so far, in order."""
        self._join()
        ops, self.ops = self.ops, []
        for op in ops:
            _run(self.db, *op)

    def stop(self) -> None:
        """Let the thread (if any) end without running what it has not run yet: the
        transaction is given up (its ROLLBACK follows on this thread)."""
        if self._queue is not None:
            self._failed.append(Conflict("write given up"))
        try:
            self._join()
        except BaseException:
            pass

    def commit(self, then: Callable[[], None]) -> None:
        """Run the statements given and COMMIT, and ``then`` (the in-memory apply): side by
        side when the statements run on their thread, else one after the other. A failure
        of either is raised once both have ended (the statements' first)."""
        if self._queue is None:
            self.run()
            _run(self.db, _COMMIT, (), None)
            self.committed = self.applying = True
            then()
            return
        self._add(_COMMIT, (), None)
        self.applying = True
        try:
            then()
        finally:
            self._join()
            self.committed = True


#: the interpreter's switch interval while a commit thread runs (see _Brisk)
_BRISK = 0.0005


class _Brisk:
    """The interpreter's switch interval shortened while any commit thread runs: a thread
    waiting for the GIL (the committing one, after each statement) gets it once the
    interval has passed, and at the default 5 ms the committing thread would sit idle
    between statements for most of the write. The caller's interval comes back when the
    last commit thread has ended (unless somebody else set another meanwhile)."""

    lock = threading.Lock()
    users = 0
    saved = 0.0

    @classmethod
    def enter(cls) -> None:
        with cls.lock:
            if cls.users == 0:
                cls.saved = sys.getswitchinterval()
                if cls.saved > _BRISK:
                    sys.setswitchinterval(_BRISK)
            cls.users += 1

    @classmethod
    def leave(cls) -> None:
        with cls.lock:
            cls.users -= 1
            if cls.users == 0 and abs(sys.getswitchinterval() - _BRISK) < 1e-6:
                sys.setswitchinterval(cls.saved)


def _run(db: sqlite3.Connection, sql: str, params: Any, changes: int | None) -> None:
    if changes is None:
        db.execute(sql, params)
        return
    cur = db.executemany(sql, params)
    if changes >= 0 and cur.rowcount != changes:
        raise Conflict("the store changed underneath this write; retry")
