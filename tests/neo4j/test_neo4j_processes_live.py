"""Several processes on one live Neo4j database (GRAPHMEM_URL or NEO4J_URI, else
testcontainers, else skipped with how to enable them — see tests/neo4j_support.py).

The promises the embedded store's stress tests check on one file (tests/stress), here on a
server: two processes of eight threads each (tests/neo4j/_procs.py) write, version, forget,
append to one run, publish org facts and consolidate; and a writer killed (SIGKILL) in the
middle of large batches leaves each batch whole or absent."""

from __future__ import annotations

import multiprocessing as mp
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.errors import NotFound
from graphmem.models import Status
from tests.neo4j._procs import work
from tests.neo4j_support import Neo4jTarget, neo4j_target

pytestmark = pytest.mark.neo4j


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Neo4jTarget:
    t = neo4j_target(request)
    t.wipe()
    return t


def _open(target: Neo4jTarget) -> GraphMemory:
    return GraphMemory.open(target.uri, auth=target.auth, database=target.database, embedder=None)


def _rows(target: Neo4jTarget, cypher: str) -> list[dict[str, Any]]:
    records, _summary, _keys = target.driver.execute_query(cypher, database_=target.database)
    return [dict(r) for r in records]


def _chains(target: Neo4jTarget) -> dict[str, list[dict[str, Any]]]:
    """Each run's memories with their NEXT edges in and out and their seq."""
    rows = _rows(
        target,
        "MATCH (m:Memory) WHERE m.run_id IS NOT NULL "
        "RETURN m.run_id AS run, m.id AS id, m.seq AS seq, "
        "COUNT { (m)-[:NEXT]->() } AS outs, COUNT { ()-[:NEXT]->(m) } AS ins",
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["run"], []).append(r)
    return out


def _one_line(mem: GraphMemory, run_id: str, members: list[dict[str, Any]]) -> None:
    """A run's memories form one NEXT line that ends at the run's last memory, and its
    events are numbered 0..event_count-1."""
    assert all(m["outs"] <= 1 and m["ins"] <= 1 for m in members), run_id
    heads = [m["id"] for m in members if m["ins"] == 0]
    tails = [m["id"] for m in members if m["outs"] == 0]
    assert len(heads) == 1 and len(tails) == 1, (run_id, len(heads), len(tails))
    run = mem.runs.get(run_id)
    assert run.last_event_id == tails[0]
    seqs = sorted(m["seq"] for m in members if m["seq"] is not None)
    assert seqs == list(range(run.event_count)), run_id


def test_two_processes_of_eight_threads_keep_every_promise(target: Neo4jTarget) -> None:
    with _open(target) as mem:
        mem.agents.register("cto", seniority="lead")
        mem.agents.register("vp", seniority="lead")
        roots = [mem.remember(f"chain {i} v0", agent_id="setup").id for i in range(4)]
        doomed = {
            p: mem.remember(f"doomed chain of {p} v0", agent_id="setup").id for p in ("p0", "p1")
        }
        facts = [
            mem.org.publish(f"fact {i}", author="cto", fact_id=f"F{i}").fact_id for i in (0, 1)
        ]
        mem.runs.start("runner", run_id="R")
    setup = {"roots": roots, "doomed": doomed, "facts": facts, "run": "R"}
    conn = {"uri": target.uri, "auth": target.auth, "database": target.database}
    with ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("spawn")) as pool:
        futures = [
            pool.submit(work, conn, name, setup, 22, seed) for seed, name in enumerate(doomed)
        ]
        results = [f.result(timeout=240) for f in futures]

    def every(key: str) -> list[Any]:
        return [x for r in results for x in r[key]]

    assert every("untyped") == [] and every("refused") == []
    assert every("leaks") == []  # no private memory of the other agent, by any read
    with _open(target) as mem:
        present = {m.id: m for m in mem.list(status=None, limit=None)}
        forgotten = set(every("forgotten"))
        # no acknowledged write lost, nothing forgotten back, nothing of a forgotten chain
        assert set(every("acked")) - forgotten <= set(present)
        assert not forgotten & set(present)
        assert not [m for m in present.values() if "doomed" in m.content]
        assert all(any(d in m.content for d in doomed.values()) is False for m in present.values())
        assert {v for root, v in every("versions") if root in roots} <= set(present)
        assert set(every("dups")) <= set(present)  # merged ones stay, superseded
        for batch, n in every("batches"):
            assert mem.count(metadata={"batch": batch}, status=None) == n, batch
        # no fork: one active version a chain, no memory superseded twice
        for root in roots:
            assert [m.status for m in mem.history(root)].count(Status.ACTIVE) == 1, root
        assert (
            _rows(
                target,
                "MATCH (old)<-[s:SUPERSEDES]-() WITH old, count(s) AS n WHERE n > 1 RETURN old.id",
            )
            == []
        )
        # one line for the shared run, with every acknowledged append on it
        chains = _chains(target)
        _one_line(mem, "R", chains["R"])
        assert set(every("events")) <= {m["id"] for m in chains["R"]}
        # org facts: versions 1..n, the newest the one active, every acknowledged one there
        for fid in facts:
            versions = mem.org.versions(fid)
            assert [v.version for v in versions] == list(range(1, len(versions) + 1))
            assert [v.status for v in versions].count(Status.ACTIVE) == 1
            assert versions[-1].status is Status.ACTIVE
        kept = {(v.fact_id, v.version, v.id) for fid in facts for v in mem.org.versions(fid)}
        assert {tuple(f) for f in every("facts")} <= kept
        # counts add up, and nobody reads the other's private memories afterwards either
        assert mem.count(status=None) == len(present)
        assert _rows(target, "MATCH (m:Memory) RETURN count(m) AS n") == [{"n": len(present)}]
        for me, other in (("alice", "bob"), ("bob", "alice")):
            assert mem.count(scope=me, agent_id=other, status=None) == 0
            assert not [
                m for m in mem.list(scope=me, status=None, limit=None) if m.agent_id == other
            ]
            theirs = [m for m in present.values() if m.agent_id == other][:10]
            for m in theirs:
                with pytest.raises(NotFound):
                    mem.get(m.id, scope=me)


WRITER = """
import random, sys
from graphmem import GraphMemory
uri, user, password, k = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rng = random.Random(int(k))
mem = GraphMemory.open(uri, auth=(user, password), embedder=None)
for j in range(10_000):
    n = rng.choice((1, 17, 300, 1500))
    run = rng.choice(("k0", "k1", f"new{k}x{j}"))
    tag = f"b{k}x{j}"
    items = [{"content": f"{tag} item {i}", "agent_id": "w", "run_id": run,
              "metadata": {"batch": tag, "size": n}} for i in range(n)]
    mem.remember_many(items)
    print(tag, n, flush=True)
"""


def test_a_writer_killed_mid_batch_leaves_each_batch_whole_or_absent(target: Neo4jTarget) -> None:
    """SIGKILL at a random moment while a process writes batches of up to 1,500 memories
    to shared and new runs: the server rolls back the batch whose connection died, so each
    batch is all there or not at all, every batch the writer saw return is there, and each
    run is still one line another process can append to."""
    if target.auth is None:
        pytest.skip("the killed writer signs in with a user and password")
    rng = random.Random(7)
    acked: dict[str, int] = {}
    for k in range(2):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, target.uri, *target.auth, str(k)],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(rng.uniform(3.0, 6.0))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
        for line in out.splitlines():
            tag, n = line.split()
            acked[tag] = int(n)
        sizes = _rows(
            target,
            "MATCH (m:Memory) RETURN m.`metadata.batch` AS batch, "
            "m.`metadata.size` AS size, count(*) AS n",
        )
        assert [r for r in sizes if r["n"] != r["size"]] == []
        seen = {r["batch"]: r["n"] for r in sizes}
        assert {tag: seen.get(tag) for tag in acked} == acked
        with _open(target) as mem:
            for run_id, members in _chains(target).items():
                _one_line(mem, run_id, members)
    assert acked  # the writer got batches through before each kill
    with _open(target) as mem:
        for run_id in ("k0", "k1"):
            mem.remember("after the kills", agent_id="w", run_id=run_id, reconcile="off")
        for run_id, members in _chains(target).items():
            _one_line(mem, run_id, members)
