"""Scale and latency of the storage layer (no embeddings).

    python benchmarks/scale.py                       # embedded store, 10k and 100k
    python benchmarks/scale.py --sizes 10000 --url neo4j://localhost:7687
    python benchmarks/scale.py --url bolt://localhost:7687 --password secret --wipe --write
    python benchmarks/scale.py --compare --url bolt://localhost:7687 --wipe --sizes 10000
    python benchmarks/scale.py --compare --recall --url bolt://localhost:7687 --wipe \
        --recall-sizes 100000
    python benchmarks/scale.py --sizes 10000,100000,1000000 --recall   # embedded, vectors

``--compare`` runs the same workload on a temporary embedded store and on the server at
``--url`` (emptied first with ``--wipe``) and prints both side by side with their ratio.

Text is synthetic: 8-20 pseudo-words per memory drawn from a 20k-word vocabulary with
Zipf-distributed frequencies (like natural language); queries are 4 words from the same
distribution. Measures, per size: batch ingest rate (remember_many, batches of 1000), single
durable remember p50/p95 (without a run, and into runs), lexical (BM25) search p50/p95
unscoped and scoped to an agent, recall without vectors p50, filtered list p50, and
(embedded) reopen time and file size. Prints a Markdown table and, with --write, replaces
the "Scale" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from graphmem.memory import GraphMemory
from graphmem.models import Filter, Memory, TextQuery


def _vocabulary(size: int = 20_000, seed: int = 3) -> list[str]:
    """Pseudo-words from syllables; used with Zipf-distributed frequencies like real text."""
    rng = random.Random(seed)
    syll = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["an", "er", "is", "on"]
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(syll) for _ in range(rng.randint(1, 4)))] = None
    return list(words)


WORDS = _vocabulary()
_CUM: list[float] = []
_acc = 0.0
for _rank in range(len(WORDS)):
    _acc += 1.0 / (_rank + 1) ** 1.07
    _CUM.append(_acc)


def word(rng: random.Random) -> str:
    return rng.choices(WORDS, cum_weights=_CUM, k=1)[0]


T0 = datetime(2025, 1, 1, tzinfo=UTC)


def sentence(rng: random.Random) -> str:
    return " ".join(word(rng) for _ in range(rng.randint(8, 20))) + "."


def items(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    # a run belongs to one agent (only its agent may add to it): run r is agent r % 20's
    runs = [rng.randrange(n // 50 + 1) for _ in range(n)]
    return [
        {
            "content": sentence(rng),
            "agent_id": f"agent{runs[i] % 20}",
            "namespace": f"ns{rng.randrange(5)}",
            "run_id": f"run{runs[i]}",
            "tags": [f"tag{rng.randrange(50)}"],
            "importance": rng.random(),
            "created_at": T0 + timedelta(seconds=i),
        }
        for i in range(n)
    ]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def server_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) the process ``pid`` has used so far (Linux /proc; NaN
    without a pid): a local server's JVM, whose work per memory is the steadier figure on a
    shared machine."""
    if pid is None:
        return float("nan")
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ingest(mem: GraphMemory, data: list[dict[str, Any]], batch: int) -> None:
    """The load: ``remember_many`` of ``batch`` at a time."""
    for i in range(0, len(data), batch):
        mem.remember_many(data[i : i + batch])


def bench(
    url: str,
    n: int,
    *,
    reopen: bool,
    server_pid: int | None = None,
    **open_options: Any,
) -> dict[str, Any]:
    rng = random.Random(1)
    data = items(n)
    out: dict[str, Any] = {"n": n}
    mem = GraphMemory.open(url, embedder=None, **open_options)
    t, c, s = time.perf_counter(), time.process_time(), server_cpu_s(server_pid)
    ingest(mem, data, 1000)
    out["ingest_per_s"] = n / (time.perf_counter() - t)
    # CPU of the whole process: on a shared machine the steadier figure
    out["ingest_cpu_per_s"] = n / max(time.process_time() - c, 1e-9)
    out["ingest_client_cpu_us"] = (time.process_time() - c) / n * 1e6
    if server_pid is not None:
        out["ingest_server_cpu_us"] = (server_cpu_s(server_pid) - s) / n * 1e6

    lat = []
    for i in range(300):
        t = time.perf_counter()
        mem.remember(sentence(rng), agent_id=f"agent{i % 20}")
        lat.append((time.perf_counter() - t) * 1000)
    out["remember_p50_ms"], out["remember_p95_ms"] = pct(lat, 50), pct(lat, 95)

    # a conversation's turns: remember into runs (10, round robin); a handle that appended
    # to a run last writes the next turn without reading the run first (own rng: the
    # queries below stay those of earlier runs of this benchmark)
    turns = random.Random(4)
    lat = []
    for i in range(300):
        t = time.perf_counter()
        mem.remember(sentence(turns), agent_id="agent0", run_id=f"bench-run{i % 10}")
        lat.append((time.perf_counter() - t) * 1000)
    out["remember_run_p50_ms"], out["remember_run_p95_ms"] = pct(lat, 50), pct(lat, 95)

    # lexical search itself (BM25 through the backend seam), active memories, top 10
    active = Filter.for_memories()
    lat = []
    for _ in range(300):
        q = " ".join(word(rng) for _ in range(4))
        t = time.perf_counter()
        mem.backend.search_text(TextQuery(text=q, k=10, filter=active))
        lat.append((time.perf_counter() - t) * 1000)
    out["lexical_p50_ms"], out["lexical_p95_ms"] = pct(lat, 50), pct(lat, 95)

    lat = []
    for _ in range(100):
        q = " ".join(word(rng) for _ in range(4))
        scoped = Filter.for_memories(agent_id=f"agent{rng.randrange(20)}")
        t = time.perf_counter()
        mem.backend.search_text(TextQuery(text=q, k=10, filter=scoped))
        lat.append((time.perf_counter() - t) * 1000)
    out["lexical_scoped_p50_ms"] = pct(lat, 50)

    # the whole recall pipeline without vectors (BM25 + graph expansion + ranking)
    lat = []
    for _ in range(100):
        q = " ".join(word(rng) for _ in range(4))
        t = time.perf_counter()
        mem.recall(q, k=10, touch=False)
        lat.append((time.perf_counter() - t) * 1000)
    out["recall_novec_p50_ms"] = pct(lat, 50)

    lat = []
    for _ in range(100):
        t = time.perf_counter()
        mem.list(agent_id=f"agent{rng.randrange(20)}", namespace=f"ns{rng.randrange(5)}", limit=20)
        lat.append((time.perf_counter() - t) * 1000)
    out["filter_p50_ms"] = pct(lat, 50)
    stats = mem.backend.stats()
    mem.close()
    del mem, data  # the reopen below is not to count the ingest's handle and items
    if reopen:
        t, c = time.perf_counter(), time.process_time()
        again = GraphMemory.open(url, embedder=None)
        again.count()
        out["reopen_s"] = time.perf_counter() - t
        out["reopen_cpu_s"] = time.process_time() - c
        again.close()
        out.update(open_fresh(url))
        out["file_mb"] = (
            sum(p.stat().st_size for p in Path(url).parent.glob(Path(url).name + "*")) / 1e6
        )
    else:
        out["file_mb"] = (stats.file_bytes or 0) / 1e6
    return out


COLUMNS = [
    ("n", "memories", "{:,}"),
    ("ingest_per_s", "batch ingest /s", "{:,.0f}"),
    ("ingest_cpu_per_s", "batch ingest /s of CPU", "{:,.0f}"),
    ("ingest_client_cpu_us", "ingest client CPU µs / memory", "{:.0f}"),
    ("ingest_server_cpu_us", "ingest server CPU µs / memory", "{:.0f}"),
    ("remember_p50_ms", "remember p50 ms", "{:.2f}"),
    ("remember_p95_ms", "remember p95 ms", "{:.2f}"),
    ("remember_run_p50_ms", "remember in a run p50 ms", "{:.2f}"),
    ("remember_run_p95_ms", "remember in a run p95 ms", "{:.2f}"),
    ("lexical_p50_ms", "lexical p50 ms", "{:.2f}"),
    ("lexical_p95_ms", "lexical p95 ms", "{:.2f}"),
    ("lexical_scoped_p50_ms", "lexical+agent p50 ms", "{:.2f}"),
    ("recall_novec_p50_ms", "recall (no vectors) p50 ms", "{:.2f}"),
    ("filter_p50_ms", "filter p50 ms", "{:.2f}"),
    ("reopen_s", "reopen s", "{:.2f}"),
    ("reopen_cpu_s", "reopen CPU s", "{:.2f}"),
    ("fresh_open_s", "open s, fresh process", "{:.2f}"),
    ("held_rss_gb", "peak RSS GB of that process", "{:.2f}"),
    ("file_mb", "file MB", "{:.1f}"),
]


def table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]] = COLUMNS) -> str:
    """A Markdown table of benchmark rows (a missing value prints as a dash)."""
    head = "| " + " | ".join(c[1] for c in columns) + " |"
    sep = "|" + "|".join("---:" for _ in columns) + "|"
    body = [
        "| " + " | ".join((fmt.format(r[k]) if k in r else "–") for k, _, fmt in columns) + " |"
        for r in rows
    ]
    return "\n".join([head, sep, *body])


def write_section(title: str, text: str, path: Path) -> None:
    """Replace (or append) the ``## title`` section of RESULTS.md."""
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    marker = f"## {title}"
    if marker in old:
        start = old.index(marker)
        nxt = old.find("\n## ", start + len(marker))
        old = old[:start] + (old[nxt + 1 :] if nxt != -1 else "")
    path.write_text(old.rstrip() + "\n\n" + marker + "\n\n" + text.strip() + "\n")


# ---------------------------------------------------------------------------------------
# hybrid recall latency with embeddings (issue 4)


class SyntheticQueries:
    """An Embedder whose query vectors are noisy copies of stored memory vectors, so the
    vector channel finds realistic neighbours (cosine ~0.6-0.8) without a model. The real
    model's query-embedding cost is paid separately on every query (see bench_recall)."""

    name = "synthetic"

    def __init__(self, dim: int, vectors: Any, seed: int = 5) -> None:
        import numpy as np

        self._np = np
        self.dim = dim
        self._vectors = vectors
        self._rng = np.random.default_rng(seed)

    def embed(self, texts: Any) -> Any:
        np = self._np
        rows = self._vectors[self._rng.integers(0, len(self._vectors), len(texts))]
        noisy = rows + 0.06 * self._rng.standard_normal(rows.shape).astype(np.float32)
        return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def synthetic_vectors(n: int, dim: int = 384, clusters: int = 2000, seed: int = 11) -> Any:
    """Unit vectors around ``clusters`` random centres (topics), float32."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for i in range(0, n, 100_000):
        m = min(n, i + 100_000) - i
        block = centres[rng.integers(0, clusters, m)]
        block += 0.9 * rng.standard_normal((m, dim)).astype(np.float32) / np.sqrt(dim) * 10
        out[i : i + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def peak_rss_gb() -> float:
    """This process's peak resident memory so far (GB; NaN where unknown)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return float("nan")
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb * (1 if sys.platform == "darwin" else 1024) / 1e9


_HOLD = """
import json, resource, sys, time
from graphmem.memory import GraphMemory
t, c = time.perf_counter(), time.process_time()
mem = GraphMemory.open(sys.argv[1], embedder=None)
mem.count()
got = {"open_s": time.perf_counter() - t, "open_cpu_s": time.process_time() - c}
try:  # this process's own peak: ru_maxrss keeps the forking parent's across the exec
    with open("/proc/self/status") as f:
        got["kb"] = next(int(x.split()[1]) for x in f if x.startswith("VmHWM"))
except (OSError, StopIteration):
    got["kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(got))
"""


def open_fresh(url: str) -> dict[str, Any]:
    """Open the embedded store at ``url`` in a fresh process: its open time and its peak
    resident memory, i.e. what holding the store costs (this process's peak also counts
    the ingest's items, vectors and handle)."""
    import json

    done = subprocess.run(
        [sys.executable, "-c", _HOLD, url], capture_output=True, text=True, check=True
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    unit = 1 if sys.platform == "darwin" else 1024
    return {
        "fresh_open_s": got["open_s"],
        "fresh_open_cpu_s": got["open_cpu_s"],
        "held_rss_gb": got["kb"] * unit / 1e9,
    }


def bench_recall(
    url: str,
    n: int,
    *,
    queries: int = 200,
    load: bool = True,
    server_pid: int | None = None,
    **open_options: Any,
) -> dict[str, Any]:
    """Hybrid recall latency over ``n`` memories with synthetic 384-d embeddings.

    Per query the clock covers the real query embedding (bundled MiniLM on the query text)
    plus ``GraphMemory.recall`` (BM25 + vector + graph expansion + fusion + ranking) with a
    synthetic query vector; ``touch=False`` so that reads stay reads. ``load=False``:
    the store already holds this workload's ``n`` memories (an earlier run's), so only the
    reads are measured."""
    import numpy as np

    from graphmem.embeddings import QueryEmbedder, make_embedder

    made = make_embedder("auto")
    assert made is not None

    # a search query is embedded as recall embeds it (int8 weights for the bundled model)
    def embed_query(text: str) -> Any:
        if isinstance(made, QueryEmbedder):
            return made.embed_query(text)
        return made.embed([text])

    embed_query("warm up the model")
    data = items(n)
    vecs = synthetic_vectors(n)
    for i, item in enumerate(data):
        item["embedding"] = vecs[i]
    out: dict[str, Any] = {"n": n}
    mem = GraphMemory.open(url, embedder=SyntheticQueries(384, vecs), **open_options)
    rng = random.Random(2)
    texts = [" ".join(word(rng) for _ in range(4)) for _ in range(queries)]
    if load:
        t, c, s = time.perf_counter(), time.process_time(), server_cpu_s(server_pid)
        # a server defers its vector index to the end of the load (populated before the
        # ingest's clock stops, so the first query finds every vector)
        bulk = getattr(mem.backend, "bulk_load", None)
        with bulk() if bulk is not None else nullcontext() as report:
            ingest(mem, data, 2000)
            mem.vectors.wait()  # background vectors: ingest ends when every vector is stored
            s_writes = server_cpu_s(server_pid)
        out["ingest_per_s"] = n / (time.perf_counter() - t)
        out["ingest_cpu_per_s"] = n / max(time.process_time() - c, 1e-9)
        out["ingest_client_cpu_us"] = (time.process_time() - c) / n * 1e6
        if server_pid is not None:
            out["ingest_server_cpu_us"] = (s_writes - s) / n * 1e6
            out["index_server_cpu_s"] = server_cpu_s(server_pid) - s_writes
        if report is not None:
            out["index_build_s"] = report.index_s
        t = time.perf_counter()
        mem.recall(texts[0], k=10, touch=False)  # above the threshold this builds HNSW
        out["first_query_s"] = time.perf_counter() - t
    else:
        held = mem.backend.count(Filter.for_memories(status=None))
        if held < n:
            sys.exit(f"--keep: {url} holds {held} memories, not the {n} of this workload")
    del data
    # the first large search starts the HNSW build in the background (searches stay exact
    # meanwhile); time the build, then measure steady-state queries
    t = time.perf_counter()
    index = getattr(mem.backend, "vector_index", None)
    if index is not None:
        index.wait_for_ann()
    out["ann_build_s"] = time.perf_counter() - t

    def run(filters: dict[str, Any], key: str) -> None:
        lat, alone, cpu = [], [], []
        for i, q in enumerate(texts):
            t, c = time.perf_counter(), time.thread_time()
            embed_query(f"{q} {i}")  # a fresh text each time: no embedding-cache hit
            t1 = time.perf_counter()
            mem.recall(q, k=10, touch=False, **filters)
            t2 = time.perf_counter()
            cpu.append((time.thread_time() - c) * 1000)
            lat.append((t2 - t) * 1000)
            alone.append((t2 - t1) * 1000)
        out[f"{key}_p50_ms"], out[f"{key}_p95_ms"] = pct(lat, 50), pct(lat, 95)
        out[f"{key}_cpu_p50_ms"] = pct(cpu, 50)  # this thread's CPU, embedding included
        # the store's part alone (the goals of the storage layer exclude the query model)
        out[f"{key}_noembed_p50_ms"] = pct(alone, 50)
        out[f"{key}_noembed_p95_ms"] = pct(alone, 95)

    lat = []
    for i, q in enumerate(texts):
        t = time.perf_counter()
        embed_query(f"{q} #{i}")
        lat.append((time.perf_counter() - t) * 1000)
    out["embed_p50_ms"] = pct(lat, 50)
    run({}, "recall")
    run({"agent_id": "agent3"}, "recall_agent")
    run({"namespace": "ns1"}, "recall_ns")
    run({"namespace": "ns1", "tags": ["tag7"]}, "recall_ns_tag")
    rows = mem.backend.match(Memory, Filter.for_memories(), limit=1)
    out["dim"] = len(rows[0].embedding or ()) if rows else 0  # type: ignore[attr-defined]
    mem.close()
    del mem
    if os.path.isfile(url):  # embedded: reopen, and is the vector graph there at once?
        out["file_mb"] = os.path.getsize(url) / 1e6
        t, c = time.perf_counter(), time.process_time()
        mem = GraphMemory.open(url, embedder=SyntheticQueries(384, vecs), **open_options)
        out["reopen_s"] = time.perf_counter() - t
        out["reopen_cpu_s"] = time.process_time() - c
        index = getattr(mem.backend, "vector_index", None)
        out["graph_at_open"] = "yes" if getattr(index, "_ann", None) is not None else "no"
        t = time.perf_counter()
        mem.recall(texts[1], k=10, touch=False)
        out["reopen_first_query_ms"] = (time.perf_counter() - t) * 1000
        mem.close()
        out.update(open_fresh(url))
    out["peak_rss_gb"] = peak_rss_gb()
    del vecs
    np.random.default_rng()  # keep numpy imported for the type of vecs
    return out


RECALL_COLUMNS = [
    ("n", "memories", "{:,}"),
    ("ingest_per_s", "ingest /s (with vectors)", "{:,.0f}"),
    ("ingest_cpu_per_s", "ingest /s of CPU", "{:,.0f}"),
    ("index_build_s", "of which vector index population s (server, after the load)", "{:.1f}"),
    ("ingest_client_cpu_us", "ingest client CPU µs / memory", "{:.0f}"),
    ("ingest_server_cpu_us", "ingest server CPU µs / memory (writes)", "{:.0f}"),
    ("index_server_cpu_s", "server CPU s of the index population", "{:.1f}"),
    ("first_query_s", "first query s", "{:.2f}"),
    ("ann_build_s", "HNSW background build s", "{:.1f}"),
    ("embed_p50_ms", "query embed p50 ms", "{:.1f}"),
    ("recall_p50_ms", "recall p50 ms", "{:.1f}"),
    ("recall_p95_ms", "recall p95 ms", "{:.1f}"),
    ("recall_cpu_p50_ms", "recall CPU p50 ms (embedding included)", "{:.1f}"),
    ("recall_noembed_p50_ms", "recall p50 ms, query embedding excluded", "{:.1f}"),
    ("recall_noembed_p95_ms", "recall p95 ms, query embedding excluded", "{:.1f}"),
    ("recall_agent_p50_ms", "recall agent p50 ms", "{:.1f}"),
    ("recall_agent_p95_ms", "recall agent p95 ms", "{:.1f}"),
    ("recall_agent_noembed_p50_ms", "recall agent p50 ms, embedding excluded", "{:.1f}"),
    ("recall_ns_noembed_p50_ms", "recall namespace p50 ms, embedding excluded", "{:.1f}"),
    ("recall_ns_tag_p50_ms", "recall ns+tag p50 ms", "{:.1f}"),
    ("recall_ns_tag_noembed_p50_ms", "recall ns+tag p50 ms, embedding excluded", "{:.1f}"),
    ("reopen_s", "reopen s", "{:.2f}"),
    ("reopen_cpu_s", "reopen CPU s", "{:.2f}"),
    ("graph_at_open", "HNSW ready at open", "{}"),
    ("reopen_first_query_ms", "first query after reopen ms", "{:.0f}"),
    ("file_mb", "file MB", "{:,.0f}"),
    ("fresh_open_s", "open s, fresh process", "{:.2f}"),
    ("held_rss_gb", "peak RSS GB of that process", "{:.2f}"),
    ("peak_rss_gb", "peak RSS GB (benchmark process so far)", "{:.2f}"),
]


def recall_table(rows: list[dict[str, Any]]) -> str:
    return table(rows, RECALL_COLUMNS)


def recall_main(args: argparse.Namespace, argv: list[str] | None) -> None:
    rows = []
    server = bool(args.url) and args.url.split("://")[0] in SERVER_SCHEMES
    for n in (int(s) for s in (args.recall_sizes or args.sizes).split(",")):
        if server:
            options = server_options(args)
            if not args.keep:
                empty_server(args.url, options, args.wipe)
            rows.append(
                bench_recall(
                    args.url,
                    n,
                    queries=args.queries,
                    load=not args.keep,
                    server_pid=args.server_pid,
                    **options,
                )
            )
            continue
        with tempfile.TemporaryDirectory() as d:
            rows.append(
                bench_recall(args.url or os.path.join(d, "recall.db"), n, queries=args.queries)
            )
        print(recall_table(rows[-1:]), flush=True)
    cmd = "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = (
        f"Backend: {args.url or 'embedded (networkx + SQLite WAL)'}; synthetic 384-d unit "
        "vectors around 2,000 topic centres and the Zipf text of the storage benchmark "
        "(20 agents, 5 namespaces, 50 tags). Each timed query = the bundled MiniLM "
        "embedding a fresh query text + `GraphMemory.recall(k=10, touch=False)` (BM25, "
        "vector, graph expansion, fusion, ranking) with a query vector near stored ones. "
        "Exact vector search below 50,000 vectors, HNSW (faiss, 8-bit quantized, M=16, ef=128) "
        "above, "
        "rescored exactly; the first query above the threshold answers exactly and starts "
        "the HNSW build in the background (its time is its own column; the graph is then "
        "kept beside the file), and the timed queries run after it. Reopen: close, open "
        "again (the graph read from beside the file when it checks out), one query. "
        "Filters: agent = 1 of 20 agents; ns+tag = 1 of 5 namespaces and "
        f"1 of 50 tags. Command: `{cmd.strip()}`; {os.cpu_count()} cores, 24 GiB, Python "
        f"{platform.python_version()}; {conditions(args)}; "
        f"{time.strftime('%Y-%m-%d')}.\n\n{recall_table(rows)}\n"
    )
    print(text)
    if args.write:
        write_section("Scale (hybrid recall)", text, Path(__file__).with_name("RESULTS.md"))


SERVER_SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


LOAD_AT_START = _load()


def reference_ms() -> float:
    """The machine's speed for plain Python, the best of three runs of a fixed workload (a
    million dict stores of new strings): the same virtual machine type has run the same code
    2-3x slower from one day to the next, so absolute rates are compared with this beside them."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        d: dict[int, str] = {}
        for i in range(1_000_000):
            d[i & 1023] = "m" + str(i)
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def conditions(args: argparse.Namespace) -> str:
    """The load the figures were measured under (1-minute load average at the start and the
    end, the CPU-bound neighbours this run started), the machine's speed for plain Python
    (:func:`reference_ms`) and the server settings given."""
    text = f"load average {LOAD_AT_START:.1f} at the start, {_load():.1f} at the end"
    text += f"; Python reference workload {reference_ms():.0f} ms at the end (lower is faster)"
    if args.busy:
        text += f", beside {args.busy} CPU-bound process(es) started by the run"
    if args.note:
        text += f"; server: {args.note}"
    return text


@contextmanager
def cpu_neighbours(n: int) -> Iterator[None]:
    """``n`` CPU-bound processes (busy loops) for the duration of the run, stopped after."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def server_options(args: argparse.Namespace) -> dict[str, Any]:
    """Credentials and database of a server URL from the options or NEO4J_* variables."""
    user = args.user or os.environ.get("NEO4J_USER", "neo4j")
    return {
        "auth": (user, args.password or os.environ.get("NEO4J_PASSWORD", "")),
        "database": args.database or os.environ.get("NEO4J_DATABASE") or None,
    }


def empty_server(url: str, options: dict[str, Any], wipe: bool) -> None:
    """Make sure the server store starts empty (deleting its graphmem data with ``wipe``)."""
    import neo4j

    from graphmem.backends.neo4j import Neo4jBackend
    from graphmem.backends.neo4j.queries import VECTOR_INDEX

    with Neo4jBackend(url, **options) as store:
        if wipe:
            store.clear()
        elif store.stats().nodes:
            sys.exit(f"{url} already holds graphmem data; pass --wipe to delete it")
    if wipe:
        # an empty store keeps its vector index, and with it the dimension of its last
        # vectors: drop it so that the run's embedder sets its own
        with neo4j.GraphDatabase.driver(url, auth=options.get("auth")) as driver:
            driver.execute_query(
                f"DROP INDEX {VECTOR_INDEX} IF EXISTS", database_=options.get("database")
            )


def side_by_side(
    left: dict[str, Any],
    right: dict[str, Any],
    columns: list[tuple[str, str, str]],
    names: tuple[str, str] = ("embedded", "neo4j"),
) -> str:
    """A Markdown table with one row per measure: both stores and right / left."""
    lines = [
        f"| {left['n']:,} memories | {names[0]} | {names[1]} | {names[1]} / {names[0]} |",
        "|---|---:|---:|---:|",
    ]
    for key, label, fmt in columns:
        if key == "n" or (key not in left and key not in right):
            continue
        a, b = left.get(key), right.get(key)
        ratio = (
            f"{b / a:.1f}x"
            if isinstance(a, int | float) and isinstance(b, int | float) and a
            else "–"
        )
        lines.append(
            f"| {label} | {fmt.format(a) if a is not None else '–'} | "
            f"{fmt.format(b) if b is not None else '–'} | {ratio} |"
        )
    return "\n".join(lines)


def compare_main(args: argparse.Namespace, argv: list[str] | None) -> None:
    """The same workload on a temporary embedded store and on the server, side by side."""
    if not args.url or args.url.split("://")[0] not in SERVER_SCHEMES:
        sys.exit("--compare needs --url of a Neo4j server (bolt://... or neo4j://...)")
    options = server_options(args)
    sizes = (args.recall_sizes or args.sizes) if args.recall else args.sizes
    columns = RECALL_COLUMNS if args.recall else COLUMNS
    tables = []
    for n in (int(s) for s in sizes.split(",")):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "compare.db")
            embedded = (
                bench_recall(path, n, queries=args.queries)
                if args.recall
                else bench(path, n, reopen=False, durability=args.durability)
            )
        if not args.keep:
            empty_server(args.url, options, args.wipe)
        server = (
            bench_recall(
                args.url,
                n,
                queries=args.queries,
                load=not args.keep,
                server_pid=args.server_pid,
                **options,
            )
            if args.recall
            else bench(
                args.url,
                n,
                reopen=False,
                server_pid=args.server_pid,
                **options,
            )
        )
        tables.append(side_by_side(embedded, server, columns))
        print(tables[-1], flush=True)
    cmd = "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    workload = "hybrid recall with vectors" if args.recall else "storage, no embeddings"
    text = (
        f"Embedded (networkx + SQLite WAL, durability={args.durability}) and Neo4j at "
        f"{args.url}, the same workload ({workload}). "
        f"Command: `{cmd.strip()}`; {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {conditions(args)}; "
        f"{time.strftime('%Y-%m-%d')}.\n\n" + "\n\n".join(tables) + "\n"
    )
    print(text)
    if args.write:
        title = "Embedded vs Neo4j" + (" (hybrid recall)" if args.recall else " (storage)")
        write_section(title, text, Path(__file__).with_name("RESULTS.md"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--url", default=None, help="backend URL (default: a temp embedded file)")
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    ap.add_argument("--user", default=None, help="server user (default: $NEO4J_USER)")
    ap.add_argument("--password", default=None, help="server password (default: $NEO4J_PASSWORD)")
    ap.add_argument("--database", default=None, help="server database (default: server's)")
    ap.add_argument(
        "--durability",
        choices=("normal", "full"),
        default="normal",
        help="embedded store: normal survives a process crash, full a power loss",
    )
    ap.add_argument(
        "--wipe",
        action="store_true",
        help="delete the graphmem data of a server store before each size",
    )
    ap.add_argument(
        "--recall",
        action="store_true",
        help="measure hybrid recall latency with synthetic embeddings instead",
    )
    ap.add_argument(
        "--recall-sizes", default=None, help="sizes for --recall (default: those of --sizes)"
    )
    ap.add_argument(
        "--compare",
        action="store_true",
        help="run on a temporary embedded store and on --url, side by side",
    )
    ap.add_argument(
        "--busy",
        type=int,
        default=0,
        help="run beside this many CPU-bound processes (started and stopped by the run)",
    )
    ap.add_argument("--note", default="", help="server settings to print with the figures")
    ap.add_argument(
        "--keep",
        action="store_true",
        help="--recall on a server (--compare or not): the server already holds this "
        "workload (an earlier run's ingest); measure its reads only",
    )
    ap.add_argument(
        "--queries", type=int, default=200, help="--recall: timed queries per filter (default 200)"
    )
    ap.add_argument(
        "--server-pid",
        type=int,
        default=None,
        help="a local server's process (its JVM): report its CPU per ingested memory",
    )
    args = ap.parse_args(argv)
    with cpu_neighbours(args.busy):
        run_main(args, argv)


def run_main(args: argparse.Namespace, argv: list[str] | None) -> None:
    """The run that ``main`` chose, with its options parsed."""
    if args.compare:
        compare_main(args, argv)
        return
    if args.recall:
        recall_main(args, argv)
        return
    server = bool(args.url) and args.url.split("://")[0] in SERVER_SCHEMES
    options = server_options(args) if server else {}
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        if server:
            empty_server(args.url, options, args.wipe)
            rows.append(
                bench(
                    args.url,
                    n,
                    reopen=False,
                    server_pid=args.server_pid,
                    **options,
                )
            )
        elif args.url:
            rows.append(bench(args.url, n, reopen=False))
        else:
            with tempfile.TemporaryDirectory() as d:
                rows.append(
                    bench(os.path.join(d, "scale.db"), n, reopen=True, durability=args.durability)
                )
        print(table(rows[-1:]), flush=True)
    cmd = "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    machine = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    embedded = f"embedded (networkx + SQLite WAL, durability={args.durability})"
    text = (
        f"Backend: {args.url or embedded}; "
        f"no embeddings. Command: `{cmd.strip()}`; machine: {machine}, 24 GiB; "
        f"{conditions(args)}; {time.strftime('%Y-%m-%d')}.\n\n{table(rows)}\n"
    )
    print(text)
    if args.write:
        title = (
            f"Scale (storage, durability={args.durability})"
            if not args.url
            else f"Scale (storage, {args.url.split(':')[0]})"
        )
        write_section(title, text, Path(__file__).with_name("RESULTS.md"))


if __name__ == "__main__":
    main()
