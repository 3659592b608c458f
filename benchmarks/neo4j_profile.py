"""PROFILE of recall's statements on a Neo4j store that holds scale.py's recall workload.

    python benchmarks/scale.py --recall --recall-sizes 100000 --url bolt://localhost:7687 --wipe
    python benchmarks/neo4j_profile.py --url bolt://localhost:7687 --size 100000

Runs ``mem.recall(q, k=10, touch=False)`` unscoped and under each scope of scale.py (an
agent, a namespace, namespace + tag), records the statements recall sends, and runs each
again with ``PROFILE`` in a read transaction (after a warm-up run, so the plan is cached).
Prints per statement: server time, rows, db hits, and the operators with the most db hits.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale

from graphmem.backends.neo4j.session import Neo4jSession
from graphmem.memory import GraphMemory

SCOPES: list[tuple[str, dict[str, Any]]] = [
    ("none", {}),
    ("agent", {"agent_id": "agent3"}),
    ("namespace", {"namespace": "ns1"}),
    ("namespace + tag", {"namespace": "ns1", "tags": ["tag7"]}),
]


def _operators(plan: Any, out: list[tuple[int, str, int, str]], depth: int = 0) -> None:
    args = plan.get("args", {})
    out.append(
        (
            int(plan.get("dbHits", 0)),
            plan["operatorType"].split("@")[0],
            int(plan.get("rows", 0)),
            str(args.get("Details", "")).replace("\n", " ")[:90],
        )
    )
    for child in plan.get("children", []):
        _operators(child, out, depth + 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--user", default=os.environ.get("NEO4J_USER", "neo4j"))
    ap.add_argument("--password", default=os.environ.get("NEO4J_PASSWORD", ""))
    ap.add_argument("--size", type=int, default=100_000, help="the workload's size")
    ap.add_argument("--top", type=int, default=6, help="operators shown per statement")
    args = ap.parse_args()
    auth = (args.user, args.password)
    vecs = scale.synthetic_vectors(args.size)
    mem = GraphMemory.open(args.url, auth=auth, embedder=scale.SyntheticQueries(384, vecs))
    rng = random.Random(9)
    query = " ".join(scale.word(rng) for _ in range(4))
    sent: list[tuple[str, str, dict[str, Any]]] = []
    original = Neo4jSession._run

    def recording(tx: Any, name: str, text: str, params: Any) -> Any:
        sent.append((name, text, dict(params)))
        return original(tx, name, text, params)

    print(f"query {query!r}; load {os.getloadavg()[0]:.1f}")
    driver = getattr(mem.backend, "_get_driver")()  # noqa: B009 - the backend's own driver
    for label, filters in SCOPES:
        mem.recall(query, k=10, touch=False, **filters)  # warm: plans cached
        sent.clear()
        setattr(Neo4jSession, "_run", staticmethod(recording))  # noqa: B010
        t = time.perf_counter()
        mem.recall(query, k=10, touch=False, **filters)
        wall = (time.perf_counter() - t) * 1000
        setattr(Neo4jSession, "_run", staticmethod(original))  # noqa: B010
        print(f"\n## {label}: recall {wall:.1f} ms client wall, {len(sent)} statements")
        for name, text, params in sent:
            with driver.session(database=None) as session:
                tx = session.begin_transaction()
                summary = tx.run("PROFILE " + text, params).consume()
                tx.rollback()
            ops: list[tuple[int, str, int, str]] = []
            _operators(summary.profile, ops)
            hits = sum(o[0] for o in ops)
            ms = (summary.result_available_after or 0) + (summary.result_consumed_after or 0)
            rows = summary.profile.get("rows", 0)
            print(f"- {name}: {ms} ms server, {rows} rows, {hits:,} db hits")
            for h, op, r, details in sorted(ops, reverse=True)[: args.top]:
                if h:
                    print(f"    {h:>7,} {op} ({r} rows) {details}")
    mem.close()


if __name__ == "__main__":
    main()
