"""Several writer processes on one embedded store: throughput and remember latency.

    python benchmarks/processes.py --size 20000 --procs 3 --writes 300

Each process opens the same file (pre-filled with ``--size`` memories) and remembers
``--writes`` memories one by one, reading (``count``) after each; the other processes'
commits reach it through the change log (an incremental refresh of the changed nodes).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import tempfile
import time
from pathlib import Path

from graphmem import GraphMemory


def _writer(path: str, name: str, writes: int, start: float) -> list[float]:
    mem = GraphMemory.open(path, embedder=None)
    while time.time() < start:
        time.sleep(0.001)
    lat = []
    for i in range(writes):
        t = time.perf_counter()
        mem.remember(f"{name} wrote note {i} about the weather", agent_id=name)
        mem.count(agent_id=name)
        lat.append((time.perf_counter() - t) * 1000)
    mem.close()
    return lat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=20_000)
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--writes", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "shared.db")
        with GraphMemory.open(path, embedder=None) as mem:
            for s in range(0, args.size, 5000):
                mem.remember_many(
                    [
                        {
                            "content": f"seed memory {i} on topic {i % 101}",
                            "agent_id": f"seed{i % 7}",
                        }
                        for i in range(s, min(s + 5000, args.size))
                    ]
                )
        ctx = mp.get_context("spawn")
        start = time.time() + 3.0
        t0 = time.perf_counter()
        with ctx.Pool(args.procs) as pool:
            lats = pool.starmap(
                _writer, [(path, f"p{i}", args.writes, start) for i in range(args.procs)]
            )
        wall = time.perf_counter() - t0 - 3.0
        flat = sorted(x for lat in lats for x in lat)
        with GraphMemory.open(path, embedder=None) as mem:
            total = mem.count()
    n = args.procs * args.writes
    print(
        f"{args.procs} processes x {args.writes} remember+count on a {args.size:,} store: "
        f"{n / wall:,.0f} writes/s overall, p50 {statistics.median(flat):.2f} ms, "
        f"p95 {flat[int(len(flat) * 0.95)]:.2f} ms; final count {total:,} "
        f"(expected {args.size + n:,})"
    )


if __name__ == "__main__":
    main()
