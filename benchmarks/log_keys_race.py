"""Concurrent writers on one log key against a live Neo4j: members kept and wall time.

Each round, ``--threads`` threads call ``mem.log.sadd`` ``--adds`` times each on a fresh
key, spread over ``--handles`` handles (each its own driver); then the set is read back.
A round is good when every acknowledged member is there. Prints one line per round and
the summary with the load from /proc/loadavg.

    python benchmarks/log_keys_race.py --url bolt://127.0.0.1:7687 --rounds 20 --handles 1

The database is emptied first (it asks for ``--wipe`` to do that).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

from graphmem.backends.neo4j import Neo4jBackend
from graphmem.memory import GraphMemory


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="bolt://127.0.0.1:7687")
    p.add_argument("--user", default="neo4j")
    p.add_argument("--password", default="graphmem-local")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--adds", type=int, default=5)
    p.add_argument("--handles", type=int, default=1)
    p.add_argument("--wipe", action="store_true", help="empty the database first")
    a = p.parse_args()
    if not a.wipe:
        raise SystemExit("this benchmark empties the database: pass --wipe")
    auth = (a.user, a.password)
    backends = [Neo4jBackend(a.url, auth=auth) for _ in range(a.handles)]
    backends[0].clear()
    mems = [GraphMemory(b, embedder=None) for b in backends]
    print(f"load before: {_load()}")
    walls: list[float] = []
    good = 0
    errors: list[str] = []
    for r in range(a.rounds):
        key = f"race-{r}"

        def work(i: int, key: str = key) -> None:
            for j in range(a.adds):
                try:
                    mems[i % a.handles].log.sadd(key, f"{i}-{j}")
                except Exception as e:  # counted: an error here is a lost member
                    errors.append(f"{key}: {type(e).__name__}: {e}"[:200])

        threads = [threading.Thread(target=work, args=(i,)) for i in range(a.threads)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
        kept = len(mems[0].log.smembers(key))
        walls.append(wall)
        good += kept == a.threads * a.adds
        print(f"round {r}: {kept}/{a.threads * a.adds} kept, {wall:.2f} s", flush=True)
    for e in errors[:5]:
        print(e)
    print(
        f"{a.rounds} rounds x {a.threads} threads x {a.adds} sadd on one key, "
        f"{a.handles} handle(s): {good}/{a.rounds} rounds kept every member, "
        f"{len(errors)} errors; wall per round min/median/max "
        f"{min(walls):.2f}/{statistics.median(walls):.2f}/{max(walls):.2f} s; "
        f"load after: {_load()}"
    )
    for m in mems:
        m.close()


if __name__ == "__main__":
    main()
