"""The floor of a Neo4j ingest on this server: the cheapest load of memory-like nodes by any client.

    python benchmarks/neo4j_floor.py --url bolt://127.0.0.1:7689 --server-pid <JVM pid>
        [--n 100000] [--batch 1000] [--steps plain,fulltext,...] [--rounds 1]

Every step wipes the database (nodes, indexes, constraints), makes its schema, then loads the
same ``n`` memories of ``scale.py``'s workload (texts, 20 agents, ~n/50 runs, 50 tags, 5
namespaces) with graphmem's node properties (the 18 a Memory stores; times sent as ISO text
and made datetimes on the server, as graphmem sends them) in ``UNWIND`` batches of
``--batch``, one auto-committed transaction each, on one session. The steps add one thing
at a time, so the difference between two rows is what that thing costs the server:

- ``plain``: ``CREATE`` of the nodes, only the id's uniqueness constraint;
- ``fulltext``: + graphmem's full-text index (content, agent_id, namespace, tags; english);
- ``eventual``: the same index refreshed behind the commits (graphmem's opt-in
  ``fulltext_refresh="background"``) instead of in them;
- ``+agent_id`` ... ``+content_hash``: + graphmem's range indexes on Memory, one more per step
  (the last of them has every Memory index graphmem makes except the vector one);
- ``edges``: + the Agent, Run and Tag hubs (created once before the load, with their
  constraints) and each memory's AUTHORED_BY, IN_RUN and TAGGED edges and its run's NEXT edge
  (the previous memory's id computed by the client);
- ``+heads``: + what graphmem keeps on each run a batch appends to (``event_count`` and
  ``last_event_id`` set on the Run, nodes/run_head_set.cypher), in the same statement;
- ``+guards``: + graphmem's guards in front (``compile_guard``: each run's previous memory and
  the Run locked in id order, then checked), i.e. graphmem's statement without its hub MERGEs;
- ``vectors-after``: + a 384-d vector per memory (``scale.synthetic_vectors``), the vector
  index (graphmem's, quantized) created after the load and its population awaited;
- ``vectors-during``: the same with the vector index made before the load;
- ``graphmem``: ``GraphMemory.remember_many`` of the same items (no vectors), for comparison;
- ``graphmem-vectors``: the same with the vectors inside ``backend.bulk_load()`` (as
  ``scale.py --recall`` loads);
- ``nam`` / ``nam-vectors``: neo4j-agent-memory's ``add_messages_batch`` of the same texts into
  one conversation (its cheapest path: one transaction per batch), without and with the
  precomputed vectors (through its ``Embedder`` protocol); needs its own environment
  (``/path/to/its/venv/bin/python benchmarks/neo4j_floor.py --steps nam,...``).

Per step: wall seconds, memories/s, the server's CPU (``/proc/<pid>/stat`` of the JVM) and the
client's CPU per memory, and the 1-minute load before and after. Not a test dependency.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale import items, server_cpu_s, synthetic_vectors  # noqa: E402

EDGES = ("edges", "+heads", "+guards", "vectors-after", "vectors-during")
"""The steps that write the hubs and each memory's edges."""

RANGE = ("agent_id", "run_id", "namespace", "audience", "status", "category", "created_at")
"""graphmem's range indexes on Memory (schema/memory_*.cypher), content_hash last."""

STEPS = (
    "plain",
    "fulltext",
    "eventual",
    *(f"+{p}" for p in RANGE),
    "+content_hash",
    "edges",
    "+heads",
    "+guards",
    "vectors-after",
    "vectors-during",
    "graphmem",
    "graphmem-vectors",
    "nam",
    "nam-vectors",
)

FULLTEXT = (
    "CREATE FULLTEXT INDEX memory_fulltext IF NOT EXISTS FOR (n:Memory) "
    "ON EACH [n.content, n.agent_id, n.namespace, n.tags] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}"
)
VECTOR = (
    "CREATE VECTOR INDEX memory_embedding_vector IF NOT EXISTS FOR (n:Memory) ON (n.embedding) "
    "OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}"
)

TIMES = (
    "WITH *, row.props AS _p SET m = _p {.*, created_at: datetime(_p.created_at), "
    "updated_at: datetime(_p.updated_at), valid_from: datetime(_p.valid_from)}"
)
"""A row's properties with its times made datetimes from their ISO text: the driver packs a
Python datetime in Python (≈ 30 µs of client CPU each, three a memory), text in Rust."""

NODES = f"UNWIND $rows AS row CREATE (m:Memory) {TIMES}"
"""The cheapest node write: one CREATE and one map per memory."""

NODES_AND_EDGES = (
    "UNWIND $rows AS row\nCREATE (m:Memory)\n"
    + TIMES
    + """
WITH m, row
MATCH (a:Agent {id: row.agent})
MATCH (r:Run {id: row.run})
CREATE (m)-[:AUTHORED_BY]->(a), (m)-[:IN_RUN]->(r)
WITH m, row
UNWIND row.tags AS tag
MATCH (t:Tag {id: tag})
CREATE (m)-[:TAGGED]->(t)
WITH count(*) AS written
UNWIND $next AS pair
MATCH (p:Memory {id: pair[0]})
MATCH (q:Memory {id: pair[1]})
CREATE (p)-[:NEXT]->(q)
RETURN count(*) AS linked
"""
)

HEADS = """
WITH count(*) AS linked
UNWIND $heads AS h
MATCH (r:Run {id: h.id})
SET r.event_count = h.event_count, r.last_event_id = h.last_event_id
RETURN count(*) AS heads
"""

HUBS = """
UNWIND $agents AS agent
CREATE (:Agent {id: agent, name: '', seniority: 'junior', autonomy: 1, kind: 'agent'})
WITH count(*) AS agents
UNWIND $tags AS tag
CREATE (:Tag {id: tag, name: tag})
WITH count(*) AS tags
UNWIND $runs AS run
MATCH (a:Agent {id: run.agent_id})
CREATE (r:Run)-[:RUN_BY]->(a)
SET r = run
"""


def wipe(args: argparse.Namespace) -> None:
    """Every node, constraint and index dropped (as neo4j_peers.py wipes)."""
    from neo4j_peers import wipe as drop_everything

    drop_everything(args.url, (args.user, args.password), None)


def schema_for(step: str) -> list[str]:
    """The schema statements a step makes before its load (cumulative, see the module doc)."""
    out = ["CREATE CONSTRAINT memory_id_unique IF NOT EXISTS FOR (n:Memory) REQUIRE n.id IS UNIQUE"]
    if step == "plain":
        return out
    if step == "eventual":
        return [
            *out,
            FULLTEXT.replace("'english'", "'english', `fulltext.eventually_consistent`: true"),
        ]
    out.append(FULLTEXT)
    props = [*RANGE, "content_hash"]
    if step.startswith("+") and step not in EDGES:
        props = props[: props.index(step[1:]) + 1]
    elif step == "fulltext":
        props = []
    out += [f"CREATE INDEX memory_{p} IF NOT EXISTS FOR (n:Memory) ON (n.{p})" for p in props]
    if step in EDGES:
        out += [
            f"CREATE CONSTRAINT {lab.lower()}_id_unique IF NOT EXISTS "
            f"FOR (n:{lab}) REQUIRE n.id IS UNIQUE"
            for lab in ("Agent", "Run", "Tag")
        ]
    if step == "vectors-during":
        out.append(VECTOR)
    return out


def memory_rows(n: int, vectors: Any | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows of the load (graphmem's Memory properties) and the hubs they point to."""
    from hashlib import sha256
    from uuid import uuid4

    rows = []
    runs: dict[str, dict[str, Any]] = {}
    for i, it in enumerate(items(n)):
        at = it["created_at"].isoformat()
        props: dict[str, Any] = {
            "id": uuid4().hex,
            "content": it["content"],
            "category": "semantic",
            "tier": "long_term",
            "importance": it["importance"],
            "confidence": 1.0,
            "created_at": at,
            "updated_at": at,
            "access_count": 0,
            "agent_id": it["agent_id"],
            "run_id": it["run_id"],
            "namespace": it["namespace"],
            "tags": it["tags"],
            "valid_from": at,
            "status": "active",
            "content_hash": sha256(it["content"].encode()).hexdigest(),
            "visibility": "private",
            "audience": f"agent:{it['agent_id']}",
        }
        if vectors is not None:
            props["embedding"] = vectors[i]
        runs.setdefault(
            it["run_id"],
            {
                "id": it["run_id"],
                "agent_id": it["agent_id"],
                "namespace": it["namespace"],
                "status": "running",
                "started_at": datetime.now(UTC).isoformat(),
            },
        )
        rows.append(
            {"props": props, "agent": it["agent_id"], "run": it["run_id"], "tags": it["tags"]}
        )
    hubs = {
        "agents": sorted({r["agent"] for r in rows}),
        "tags": sorted({t for r in rows for t in r["tags"]}),
        "runs": list(runs.values()),
    }
    return rows, hubs


def batches(rows: Sequence[dict[str, Any]], size: int) -> Iterator[Sequence[dict[str, Any]]]:
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


def next_pairs(rows: Sequence[dict[str, Any]], last: dict[str, str]) -> list[list[str]]:
    """(previous memory, memory) of each row's run, in load order; ``last`` carries on."""
    pairs = []
    for r in rows:
        prev = last.get(r["run"])
        if prev is not None:
            pairs.append([prev, r["props"]["id"]])
        last[r["run"]] = r["props"]["id"]
    return pairs


def guarded(
    chunk: Sequence[dict[str, Any]], last: dict[str, str], heads: dict[str, int]
) -> tuple[str, dict[str, Any]]:
    """graphmem's guards of a batch that appends to runs (the run's previous memory exists,
    the Run is as the writer last left it), composed in front of the write."""
    from graphmem.backends.neo4j.statements import compose
    from graphmem.backends.neo4j.writes import compile_guard
    from graphmem.models import NodeLabel

    runs = {r["run"] for r in chunk}
    prev = [
        {"id": last[r], "exists": True, "props": {}, "nulls": [], "types": [], "sources": None}
        for r in runs
        if r in last
    ]
    state = [
        {
            "id": r,
            "exists": True,
            "nulls": [],
            "types": [],
            "sources": None,
            "props": {"event_count": heads.get(r, 0), "last_event_id": last.get(r)},
        }
        for r in runs
        if r in last
    ]
    parts = [compile_guard(NodeLabel.MEMORY, prev), compile_guard(NodeLabel.RUN, state)]
    text, params = compose(parts, counted=[])
    return text, params


def load_cypher(
    driver: Any,
    step: str,
    rows: list[dict[str, Any]],
    hubs: dict[str, Any],
    batch: int,
    vectors: bool,
) -> None:
    edges = step in EDGES
    with driver.session() as s:
        if edges:
            s.run(HUBS, hubs).consume()
        last: dict[str, str] = {}
        heads: dict[str, int] = {}
        for chunk in batches(rows, batch):
            if vectors:
                sent = [
                    {**r, "props": {**r["props"], "embedding": r["props"]["embedding"].tolist()}}
                    for r in chunk
                ]
            else:
                sent = list(chunk)
            if step in ("+heads", "+guards"):
                text, params = guarded(chunk, last, heads) if step == "+guards" else ("", {})
                pairs = next_pairs(chunk, last)
                for r in chunk:
                    heads[r["run"]] = heads.get(r["run"], 0) + 1
                rows_heads = [
                    {"id": k, "event_count": heads[k], "last_event_id": last[k]}
                    for k in sorted({r["run"] for r in chunk})
                ]
                body = NODES_AND_EDGES.replace("RETURN count(*) AS linked", HEADS)
                if text:
                    body = text.rsplit("RETURN", 1)[0] + "WITH count(*) AS guarded\n" + body
                s.run(body, {**params, "rows": sent, "next": pairs, "heads": rows_heads}).consume()
            elif edges:
                s.run(NODES_AND_EDGES, rows=sent, next=next_pairs(chunk, last)).consume()
            else:
                s.run(NODES, rows=sent).consume()
        if step == "vectors-after":
            s.run(VECTOR).consume()
        if step == "eventual":  # searchable before the clock stops
            s.run("CALL db.index.fulltext.awaitEventuallyConsistentIndexRefresh()").consume()
        s.run("CALL db.awaitIndexes(7200)").consume()


def graphmem_loader(
    url: str, auth: tuple[str, str], n: int, batch: int, vectors: Any
) -> tuple[Callable[[], None], Callable[[], None]]:
    """graphmem opened, its schema made and its items built before the clock starts (as
    ``scale.py`` does); returns the load and what closes the handle."""
    from contextlib import nullcontext

    from scale import SyntheticQueries, ingest

    from graphmem.memory import GraphMemory

    data = items(n)
    if vectors is not None:
        for i, it in enumerate(data):
            it["embedding"] = vectors[i]
    mem = GraphMemory.open(
        url, embedder=None if vectors is None else SyntheticQueries(384, vectors), auth=auth
    )
    mem.backend.ensure_schema()  # type: ignore[attr-defined]

    def load() -> None:
        bulk = getattr(mem.backend, "bulk_load", None) if vectors is not None else None
        with bulk() if bulk is not None else nullcontext():
            ingest(mem, data, batch)
            mem.vectors.wait()

    return load, mem.close


class _Precomputed:
    """neo4j-agent-memory's ``Embedder`` protocol answering from precomputed vectors."""

    dimensions = 384

    def __init__(self, by_text: dict[str, list[float]]) -> None:
        self.by_text = by_text

    async def embed(self, text: str) -> list[float]:
        return self.by_text[text]

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [self.by_text[t] for t in texts]


def nam_loader(
    url: str, auth: tuple[str, str], n: int, batch: int, vectors: Any
) -> tuple[Callable[[], None], Callable[[], None]]:
    """neo4j-agent-memory connected (its schema, vector index included, made on connect) and
    its messages built before the clock starts; returns the load and what closes it."""
    from neo4j_agent_memory import MemoryClient, MemorySettings
    from neo4j_agent_memory.config.settings import ExtractionConfig, ExtractorType, Neo4jConfig
    from pydantic import SecretStr

    texts = [it["content"] for it in items(n)]
    by_text = {} if vectors is None else {t: vectors[i].tolist() for i, t in enumerate(texts)}
    messages = [{"role": "user", "content": t} for t in texts]
    settings = MemorySettings(
        neo4j=Neo4jConfig(uri=url, username=auth[0], password=SecretStr(auth[1])),
        extraction=ExtractionConfig(extractor_type=ExtractorType.NONE),
    )
    loop = asyncio.new_event_loop()
    client = MemoryClient(settings, embedder=_Precomputed(by_text))
    loop.run_until_complete(client.connect())

    def load() -> None:
        for chunk in batches(messages, batch):
            loop.run_until_complete(
                client.short_term.add_messages_batch(
                    "floor",
                    list(chunk),
                    batch_size=batch,
                    generate_embeddings=vectors is not None,
                    extract_entities=False,
                )
            )
        loop.run_until_complete(client.graph.execute_write("CALL db.awaitIndexes(7200)", {}))

    def close() -> None:
        loop.run_until_complete(client.close())
        loop.close()

    return load, close


def run_step(args: argparse.Namespace, driver: Any, step: str, vecs: Any) -> dict[str, Any]:
    auth = (args.user, args.password)
    with_vectors = step in ("vectors-after", "vectors-during", "graphmem-vectors", "nam-vectors")
    wipe(args)
    with driver.session() as s:
        for q in schema_for(step) if not step.startswith(("graphmem", "nam")) else []:
            s.run(q).consume()
        s.run("CALL db.awaitIndexes(600)").consume()
    rows: list[dict[str, Any]] = []
    hubs: dict[str, Any] = {}
    load: Callable[[], None]
    close: Callable[[], None] = lambda: None  # noqa: E731
    if step.startswith("graphmem"):
        load, close = graphmem_loader(
            args.url, auth, args.n, args.batch, vecs if with_vectors else None
        )
    elif step.startswith("nam"):
        load, close = nam_loader(args.url, auth, args.n, args.batch, vecs if with_vectors else None)
    else:
        rows, hubs = memory_rows(args.n, vecs if with_vectors else None)

        def load() -> None:
            load_cypher(driver, step, rows, hubs, args.batch, with_vectors)

    time.sleep(args.settle)
    load_before = os.getloadavg()[0]
    t, c, s = time.perf_counter(), time.process_time(), server_cpu_s(args.server_pid)
    load()
    wall = time.perf_counter() - t
    client = time.process_time() - c
    server = server_cpu_s(args.server_pid) - s
    close()
    with driver.session() as ses:
        label = "Message" if step.startswith("nam") else "Memory"
        stored = ses.run(f"MATCH (n:{label}) RETURN count(n) AS c").single()["c"]
    if stored < args.n:
        raise SystemExit(f"{step}: {stored} of {args.n} memories stored")
    return {
        "step": step,
        "wall_s": wall,
        "per_s": args.n / wall,
        "server_us": server / args.n * 1e6,
        "client_us": client / args.n * 1e6,
        "load": f"{load_before:.1f} → {os.getloadavg()[0]:.1f}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="bolt URL (the database is wiped)")
    ap.add_argument("--user", default=os.environ.get("NEO4J_USER", "neo4j"))
    ap.add_argument("--password", default=os.environ.get("NEO4J_PASSWORD", ""))
    ap.add_argument("--server-pid", type=int, default=None, help="the server JVM's pid")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--steps", default=",".join(s for s in STEPS if not s.startswith("nam")))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds idle before each load")
    args = ap.parse_args()
    steps = args.steps.split(",")
    unknown = set(steps) - set(STEPS)
    if unknown:
        ap.error(f"unknown steps {sorted(unknown)}; choose from {', '.join(STEPS)}")
    import neo4j

    vecs = synthetic_vectors(args.n) if any("vectors" in s for s in steps) else None
    print(
        f"`{' '.join(sys.argv)}`, n={args.n}, batch={args.batch}, "
        f"{os.cpu_count()} cores, {time.strftime('%H:%M UTC', time.gmtime())}"
    )
    print("| step | wall s | memories/s | server CPU µs / memory | client CPU µs / memory | load |")
    print("|---|---:|---:|---:|---:|---|")
    with neo4j.GraphDatabase.driver(args.url, auth=(args.user, args.password)) as driver:
        for _ in range(args.rounds):
            for step in steps:
                r = run_step(args, driver, step, vecs)
                print(
                    f"| {r['step']} | {r['wall_s']:.1f} | {r['per_s']:,.0f} | "
                    f"{r['server_us']:,.0f} | {r['client_us']:,.0f} | {r['load']} |",
                    flush=True,
                )
        wipe(args)


if __name__ == "__main__":
    main()
