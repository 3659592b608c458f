"""Duplicates keep what the caller said, by one rule (graphmem.reconcile.merge_duplicate),
an update never makes two identical active memories, and every surface reports the
outcome of a write."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from graphmem.errors import Conflict
from graphmem.memory import GraphMemory
from graphmem.models import Memory, content_hash
from graphmem.server.http import create_app


def test_an_exact_duplicate_keeps_the_requests_fields(mem: GraphMemory) -> None:
    first = mem.remember(
        "Alice prefers green tea", tags=["prefs"], metadata={"source": "chat"}, importance=0.4
    )
    past = mem.writes.now() - timedelta(days=1)
    earlier = first.created_at - timedelta(days=30)
    result = mem.writes.reconcile(
        "Alice prefers green tea",
        tags=["drinks"],
        metadata={"source": "form", "lang": "en"},
        importance=0.9,
        expires_at=past,
        valid_from=earlier,
    )
    assert result.action == "duplicate" and result.related_ids == (first.id,)
    kept = mem.get(first.id)
    assert result.memory.id == first.id
    assert kept.tags == ("prefs", "drinks")
    assert kept.metadata["source"] == "form" and kept.metadata["lang"] == "en"
    assert kept.importance == pytest.approx(0.9)
    assert kept.expires_at == past
    assert kept.valid_from == earlier
    assert mem.count() == 1


def test_remember_of_an_exact_duplicate_keeps_what_the_caller_said(mem: GraphMemory) -> None:
    """The public verb itself (issue 24 finding 4: a new expiry in the past came back as
    the old one), not only ``writes.reconcile``."""
    first = mem.remember("Alice prefers green tea", tags=["prefs"])
    past = mem.writes.now() - timedelta(days=1)
    again = mem.remember(
        "Alice prefers green tea", tags=["drinks"], metadata={"lang": "en"}, expires_at=past
    )
    assert again.id == first.id and again.expires_at == past
    kept = mem.get(first.id)
    assert kept.expires_at == past
    assert kept.tags == ("prefs", "drinks") and kept.metadata["lang"] == "en"
    assert mem.count(status=None) == 1


def test_a_duplicate_that_says_nothing_new_changes_nothing(mem: GraphMemory) -> None:
    first = mem.remember("Alice prefers green tea", tags=["prefs"], importance=0.8)
    result = mem.writes.reconcile("Alice prefers green tea", importance=0.2)
    assert result.action == "duplicate"
    kept = mem.get(first.id)
    assert kept.tags == ("prefs",) and kept.importance == pytest.approx(0.8)


def test_an_update_cannot_make_an_exact_duplicate(mem: GraphMemory) -> None:
    a = mem.remember("Alice prefers green tea")
    b = mem.remember("Alice prefers tea")
    with pytest.raises(Conflict, match=a.id):
        mem.update(b.id, "Alice prefers green tea")
    assert [m.content for m in mem.list()].count("Alice prefers green tea") == 1
    assert mem.get(b.id).status.value == "active"
    other = mem.remember("Alice prefers tea", agent_id="bob")  # another scope: allowed
    assert mem.update(other.id, "Alice prefers green tea").agent_id == "bob"


def test_http_reports_the_outcome_of_a_write(store_mem: GraphMemory) -> None:
    with TestClient(create_app(store_mem)) as client:
        r1 = client.post("/memories", json={"content": "Bob lives in Oslo"})
        assert r1.status_code == 201 and r1.json()["outcome"] == "created"
        r2 = client.post("/memories", json={"content": "Bob lives in Oslo", "tags": ["home"]})
        body = r2.json()
        assert body["outcome"] == "duplicate" and body["duplicate_of"] == r1.json()["id"]
        assert body["tags"] == ["home"]
        r3 = client.post("/memories", json={"content": "Bob lives in Bergen"})
        assert r3.json()["outcome"] == "superseded"
        assert r3.json()["related_ids"] == [r1.json()["id"]]


def test_an_http_duplicate_keeps_the_requests_fields(store_mem: GraphMemory) -> None:
    with TestClient(create_app(store_mem)) as client:
        first = client.post("/memories", json={"content": "Bob lives in Oslo", "tags": ["home"]})
        again = client.post(
            "/memories",
            json={
                "content": "Bob lives in Oslo",
                "tags": ["city"],
                "metadata": {"source": "form"},
                "expires_at": "2031-01-01T00:00:00Z",
            },
        )
    assert again.status_code in (200, 201), again.text
    body = again.json()
    assert body["id"] == first.json()["id"]
    assert body["tags"] == ["home", "city"] and body["metadata"]["source"] == "form"
    kept = store_mem.get(body["id"])
    assert kept.expires_at is not None and kept.expires_at.year == 2031
    assert kept.tags == ("home", "city")


def test_mcp_reports_the_outcome_of_a_write(store_mem: GraphMemory) -> None:
    import asyncio

    from mcp import Client

    from graphmem.server.mcp import create_mcp_server

    server = create_mcp_server(store_mem, agent_id="alice")

    async def go() -> tuple[dict[str, object], dict[str, object]]:
        async with Client(server) as client:
            a = await client.call_tool("remember", {"content": "Carla likes jazz"})
            b = await client.call_tool("remember", {"content": "Carla likes jazz"})
            return a.structured_content, b.structured_content  # type: ignore[return-value]

    first, second = asyncio.run(go())
    assert first["outcome"] == "created"
    assert second["outcome"] == "duplicate" and second["duplicate_of"] == first["id"]


@pytest.mark.parametrize("given", ["mapping", "memory object"])
def test_a_content_hash_given_with_a_new_memory_is_the_hash_of_its_content(
    mem: GraphMemory, given: str
) -> None:
    """The content hash finds exact duplicates; one given with an item was stored as
    given, so a later remember of the text it was the hash of was answered "duplicate"
    with another memory, and that text was never stored."""
    bob = content_hash("Bob is nice")
    item: Any = {"content": "Carol owns a red bicycle", "content_hash": bob}
    if given == "memory object":
        item = Memory(**item)
    [carol] = mem.remember_many([item])
    assert carol.content_hash == content_hash("Carol owns a red bicycle")
    result = mem.writes.reconcile("Bob is nice")
    assert result.action == "created"
    assert result.memory.content == "Bob is nice"
    assert mem.get(carol.id).content_hash == content_hash("Carol owns a red bicycle")
