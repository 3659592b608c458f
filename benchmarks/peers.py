"""graphmem side by side with Mem0 OSS on the same LoCoMo turns, in one run.

    python benchmarks/peers.py [--turns 2000] [--adds 200] [--queries 300]

Both systems store the same turns in one scope with the same bundled all-MiniLM-L6-v2 model
(graphmem: its default embedder; Mem0: its ``huggingface`` embedder on the bundled model
directory, ``infer=False`` so no LLM is called, its local Qdrant store on disk). Measured:
``add`` one memory at a time (the first ``--adds`` turns; background vectors are finished
after each, outside the timings), batch ingest of the rest until
every vector is stored (graphmem ``remember_many``, then ``wait_for_vectors`` where vectors
are computed in the background; Mem0 has no batch call, so one ``add`` each), ``search`` with
k=10 for LoCoMo questions whose evidence was stored, and LoCoMo recall@10 on those
questions. Each step runs on both systems in turn (batch ingest in chunks of 50), so both
see the same machine load. Ratios are Mem0's figure over graphmem's for times, graphmem's
over Mem0's for rates and recall: above 1 means graphmem is ahead.

Mem0 is optional (``pip install -e ".[peers]"``, i.e. mem0ai; never a test dependency).
Without it only the graphmem column is printed. Everything runs offline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

from locomo import DEFAULT_DATA, load, turn_content  # noqa: E402

from graphmem.embeddings import bundled_model_path  # noqa: E402
from graphmem.memory import GraphMemory  # noqa: E402

SCOPE = "bench"
K = 10


@dataclass
class Item:
    key: str  # sample id / dia id, unique across conversations
    text: str


@dataclass
class Query:
    text: str
    gold: set[str]


@dataclass
class Result:
    add_ms: list[float] = field(default_factory=list)
    ingest_rate: float = 0.0
    search_ms: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)

    def pct(self, xs: list[float], q: float) -> float:
        s = sorted(xs)
        return s[min(len(s) - 1, int(q * len(s)))]


def dataset(path: Path, turns: int, queries: int) -> tuple[list[Item], list[Query]]:
    items: list[Item] = []
    qs: list[Query] = []
    for conv in load(path):
        for s in sorted(conv.sessions):
            items += [
                Item(f"{conv.sample_id}/{t.dia_id}", turn_content(t)) for t in conv.sessions[s]
            ]
        stored = {i.key for i in items[:turns]}
        for q in conv.questions:
            gold = {f"{conv.sample_id}/{g}" for g in q.gold}
            if gold and gold <= stored:
                qs.append(Query(q.text, gold))
        if len(items) >= turns:
            break
    return items[:turns], qs[:queries]


class System:
    name: str

    def add(self, item: Item) -> None: ...
    def add_many(self, items: Sequence[Item]) -> None: ...
    def search(self, text: str) -> list[str]: ...  # keys, best first
    def settle(self) -> None: ...  # until everything added is searchable by vector
    def close(self) -> None: ...


class Graphmem(System):
    name = "graphmem"

    def __init__(self, folder: Path) -> None:
        self.mem = GraphMemory.open(str(folder / "graphmem.db"))

    def add(self, item: Item) -> None:
        self.mem.remember(
            item.text, agent_id=SCOPE, category="episodic", metadata={"key": item.key}
        )

    def add_many(self, items: Sequence[Item]) -> None:
        for i in range(0, len(items), 256):
            self.mem.remember_many(
                [
                    {
                        "content": it.text,
                        "agent_id": SCOPE,
                        "category": "episodic",
                        "metadata": {"key": it.key},
                    }
                    for it in items[i : i + 256]
                ]
            )

    def search(self, text: str) -> list[str]:
        return [
            str(r.memory.metadata.get("key")) for r in self.mem.recall(text, k=K, agent_id=SCOPE)
        ]

    def settle(self) -> None:
        wait = getattr(self.mem, "wait_for_vectors", None)  # background vectors
        if wait is not None:
            wait()

    def close(self) -> None:
        self.mem.close()


class Mem0(System):
    name = "Mem0 OSS"

    def __init__(self, folder: Path) -> None:
        from mem0 import Memory

        os.environ.setdefault("OPENAI_API_KEY", "unused")  # infer=False never calls the LLM
        self.mem = Memory.from_config(
            {
                "embedder": {
                    "provider": "huggingface",
                    "config": {"model": str(bundled_model_path()), "embedding_dims": 384},
                },
                "vector_store": {
                    "provider": "qdrant",
                    "config": {
                        "path": str(folder / "qdrant"),
                        "collection_name": SCOPE,
                        "embedding_model_dims": 384,
                    },
                },
                "history_db_path": str(folder / "mem0-history.db"),
            }
        )

    def add(self, item: Item) -> None:
        self.mem.add(item.text, user_id=SCOPE, metadata={"key": item.key}, infer=False)

    def add_many(self, items: Sequence[Item]) -> None:
        for it in items:
            self.add(it)

    def search(self, text: str) -> list[str]:
        found = self.mem.search(text, top_k=K, filters={"user_id": SCOPE}, threshold=0.0)
        return [str((r.get("metadata") or {}).get("key")) for r in found["results"]]


def run(
    makers: dict[str, Callable[[Path], System]],
    items: list[Item],
    queries: list[Query],
    adds: int,
    chunk: int = 50,
) -> dict[str, Result]:
    """Every step runs on each system in turn, so both see the same machine load."""
    results = {name: Result() for name in makers}
    with tempfile.TemporaryDirectory(prefix="graphmem-peers-") as tmp:
        systems: dict[str, System] = {}
        try:
            for name, make in makers.items():
                folder = Path(tmp) / name.replace(" ", "-")
                folder.mkdir()
                systems[name] = make(folder)
                systems[name].search("warm up")  # load the model outside the timings
            for it in items[:adds]:
                for name, system in systems.items():
                    t0 = time.perf_counter()
                    system.add(it)
                    results[name].add_ms.append(1000 * (time.perf_counter() - t0))
                    # graphmem embeds behind the write: finish that before the other system's
                    # timed add, not during it (paced single writes)
                    system.settle()
            spent = dict.fromkeys(systems, 0.0)
            for system in systems.values():
                system.settle()
            rest = items[adds:]
            for i in range(0, len(rest), chunk):
                for name, system in systems.items():
                    t0 = time.perf_counter()
                    system.add_many(rest[i : i + chunk])
                    system.settle()
                    spent[name] += time.perf_counter() - t0
            for name in systems:
                results[name].ingest_rate = len(rest) / max(spent[name], 1e-9)
            for q in queries:
                for name, system in systems.items():
                    t0 = time.perf_counter()
                    ranked = system.search(q.text)
                    results[name].search_ms.append(1000 * (time.perf_counter() - t0))
                    results[name].recall.append(len(q.gold & set(ranked[:K])) / len(q.gold))
        finally:
            for system in systems.values():
                system.close()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--adds", type=int, default=200, help="turns added one at a time first")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()

    items, queries = dataset(args.data, args.turns, args.queries)
    makers: dict[str, Callable[[Path], System]] = {"graphmem": Graphmem}
    try:
        import mem0  # noqa: F401

        makers["Mem0 OSS"] = Mem0
    except ImportError:
        print("mem0ai is not installed: graphmem only (pip install mem0ai to compare)")
    load_before = os.getloadavg()[0]
    results = run(makers, items, queries, args.adds)
    load_after = os.getloadavg()[0]

    print(
        f"{len(items)} LoCoMo turns in one scope, {len(queries)} questions, k={K}; "
        f"{os.cpu_count()} cores, load average {load_before:.2f} at start, "
        f"{load_after:.2f} at end\n"
    )
    names = list(results)
    rows: list[tuple[str, Callable[[Result], float], str, bool]] = [
        ("add p50 ms", lambda r: r.pct(r.add_ms, 0.5), "{:.1f}", True),
        ("add p95 ms", lambda r: r.pct(r.add_ms, 0.95), "{:.1f}", True),
        ("batch ingest /s", lambda r: r.ingest_rate, "{:.0f}", False),
        ("search p50 ms", lambda r: r.pct(r.search_ms, 0.5), "{:.1f}", True),
        ("search p95 ms", lambda r: r.pct(r.search_ms, 0.95), "{:.1f}", True),
        ("LoCoMo recall@10", lambda r: 100 * statistics.fmean(r.recall), "{:.1f}", False),
    ]
    head = " | ".join(names) + (" | ratio" if len(names) == 2 else "")
    print(f"| {len(items)} memories | {head} |")
    print("|---|" + "---:|" * (len(names) + (1 if len(names) == 2 else 0)))
    for label, get, fmt, lower_is_better in rows:
        vals = [get(results[n]) for n in names]
        cells = [fmt.format(v) for v in vals]
        if len(vals) == 2:
            g, m = vals
            ratio = (m / g if lower_is_better else g / m) if min(vals) > 0 else float("nan")
            cells.append(f"{ratio:.2f}×")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
