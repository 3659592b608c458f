"""Entity mention counts stay exact under forget, whichever handle indexed the memories.

Issue 24, finding 7: the demo run twice showed Alice with 18 mentions although the first
run's memories had been forgotten — the second handle had not loaded the entities, so its
forget recounted nothing. Each handle here is a fresh GraphMemory on the same backend (for
Neo4j: the same server), as a reopened store or a second process would be.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from graphmem.backends.base import GraphBackend
from graphmem.memory import GraphMemory

ALICE = [
    "Alice moved to Lisbon in May.",
    "Alice drinks tea with Carla.",
    "Alice booked a hotel in Alfama.",
]


@pytest.fixture
def handles(backend: GraphBackend) -> Iterator[list[GraphMemory]]:
    opened: list[GraphMemory] = []

    def fresh() -> GraphMemory:
        m = GraphMemory(backend, embedder=None, owns_backend=False, knowledge=True)
        opened.append(m)
        return m

    yield [fresh(), fresh(), fresh()]
    for m in opened:
        m.close()


def _mentions(mem: GraphMemory, name: str) -> int | None:
    found = [e for e in mem.knowledge.entities(limit=1000) if e.name == name]
    return found[0].mention_count if found else None


def test_a_fresh_handle_forgetting_recounts_the_mentions(handles: list[GraphMemory]) -> None:
    writer, forgetter, reader = handles
    ids = [writer.remember(text, agent_id="a").id for text in ALICE]
    assert _mentions(reader, "Alice") == 3
    forgetter.forget(ids[0])
    assert _mentions(reader, "Alice") == 2
    assert _mentions(reader, "Lisbon") is None  # no memory names it any more
    for i in ids[1:]:
        forgetter.forget(i)
    assert _mentions(reader, "Alice") is None


def test_forgetting_and_writing_again_counts_only_what_is_stored(
    handles: list[GraphMemory],
) -> None:
    first, second, reader = handles
    for text in ALICE:
        first.remember(text, agent_id="a")
    # the demo's second run: a new handle forgets the old memories, then writes them again
    for m in second.list(agent_id="a", status=None, limit=None):
        second.forget(m.id)
    for text in ALICE:
        second.remember(text, agent_id="a")
    assert _mentions(reader, "Alice") == 3
    assert _mentions(reader, "Carla") == 1
