"""Cost of the knowledge layer on the write path.

Extraction alone (``graphmem.knowledge.extract``) per LoCoMo turn, and ``remember`` p50/p95
without embedding on the embedded store (a SQLite file), with and without the knowledge
layer (``GraphMemory.open(..., knowledge=...)``): one conversation, one turn per call.

    python benchmarks/knowledge.py [--data ../shared/data/locomo_dev.json] [--turns 400]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from locomo import DEFAULT_DATA, load, turn_content  # noqa: E402

from graphmem.knowledge import extract  # noqa: E402
from graphmem.memory import GraphMemory  # noqa: E402


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--turns", type=int, default=400, help="turns written per store")
    args = ap.parse_args(argv)
    conv = load(args.data)[0]
    turns = [t for s in sorted(conv.sessions) for t in conv.sessions[s]][: args.turns]
    texts = [turn_content(t) for t in turns]
    for text in texts[:20]:  # warm-up (regex compilation, caches)
        extract(text)
    times = []
    for text in texts:
        t0 = time.perf_counter()
        extract(text)
        times.append(time.perf_counter() - t0)
    print(
        f"extract: {len(texts)} turns, p50 {1e6 * _pct(times, 0.5):.0f} us, "
        f"p95 {1e6 * _pct(times, 0.95):.0f} us, mean {1e6 * statistics.fmean(times):.0f} us"
    )
    for knowledge in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            mem = GraphMemory.open(f"{tmp}/k.db", embedder="none", knowledge=knowledge)
            times = []
            for t in turns:
                t0 = time.perf_counter()
                mem.remember(
                    turn_content(t),
                    agent_id=conv.sample_id,
                    run_id=f"{conv.sample_id}/session-{t.session}",
                    created_at=t.at,
                )
                times.append(time.perf_counter() - t0)
            n_entities = mem.stats()["nodes"].get("Entity", 0)
            mem.close()
        print(
            f"remember, knowledge={'on' if knowledge else 'off'}: p50 "
            f"{1e3 * _pct(times, 0.5):.2f} ms, p95 {1e3 * _pct(times, 0.95):.2f} ms "
            f"({len(turns)} turns, {n_entities} entities)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
