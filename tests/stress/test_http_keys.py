"""Eight client threads send a mix of writes, batches, recalls, lists, reads of one memory
and context blocks with three API keys to a real uvicorn server: no answer is 5xx, no answer
to one key names another key's memory, and every acknowledged write is there afterwards,
through the server and in the store file reopened after it stopped."""

from __future__ import annotations

import os
import random
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from graphmem import GraphMemory
from graphmem.config import ApiKey, ServerSettings, Settings
from tests.served import uvicorn_thread

pytestmark = pytest.mark.embedded("a real server on a store file, reopened after it stops")

REQUESTS = int(os.environ.get("GRAPHMEM_STRESS_HTTP_REQUESTS", "150"))  # per thread
THREADS = 8
KEYS = {"alice": "alice-key-0001", "bob": "bob-key-00002", "carol": "carol-key-0003"}
TAG = "probe"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, Callable[[], None]]]:
    """The server's URL, its store file, and a function that stops it."""
    db = str(tmp_path / "keys.db")
    keys = tuple(
        ApiKey(key=secret, agent_id=agent, namespaces=("default", f"{agent}-room"))
        for agent, secret in KEYS.items()
    )
    settings = Settings(url=db, embedder="none", server=ServerSettings(api_keys=keys))
    with uvicorn_thread(settings, join_s=60) as (base, stop):
        yield base, db, stop


def test_three_keys_under_concurrent_load_never_leak_nor_lose_a_write(
    served: tuple[str, str, Callable[[], None]],
) -> None:
    base, db, stop = served
    acked: dict[str, set[str]] = defaultdict(set)
    problems: list[str] = []
    lock = threading.Lock()

    def check(who: str, r: httpx.Response, what: str) -> None:
        if r.status_code >= 500:
            problems.append(f"{what} as {who}: {r.status_code} {r.text[:200]}")
        for other in KEYS:
            if other != who and f"owner={other};" in r.text:
                problems.append(f"{what} as {who} named {other}'s memory: {r.text[:200]}")

    def worker(n: int) -> None:
        rnd = random.Random(n)
        with httpx.Client(base_url=base, timeout=120) as c:
            for i in range(REQUESTS):
                who = rnd.choice(list(KEYS))
                h = {"Authorization": f"Bearer {KEYS[who]}"}
                room = rnd.choice(["default", f"{who}-room"])
                op = rnd.random()
                word = f"word{rnd.randrange(30)}"
                if op < 0.3:
                    body = {"content": f"owner={who}; {n}-{i} {word}", "tags": [TAG]}
                    r = c.post("/memories", json={**body, "namespace": room}, headers=h)
                    if r.status_code == 201:
                        with lock:
                            acked[who].add(r.json()["id"])
                elif op < 0.4:
                    items = [
                        {"content": f"owner={who}; {n}-{i}-{j} {word}", "tags": [TAG]}
                        for j in range(3)
                    ]
                    r = c.post("/memories/batch", json={"items": items}, headers=h)
                    if r.status_code == 201:
                        with lock:
                            acked[who].update(m["id"] for m in r.json())
                elif op < 0.6:
                    r = c.post("/recall", json={"query": f"owner {word}", "k": 20}, headers=h)
                elif op < 0.75:
                    r = c.get("/memories", params={"tag": TAG, "limit": 200}, headers=h)
                elif op < 0.9:
                    with lock:
                        pool = [(a, m) for a, ids in acked.items() for m in ids]
                    if not pool:
                        continue
                    owner, mid = rnd.choice(pool)
                    r = c.get(f"/memories/{mid}", headers=h)
                    if (r.status_code == 200) != (owner == who):
                        problems.append(f"GET {owner}'s memory as {who}: {r.status_code}")
                else:
                    r = c.post("/context", json={"query": f"owner {word}"}, headers=h)
                check(who, r, f"request {n}-{i}")
                if r.status_code not in (200, 201, 403):
                    problems.append(f"request {n}-{i} as {who}: {r.status_code} {r.text[:200]}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems, problems[:5]
    assert all(acked.values()), dict(acked)

    with httpx.Client(base_url=base, timeout=120) as c:
        for who, secret in KEYS.items():
            listed = c.get(
                "/memories",
                params={"tag": TAG, "limit": 1000},
                headers={"Authorization": f"Bearer {secret}"},
            ).json()
            assert {m["id"] for m in listed} >= acked[who]
            assert {m["agent_id"] for m in listed} == {who}
    served_ids = set().union(*acked.values())

    stop()  # the store the server opened is closed: every acknowledged write is in the file
    with GraphMemory.open(db, embedder=None) as mem:
        stored = {m.id: m.agent_id for m in mem.list(tags=[TAG], limit=None)}
    assert served_ids <= set(stored)
    for who, ids in acked.items():
        assert {stored[i] for i in ids} == {who}
