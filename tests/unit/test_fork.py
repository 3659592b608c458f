"""A process forked (``os.fork``, multiprocessing's fork start method) while a store handle of
the parent is in the middle of a big write on another thread: the fork waits for the write,
so the child inherits no half-done transaction (SQLite's locks and the WAL index state of
the parent's connection are process memory a child copies: with them copied mid-write, a
child's own handle on the file hung in BEGIN or read "database disk image is malformed"),
and the collector and the switch interval are the child's own again."""

from __future__ import annotations

import faulthandler
import gc
import json
import multiprocessing as mp
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded import commit
from graphmem.gcpause import gc_paused

pytestmark = [
    pytest.mark.embedded("a forked process and its parent's handle on one SQLite store file"),
    pytest.mark.skipif(not hasattr(os, "fork"), reason="the platform has no fork"),
]


def _items(n: int, tag: str) -> list[dict[str, object]]:
    return [
        {"content": f"{tag} note {i} about herons", "agent_id": "a1", "run_id": f"{tag}-r"}
        for i in range(n)
    ]


def _in_child(path: str, mem: GraphMemory, interval: float, out: str) -> None:
    """What the forked process does: its own handle and the inherited one, each a big
    write and a read; what it saw goes to ``out``."""
    faulthandler.dump_traceback_later(50, exit=True)  # where it hangs, if it does
    seen: dict[str, Any] = {"gc": gc.isenabled(), "interval": sys.getswitchinterval()}
    try:
        own = GraphMemory.open(path, embedder=None)
        own.remember_many(_items(commit._THREAD_ROWS, "child-own"))
        seen["own"] = own.count()
        own.close()
        mem.remember_many(_items(commit._THREAD_ROWS, "child-inherited"))
        seen["inherited"] = mem.count()
        mem.close()
    except Exception as e:  # reported to the parent, which fails the test with it
        seen["error"] = repr(e)
    seen["interval_after"] = sys.getswitchinterval()
    Path(out).write_text(json.dumps(seen))


def _forked_mid_write(
    tmp_path: Path, fork: Callable[[Callable[[], None]], Callable[[float], bool]]
) -> None:
    path = str(tmp_path / "store.db")
    out = str(tmp_path / "child.json")
    mem = GraphMemory.open(path, embedder=None)
    mem.remember_many(_items(commit._THREAD_ROWS, "before"))  # the commit thread runs
    interval = sys.getswitchinterval()
    inside, go = threading.Event(), threading.Event()
    armed = [True]

    def held(_rid: int) -> int:
        # on the committing thread, inside the write's transaction: held there until
        # shortly after the fork began
        if armed[0]:
            armed[0] = False
            inside.set()
            go.wait(30)
        return 0

    mem.backend._db.create_function("held", 1, held)  # type: ignore[attr-defined]
    mem.backend._db.execute(  # type: ignore[attr-defined]
        "CREATE TEMP TRIGGER held AFTER INSERT ON nodes BEGIN SELECT held(new.rid); END"
    )
    writer = threading.Thread(
        target=mem.remember_many, args=(_items(2 * commit._THREAD_ROWS, "during"),)
    )
    writer.start()
    assert inside.wait(30)
    threading.Timer(0.2, go.set).start()  # the write ends while the fork waits (or not)
    ended = fork(lambda: _in_child(path, mem, interval, out))
    finished = ended(60.0)
    go.set()
    writer.join()
    assert finished, "the child hung"
    seen = json.loads(Path(out).read_text())
    assert "error" not in seen, seen["error"]
    assert seen["gc"] is gc.isenabled()  # the collector as the parent has it out of a write
    assert seen["interval"] == pytest.approx(interval)
    assert seen["interval_after"] == pytest.approx(interval)
    before_and_during = 3 * commit._THREAD_ROWS
    assert seen["own"] == before_and_during + commit._THREAD_ROWS
    assert seen["inherited"] == before_and_during + 2 * commit._THREAD_ROWS
    mem.remember_many(_items(commit._THREAD_ROWS, "after"))
    assert mem.count() == before_and_during + 3 * commit._THREAD_ROWS
    mem.close()
    with GraphMemory.open(path, embedder=None) as again:
        assert again.count() == before_and_during + 3 * commit._THREAD_ROWS


def _os_fork(body: Callable[[], None]) -> Callable[[float], bool]:
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 1
        try:
            body()
            code = 0
        finally:
            os._exit(code)

    def ended(timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done, _status = os.waitpid(pid, os.WNOHANG)
            if done:
                return True
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return False

    return ended


def _mp_fork(body: Callable[[], None]) -> Callable[[float], bool]:
    child = mp.get_context("fork").Process(target=body)
    child.start()

    def ended(timeout: float) -> bool:
        child.join(timeout)
        if child.is_alive():
            child.kill()
            child.join()
            return False
        return True

    return ended


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
@pytest.mark.parametrize("fork", [_os_fork, _mp_fork], ids=["os.fork", "multiprocessing"])
def test_a_child_forked_during_a_big_write_uses_the_store_with_its_own_and_the_inherited_handle(
    tmp_path: Path, fork: Callable[[Callable[[], None]], Callable[[float], bool]]
) -> None:
    _forked_mid_write(tmp_path, fork)


def _seen_in_fork(tmp_path: Path, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """What ``body`` returns in a process forked from this one (os.fork)."""
    out = tmp_path / "seen.json"

    def child() -> None:
        out.write_text(json.dumps(body()))

    assert _os_fork(child)(30.0), "the child hung"
    seen: dict[str, Any] = json.loads(out.read_text())
    return seen


def test_a_child_forked_while_another_thread_pauses_the_collector_runs_it(
    tmp_path: Path,
) -> None:
    assert gc.isenabled()
    inside, go = threading.Event(), threading.Event()

    def pausing() -> None:
        with gc_paused():
            inside.set()
            go.wait(30)

    other = threading.Thread(target=pausing)
    other.start()
    assert inside.wait(30)

    def in_child() -> dict[str, Any]:
        seen = {"at_fork": gc.isenabled()}
        with gc_paused():
            seen["paused"] = gc.isenabled()
        seen["after"] = gc.isenabled()
        return seen

    try:
        seen = _seen_in_fork(tmp_path, in_child)
    finally:
        go.set()
        other.join()
    assert seen == {"at_fork": True, "paused": False, "after": True}
    assert gc.isenabled()


def test_a_child_forked_inside_a_pause_of_the_forking_thread_keeps_it_until_it_ends(
    tmp_path: Path,
) -> None:
    out = tmp_path / "seen.json"
    seen: dict[str, bool] = {}
    with gc_paused():
        pid = os.fork()
        if pid == 0:
            seen["at_fork"] = gc.isenabled()
    if pid == 0:  # the child, out of the pause it was forked in: never back into pytest
        try:
            seen["after"] = gc.isenabled()
            out.write_text(json.dumps(seen))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert json.loads(out.read_text()) == {"at_fork": False, "after": True}


def test_a_child_forked_while_a_commit_thread_runs_has_the_callers_switch_interval(
    tmp_path: Path,
) -> None:
    interval = sys.getswitchinterval()
    db = sqlite3.connect(tmp_path / "s.db", isolation_level=None, check_same_thread=False)
    db.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT)")
    inside, go = threading.Event(), threading.Event()

    def held(_a: int) -> int:
        inside.set()
        go.wait(30)
        return 0

    db.create_function("held", 1, held)
    db.execute(
        "CREATE TEMP TRIGGER held AFTER INSERT ON t WHEN new.a = 0 BEGIN SELECT held(0); END"
    )
    committer = commit.Committer()
    db.execute("BEGIN IMMEDIATE")
    tx = commit.Pending(db, committer)
    tx.insert("INSERT INTO t(a, b)", [(i, "x") for i in range(commit._THREAD_ROWS)])
    try:
        assert inside.wait(30)
        assert sys.getswitchinterval() == pytest.approx(min(interval, commit._BRISK))
        seen = _seen_in_fork(tmp_path, lambda: {"interval": sys.getswitchinterval()})
    finally:
        go.set()
        tx.commit(lambda: None)
        committer.close()
    assert seen["interval"] == pytest.approx(interval)
    assert sys.getswitchinterval() == pytest.approx(interval)
