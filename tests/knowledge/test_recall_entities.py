"""Recall through entities: the entity channel and multi-hop over shared entities, scoped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graphmem.config import RecallConfig
from graphmem.knowledge import entity_channel
from graphmem.memory import GraphMemory
from graphmem.models import Filter
from graphmem.retrieval import Retriever
from tests.conftest import Stores
from tests.knowledge import indexed

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)


FILLER = [
    "the weather was grey and wet all week",
    "we cooked pasta with tomato sauce",
    "the printer jammed again this morning",
    "a new season of the show started",
    "the bus was late because of roadworks",
    "my plants need more light in winter",
    "the football match ended in a draw",
    "we painted the fence green on sunday",
    "the library closes early on fridays",
    "coffee prices went up again",
    "the cat knocked a glass off the table",
    "the train to the coast was packed",
]


@pytest.fixture
def kmem(stores: Stores) -> GraphMemory:
    m = stores.open("k.db", embedder=None, knowledge=True)
    indexed(m)
    for i, text in enumerate(FILLER):
        m.remember(f"Jon: {text}", agent_id="a", created_at=T0 + timedelta(hours=i))
    return m


def test_a_seed_brings_memories_that_share_a_rare_entity(kmem: GraphMemory) -> None:
    seed = kmem.remember(
        "Jon: my best holiday ever was the week in Lisbon", agent_id="a", created_at=T0
    )
    hop = kmem.remember(
        "Jon: the trams of Lisbon are yellow and loud",
        agent_id="a",
        created_at=T0 + timedelta(days=40),
    )
    r = Retriever(kmem.backend, None)
    hops = RecallConfig(expand_entities=True)  # opt-in: the default recall does not hop
    results = {
        x.memory.id: x
        for x in r.recall(
            "best holiday",
            k=5,
            touch=False,
            config=hops,
            filter=Filter.for_memories(agent_id="a"),
        )
    }
    assert seed.id in results
    assert hop.id in results
    assert results[hop.id].breakdown["entity:Lisbon"] == 1.0
    assert results[hop.id].breakdown["graph_via_entity"] == 1.0
    plain = r.recall("best holiday", k=5, touch=False, filter=Filter.for_memories(agent_id="a"))
    assert hop.id not in {x.memory.id for x in plain}


def test_entity_hops_never_cross_scopes(kmem: GraphMemory) -> None:
    kmem.remember("Jon: my best holiday ever was the week in Lisbon", agent_id="a", created_at=T0)
    kmem.remember("Jon: Lisbon again next year", agent_id="a", created_at=T0)
    other = kmem.remember("Eve: the trams of Lisbon are yellow", agent_id="b", created_at=T0)
    r = Retriever(kmem.backend, None)
    hops = RecallConfig(expand_entities=True)
    for flt in (Filter.for_memories(agent_id="a"), Filter.for_memories()):
        found = r.recall("best holiday", k=10, touch=False, filter=flt, config=hops)
        ids = {x.memory.id for x in found}
        # b's memory is a different entity (another audience): never reached through a's
        assert other.id not in ids


def test_hub_entities_are_not_followed(kmem: GraphMemory) -> None:
    # "Jon" is mentioned by every memory: sharing him says nothing
    kmem.remember("Jon: my best holiday ever was in the hills", agent_id="a", created_at=T0)
    r = Retriever(kmem.backend, None)
    results = r.recall(
        "best holiday",
        k=10,
        touch=False,
        config=RecallConfig(
            expand_entities=True,
            entity_hub_limit=5,
            expand_tags=False,
            expand_next=False,
            run_weight=0.0,
        ),
    )
    assert [x.memory.content for x in results] == ["Jon: my best holiday ever was in the hills"]


def test_entity_channel_finds_memories_by_a_short_form(kmem: GraphMemory) -> None:
    kmem.remember("Caroline: Thanks, Melanie!", agent_id="a", created_at=T0)
    short = kmem.remember("Caroline: Mel, your pottery is lovely", agent_id="a", created_at=T0)
    hits = entity_channel(
        kmem.backend, "what does Melanie make?", Filter.for_memories(agent_id="a"), None, k=10
    )
    assert short.id in {h.memory.id for h in hits}
    assert all(h.entities == ("Melanie",) for h in hits)
    # the scope decides which entities exist: agent b has no Melanie
    assert (
        entity_channel(
            kmem.backend, "what does Melanie make?", Filter.for_memories(agent_id="b"), None, k=10
        )
        == []
    )
