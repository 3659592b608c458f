"""A writer process for the multi-process stress test (importable under spawn)."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from graphmem import GraphMemory
from graphmem.errors import Conflict, NotFound


def work(
    path: str, name: str, roots: list[str], doomed_root: str, ops: int, threads: int, seed: int
) -> dict[str, Any]:
    """Mixed remember / update / forget on a shared store; returns what was acknowledged."""
    out: dict[str, Any] = {
        "acked": [],
        "forgotten": [],
        "refused": [],
        "conflicts": 0,
        "versions": 0,
    }
    lock = threading.Lock()
    mem = GraphMemory.open(path, embedder=None)

    def loop(tag: str, rng: random.Random) -> None:
        mine: list[str] = []
        for j in range(ops):
            r = rng.random()
            if j == ops // 2 and tag.endswith("t0") and doomed_root:
                try:
                    mem.forget(doomed_root)
                    with lock:
                        out["forgotten"].append("doomed")
                except NotFound:
                    pass
            elif r < 0.5:
                try:
                    m = mem.remember(f"{tag} note {j}", agent_id=name)
                    mine.append(m.id)
                    with lock:
                        out["acked"].append(m.id)
                except Exception as e:  # a plain write must never be refused
                    with lock:
                        out["refused"].append(repr(e))
            elif r < 0.85:
                root = rng.choice(roots)
                try:
                    cur = mem.get(root, current=True)
                    mem.update(cur.id, f"chain {root} by {tag} {j}")
                    with lock:
                        out["versions"] += 1
                except (Conflict, NotFound):
                    with lock:
                        out["conflicts"] += 1
            elif mine:
                victim = mine.pop(rng.randrange(len(mine)))
                mem.forget(victim)
                with lock:
                    out["forgotten"].append(victim)

    workers = [
        threading.Thread(target=loop, args=(f"{name}t{t}", random.Random(seed * 100 + t)))
        for t in range(threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    # when this process began its final read: the latest such reader saw every write
    out["view_at"] = time.time()
    out["view"] = sorted(
        (m.id, m.status.value, m.content) for m in mem.list(status=None, limit=None)
    )
    mem.close()
    return out
