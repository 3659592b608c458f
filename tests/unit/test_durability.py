"""Durability and concurrency of the embedded backend: crash, threads, two processes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphmem.backends.base import WriteBatch
from graphmem.backends.embedded import NetworkXBackend
from graphmem.memory import GraphMemory
from graphmem.models import EdgeType, NodeLabel, OrgFact
from tests.threads import run_threads

pytestmark = pytest.mark.embedded(
    "the embedded store's journal and file: kills, reopens, second processes"
)

WRITER = r"""
import sys
from graphmem.memory import GraphMemory
mem = GraphMemory.open(sys.argv[1], embedder=None)
for i in range(int(sys.argv[2])):
    m = mem.remember(f"memory number {i} about topic {i % 17}", agent_id=f"a{i % 5}",
                     tags=[f"t{i % 3}"], metadata={"i": i})
    sys.stdout.write(m.id + "\n")
    sys.stdout.flush()
"""


def test_sigkill_during_10k_writes_loses_no_acknowledged_write(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "10000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while len(acked) < 1500 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acked.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)  # mid-write, no chance to clean up
    rest, _ = proc.communicate()
    acked += [x for x in rest.split("\n") if x]
    assert proc.returncode == -signal.SIGKILL
    assert 1500 <= len(acked) < 10000, "the writer must be killed in the middle of its run"

    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with GraphMemory.open(str(db), embedder=None) as mem:
        found = mem.get(acked)
        assert len(found) == len(acked), "an acknowledged write was lost"
        total = mem.count()
        assert total in (len(acked), len(acked) + 1)  # at most the one in flight
        # the store keeps working and its indexes agree with the data
        mem.remember("after the crash")
        assert mem.count() == total + 1
        hits = mem.recall("topic 3", k=50, touch=False)
        assert hits and all("topic 3" in r.memory.content for r in hits[:5])


def _edge_set(mem: GraphMemory) -> set[tuple[str, str, str]]:
    return {(u, k, v) for u, v, k in mem.graph.edges(keys=True)}


def test_reopen_rebuilds_exactly_the_same_graph(tmp_path: Path) -> None:
    db = str(tmp_path / "g.db")
    with GraphMemory.open(db, embedder=None) as mem:
        mem.runs.start("bot", run_id="r1")
        a = mem.remember("with tags and a run", agent_id="bot", run_id="r1", tags=["x", "y"])
        mem.update(a.id, "changed", tags=["y"])
        mem.runs.add_events(
            "r1", [{"event_type": "user_message", "content": f"e{i}"} for i in range(3)]
        )
        mem.backend.write(
            WriteBatch(nodes=[OrgFact(fact_id="f", content="policy", author="bot", tags=["x"])])
        )
        edges, nodes = _edge_set(mem), dict(mem.graph.nodes(data=True))
    with GraphMemory.open(db, embedder=None) as mem:
        assert _edge_set(mem) == edges
        assert dict(mem.graph.nodes(data=True)) == nodes


def test_reopen_restores_everything(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    with GraphMemory.open(db, embedder=None) as mem:
        a = mem.remember("persist me", tags=["x"], metadata={"k": [1, 2]})
        b = mem.update(a.id, "persist me too")
        mem.runs.add_event("run", "user_message", "hello")
        mem.backend.ensure_schema(embedding_dim=2)
        [v] = mem.remember_many([{"content": "vec", "embedding": [0.6, 0.8]}])
        stats = mem.backend.stats()
    with GraphMemory.open(db, embedder=None) as mem:
        assert mem.backend.stats().nodes == stats.nodes
        assert mem.backend.stats().edges == stats.edges
        assert mem.get(b.id) == b and [m.id for m in mem.history(a.id)] == [a.id, b.id]
        assert mem.get(v.id).embedding == (pytest.approx(0.6), pytest.approx(0.8))
        assert [r.memory.id for r in mem.recall("persist", touch=False)] == [b.id]


def test_eight_threads_of_mixed_writes_and_reads_give_exact_counts(tmp_path: Path) -> None:
    mem = GraphMemory.open(str(tmp_path / "t.db"), embedder=None)
    mem.runs.start("shared", run_id="shared-run")
    per_thread = 150

    def work(t: int) -> None:
        for i in range(per_thread):
            m = mem.remember(f"thread {t} item {i}", agent_id=f"agent{t}", tags=[f"t{t}"])
            assert mem.get(m.id).content == m.content
            if i % 10 == 0:
                mem.runs.add_event("shared-run", "observation", f"thread {t} saw {i}")
                mem.recall(f"thread {t}", agent_id=f"agent{t}", k=3)
                mem.list(agent_id=f"agent{t}", limit=5)

    run_threads(work, [(t,) for t in range(8)])
    assert mem.count(category="semantic") == 8 * per_thread
    for t in range(8):
        assert mem.count(agent_id=f"agent{t}") == per_thread
        assert mem.count(tags=[f"t{t}"]) == per_thread
    events = mem.runs.events("shared-run")
    assert [e.seq for e in events] == list(range(8 * 15))
    chain = mem.backend.expand([events[0].ref], [EdgeType.NEXT], direction="out", depth=10_000)
    assert len(chain.edges) == len(events) - 1  # one linear NEXT chain
    mem.close()
    with GraphMemory.open(str(tmp_path / "t.db"), embedder=None) as again:
        assert again.count(category="semantic") == 8 * per_thread


def test_a_second_process_sees_writes_and_never_corrupts(tmp_path: Path) -> None:
    db = str(tmp_path / "shared.db")
    mem = GraphMemory.open(db, embedder=None)
    mem.remember("written by the first process")
    out = subprocess.run(
        [sys.executable, "-c", WRITER, db, "25"], capture_output=True, text=True, check=True
    )
    other_ids = out.stdout.split()
    assert len(other_ids) == 25
    # the first process reloads on its next call because the file changed under it
    assert mem.count() == 26
    assert len(mem.get(other_ids)) == 25
    mine = mem.remember("and again by the first")
    mem.close()
    with GraphMemory.open(db, embedder=None) as fresh:
        assert fresh.count() == 27 and fresh.get(mine.id).content == mine.content
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_failed_write_leaves_memory_state_untouched(tmp_path: Path) -> None:
    backend = NetworkXBackend(tmp_path / "f.db")
    mem = GraphMemory(backend, embedder=None)
    a = mem.remember("a")
    # make the SQL write fail after planning: a read-only database rejects the commit
    backend._db.execute("PRAGMA query_only = ON")
    with pytest.raises(Exception) as info:
        mem.remember("b")
    assert "write" in str(info.value).lower() or "readonly" in str(info.value).lower()
    backend._db.execute("PRAGMA query_only = OFF")
    assert mem.count() == 1 and mem.get(a.id) == a
    assert backend.stats().nodes[NodeLabel.MEMORY.value] == 1
    mem.close()


def test_closed_store_raises_typed_error(tmp_path: Path) -> None:
    from graphmem.errors import BackendUnavailable

    mem = GraphMemory.open(str(tmp_path / "c.db"), embedder=None)
    mem.close()
    mem.close()  # idempotent
    with pytest.raises(BackendUnavailable):
        mem.remember("x")
