"""Entities on every backend (Neo4j runs when a server is reachable, else skips): Entity
nodes, MENTIONS and RELATES round-trip through the write path and read back the same."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from graphmem.memory import GraphMemory
from graphmem.models import (
    Edge,
    EdgeType,
    Entity,
    EntityType,
    Filter,
    NodeLabel,
    Visibility,
)

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)


@pytest.fixture
def mem_options() -> dict[str, Any]:
    """A store without the automatic knowledge layer: these tests write entities by hand."""
    return {"knowledge": False}


def _entity(norm: str, etype: EntityType, **kw: object) -> Entity:
    return Entity(
        id=f"e-{norm}",
        name=norm.title(),
        norm=norm,
        type=etype,
        first_seen=T0,
        last_seen=T0,
        mention_count=1,
        agent_id="a",
        **kw,
    )  # type: ignore[arg-type]


def test_entities_mentions_and_relations_round_trip(mem: GraphMemory) -> None:
    m = mem.remember("she moved from there last year", agent_id="a", created_at=T0)
    caro = _entity("caroline", EntityType.PERSON, aliases=("Caro",))
    sweden = _entity("sweden", EntityType.PLACE)
    mem.writes.put(
        [caro, sweden],
        [
            Edge(type=EdgeType.MENTIONS, src=m.ref, dst=caro.ref, props={"role": "speaker"}),
            Edge(type=EdgeType.MENTIONS, src=m.ref, dst=sweden.ref, props={"role": "mention"}),
            Edge(
                type=EdgeType.RELATES,
                src=caro.ref,
                dst=sweden.ref,
                props={"predicate": "moved_from", "memory_id": m.id, "valid_from": T0},
            ),
        ],
    )
    assert mem.backend.get(Entity, [caro.id, sweden.id]) == [caro, sweden]
    found = mem.backend.match(Entity, Filter(label=NodeLabel.ENTITY, equals={"norm": "sweden"}))
    assert found == [sweden]
    assert found[0].audience == "agent:a"
    by_type = mem.backend.match(Entity, Filter(label=NodeLabel.ENTITY, equals={"type": "person"}))
    assert [e.id for e in by_type] == [caro.id]

    sub = mem.backend.expand([m.ref], [EdgeType.MENTIONS], direction="out")
    assert {n.id for n in sub.nodes if isinstance(n, Entity)} == {caro.id, sweden.id}
    roles = {e.dst.id: e.props["role"] for e in sub.edges}
    assert roles == {caro.id: "speaker", sweden.id: "mention"}

    rel = mem.backend.expand([caro.ref], [EdgeType.RELATES], direction="out")
    [edge] = rel.edges
    assert edge.props["predicate"] == "moved_from"
    assert edge.props["memory_id"] == m.id
    assert edge.props["valid_from"] == T0

    back = mem.backend.expand([sweden.ref], [EdgeType.MENTIONS], direction="in")
    assert [n.id for n in back.nodes if n.label is NodeLabel.MEMORY] == [m.id]


def test_forgetting_a_memory_removes_its_mentions(mem: GraphMemory) -> None:
    m = mem.remember("she moved from there last year", agent_id="a", created_at=T0)
    sweden = _entity("sweden", EntityType.PLACE)
    mem.writes.put(
        [sweden],
        [Edge(type=EdgeType.MENTIONS, src=m.ref, dst=sweden.ref, props={"role": "mention"})],
    )
    mem.forget(m.id)
    sub = mem.backend.expand([sweden.ref], [EdgeType.MENTIONS], direction="in")
    assert sub.edges == ()


def test_entity_scope_follows_visibility() -> None:
    shared = Entity(
        name="Team", norm="team", agent_id="a", namespace="ops", visibility=Visibility.SHARED
    )
    assert shared.audience == "ns:ops"
    org = Entity(name="Acme", norm="acme", agent_id="a", visibility=Visibility.ORG)
    assert org.audience == "org"
