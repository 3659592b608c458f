"""The floor of an embedded ingest on this machine: graphmem's own rows written by SQLite alone.

    python benchmarks/embedded_floor.py [--n 100000] [--batch 1000] [--rounds 1]

Steps, each on a fresh file in a temporary folder (removed at the end):

- ``graphmem``: ``GraphMemory.remember_many`` of ``scale.py``'s items (no embeddings, the
  default settings), ``--batch`` at a time: the figure the issue's goal is about;
- ``sqlite``: the rows that run left in its file — the node rows (their JSON as written),
  the full-text rows, the bare NEXT edges, the runs' heads and one change-log row a write —
  read back and written again into a fresh file with the store's own schema and pragmas
  (WAL, ``synchronous=NORMAL``), one transaction of ``--batch`` memories at a time, every
  parameter made before the clock: what SQLite alone costs for exactly those bytes;
- ``sqlite-nofts``: the same without the full-text rows (what the full-text index costs);
- ``python``: the least Python a checked memory takes in graphmem — ``plain_memory`` (the
  fast path that checks a mapping item's fields and builds the :class:`Memory` that
  ``remember_many`` returns), item by item, nothing stored.

Per step: memories/s by wall clock and by the process's CPU, CPU µs a memory, the 1-minute
load before and after. ``sqlite`` + ``python`` is a lower bound of any ingest that keeps
the store's file and returns checked memories: nothing else of graphmem's write path (the
in-memory graph and its indexes, run chaining, preconditions, the change log's keys) is in
it. Not a test dependency.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale import items, reference_ms  # noqa: E402

from graphmem.backends.embedded.rows import SCHEMA  # noqa: E402
from graphmem.memory import GraphMemory  # noqa: E402
from graphmem.models.plain import plain_memory  # noqa: E402

Rows = list[tuple[Any, ...]]
Batch = tuple[Rows, Rows, Rows, Rows, str]


def load() -> float:
    return os.getloadavg()[0]


def timed(n: int, work: Callable[[], None]) -> dict[str, float]:
    before = load()
    t, c = time.perf_counter(), time.process_time()
    work()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return {
        "per_s": n / wall,
        "cpu_per_s": n / max(cpu, 1e-9),
        "cpu_us": cpu / n * 1e6,
        "load": before,
        "load_after": load(),
    }


def graphmem_step(path: Path, data: list[dict[str, Any]], batch: int) -> dict[str, float]:
    mem = GraphMemory.open(str(path), embedder=None)

    def work() -> None:
        for i in range(0, len(data), batch):
            mem.remember_many(data[i : i + batch])

    try:
        return timed(len(data), work)
    finally:
        mem.close()


def rows_of(path: Path, batch: int) -> tuple[list[tuple[Any, ...]], list[Batch]]:
    """The store's rows: the other nodes (agents, runs, tags), then its memories in row
    order, ``batch`` a transaction, each with its full-text rows, the NEXT edges into them,
    the heads of the runs they belong to and a change-log row naming them."""
    db = sqlite3.connect(path)
    try:
        others = db.execute(
            "SELECT rid, label, id, props FROM nodes WHERE label != 'Memory' ORDER BY rid"
        ).fetchall()
        memories = db.execute(
            "SELECT rid, label, id, props FROM nodes WHERE label = 'Memory' ORDER BY rid"
        ).fetchall()
        nexts = dict(db.execute("SELECT dst, src FROM next_edges").fetchall())
        heads = {
            r[0]: r for r in db.execute("SELECT rid, event_count, last_event_id FROM run_heads")
        }
    finally:
        db.close()
    run_rid = {ident: rid for rid, label, ident, _ in others if label == "Run"}
    batches: list[Batch] = []
    for i in range(0, len(memories), batch):
        chunk = memories[i : i + batch]
        fts, edges, touched = [], [], defaultdict(int)
        for rid, _, _, props in chunk:
            p = orjson.loads(props)
            fts.append((rid, p["content"]))
            if rid in nexts:
                edges.append((rid, nexts[rid]))
            run = run_rid.get(p.get("run_id"))
            if run in heads:
                touched[run] += 1
        named = [f"Memory:{m[2]}" for m in chunk] + [f"Run:{r}" for r in touched]
        keys = orjson.dumps(named).decode()
        batches.append((chunk, fts, edges, [heads[r] for r in touched], keys))
    return others, batches


HEADS = "INSERT OR REPLACE INTO run_heads(rid, event_count, last_event_id) VALUES (?, ?, ?)"


def sqlite_step(path: Path, others: Rows, batches: list[Batch], fts: bool) -> dict[str, float]:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(SCHEMA)
    db.execute("BEGIN IMMEDIATE")
    db.executemany("INSERT INTO nodes(rid, label, id, props) VALUES (?, ?, ?, ?)", others)
    db.execute("COMMIT")

    def work() -> None:
        for nodes, texts, edges, heads, keys in batches:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT INTO nodes(rid, label, id, props) VALUES (?, ?, ?, ?)", nodes)
            if fts:
                db.executemany("INSERT INTO memory_fts(rowid, content) VALUES (?, ?)", texts)
            db.executemany("INSERT INTO next_edges(dst, src) VALUES (?, ?)", edges)
            db.executemany(HEADS, heads)
            db.execute("INSERT INTO changes(key) VALUES (?)", (keys,))
            db.execute("COMMIT")

    try:
        return timed(sum(len(b[0]) for b in batches), work)
    finally:
        db.close()


def python_step(data: list[dict[str, Any]]) -> dict[str, float]:
    def work() -> None:
        for item in data:
            if plain_memory(item) is None:
                raise SystemExit(f"plain_memory cannot take {item!r}: not the floor")

    return timed(len(data), work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    data = items(args.n)
    version = sys.version.split()[0]
    print(
        f"n={args.n:,} batch={args.batch:,} cores={os.cpu_count()} python={version} "
        f"Python reference workload {reference_ms():.0f} ms (scale.py's; lower is faster)"
    )
    print("| round | step | /s (wall) | /s of CPU | CPU µs a memory | load before → after |")
    print("|---:|---|---:|---:|---:|---|")
    for r in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="graphmem-floor-") as tmp:
            store = Path(tmp) / "graphmem.db"
            steps = {"graphmem": graphmem_step(store, data, args.batch)}
            others, batches = rows_of(store, args.batch)
            steps["sqlite"] = sqlite_step(Path(tmp) / "sqlite.db", others, batches, fts=True)
            steps["sqlite-nofts"] = sqlite_step(Path(tmp) / "nofts.db", others, batches, fts=False)
            steps["python"] = python_step(data)
        for name, s in steps.items():
            print(
                f"| {r} | {name} | {s['per_s']:,.0f} | {s['cpu_per_s']:,.0f} | {s['cpu_us']:.1f} "
                f"| {s['load']:.1f} → {s['load_after']:.1f} |"
            )
        bound = steps["sqlite"]["cpu_us"] + steps["python"]["cpu_us"]
        print(
            f"| {r} | floor (sqlite + python CPU) | – | {1e6 / bound:,.0f} | {bound:.1f} | – |",
            flush=True,
        )
        share = steps["graphmem"]["per_s"] / steps["sqlite"]["per_s"]
        print(f"| {r} | graphmem / sqlite (wall) | {share:.2f} | – | – | – |", flush=True)


if __name__ == "__main__":
    main()
