"""The knowledge layer against a real store: indexing through the write path, scoping,
resolution across memories, forget, and the read API (entities / about)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from graphmem.errors import NotFound
from graphmem.knowledge import about, entities
from graphmem.memory import GraphMemory
from graphmem.models import EdgeType, Entity, EntityType, Filter, Memory, NodeLabel
from graphmem.writes import Writes
from tests.conftest import Stores
from tests.knowledge import indexed
from tests.threads import run_threads

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)


@pytest.fixture
def kmem(stores: Stores) -> GraphMemory:
    m = stores.open("k.db", embedder=None, knowledge=True)
    indexed(m)
    return m


def all_entities(m: GraphMemory) -> dict[str, Entity]:
    found = m.backend.match(Entity, Filter(label=NodeLabel.ENTITY))
    return {e.norm: e for e in found if isinstance(e, Entity)}


def test_remember_writes_entities_and_mentions(kmem: GraphMemory) -> None:
    mm = kmem.remember(
        "Melanie: I went camping in Oregon with Caroline.", agent_id="a", created_at=T0
    )
    ents = all_entities(kmem)
    assert set(ents) == {"melanie", "camping", "oregon", "caroline"}
    assert ents["oregon"].type is EntityType.PLACE
    assert ents["melanie"].audience == "agent:a"
    sub = kmem.backend.expand([mm.ref], [EdgeType.MENTIONS], direction="out")
    roles = {e.dst.id: e.props["role"] for e in sub.edges}
    assert roles[ents["melanie"].id] == "speaker"
    assert roles[ents["oregon"].id] == "mention"


def test_later_memories_resolve_to_known_entities_and_count(kmem: GraphMemory) -> None:
    kmem.remember("Caroline: Thanks, Melanie! See you soon.", agent_id="a", created_at=T0)
    kmem.remember(
        "Caroline: Mel, your pottery class looks fun.",
        agent_id="a",
        created_at=T0 + timedelta(days=3),
    )
    ents = all_entities(kmem)
    assert "mel" not in ents  # resolved to the person the store knows
    mel = ents["melanie"]
    assert mel.mention_count == 2
    assert "Mel" in mel.aliases
    assert mel.first_seen == T0 and mel.last_seen == T0 + timedelta(days=3)
    assert ents["caroline"].mention_count == 2


def test_a_new_handle_loads_known_entities_from_the_store(stores: Stores) -> None:
    with stores.open("k.db", embedder=None, knowledge=True) as m1:
        indexed(m1)
        m1.remember("Jon: Hey Melanie, good to see you.", agent_id="a", created_at=T0)
    with stores.open("k.db", embedder=None, knowledge=True) as m2:
        indexed(m2)
        m2.remember("Jon: Mel loves it.", agent_id="a", created_at=T0)
        ents = all_entities(m2)
        assert ents["melanie"].mention_count == 2
        assert "mel" not in ents


def test_entities_are_scoped_like_memories(kmem: GraphMemory) -> None:
    kmem.remember("Ann: I moved from Sweden last year.", agent_id="a", created_at=T0)
    kmem.remember("Bob: It was cold in Sweden.", agent_id="b", created_at=T0)
    ents = kmem.backend.match(Entity, Filter(label=NodeLabel.ENTITY, equals={"norm": "sweden"}))
    assert sorted(e.audience for e in ents if isinstance(e, Entity)) == ["agent:a", "agent:b"]
    seen_by_b = {e.norm for e in entities(kmem.backend, Filter.for_memories(agent_id="b"))}
    assert seen_by_b == {"bob", "sweden"}
    a_view = about(kmem.backend, "Sweden", Filter.for_memories(agent_id="a"))
    assert [m.agent_id for m in a_view.memories] == ["a"]
    with pytest.raises(NotFound):
        about(kmem.backend, "Ann", Filter.for_memories(agent_id="b"))


def test_about_lists_memories_over_time_and_relations(kmem: GraphMemory) -> None:
    kmem.remember(
        "Caroline: I moved from Sweden four years ago.",
        agent_id="a",
        created_at=T0 + timedelta(days=1),
    )
    kmem.remember("Caroline: my grandma still lives in Sweden.", agent_id="a", created_at=T0)
    view = about(kmem.backend, "sweden", Filter.for_memories(agent_id="a"))
    assert view.entity.type is EntityType.PLACE
    assert [m.created_at for m in view.memories] == [T0, T0 + timedelta(days=1)]
    assert [(r.subject, r.predicate, r.object) for r in view.relations] == [
        ("Caroline", "moved_from", "Sweden")
    ]
    # an alias finds the entity too
    kmem.remember("Ann: Caro is away.", agent_id="a", created_at=T0)
    assert about(kmem.backend, "Caro", Filter.for_memories(agent_id="a")).entity.norm == (
        "caroline"
    )


def test_forget_prunes_entities_no_memory_mentions(kmem: GraphMemory) -> None:
    keep = kmem.remember("Jon: We loved Paris.", agent_id="a", created_at=T0)
    gone = kmem.remember("Jon: Oslo next, with Anna.", agent_id="a", created_at=T0)
    kmem.forget(gone.id)
    assert set(all_entities(kmem)) == {"jon", "paris"}
    assert keep.id  # the other memory's entities stay


def test_superseded_and_archived_memories_are_not_indexed_again(kmem: GraphMemory) -> None:
    m = kmem.remember("Jon: We loved Paris.", agent_id="a", created_at=T0)
    kmem.writes.set_status([m.id], "archived")
    assert all_entities(kmem)["paris"].mention_count == 1


def test_backfill_indexes_memories_written_before_the_layer(stores: Stores) -> None:
    with stores.open("b.db", embedder=None) as plain:
        # written by a write path without the knowledge layer
        old = Memory(content="Jon: We loved Paris.", agent_id="a", created_at=T0)
        Writes(plain.backend).create([old])
    with stores.open("b.db", embedder=None, knowledge=True) as m:
        assert all_entities(m) == {}
        assert indexed(m).backfill(m.list(limit=None)) == 2
        assert set(all_entities(m)) == {"jon", "paris"}


def test_export_import_keeps_entities_without_counting_twice(
    stores: Stores, tmp_path: Path
) -> None:
    with stores.open("a.db", embedder=None, knowledge=True) as a:
        indexed(a)
        a.remember("Jon: We loved Paris.", agent_id="a", created_at=T0)
        a.remember("Jon: Paris again in May, with Anna.", agent_id="a", created_at=T0)
        a.transfer.export(tmp_path / "dump.jsonl")
        before = {n: (e.id, e.mention_count) for n, e in all_entities(a).items()}
    with stores.open("b.db", embedder=None, knowledge=True) as b:
        indexed(b)
        b.transfer.import_(tmp_path / "dump.jsonl")
        after = {n: (e.id, e.mention_count) for n, e in all_entities(b).items()}
        assert after == before
        assert before["paris"][1] == 2


def test_concurrent_writers_count_every_mention(kmem: GraphMemory) -> None:

    def write(i: int) -> None:
        for j in range(10):
            kmem.remember(f"Jon: We loved Paris, visit {i}-{j}.", agent_id="a", created_at=T0)

    run_threads(write, [(i,) for i in range(4)])
    ents = all_entities(kmem)
    assert ents["paris"].mention_count == 40
    assert ents["jon"].mention_count == 40


def test_two_handles_on_one_store_count_from_the_store(stores: Stores) -> None:
    with (
        stores.open("shared.db", embedder=None, knowledge=True) as m1,
        stores.open("shared.db", embedder=None, knowledge=True) as m2,
    ):
        indexed(m1)
        indexed(m2)
        m1.remember("Jon: We loved Paris.", agent_id="a", created_at=T0)
        m2.remember("Jon: Paris in May.", agent_id="a", created_at=T0)  # m2 loads: 1
        m1.remember("Jon: Paris in June.", agent_id="a", created_at=T0)  # m1 cached 1
        m2.remember("Jon: Paris in July.", agent_id="a", created_at=T0)  # m2 cached 2
        assert all_entities(m1)["paris"].mention_count == 4
        assert all_entities(m2)["jon"].mention_count == 4


def test_forget_recounts_the_entities_that_stay(kmem: GraphMemory) -> None:
    kmem.remember("Jon: We loved Paris.", agent_id="a", created_at=T0)
    gone = kmem.remember("Jon: Paris again in May.", agent_id="a", created_at=T0)
    assert all_entities(kmem)["paris"].mention_count == 2
    kmem.forget(gone.id)
    assert all_entities(kmem)["paris"].mention_count == 1
    kmem.remember("Jon: Paris in June.", agent_id="a", created_at=T0)
    assert all_entities(kmem)["paris"].mention_count == 2
