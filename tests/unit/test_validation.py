"""Every kind of bad input raises a typed error and leaves the store unchanged."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from graphmem.errors import GraphMemError, InvalidInput
from graphmem.memory import GraphMemory
from graphmem.models import MAX_CONTENT_CHARS, Edge, EdgeType, Filter, Memory, NodeLabel

NAIVE = datetime(2025, 1, 1)

BAD_MEMORIES: list[tuple[str, dict[str, Any]]] = [
    ("empty content", {"content": ""}),
    ("blank content", {"content": "   \n\t"}),
    ("oversized content", {"content": "x" * (MAX_CONTENT_CHARS + 1)}),
    ("NUL in content", {"content": "a\x00b"}),
    ("importance > 1", {"content": "x", "importance": 1.5}),
    ("importance < 0", {"content": "x", "importance": -0.1}),
    ("confidence > 1", {"content": "x", "confidence": 2}),
    ("malformed tag", {"content": "x", "tags": ["has space"]}),
    ("empty tag", {"content": "x", "tags": [""]}),
    ("tags as a string", {"content": "x", "tags": "prefs"}),
    ("non-JSON metadata", {"content": "x", "metadata": {"obj": object()}}),
    ("NaN metadata", {"content": "x", "metadata": {"v": float("nan")}}),
    ("metadata not a map", {"content": "x", "metadata": ["a"]}),
    ("metadata int over 64 bits", {"content": "x", "metadata": {"big": 2**70}}),
    ("unknown category", {"content": "x", "category": "gossip"}),
    ("unknown tier", {"content": "x", "tier": "fleeting"}),
    ("unknown status", {"content": "x", "status": "deleted"}),
    ("naive created_at", {"content": "x", "created_at": NAIVE}),
    ("naive expires_at", {"content": "x", "expires_at": NAIVE}),
    ("unknown field", {"content": "x", "colour": "red"}),
    ("bad agent id", {"content": "x", "agent_id": " padded "}),
    ("control chars in agent id", {"content": "x", "agent_id": "a\nb"}),
    ("bad event type", {"content": "x", "event_type": "Not An Identifier"}),
    ("NaN embedding", {"content": "x", "embedding": [0.1, float("nan")]}),
    ("empty embedding", {"content": "x", "embedding": []}),
    ("valid_to before valid_from", {
        "content": "x", "valid_from": datetime(2025, 2, 1, tzinfo=UTC),
        "valid_to": datetime(2025, 1, 1, tzinfo=UTC)}),
]


@pytest.mark.parametrize(("why", "item"), BAD_MEMORIES, ids=[b[0] for b in BAD_MEMORIES])
def test_bad_memory_is_rejected_and_store_unchanged(
    nxmem: GraphMemory, why: str, item: dict[str, Any]
) -> None:
    keep = nxmem.remember("already here")
    before = nxmem.backend.stats()
    with pytest.raises(InvalidInput) as info:
        nxmem.remember_many([item])
    assert isinstance(info.value, GraphMemError) and isinstance(info.value, ValueError)
    assert str(info.value)  # a message a person can read
    assert nxmem.backend.stats() == before
    assert nxmem.get(keep.id) == keep


def test_messages_name_the_field(nxmem: GraphMemory) -> None:
    with pytest.raises(InvalidInput, match="importance"):
        nxmem.remember("x", importance=7)
    with pytest.raises(InvalidInput, match="timezone-aware"):
        nxmem.remember("x", created_at=NAIVE)
    with pytest.raises(InvalidInput, match="malformed tag"):
        nxmem.remember("x", tags=["a b"])
    with pytest.raises(InvalidInput, match="content must not be empty"):
        nxmem.remember("")


def test_bad_edges_and_filters() -> None:
    with pytest.raises(ValueError, match="cannot link"):
        Edge(type=EdgeType.RUN_BY, src=(NodeLabel.MEMORY, "a"), dst=(NodeLabel.AGENT, "b"))
    with pytest.raises(ValueError, match="itself"):
        Edge(type=EdgeType.NEXT, src=(NodeLabel.MEMORY, "a"), dst=(NodeLabel.MEMORY, "a"))
    with pytest.raises(ValueError):
        Edge(type="EVIL` DETACH DELETE", src=(NodeLabel.MEMORY, "a"), dst=(NodeLabel.MEMORY, "b"))
    with pytest.raises(ValueError):
        Edge(type=EdgeType.NEXT, src=("Evil", "a"), dst=(NodeLabel.MEMORY, "b"))
    with pytest.raises(ValueError):
        Edge(type=EdgeType.NEXT, src=(NodeLabel.MEMORY, "a"), dst=(NodeLabel.MEMORY, "b"),
             props={"bad key": 1})
    with pytest.raises(ValueError):
        Filter(equals={"content) DETACH DELETE n //": 1})
    with pytest.raises(ValueError):
        Filter(equals={"agent_id": {"$ne": 1}})
    with pytest.raises(InvalidInput):
        Filter.for_memories(since=NAIVE)


def test_update_with_bad_values_changes_nothing(nxmem: GraphMemory) -> None:
    m = nxmem.remember("original")
    before = nxmem.backend.stats()
    with pytest.raises(InvalidInput):
        nxmem.update(m.id, "")
    with pytest.raises(InvalidInput):
        nxmem.update(m.id, importance=5)
    assert nxmem.backend.stats() == before
    assert nxmem.get(m.id) == m


def test_models_are_frozen_values() -> None:
    m = Memory(content="x")
    with pytest.raises(Exception):  # noqa: B017  pydantic's frozen-instance error
        m.content = "y"  # type: ignore[misc]
    assert m.evolve(content="y").content == "y" and m.content == "x"
    with pytest.raises(InvalidInput):
        m.evolve(importance=2)


def test_unknown_backend_scheme() -> None:
    with pytest.raises(InvalidInput, match="scheme"):
        GraphMemory.open("redis://localhost", embedder=None)
