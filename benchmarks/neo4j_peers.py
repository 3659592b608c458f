"""graphmem on Neo4j beside neo4j-agent-memory on the same server, same turns, same model.

    python benchmarks/neo4j_peers.py --url bolt://127.0.0.1:7687 [--turns 2000]
        [--adds 200] [--queries 300] [--threads 1] [--rounds 2] [--load 0]
        [--only graphmem,neo4j-agent-memory]

neo4j-agent-memory (PyPI ``neo4j-agent-memory``) keeps conversation turns as ``:Message``
nodes with a vector index on their embedding; its message search is that vector index alone
(``short_term.search_messages``). It is not a dependency of graphmem: install it into a
separate environment beside graphmem's core requirements (``pip install
".[neo4j-peers]"`` there, or the packages that extra names) and run this script from it with
``PYTHONPATH`` pointing at the tree.

Fairness, so that the figures describe the systems and not their setup:

- **Same server, one system at a time.** Community edition has one user database, so each
  system runs alone on a wiped database (every node, index and constraint dropped before it
  starts): neither sees the other's data, nodes or indexes. ``--rounds 2`` runs them again
  in the opposite order, so a change of machine load during a run shows as a difference
  between rounds instead of between systems.
- **Same model, same runtime, same threads.** Both embed with all-MiniLM-L6-v2 on ONNX
  Runtime from graphmem's export of the bundled model, ``--threads`` intra-op threads:
  graphmem with its ``OnnxEmbedder``; neo4j-agent-memory through its ``Embedder`` protocol
  (``embed`` / ``embed_batch``) with an ``OnnxEmbedder`` of its own. Its shipped local
  embedder is sentence-transformers on PyTorch, slower on a CPU than ONNX Runtime.
- **The peer at its best.** Entity extraction off (it would need an LLM or a downloaded
  GLiNER/spaCy model; graphmem's LLM passes are off too), bulk loads through its
  ``add_messages_batch`` (one embedding batch and one write transaction per chunk), the
  vector index its own schema setup creates, and its search with ``threshold=0`` (its default
  0.7 cuts the list below k for most questions, which only lowers its recall). Its message
  search takes no scope (``session_id`` is accepted and not used), so the turns are all in one
  session and the warm-up message is deleted before the timed queries.
- **Warm-up before timing**: one add, the searches of ``WARM_TEXTS`` (not measured queries).

Measured per system, as in ``peers.py``: ``add`` one turn at a time (call and until
searchable), batch ingest of the rest in chunks of 50 until searchable, ``search`` k=10 with
the query embedding (p50/p95, process CPU) and LoCoMo evidence recall@10 on the questions
whose evidence is stored. The load average is printed before and after each system.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from peers import (  # noqa: E402
    SCOPE,
    WARM_SCOPE,
    WARM_TEXTS,
    GraphmemVerbs,
    Item,
    K,
    Query,
    Result,
    System,
    cpu_load,
    dataset,
    pin_threads,
    table,
    version,
)

PEER = "neo4j-agent-memory"


def wipe(url: str, auth: tuple[str, str], database: str | None) -> None:
    """Every node, constraint and index of the database dropped (the node and relationship
    label lookups stay: the server keeps them for every store)."""
    import neo4j

    with neo4j.GraphDatabase.driver(url, auth=auth) as driver:
        with driver.session(database=database) as session:
            # relationships first: a hub's thousands of edges in one DETACH DELETE can
            # exceed the server's transaction memory on a large store
            session.run(
                "MATCH ()-[r]->() CALL (r) { DELETE r } IN TRANSACTIONS OF 10000 ROWS"
            ).consume()
            session.run("MATCH (n) CALL (n) { DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()
            for (name,) in session.run("SHOW CONSTRAINTS YIELD name").values():
                session.run(f"DROP CONSTRAINT `{name}` IF EXISTS").consume()
            for (name,) in session.run(
                "SHOW INDEXES YIELD name, type WHERE type <> 'LOOKUP' RETURN name"
            ).values():
                session.run(f"DROP INDEX `{name}` IF EXISTS").consume()


class GraphmemNeo4j(GraphmemVerbs):
    name = "graphmem"

    #: graphmem's vector index: the server's quantized one (the default) or, with False,
    #: one without quantization
    vector_quantization = True

    def __init__(self, url: str, auth: tuple[str, str], database: str | None, threads: int):
        from graphmem.embeddings import OnnxEmbedder
        from graphmem.memory import GraphMemory

        self.mem = GraphMemory.open(
            url,
            embedder=OnnxEmbedder(threads=threads),
            auth=auth,
            database=database,
            vector_quantization=self.vector_quantization,
        )

    def settle(self) -> None:
        self.mem.vectors.wait()


class GraphmemUnquantized(GraphmemNeo4j):
    name = "graphmem-unquantized"
    vector_quantization = False


class OnnxForPeer:
    """neo4j-agent-memory's ``Embedder`` protocol over graphmem's ONNX MiniLM."""

    dimensions = 384

    def __init__(self, threads: int) -> None:
        from graphmem.embeddings import OnnxEmbedder

        self._onnx = OnnxEmbedder(threads=threads)

    async def embed(self, text: str) -> list[float]:
        return list(self._onnx.embed([text])[0].tolist())

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return list(self._onnx.embed(texts).tolist())


class AgentMemory(System):
    name = PEER

    def __init__(self, url: str, auth: tuple[str, str], database: str | None, threads: int):
        from neo4j_agent_memory import MemoryClient, MemorySettings
        from neo4j_agent_memory.config.settings import (
            ExtractionConfig,
            ExtractorType,
            Neo4jConfig,
        )
        from pydantic import SecretStr

        settings = MemorySettings(
            neo4j=Neo4jConfig(
                uri=url,
                username=auth[0],
                password=SecretStr(auth[1]),
                database=database or "neo4j",
            ),
            extraction=ExtractionConfig(extractor_type=ExtractorType.NONE),
        )
        self.loop = asyncio.new_event_loop()
        self.client = MemoryClient(settings, embedder=OnnxForPeer(threads))
        self.loop.run_until_complete(self.client.connect())
        self.keys: dict[str, str] = {}
        self.warm_ids: list[Any] = []

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def add(self, item: Item) -> None:
        msg = self._run(
            self.client.short_term.add_message(
                SCOPE, "user", item.text, extract_entities=False, extraction_mode="skip"
            )
        )
        self.keys[str(msg.id)] = item.key

    def warm(self) -> None:
        msg = self._run(
            self.client.short_term.add_message(
                WARM_SCOPE, "user", WARM_TEXTS[0], extract_entities=False, extraction_mode="skip"
            )
        )
        self.warm_ids.append(msg.id)

    def add_many(self, items: Sequence[Item]) -> None:
        found = self._run(
            self.client.short_term.add_messages_batch(
                SCOPE,
                [{"role": "user", "content": it.text} for it in items],
                batch_size=len(items),
                extract_entities=False,
            )
        )
        if len(found) != len(items):
            raise RuntimeError(f"{PEER} stored {len(found)} of {len(items)} messages")
        for it, msg in zip(items, found, strict=True):
            self.keys[str(msg.id)] = it.key

    def search(self, text: str, scope: str = SCOPE) -> list[str]:
        found = self._run(
            self.client.short_term.search_messages(text, session_id=scope, limit=K, threshold=0.0)
        )
        return [self.keys.get(str(m.id), "?") for m in found]

    def unwarm(self) -> None:
        # its delete_message refuses a message that is linked into its conversation
        for i in self.warm_ids:
            self._run(
                self.client.graph.execute_write(
                    "MATCH (m:Message {id: $id}) DETACH DELETE m", {"id": str(i)}
                )
            )

    def close(self) -> None:
        self._run(self.client.close())
        self.loop.close()


def server_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of the server process so far (0 without a pid)."""
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_one(
    make: Callable[[], System],
    items: list[Item],
    queries: list[Query],
    adds: int,
    server_pid: int | None = None,
    chunk: int = 50,
) -> tuple[Result, float, float, float]:
    """One system on a freshly wiped database: its result, the load before and after, and the
    server's CPU per search (ms; 0 without ``server_pid``)."""
    result = Result()
    load_before = os.getloadavg()[0]
    system = make()
    try:
        system.warm()
        system.settle()
        for text in WARM_TEXTS:
            system.search(text, WARM_SCOPE)
        if isinstance(system, AgentMemory):
            system.unwarm()
        for it in items[:adds]:
            t0 = time.perf_counter()
            system.add(it)
            t1 = time.perf_counter()
            system.settle()
            result.add_ms.append(1000 * (t1 - t0))
            result.visible_ms.append(1000 * (time.perf_counter() - t0))
        rest = items[adds:]
        spent = 0.0
        for i in range(0, len(rest), chunk):
            t0, c0 = time.perf_counter(), time.process_time()
            system.add_many(rest[i : i + chunk])
            system.settle()
            spent += time.perf_counter() - t0
            result.ingest_cpu_s += time.process_time() - c0
        result.ingest_rate = len(rest) / max(spent, 1e-9)
        s0 = server_cpu_s(server_pid)
        for q in queries:
            t0, c0 = time.perf_counter(), time.process_time()
            ranked = system.search(q.text)
            result.search_ms.append(1000 * (time.perf_counter() - t0))
            result.search_cpu_ms.append(1000 * (time.process_time() - c0))
            result.recall.append(len(q.gold & set(ranked[:K])) / len(q.gold))
        server_ms = 1000 * (server_cpu_s(server_pid) - s0) / max(len(queries), 1)
    finally:
        system.close()
    return result, load_before, os.getloadavg()[0], server_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", required=True, help="bolt URL of the server (its data is wiped)")
    ap.add_argument("--user", default=os.environ.get("NEO4J_USER", "neo4j"))
    ap.add_argument("--password", default=os.environ.get("NEO4J_PASSWORD", ""))
    ap.add_argument("--database", default=os.environ.get("NEO4J_DATABASE") or None)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--adds", type=int, default=200, help="turns added one at a time first")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1, help="threads for every runtime")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, the order reversed each time")
    ap.add_argument("--load", type=int, default=0, help="CPU-bound processes run beside")
    ap.add_argument(
        "--only",
        default="",
        help="comma-separated systems: graphmem, neo4j-agent-memory (the default: both), "
        "graphmem-unquantized (graphmem with a vector index without quantization)",
    )
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument(
        "--server-pid", type=int, default=None, help="the server JVM's pid: its CPU per search"
    )
    args = ap.parse_args()
    pin_threads(args.threads)

    from locomo import DEFAULT_DATA

    items, queries = dataset(args.data or DEFAULT_DATA, args.turns, args.queries)
    auth = (args.user, args.password)
    makers: dict[str, Callable[[], System]] = {
        "graphmem": lambda: GraphmemNeo4j(args.url, auth, args.database, args.threads),
        PEER: lambda: AgentMemory(args.url, auth, args.database, args.threads),
        "graphmem-unquantized": lambda: GraphmemUnquantized(
            args.url, auth, args.database, args.threads
        ),
    }
    only = {s.strip().lower() for s in args.only.split(",") if s.strip()}
    # the unquantized variant only when asked for by name
    names = [n for n in makers if n in only or (not only and n != "graphmem-unquantized")]
    lines = []
    with cpu_load(args.load):
        for r in range(args.rounds):
            results: dict[str, Result] = {}
            loads, server = [], []
            for name in names if r % 2 == 0 else names[::-1]:
                wipe(args.url, auth, args.database)
                results[name], before, after, server_ms = run_one(
                    makers[name], items, queries, args.adds, args.server_pid
                )
                loads.append(f"{name} {before:.2f} → {after:.2f}")
                server.append(f"{name} {server_ms:.1f} ms")
            wipe(args.url, auth, args.database)
            ordered = {n: results[n] for n in names}
            lines.append(
                f"Round {r + 1} (order: {', '.join(results)}; load average "
                f"{'; '.join(loads)}"
                + (f"; server CPU per search {', '.join(server)}" if args.server_pid else "")
                + f"):\n\n{table(ordered, len(items))}\n"
            )
            print(lines[-1], flush=True)
    versions = ", ".join(
        f"{d} {version(d)}"
        for d in (PEER, "neo4j", "neo4j-rust-ext", "onnxruntime")
        if version(d) != "-"
    )
    cmd = "python benchmarks/neo4j_peers.py " + " ".join(sys.argv[1:])
    print(
        f"`{cmd.strip()}`; {len(items)} LoCoMo turns in one scope ({args.adds} added one at a "
        f"time, the rest in chunks of 50), {len(queries)} distinct questions, k={K}; "
        f"all-MiniLM-L6-v2 on ONNX Runtime, {args.threads} thread(s); {args.load} CPU-bound "
        f"process(es) beside; server {args.url}; {os.cpu_count()} cores, 24 GiB, Python "
        f"{platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC. "
        f"{versions}.\n\n" + "\n".join(lines)
    )


if __name__ == "__main__":
    main()
