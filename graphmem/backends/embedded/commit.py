"""How an embedded write reaches the file: writers of several processes take turns
(:func:`writer_turn`), and a write's statements run in order on the connection, a big
write's on a thread of their own beside the in-memory apply (:class:`Pending`)."""

from __future__ import annotations

import logging
import os
import queue
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from graphmem.errors import Conflict

log = logging.getLogger("graphmem.backends.embedded")

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


def open_lock_file(path: os.PathLike[str] | str) -> int | None:
    """The descriptor of the lock file beside the store at ``path`` that
    :func:`writer_turn` takes (None: SQLite's own locking and busy handler only, on a
    platform without flock or in a folder this process may not write)."""
    if sys.platform == "win32":
        return None
    try:
        return os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        log.debug("no writer lock file beside %s: %s", path, e)
        return None


#: rows one INSERT statement carries at most (SQLite takes up to 250,000 bound values)
_CHUNK = 4096
#: rows a write's statements insert from which they run on the committing thread
_THREAD_ROWS = 200
_COMMIT = "COMMIT"
#: (SQL, parameters, for executemany the row count it must change or -1; None for a
#: single statement)
Op = tuple[str, Any, int | None]
_Item = tuple["Pending", "Op | threading.Event"]


#: WAL frames from which a big write's checkpoint is due (SQLite's own default: 1,000)
_CHECKPOINT_FRAMES = 800


#: seconds a handle's thread waits for work before it ends (the next write starts another):
#: a handle dropped without ``close`` keeps no thread
_IDLE = 30.0


class Committer:
    """A store handle's thread that runs big writes' statements (see :class:`Pending`),
    and its :class:`Checkpointer`: started at a big write, ended by :meth:`close` or after
    :data:`_IDLE` seconds without work.

    One thread for many writes, not one a write: starting a thread waits until the new
    thread runs, which on a busy machine is a scheduler's wait."""

    def __init__(self, path: str | None = None, timeout: float = 10.0) -> None:
        """``path``: the store's file (None: one in memory, without a WAL)."""
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self.checkpoints = None if path is None else Checkpointer(path, timeout)

    def start(self) -> bool:
        """Have a thread of this process run the queue (started when none does); False when
        none can be started (at interpreter shutdown from Python 3.12 on, as in an
        ``atexit`` handler, or in a process out of threads): the writer then runs its
        statements itself."""
        with self._lock:
            return self._started()

    def _started(self) -> bool:
        if self._thread is not None and self._pid == os.getpid():
            return True
        # (again in a forked child, which has no copy of the thread)
        items: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        thread = threading.Thread(
            target=self._loop, args=(items,), name="graphmem-commit", daemon=True
        )
        try:
            thread.start()
        except RuntimeError as e:
            log.debug("no thread for a big write's statements: %s", e)
            return False
        self._queue, self._thread, self._pid = items, thread, os.getpid()
        return True

    def put(self, tx: Pending, item: Op | threading.Event) -> None:
        """Queue ``item`` of ``tx``: a statement, or an event to set once all before it
        ran. Run here and now when the thread has ended (idle in the middle of a long
        write) and none can be started again: the last one ended on an empty queue, so the
        order holds."""
        with self._lock:
            if self._started():
                self._queue.put((tx, item))
                return
        tx._step(item, here=True)

    def _loop(self, items: queue.SimpleQueue[_Item | None]) -> None:
        while True:
            try:
                got = items.get(timeout=_IDLE)
            except queue.Empty:
                with self._lock:  # (put queues under it: nothing can come in unseen)
                    if items.empty():
                        if self._queue is items:
                            self._thread = None
                        return
                continue
            if got is None:
                return
            got[0]._step(got[1])

    def close(self) -> None:
        with self._lock:
            thread = self._thread if self._pid == os.getpid() else None
            if thread is not None:
                self._queue.put(None)
            self._thread = None
        if thread is not None:
            thread.join()
        if self.checkpoints is not None:
            self.checkpoints.close()

    def before_fork(self, timeout: float) -> None:
        """Before a fork: wait (up to ``timeout`` seconds) for a checkpoint that is running
        to end, and hold the next back (see :meth:`Checkpointer.before_fork`)."""
        if self.checkpoints is not None:
            self.checkpoints.before_fork(timeout)

    def after_fork(self, *, child: bool) -> None:
        """After a fork, in the parent or the ``child`` (which has none of the threads, and
        whose locks may have been held by one of them at the fork): the next big write
        starts a thread of the child's own."""
        if child:
            self._lock = threading.Lock()
            self._queue = queue.SimpleQueue()
            self._thread = None
            self._pid = os.getpid()
        if self.checkpoints is not None:
            self.checkpoints.after_fork(child=child)


class Checkpointer:
    """The WAL checkpointed after big writes on a thread and a connection of their own,
    instead of inside a COMMIT (SQLite's automatic checkpoint, every 1,000 frames, which
    a writer waits for: a few to tens of ms, mostly the file's fsync, every few batches
    of 1,000 memories). Due once the big writes since the last one are estimated to have
    written :data:`_CHECKPOINT_FRAMES` frames (each checkpoint tells how many the WAL
    held); the COMMITs' own checkpoint still catches what this one leaves. The thread ends
    after :data:`_IDLE` seconds without a checkpoint to run."""

    def __init__(self, path: str, timeout: float) -> None:
        self._path = path
        self._timeout = timeout
        self._lock = threading.Lock()
        #: held while a checkpoint runs (and across a fork: see before_fork)
        self._running = threading.Lock()
        self._held_for_fork = False
        self._due = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._closing = False
        #: big writes since the last checkpoint, and the frames one writes (None: unknown)
        self.writes = 0
        self.per_write: float | None = None

    def written(self) -> None:
        """A big write has committed: ask for a checkpoint when one is due."""
        self.writes += 1
        if self.per_write is not None and self.writes * self.per_write < _CHECKPOINT_FRAMES:
            return
        with self._lock:
            if self._thread is None or self._pid != os.getpid():
                thread = threading.Thread(
                    target=self._loop, name="graphmem-checkpoint", daemon=True
                )
                self._closing = False
                try:
                    thread.start()
                except RuntimeError as e:  # (see Committer.start) advisory: skipped
                    log.debug("no thread for a checkpoint of %s: %s", self._path, e)
                    return
                self._pid, self._thread = os.getpid(), thread
            self._due.set()

    def _loop(self) -> None:
        db: sqlite3.Connection | None = None
        while True:
            if not self._due.wait(_IDLE):
                with self._lock:  # (written sets it under the lock: none is missed)
                    if not self._due.is_set():
                        if self._thread is threading.current_thread():
                            self._thread = None
                        break
            self._due.clear()
            if self._closing:
                break
            writes, self.writes = self.writes, 0
            try:
                with self._running:
                    if db is None:
                        db = sqlite3.connect(
                            self._path, timeout=self._timeout, isolation_level=None
                        )
                    # PASSIVE: copies what it can without waiting for (or blocking) anyone
                    _busy, frames, _done = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error as e:  # advisory: the COMMITs' own checkpoints remain
                log.debug("checkpoint of %s skipped: %s", self._path, e)
                continue
            if writes and frames > 0:
                self.per_write = frames / writes
        if db is not None:
            db.close()

    def close(self) -> None:
        with self._lock:
            thread = self._thread if self._pid == os.getpid() else None
            if thread is not None:
                self._closing = True
                self._due.set()
            self._thread = None
        if thread is not None:
            thread.join()

    def before_fork(self, timeout: float) -> bool:
        """Wait (up to ``timeout`` seconds) for a running checkpoint to end and hold the
        next back until :meth:`after_fork`: a checkpoint holds locks of the WAL index
        that a child would inherit as held by a connection it does not have. False when
        the wait timed out (the fork goes ahead regardless)."""
        self._held_for_fork = self._running.acquire(timeout=timeout)
        return self._held_for_fork

    def after_fork(self, *, child: bool) -> None:
        if child:  # none of the parent's threads is here (nor the thread's connection)
            self._lock = threading.Lock()
            self._running = threading.Lock()
            self._due = threading.Event()
            self._thread = None
            self._pid = os.getpid()
            self._closing = False
        elif self._held_for_fork:
            self._running.release()
        self._held_for_fork = False


class Pending:
    """The statements of one write transaction, run in order on the connection: a small
    write's at its commit; a big write's, once it has given :data:`_THREAD_ROWS` rows, on
    the handle's :class:`Committer` thread as they come, with the COMMIT.

    Meanwhile the writing thread works out the rest of the write and applies it to the
    in-memory state: SQLite lets go of the GIL while it runs a statement, so the two use
    both cores. Rows are inserted many to a statement, since the committing thread must win
    the GIL back after each statement (a per-row ``executemany`` would ask for it once a
    row, and wait for the writing thread each time)."""

    __slots__ = (
        "_committer",
        "_failed",
        "_queued",
        "_writer_waits",
        "applying",
        "committed",
        "db",
        "ops",
        "rows",
    )

    def __init__(self, db: sqlite3.Connection, committer: Committer) -> None:
        self.db = db
        self.ops: list[Op] = []  # held until run (none once queued)
        self.rows = 0
        #: the in-memory apply has begun; the COMMIT went through
        self.applying = self.committed = False
        self._committer = committer
        self._queued = False
        #: set while the writing thread waits for the committing one (see _step)
        self._writer_waits = threading.Event()
        self._failed: list[BaseException] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._add((sql, params, None))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]], *, changes: int = -1) -> None:
        """Run ``sql`` for each row; ``changes``: how many rows it must change in all (a
        :class:`Conflict` when it changes another number)."""
        if rows:
            self.rows += len(rows)
            self._add((sql, rows, changes))

    def insert(self, head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        """``head`` (``INSERT INTO t(a, b)``) VALUES the rows (tuples of one width), up to
        :data:`_CHUNK` to a statement, then ``tail`` (an ON CONFLICT clause)."""
        if rows:
            self.insert_columns(head, list(zip(*rows, strict=True)), tail)

    def insert_columns(self, head: str, columns: Sequence[Sequence[Any]], tail: str = "") -> None:
        """:meth:`insert` of rows given a column at a time (sequences of one length), up to
        :data:`_CHUNK` to a statement: the parameters interleaved from them in C, without a
        tuple a row."""
        n = len(columns[0])
        if not n:
            return
        self.rows += n
        width = len(columns)
        one = "(" + ",".join("?" * width) + ")"
        for i in range(0, n, _CHUNK):
            k = min(_CHUNK, n - i)
            params: list[Any] = [None] * (k * width)
            for j, column in enumerate(columns):
                params[j::width] = column[i : i + k]
            self._add((f"{head} VALUES {','.join([one] * k)} {tail}", params, None))

    def _add(self, op: Op) -> None:
        if self._queued:
            self._committer.put(self, op)
            return
        self.ops.append(op)
        if self.rows >= _THREAD_ROWS and self._committer.start():
            self._queued = True
            self._writer_waits.clear()
            _Brisk.enter()
            for held in self.ops:
                self._committer.put(self, held)
            self.ops = []

    def _step(self, item: Op | threading.Event, *, here: bool = False) -> None:
        """On the committing thread (or ``here``, on the writing one: see
        ``Committer.put``): run one statement, or say all before it have run."""
        if isinstance(item, threading.Event):
            item.set()
            return
        if self._failed:  # a lost transaction runs no more
            return
        if item[2] is not None and not here:
            # a statement a row (an executemany): each row's step gives the GIL up and
            # waits to win it back, so it waits for the writing thread to stop running
            # Python (else up to a switch interval a row)
            self._writer_waits.wait()
        try:
            _run(self.db, *item)
        except BaseException as e:  # raised by the writing thread (see _join)
            self._failed.append(e)

    def _join(self) -> None:
        """Wait for the statements given so far (raising the first failure)."""
        if self._queued:
            done = threading.Event()
            self._committer.put(self, done)
            self._writer_waits.set()
            try:
                done.wait()
            finally:
                _Brisk.leave()
                self._queued = False
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
        """Run nothing more of what was given: the transaction is given up (its ROLLBACK
        follows on the writing thread)."""
        if self._queued:
            self._failed.append(Conflict("write given up"))
        self.ops = []
        try:
            self._join()
        except BaseException:
            pass

    def commit(self, then: Callable[[], None]) -> None:
        """Run the statements given and COMMIT, and ``then`` (the in-memory apply): side by
        side when the statements run on the committing thread, else one after the other. A
        failure of either is raised once both have ended (the statements' first)."""
        if not self._queued:
            self.run()
            _run(self.db, _COMMIT, (), None)
            self.committed = self.applying = True
            then()
            return
        self._add((_COMMIT, (), None))
        self.applying = True
        try:
            then()
        finally:
            self._join()
            self.committed = True
            if self._committer.checkpoints is not None:
                self._committer.checkpoints.written()


#: the interpreter's switch interval while a commit thread runs (see _Brisk)
_BRISK = 0.0002


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

    @classmethod
    def after_fork_in_child(cls) -> None:
        """A forked child has no commit thread (and no write of the forking thread is
        under way: it is forking): the caller's interval again."""
        cls.lock = threading.Lock()
        if cls.users:
            cls.users = 0
            if abs(sys.getswitchinterval() - _BRISK) < 1e-6:
                sys.setswitchinterval(cls.saved)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_Brisk.after_fork_in_child)


def _run(db: sqlite3.Connection, sql: str, params: Any, changes: int | None) -> None:
    if changes is None:
        db.execute(sql, params)
        return
    cur = db.executemany(sql, params)
    if changes >= 0 and cur.rowcount != changes:
        raise Conflict("the store changed underneath this write; retry")
