"""The write and read paths as a user meets them, quiet or beside CPU-bound processes.

    python benchmarks/writes.py                 # as the machine is
    python benchmarks/writes.py --busy 1        # with one `while True: pass` beside it

On LoCoMo turns (../shared/data/locomo_dev.json), embedded store in a temp dir:

- ``remember`` p50/p95 with the default embedder (background vectors: acknowledged once
  durable), one memory per call into a store of ``--size`` memories;
- ingest with embeddings: ``remember_many`` in batches of 256, then ``mem.vectors.wait()``,
  memories/s;
- ``recall(k=10)`` p50/p95 with touching on and off (question vectors cached, so the
  figure is the read path, not the model);
- batch ingest without embeddings (``embedder=None``, knowledge layer on and off), /s.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphmem import GraphMemory  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "locomo_dev.json"


def _turns() -> tuple[list[str], list[str]]:
    data = json.loads(DATA.read_text())
    turns = [
        t["text"]
        for s in data
        for k, v in s["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
        for t in v
    ]
    questions = [q["question"] for s in data for q in s["qa"]]
    return turns, questions


def _spin() -> None:
    while True:
        pass


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--busy", type=int, default=0, help="CPU-bound processes beside it")
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    spinners = [mp.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    load0 = os.getloadavg()[0]
    turns, questions = _turns()
    rows: list[tuple[str, str]] = []
    try:
        with tempfile.TemporaryDirectory() as d:
            with GraphMemory.open(str(Path(d) / "w.db")) as mem:
                mem.embedder.embed(["warm up"])  # type: ignore[union-attr]
                t = time.perf_counter()
                n = 0
                for s in range(0, args.size, 256):
                    batch = turns[s : min(s + 256, args.size)]
                    mem.remember_many([{"content": x, "agent_id": "a"} for x in batch])
                    n += len(batch)
                mem.vectors.wait()
                rows.append(
                    (
                        "ingest with embeddings (remember_many 256 + vectors) /s",
                        f"{n / (time.perf_counter() - t):,.0f}",
                    )
                )
                it = iter(turns[args.size : args.size + args.calls])
                lat = _timed(
                    lambda: mem.remember(next(it), agent_id="a", reconcile="off"),
                    min(args.calls, len(turns) - args.size),
                )
                rows.append(
                    (
                        "remember p50 / p95 ms (default embedder, background vectors)",
                        f"{statistics.median(lat):.2f} / {_pct(lat, 0.95):.2f}",
                    )
                )
                mem.vectors.wait()
                qs = questions[: args.calls]
                mem.embedder.embed(qs)  # type: ignore[union-attr]  # cache the questions
                for q in qs[:50]:  # warm-up: caches, index planning
                    mem.recall(q, agent_id="a", k=10, touch=False)
                lats: dict[bool, list[float]] = {True: [], False: []}
                for i, q in enumerate(qs * 2):  # interleaved, so both see the same load
                    touch = i % 2 == 0
                    t = time.perf_counter()
                    mem.recall(q, agent_id="a", k=10, touch=touch)
                    lats[touch].append((time.perf_counter() - t) * 1000)
                for touch, lat in lats.items():
                    rows.append(
                        (
                            f"recall k=10 p50 / p95 ms, touch={touch} (question cached)",
                            f"{statistics.median(lat):.2f} / {_pct(lat, 0.95):.2f}",
                        )
                    )
            for knowledge in (True, False):
                with GraphMemory.open(
                    str(Path(d) / f"b{knowledge}.db"), embedder=None, knowledge=knowledge
                ) as mem:
                    items = [{"content": x, "agent_id": "a"} for x in turns]
                    t = time.perf_counter()
                    for s in range(0, len(items), 1000):
                        mem.remember_many(items[s : s + 1000])
                    rows.append(
                        (
                            f"batch ingest without embeddings, knowledge={knowledge} /s",
                            f"{len(items) / (time.perf_counter() - t):,.0f}",
                        )
                    )
    finally:
        for p in spinners:
            p.terminate()
    print(
        f"`python benchmarks/writes.py --busy {args.busy} --size {args.size}`; "
        f"2 cores, 24 GiB; load {load0:.1f} -> {os.getloadavg()[0]:.1f}; "
        f"{args.busy} spinner(s)"
    )
    print("| measure | value |\n|---|---:|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
