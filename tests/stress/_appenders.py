"""Workers and checks for the append stress tests (importable under spawn).

A writer appends batches of 1-2,000 memories and single ones to shared runs and new runs
from several threads and records, in order, every write that returned; a reader reads
meanwhile and then waits until it sees every acknowledged write. The checks read a run's
NEXT chain from the embedded store's graph."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from typing import Any

from graphmem import GraphMemory
from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.models import Memory
from tests.threads import run_threads

SHARED_RUNS = 3  # runs of agent "a" that every writer appends to


def _batch_size(rng: random.Random, biggest: int) -> int:
    r = rng.random()
    if r < 0.3:
        return 1
    if r < 0.6:
        return rng.randint(2, 20)
    if r < 0.9:
        return rng.randint(16, 200)
    return rng.randint(200, biggest)


def _items(tag: str, j: int, n: int, run_id: str, agent: str) -> list[dict[str, Any]]:
    return [
        {
            "content": f"tok{tag}x{j}x{i} shared words",
            "agent_id": agent,
            "namespace": "ns0" if agent == "a" else "ns1",
            "tags": [f"w{tag}", f"k{i % 3}"],
            "run_id": run_id,
        }
        for i in range(n)
    ]


def write(
    path: str, name: str, threads: int, ops: int, seed: int, biggest: int, churn: bool
) -> dict[str, Any]:
    """Writer process: ``threads`` threads of ``ops`` writes each. Returns the acknowledged
    writes as (thread tag, run id, agent, ids) in each thread's order, and what was
    forgotten or superseded."""
    acked: list[tuple[str, str, str, list[str]]] = []
    gone: list[tuple[str, str]] = []
    lock = threading.Lock()
    mem = GraphMemory.open(path, embedder=None)

    def loop(t: int) -> None:
        tag = f"{name}t{t}"
        rng = random.Random(seed * 1000 + t)
        mine: list[tuple[str, str]] = []  # (run id, memory id)
        for j in range(ops):
            shared = rng.random() < 0.5
            run_id = f"shared{rng.randrange(SHARED_RUNS)}" if shared else f"{tag}r{j % 4}"
            agent = "a" if shared else tag
            n = _batch_size(rng, biggest)
            r = rng.random()
            if not churn:
                pass
            elif r < 0.08 and mine:
                victim = mine.pop(rng.randrange(len(mine)))
                try:
                    mem.forget(victim[1])
                except NotFound:  # already superseded by this thread
                    continue
                with lock:
                    gone.append(victim)
                continue
            elif r < 0.14 and mine:
                old = mine.pop(rng.randrange(len(mine)))
                try:
                    new = mem.update(old[1], f"tok{tag}x{j}xv replaced")
                except (Conflict, NotFound):
                    continue
                with lock:
                    gone.append(old)
                mine.append((old[0], new.id))
                continue
            elif r < 0.22 and len(mine) >= 2:
                # two of one scope: the newest and another of its agent
                last = mine.pop()
                same = [
                    o for o in mine if o[0].startswith("shared") == last[0].startswith("shared")
                ]
                if not same:
                    mine.append(last)
                    continue
                mine.remove(other := rng.choice(same))
                olds = [last, other]
                try:
                    first = mem.get(olds[0][1])
                    new = mem.writes.supersede(
                        [o for _r, o in olds],
                        Memory(
                            content=f"tok{tag}x{j}xs merged",
                            agent_id=first.agent_id,
                            namespace=first.namespace,
                        ),
                        reason="probe",
                    )
                except (Conflict, NotFound, InvalidInput):
                    continue  # gone meanwhile, or of two scopes: never combined
                with lock:
                    gone.extend(olds)
                continue
            elif r < 0.24 and t == 0:
                mem.lifecycle.consolidate(agent_id=tag)
                continue
            if n == 1 and rng.random() < 0.5:
                it = _items(tag, j, 1, run_id, agent)[0]
                made = [mem.remember(**it, reconcile="off")]
            else:
                made = mem.remember_many(_items(tag, j, n, run_id, agent))
            ids = [m.id for m in made]
            if rng.random() < 0.3:
                mine.extend((run_id, i) for i in ids[:2])
            with lock:
                acked.append((tag, run_id, agent, ids))

    run_threads(loop, [(t,) for t in range(threads)])
    mem.close()
    return {"acked": acked, "gone": gone}


def read_until(path: str, stop_file: str, want_file: str, timeout_s: float) -> dict[str, Any]:
    """Reader process: reads while the writers write (counts never go down), then waits
    until ``want_file`` names the acknowledged ids and sees every one of them."""
    import json
    import os

    mem = GraphMemory.open(path, embedder=None)
    last = 0
    reads = 0
    went_down = []
    while not os.path.exists(stop_file):
        n = mem.count(status=None)
        if n < last:
            went_down.append((last, n))
        last = n
        mem.recall("shared words", k=5, touch=False)
        reads += 1
        time.sleep(0.01)
    with open(want_file) as f:
        want: list[str] = json.load(f)
    deadline = time.monotonic() + timeout_s
    missing = want
    while missing and time.monotonic() < deadline:
        missing = [i for i in missing if not _has(mem, i)]
        if missing:
            time.sleep(0.1)
    seen = summary(mem)
    mem.close()
    return {"reads": reads, "went_down": went_down, "missing": missing, "summary": seen}


def summary(mem: GraphMemory) -> dict[str, Any]:
    """What a handle reads of the whole store: every memory, and the counts by run, agent,
    namespace and tag."""
    listed = mem.list(status=None, limit=None)
    runs = sorted({m.run_id for m in listed if m.run_id})
    tags = sorted({t for m in listed for t in m.tags})
    return {
        "ids": sorted((m.id, m.status.value) for m in listed),
        "runs": {r: mem.count(run_id=r, status=None) for r in runs},
        "events": {r: len(mem.runs.events(r)) for r in runs},
        "tags": {t: mem.count(tags=[t], status=None) for t in tags},
        "agents": {a: mem.count(agent_id=a, status=None) for a in {m.agent_id for m in listed}},
        "namespaces": {n: mem.count(namespace=n, status=None) for n in ("ns0", "ns1")},
    }


def _has(mem: GraphMemory, memory_id: str) -> bool:
    try:
        mem.get(memory_id)
    except NotFound:
        return False
    return True


def chains(mem: GraphMemory) -> dict[str, list[list[str]]]:
    """Each run's memories as the lines its NEXT edges make (one memory alone is a line of
    one), checked: no memory with two NEXT edges out or in, no cycle, no NEXT edge between
    runs."""
    g: Any = mem.backend._g  # type: ignore[attr-defined]
    run_of: dict[str, str] = {}
    succ: dict[str, str] = {}
    pred: dict[str, str] = {}
    for src, dst, etype in g.edges():
        if etype == "IN_RUN":
            run_of[src.removeprefix("Memory:")] = dst.removeprefix("Run:")
        elif etype == "NEXT":
            a, b = src.removeprefix("Memory:"), dst.removeprefix("Memory:")
            assert a not in succ, f"fork: {a} -> {succ[a]} and {b}"
            assert b not in pred, f"join: {pred[b]} and {a} -> {b}"
            succ[a] = b
            pred[b] = a
    out: dict[str, list[list[str]]] = defaultdict(list)
    seen = 0
    for i in sorted(run_of):
        if i in pred:
            continue
        line = [i]
        while line[-1] in succ:
            nxt = succ[line[-1]]
            assert run_of.get(nxt) == run_of[i], f"NEXT from run {run_of[i]} to {nxt}"
            line.append(nxt)
        seen += len(line)
        out[run_of[i]].append(line)
    assert seen == len(run_of), "a cycle of NEXT edges"
    return out


def in_order(lines: dict[str, list[list[str]]], acked: list[Any]) -> None:
    """Each thread's acknowledged memories of a run stand in the order it wrote them on
    their line."""
    where = {
        m: (r, k, p) for r, ls in lines.items() for k, ln in enumerate(ls) for p, m in enumerate(ln)
    }
    last: dict[tuple[str, str], tuple[int, int]] = {}
    for tag, run_id, _agent, ids in acked:
        for i in ids:
            if i not in where:
                continue  # forgotten or superseded; checked by the caller
            r, k, p = where[i]
            assert r == run_id, f"{i} in run {r}, written to {run_id}"
            before = last.get((tag, run_id))
            if before is not None and before[0] == k:
                assert before[1] < p, f"{tag}: {i} before what it wrote earlier in {run_id}"
            last[(tag, run_id)] = (k, p)
