"""Int8 weights for the search query only: LoCoMo quality and query-embedding speed.

    python benchmarks/int8_queries.py [--data ../shared/data/locomo_dev.json]

The LoCoMo turns are stored once with fp32 vectors (user path: ``remember`` per turn, the
conversation as the agent, the session as the run) and once with int8 vectors. Every question
is then asked through ``Retriever.recall(k=50, agent scope, touch=False)`` three ways: fp32
documents with fp32 queries, fp32 documents with int8 queries (``OnnxEmbedder()``'s default,
``query_quantize="int8"``), and int8 with int8. Printed: recall@10/@50 per way, and the query
embedding's p50 wall and CPU time, fp32 against int8, interleaved.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo

from graphmem.config import RecallConfig
from graphmem.embeddings import OnnxEmbedder
from graphmem.memory import GraphMemory
from graphmem.models import Filter
from graphmem.retrieval import Retriever


def _asker(
    mem: GraphMemory, emb: OnnxEmbedder, cfg: RecallConfig
) -> Callable[[str, str], list[str]]:
    retriever = Retriever(mem.backend, emb, config=cfg)

    def ask(question: str, sample_id: str) -> list[str]:
        hits = retriever.recall(
            question, k=50, filter=Filter.for_memories(agent_id=sample_id), touch=False
        )
        return [locomo._dia(h.memory) for h in hits]

    return ask


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    convs = locomo.load(args.data)
    fp32, int8q, int8 = (
        OnnxEmbedder(query_quantize="none"),
        OnnxEmbedder(query_quantize="int8"),  # graphmem's default
        OnnxEmbedder(quantize="int8"),
    )
    cfg = RecallConfig.preset("balanced").model_copy(
        update={"expand_entities": False, "entity_weight": 0.0}
    )
    stores = {}
    for name, emb in (("fp32", fp32), ("int8", int8)):
        mem = GraphMemory.open("memory://", embedder=emb, knowledge=False)
        for conv in convs:
            locomo.ingest_user(mem, conv)
        mem.vectors.wait()
        stores[name] = mem
    ways = {
        "fp32 documents, fp32 queries": _asker(stores["fp32"], fp32, cfg),
        "fp32 documents, int8 queries": _asker(stores["fp32"], int8q, cfg),
        "int8 documents, int8 queries": _asker(stores["int8"], int8, cfg),
    }
    load0 = os.getloadavg()[0]
    scores = locomo.evaluate(convs, ways)
    for name, s in scores.items():
        print(f"{name}: R@10 {s.recall(10):.2f}, R@50 {s.recall(50):.2f}")
    questions = [q.text for c in convs for q in c.questions][:300]
    wall: dict[str, list[float]] = {"fp32": [], "int8": []}
    cpu: dict[str, list[float]] = {"fp32": [], "int8": []}
    for i, q in enumerate(questions):
        order = (("fp32", fp32), ("int8", int8q))
        for name, emb in order if i % 2 else order[::-1]:
            t, c = time.perf_counter(), time.thread_time()
            emb.embed_query(f"{q} #{i}")  # a fresh text: no cache hit
            cpu[name].append(time.thread_time() - c)
            wall[name].append(time.perf_counter() - t)
    for name in wall:
        print(
            f"query embedding {name}: wall p50 {np.median(wall[name]) * 1e3:.2f} ms, "
            f"CPU p50 {np.median(cpu[name]) * 1e3:.2f} ms"
        )
    print(f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    for mem in stores.values():
        mem.close()


if __name__ == "__main__":
    main()
