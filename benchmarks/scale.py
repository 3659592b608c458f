"""Scale and latency of the storage layer (no embeddings).

    python benchmarks/scale.py                       # embedded store, 10k and 100k
    python benchmarks/scale.py --sizes 10000 --url neo4j://localhost:7687
    python benchmarks/scale.py --url bolt://localhost:7687 --password secret --wipe --write

Text is synthetic: 8-20 pseudo-words per memory drawn from a 20k-word vocabulary with
Zipf-distributed frequencies (like natural language); queries are 4 words from the same
distribution. Measures, per size: batch ingest rate (remember_many, batches of 1000), single durable
remember p50/p95, lexical recall p50/p95, filtered list p50, and (embedded) reopen time and
file size. Prints a Markdown table and, with --write, replaces the "Scale" section of
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from graphmem.memory import GraphMemory


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
    return [
        {
            "content": sentence(rng),
            "agent_id": f"agent{rng.randrange(20)}",
            "namespace": f"ns{rng.randrange(5)}",
            "run_id": f"run{rng.randrange(n // 50 + 1)}",
            "tags": [f"tag{rng.randrange(50)}"],
            "importance": rng.random(),
            "created_at": T0 + timedelta(seconds=i),
        }
        for i in range(n)
    ]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def bench(url: str, n: int, *, reopen: bool, **open_options: Any) -> dict[str, Any]:
    rng = random.Random(1)
    data = items(n)
    out: dict[str, Any] = {"n": n}
    mem = GraphMemory.open(url, embedder=None, **open_options)
    t = time.perf_counter()
    for i in range(0, n, 1000):
        mem.remember_many(data[i : i + 1000])
    out["ingest_per_s"] = n / (time.perf_counter() - t)

    lat = []
    for i in range(300):
        t = time.perf_counter()
        mem.remember(sentence(rng), agent_id=f"agent{i % 20}")
        lat.append((time.perf_counter() - t) * 1000)
    out["remember_p50_ms"], out["remember_p95_ms"] = pct(lat, 50), pct(lat, 95)

    lat = []
    for _ in range(300):
        q = " ".join(word(rng) for _ in range(4))
        t = time.perf_counter()
        mem.recall(q, k=10, touch=False)
        lat.append((time.perf_counter() - t) * 1000)
    out["lexical_p50_ms"], out["lexical_p95_ms"] = pct(lat, 50), pct(lat, 95)

    lat = []
    for _ in range(100):
        q = " ".join(word(rng) for _ in range(4))
        t = time.perf_counter()
        mem.recall(q, k=10, agent_id=f"agent{rng.randrange(20)}", touch=False)
        lat.append((time.perf_counter() - t) * 1000)
    out["lexical_scoped_p50_ms"] = pct(lat, 50)

    lat = []
    for _ in range(100):
        t = time.perf_counter()
        mem.list(agent_id=f"agent{rng.randrange(20)}", namespace=f"ns{rng.randrange(5)}", limit=20)
        lat.append((time.perf_counter() - t) * 1000)
    out["filter_p50_ms"] = pct(lat, 50)
    stats = mem.backend.stats()
    mem.close()
    if reopen:
        t = time.perf_counter()
        again = GraphMemory.open(url, embedder=None)
        again.count()
        out["reopen_s"] = time.perf_counter() - t
        again.close()
        out["file_mb"] = sum(
            p.stat().st_size for p in Path(url).parent.glob(Path(url).name + "*")
        ) / 1e6
    else:
        out["file_mb"] = (stats.file_bytes or 0) / 1e6
    return out


COLUMNS = [
    ("n", "memories", "{:,}"),
    ("ingest_per_s", "batch ingest /s", "{:,.0f}"),
    ("remember_p50_ms", "remember p50 ms", "{:.2f}"),
    ("remember_p95_ms", "remember p95 ms", "{:.2f}"),
    ("lexical_p50_ms", "lexical p50 ms", "{:.2f}"),
    ("lexical_p95_ms", "lexical p95 ms", "{:.2f}"),
    ("lexical_scoped_p50_ms", "lexical+agent p50 ms", "{:.2f}"),
    ("filter_p50_ms", "filter p50 ms", "{:.2f}"),
    ("reopen_s", "reopen s", "{:.2f}"),
    ("file_mb", "file MB", "{:.1f}"),
]


def table(rows: list[dict[str, Any]]) -> str:
    head = "| " + " | ".join(c[1] for c in COLUMNS) + " |"
    sep = "|" + "|".join("---:" for _ in COLUMNS) + "|"
    body = [
        "| " + " | ".join(
            (fmt.format(r[k]) if k in r else "–") for k, _, fmt in COLUMNS) + " |"
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--url", default=None, help="backend URL (default: a temp embedded file)")
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    ap.add_argument("--user", default=None, help="server user (default: $NEO4J_USER)")
    ap.add_argument("--password", default=None, help="server password (default: $NEO4J_PASSWORD)")
    ap.add_argument("--database", default=None, help="server database (default: server's)")
    ap.add_argument("--wipe", action="store_true",
                    help="delete the graphmem data of a server store before each size")
    args = ap.parse_args(argv)
    options: dict[str, Any] = {}
    server = bool(args.url) and args.url.split("://")[0] in ("neo4j", "neo4j+s", "neo4j+ssc",
                                                             "bolt", "bolt+s", "bolt+ssc")
    if server:
        user = args.user or os.environ.get("NEO4J_USER", "neo4j")
        options["auth"] = (user, args.password or os.environ.get("NEO4J_PASSWORD", ""))
        options["database"] = args.database or os.environ.get("NEO4J_DATABASE") or None
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        if server:
            from graphmem.backends.neo4j import Neo4jBackend

            with Neo4jBackend(args.url, **options) as store:
                if args.wipe:
                    store.clear()
                elif store.stats().nodes:
                    sys.exit(f"{args.url} already holds graphmem data; pass --wipe to delete it")
            rows.append(bench(args.url, n, reopen=False, **options))
        elif args.url:
            rows.append(bench(args.url, n, reopen=False))
        else:
            with tempfile.TemporaryDirectory() as d:
                rows.append(bench(os.path.join(d, "scale.db"), n, reopen=True))
        print(table(rows[-1:]), flush=True)
    cmd = "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    machine = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    text = (
        f"Backend: {args.url or 'embedded (networkx + SQLite WAL, durability=normal)'}; "
        f"no embeddings. Command: `{cmd.strip()}`; machine: {machine}, 24 GiB; "
        f"{time.strftime('%Y-%m-%d')}.\n\n{table(rows)}\n"
    )
    print(text)
    if args.write:
        title = "Scale (storage)" if not args.url else f"Scale (storage, {args.url.split(':')[0]})"
        write_section(title, text, Path(__file__).with_name("RESULTS.md"))


if __name__ == "__main__":
    main()
