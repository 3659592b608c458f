"""A failed statement must not leave the backend holding a connection the driver has put
back in its pool.

When the server fails a statement of a transaction, the driver resets the connection and
returns it to the pool at once; its own clean-up of a transaction function that then raises
(``execute_write``'s rollback) still reads that connection's socket to see whether it is
dead. Another thread may already be using the connection: the stray one-byte read takes a
byte of that thread's reply, which then waits for bytes that never come while the server
keeps its transaction (and locks) open. That is how eight threads updating one chain hung on
a live server. These tests watch the driver's connections: after a failed write, nothing
may touch one that is back in the pool. (Drivers before 6.0 read no socket in that check, but
their clean-up sends a ROLLBACK on the connection unless it looks freshly reset — by then
possibly another thread's transaction; the same change covers both.)"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from graphmem.backends.base import Expect, WriteBatch
from graphmem.backends.neo4j import Neo4jBackend
from graphmem.errors import Conflict
from graphmem.models import Memory, NodeLabel, NodeRef
from tests.neo4j_support import Neo4jTarget, neo4j_target

pytestmark = pytest.mark.neo4j


@pytest.fixture
def neo(request: pytest.FixtureRequest) -> Iterator[Neo4jBackend]:
    target: Neo4jTarget = neo4j_target(request)
    target.wipe()
    with target.backend() as b:
        yield b


@pytest.fixture
def released_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Stacks of every liveness read (``Bolt.defunct``) of a connection that sits in the
    pool, free for any thread to take."""
    try:  # the driver's connection class: a package from 6.0, a module before
        from neo4j._sync.io._bolt._base import Bolt
    except ImportError:
        from neo4j._sync.io._bolt import Bolt  # type: ignore[no-redef,attr-defined]

    seen: list[str] = []
    real = Bolt.defunct

    def watched(self: Any) -> Any:
        pool = getattr(self, "pool", None)
        pooled = pool is not None and any(c is self for cs in pool.connections.values() for c in cs)
        if pooled and not self.in_use and not self.closed():
            seen.append("".join(traceback.format_stack(limit=8)))
        return real(self)

    monkeypatch.setattr(Bolt, "defunct", watched)
    return seen


def test_a_failed_guard_leaves_the_released_connection_alone(
    neo: Neo4jBackend, released_reads: list[str]
) -> None:
    old = Memory(content="Alice lives in Oslo", agent_id="a")
    neo.write(WriteBatch(nodes=[old]))
    later = Memory(content="Alice lives in Rome", agent_id="a")
    for _ in range(3):
        with pytest.raises(Conflict):  # the server-side guard fails the statement
            neo.write(WriteBatch(nodes=[later], expect=[Expect(ref=old.ref, exists=False)]))
        with pytest.raises(Conflict):
            neo.write(
                WriteBatch(nodes=[later], expect=[Expect(ref=NodeRef(NodeLabel.MEMORY, "gone"))])
            )
    assert released_reads == [], released_reads[0]
    assert neo.get(Memory, [later.id]) == []


def test_a_constraint_failure_leaves_the_released_connection_alone(
    neo: Neo4jBackend, released_reads: list[str]
) -> None:
    m = Memory(content="written once", agent_id="a")
    neo.write(WriteBatch(nodes=[m], expect=[Expect(ref=m.ref, exists=False)]))
    with pytest.raises(Conflict):  # created already: the uniqueness constraint says so
        neo.write(
            WriteBatch(nodes=[m.evolve(content="again")], expect=[Expect(ref=m.ref, exists=False)])
        )
    assert released_reads == [], released_reads[0]
    assert neo.get(Memory, [m.id])[0].content == "written once"


def test_eight_threads_of_failing_and_passing_writes_all_finish(neo: Neo4jBackend) -> None:
    """Writes whose guard fails interleaved with reads on one pool: every call returns
    (a typed Conflict or a result) within the bound, and nothing else is raised."""
    base = Memory(content="the base", agent_id="a")
    neo.write(WriteBatch(nodes=[base]))
    errors: list[BaseException] = []
    conflicts = [0]
    lock = threading.Lock()

    def worker(n: int) -> None:
        try:
            for j in range(25):
                m = Memory(content=f"w{n} {j}", agent_id="a")
                try:
                    neo.write(WriteBatch(nodes=[m], expect=[Expect(ref=base.ref, exists=False)]))
                except Conflict:
                    with lock:
                        conflicts[0] += 1
                assert neo.get(Memory, [base.id])[0].content == "the base"
        except BaseException as e:  # reported by the test below
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    stuck = sum(t.is_alive() for t in threads)
    assert not stuck, f"{stuck} of 8 workers never finished"
    assert errors == []
    assert conflicts[0] == 8 * 25
