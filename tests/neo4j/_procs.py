"""A writer process for the live Neo4j multi-process test (importable under spawn).

Eight threads of one handle mix, on a database other processes write too: private
remembers and batches of two agents, new versions of shared chains (one of which another
process forgets meanwhile), events and memories appended to one shared run, versions of
shared org facts by two authors, near-duplicates and their consolidation, and reads that
must never return the other agent's private memories. It returns what was acknowledged."""

from __future__ import annotations

import random
import threading
import traceback
from typing import Any

from graphmem import GraphMemory
from graphmem.errors import Conflict, GraphMemError, NotFound

SECRET = "SECRET{}"  # in each private memory's content: the agent's name, upper case


def work(conn: dict[str, Any], name: str, setup: dict[str, Any], ops: int, seed: int) -> dict:
    out: dict[str, list[Any]] = {
        k: []
        for k in (
            "acked",
            "forgotten",
            "batches",
            "versions",
            "events",
            "facts",
            "dups",
            "leaks",
            "untyped",
            "refused",
        )
    }
    lock = threading.Lock()
    mem = GraphMemory.open(conn["uri"], auth=conn["auth"], database=conn["database"], embedder=None)

    def note(key: str, value: Any) -> None:
        with lock:
            out[key].append(value)

    def loop(t: int) -> None:
        rng = random.Random(seed * 100 + t)
        tag = f"{name}t{t}"
        agent, other = ("alice", "bob") if t % 2 == 0 else ("bob", "alice")
        mine: list[str] = []
        for j in range(ops):
            r = rng.random()
            try:
                if t == 1 and j == ops // 3:
                    try:
                        mem.forget(setup["doomed"][name])
                        note("forgotten", setup["doomed"][name])
                    except NotFound:
                        pass
                elif r < 0.18:
                    m = mem.remember(
                        f"{tag} note {j} {SECRET.format(agent.upper())}",
                        agent_id=agent,
                        reconcile="off",
                    )
                    mine.append(m.id)
                    note("acked", m.id)
                elif r < 0.28:
                    batch = f"{tag}b{j}"
                    items = [
                        {
                            "content": f"{batch} item {i} {SECRET.format(agent.upper())}",
                            "agent_id": agent,
                            "metadata": {"batch": batch},
                        }
                        for i in range(rng.choice((2, 10, 40)))
                    ]
                    made = mem.remember_many(items)
                    note("batches", (batch, len(items)))
                    for m in made:
                        note("acked", m.id)
                elif r < 0.46:
                    root = rng.choice(setup["roots"] + list(setup["doomed"].values()))
                    try:
                        cur = mem.get(root, current=True)
                        new = mem.update(cur.id, f"chain {root} by {tag} {j}")
                        note("versions", (root, new.id))
                    except (Conflict, NotFound):
                        pass  # lost a race for the chain, or it was forgotten: typed
                elif r < 0.54 and mine:
                    victim = mine.pop(rng.randrange(len(mine)))
                    mem.forget(victim)
                    note("forgotten", victim)
                elif r < 0.68:
                    if rng.random() < 0.5:
                        ev = mem.runs.add_event(setup["run"], "note", f"{tag} event {j}")
                    else:
                        ev = mem.remember(
                            f"{tag} run memory {j}",
                            agent_id="runner",
                            run_id=setup["run"],
                            reconcile="off",
                        )
                    note("events", ev.id)
                elif r < 0.76:
                    fid = rng.choice(setup["facts"])
                    try:
                        f = mem.org.publish(
                            f"fact {fid} by {tag} {j}",
                            author=rng.choice(["cto", "vp"]),
                            fact_id=fid,
                        )
                        note("facts", (fid, f.version, f.id))
                    except Conflict:
                        pass  # another author published that version first
                elif r < 0.84:
                    m = mem.remember(
                        f"Dana hikes in the northern mountains every weekend {j % 3}",
                        agent_id="dup",
                        reconcile="off",
                    )
                    note("dups", m.id)
                elif r < 0.87 and t in (2, 3):
                    mem.lifecycle.consolidate(agent_id="dup")
                else:
                    secret = SECRET.format(other.upper())
                    hits = [x.memory for x in mem.recall("note SECRET", scope=agent, k=30)]
                    listed = mem.list(scope=agent, limit=200)
                    block = mem.context("note item", scope=agent, touch=False)
                    for m in (*hits, *listed):
                        if secret in m.content:
                            note("leaks", m.id)
                    if secret in block:
                        note("leaks", "context")
            except GraphMemError as e:
                note("refused", f"{type(e).__name__}: {e}"[:300])
            except Exception as e:
                note("untyped", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"[-1500:])

    threads = [threading.Thread(target=loop, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    mem.close()
    return out
