"""Read your writes: what a recall right after ``remember`` costs, and that it finds the write.

Measured with the default embedder (bundled MiniLM, background vectors), embedded store:

- ``remember`` p50/p95 when no recall follows (the acknowledged write);
- ``remember`` + ``recall`` at once (the recall waits for this handle's pending vector)
  against a ``recall`` of the same question once the vectors are done (the extra wait is
  the price of reading your own write by meaning);
- whether the first recall ranks the fresh memory as the later one does.

    python benchmarks/read_your_writes.py [--n 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from graphmem.memory import GraphMemory  # noqa: E402

PAIRS = [
    ("Alice prefers green tea in the morning", "favourite beverage"),
    ("Bob moved to Lisbon for a new job at a bank", "where does Bob work now?"),
    ("Carla is allergic to peanuts", "what food must Carla avoid?"),
    ("Dan adopted a puppy called Rex last spring", "does Dan have a pet?"),
    ("Eve runs a marathon every autumn", "what sport does Eve do?"),
]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return 1000 * xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="remembers timed with no recall")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp, GraphMemory.open(str(Path(tmp) / "r.db")) as mem:
        mem.recall("warm up the model", k=1)  # model load outside the measurement
        plain: list[float] = []
        for i in range(args.n):
            t0 = time.perf_counter()
            mem.remember(f"note {i}: the meeting about budget item {i} moved", agent_id="bulk")
            plain.append(time.perf_counter() - t0)
        mem.vectors.wait()
        fresh: list[float] = []
        settled: list[float] = []
        same = 0
        for round_ in range(4):
            for text, question in PAIRS:
                agent = f"a{round_}-{text[:3]}"
                # new words each round: neither the memory nor the question is in the
                # embedder's cache
                text = f"{text}, noted on visit {round_}"
                question = f"{question} (visit {round_})"
                mem.remember(text, agent_id=agent)
                t0 = time.perf_counter()
                first = mem.recall(question, agent_id=agent, k=3, touch=False)
                fresh.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                later = mem.recall(question, agent_id=agent, k=3, touch=False)
                settled.append(time.perf_counter() - t0)
                same += [r.memory.id for r in first] == [r.memory.id for r in later] and bool(
                    first and "vector" in first[0].breakdown
                )
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"remember (no recall after) p50 {pct(plain, 0.5):.2f} ms, p95 {pct(plain, 0.95):.2f} ms")
    print(
        f"recall right after remember p50 {pct(fresh, 0.5):.1f} ms, p95 {pct(fresh, 0.95):.1f} ms;"
        f" the same recall once settled p50 {pct(settled, 0.5):.1f} ms,"
        f" p95 {pct(settled, 0.95):.1f} ms; read-your-writes cost p50"
        f" {pct(fresh, 0.5) - pct(settled, 0.5):.1f} ms"
    )
    print(f"first recall = later recall, ranked by meaning: {same} of {len(fresh)}")
    print(f"(mean remember {1000 * statistics.fmean(plain):.2f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
