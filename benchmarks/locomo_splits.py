"""Recall settings compared on LoCoMo dev splits (how issue 20's ideas were measured).

Ingests the user path once for all five dev conversations (``remember`` per turn,
knowledge layer off unless ``--knowledge``), waits for the vectors, then asks every question through
``Retriever.recall(k=50, touch=False)`` once per variant, so variants do not disturb each
other's access statistics. Splits: ``a`` = the first three dev conversations (conv-26,
conv-30, conv-41: where settings are chosen), ``b`` = the last two (conv-42, conv-43: where
a choice is confirmed), ``all``.

    python benchmarks/locomo_splits.py a '{}' '{"context_weight": 0.25}' \\
        --embed-cache /tmp/minilm.npz
    python benchmarks/locomo_splits.py b '{}' --embedder onnx:fp32  # fp32 query weights

Prints R@5/10/25/50 and R@10 per category for each variant (a JSON object of RecallConfig
fields), the load average at the end of each.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import locomo  # noqa: E402

from graphmem.config import RecallConfig  # noqa: E402
from graphmem.embeddings import make_embedder  # noqa: E402
from graphmem.memory import GraphMemory  # noqa: E402
from graphmem.models import Filter  # noqa: E402
from graphmem.retrieval import Retriever  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("split", choices=("a", "b", "all"))
    ap.add_argument("variants", nargs="+", help="JSON objects of RecallConfig fields")
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    ap.add_argument("--embed-cache", type=Path, default=None)
    ap.add_argument("--knowledge", action="store_true")
    ap.add_argument("--embedder", default="auto", help="as graphmem's embedder setting")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    convs = locomo.load(args.data)
    chosen = {"a": convs[:3], "b": convs[3:], "all": convs}[args.split]
    embedder = make_embedder(args.embedder)
    if args.embed_cache is not None:
        embedder = locomo.DiskCachedEmbedder(embedder, args.embed_cache)
    mem = GraphMemory.open("memory://", embedder=embedder, knowledge=args.knowledge)
    # the store holds every dev conversation (BM25's document frequencies as in
    # locomo.py); only the chosen split's questions are asked
    for conv in convs:
        locomo.ingest_user(mem, conv)
    mem.vectors.wait()
    base = RecallConfig().model_dump()
    for spec in args.variants:
        cfg = RecallConfig.model_validate({**base, **json.loads(spec)})
        retriever = Retriever(mem.backend, mem.embedder, config=cfg)
        scores = locomo.Scores(spec)
        t0 = time.perf_counter()
        for conv in chosen:
            flt = Filter.for_memories(agent_id=conv.sample_id)
            for q in conv.questions:
                if not q.gold:
                    continue
                t1 = time.perf_counter()
                rs = retriever.recall(q.text, k=50, filter=flt, touch=False)
                scores.add(q, [locomo._dia(r.memory) for r in rs], time.perf_counter() - t1)
        cats = " ".join(
            f"{label} {scores.cat_recall(cat, 10):.1f}"
            for cat, label in locomo.CATEGORIES.items()
            if scores.cat_recall(cat, 10) is not None
        )
        ks = " ".join(f"R@{k} {scores.recall(k):.1f}" for k in locomo.KS)
        print(
            f"{spec:45s} {ks} | {cats} | p50 {scores.latency_ms(0.5):.0f} ms, "
            f"{time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    if isinstance(embedder, locomo.DiskCachedEmbedder):
        embedder.save()
    mem.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
