"""Reconcile on write and the write-time lifecycle rules (importance, tier), on every
backend through the public API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from graphmem.backends.base import GraphBackend
from graphmem.config import ClassificationRules, ImportanceScorer, LifecycleConfig, Settings
from graphmem.errors import InvalidInput
from graphmem.llm import claim_of
from graphmem.memory import GraphMemory
from graphmem.models import Status, Tier
from graphmem.reconcile import contradicts
from tests.conftest import Stores

NOW = datetime(2024, 6, 1, tzinfo=UTC)


@pytest.fixture
def mem_options() -> dict[str, Any]:
    return {"clock": lambda: NOW}


def statuses(mem: GraphMemory) -> list[tuple[str, str]]:
    return sorted((m.content, m.status.value) for m in mem.list(status=None))


# ---------------------------------------------------------------------------------------
# reconcile


def test_exact_duplicate_returns_the_existing_memory_touched(mem: GraphMemory) -> None:
    first = mem.remember("Alice prefers tea", agent_id="a")
    assert mem.last_reconcile is not None and mem.last_reconcile.action == "created"
    again = mem.remember("Alice prefers tea", agent_id="a")
    assert again.id == first.id
    assert mem.last_reconcile.duplicate and mem.last_reconcile.related_ids == (first.id,)
    assert mem.get(first.id).access_count == 1
    assert mem.count(status=None) == 1


def test_duplicate_in_another_scope_is_a_new_memory(mem: GraphMemory) -> None:
    mem.remember("Alice prefers tea", agent_id="a")
    mem.remember("Alice prefers tea", agent_id="b")
    mem.remember("Alice prefers tea", agent_id="a", namespace="other")
    mem.remember("Alice prefers tea", agent_id="a", visibility="org")
    mem.remember("Alice prefers tea", agent_id="a", user_id="u1")
    assert mem.count(status="active") == 5
    assert mem.last_reconcile is not None and mem.last_reconcile.action == "created"


def test_contradiction_supersedes_the_old_version_offline(mem: GraphMemory) -> None:
    oslo = mem.remember("Alice lives in Oslo", agent_id="a")
    bergen = mem.remember("Alice lives in Bergen", agent_id="a")
    result = mem.last_reconcile
    assert result is not None and result.action == "superseded"
    assert result.related_ids == (oslo.id,) and "oslo" in (result.reason or "")
    assert statuses(mem) == [
        ("Alice lives in Bergen", "active"),
        ("Alice lives in Oslo", "superseded"),
    ]
    assert [m.id for m in mem.history(bergen.id)] == [oslo.id, bergen.id]
    # reversible: forgetting only the new version brings the old one back
    mem.forget(bergen.id, cascade=False)
    assert statuses(mem) == [("Alice lives in Oslo", "active")]


def test_same_value_or_other_subject_is_no_contradiction(mem: GraphMemory) -> None:
    mem.remember("Alice lives in Oslo", agent_id="a")
    mem.remember("Bob lives in Bergen", agent_id="a")
    mem.remember("Alice works at Acme", agent_id="a")
    assert mem.count(status="active") == 3


def test_near_duplicate_is_left_to_consolidation_by_default_or_linked(
    mem: GraphMemory,
    backend: GraphBackend,
) -> None:
    mem.remember("The nightly backup runs at two in the morning", agent_id="a")
    kept = mem.remember("The nightly backup runs at two in the morning UTC", agent_id="a")
    assert mem.last_reconcile is not None and mem.last_reconcile.action == "created"
    assert "near_duplicate_of" not in kept.metadata
    assert len(mem.lifecycle.consolidate(dry_run=True).groups) == 1  # merged by maintenance
    linking = GraphMemory(
        backend,
        embedder=None,
        owns_backend=False,
        clock=lambda: NOW,
        settings=Settings(reconcile={"near_duplicates": "link"}),
    )  # type: ignore[arg-type]
    old = linking.remember("The weekly report goes out on Monday morning", agent_id="b")
    new = linking.remember("The weekly report goes out on Monday morning early", agent_id="b")
    assert linking.last_reconcile is not None and linking.last_reconcile.action == "linked"
    assert new.metadata["near_duplicate_of"] == old.id
    assert mem.get(old.id).status is Status.ACTIVE


def test_near_duplicate_supersede_policy(backend: GraphBackend) -> None:
    settings = Settings(reconcile={"near_duplicates": "supersede"})  # type: ignore[arg-type]
    mem = GraphMemory(
        backend, embedder=None, owns_backend=False, clock=lambda: NOW, settings=settings
    )
    old = mem.remember("The nightly backup runs at two in the morning", agent_id="a")
    mem.remember("The nightly backup runs at two in the morning UTC", agent_id="a")
    assert mem.last_reconcile is not None and mem.last_reconcile.action == "superseded"
    assert mem.get(old.id).status is Status.SUPERSEDED


def test_episodic_memories_are_never_reconciled(mem: GraphMemory) -> None:
    turns = ["Melanie: thanks!", "Melanie: thanks!", "Alice lives in Oslo", "Alice lives in Bergen"]
    for t in turns:
        mem.remember(t, run_id="s1", category="episodic")
        assert mem.last_reconcile is not None and mem.last_reconcile.action == "created"
    fact = mem.remember("Alice lives in Tromsø")  # a fact never supersedes an utterance
    assert mem.last_reconcile is not None and mem.last_reconcile.action == "created"
    assert mem.count() == 5 and fact.status is Status.ACTIVE


def test_reconcile_off_stores_copies(mem: GraphMemory) -> None:
    mem.remember("Alice lives in Oslo", reconcile="off")
    mem.remember("Alice lives in Oslo", reconcile="off")
    mem.remember("Alice lives in Bergen", reconcile="off")
    assert mem.count(status="active") == 3
    with pytest.raises(InvalidInput):
        mem.remember("x", reconcile="sometimes")


def test_consolidation_does_not_merge_a_contradiction(mem: GraphMemory) -> None:
    mem.remember("Alice lives in Oslo", reconcile="off")
    mem.remember("Alice lives in Bergen", reconcile="off")
    report = mem.lifecycle.consolidate()
    assert report.groups == ()
    assert statuses(mem) == [("Alice lives in Bergen", "active"), ("Alice lives in Oslo", "active")]


def test_claims() -> None:
    assert claim_of("Alice lives in Oslo.") == claim_of("Alice now lives in Oslo")
    assert claim_of("Alice moved to Oslo") == claim_of("Alice lives in Oslo")
    assert claim_of("Alice likes tea") is None
    assert claim_of("Alice prefers tea") is None  # preferences can be many
    assert claim_of("Alice lives in Oslo. Bob lives in Rome.") is None
    # subjects match as the knowledge layer matches names (article, possessive, case)
    assert contradicts(claim_of("The user lives in Oslo"), claim_of("User lives in Bergen"))
    assert not contradicts(claim_of("Alice lives in Oslo"), claim_of("Bob lives in Bergen"))


def test_user_id_is_a_filter_and_recall_scope(mem: GraphMemory) -> None:
    mem.remember("prefers window seats", user_id="u1")
    mem.remember("prefers aisle seats", user_id="u2")
    assert [r.memory.content for r in mem.recall("seats", user_id="u1")] == ["prefers window seats"]
    assert mem.count(metadata={"user_id": "u2"}) == 1
    assert [m.content for m in mem.list(user_id="u2")] == ["prefers aisle seats"]


# ---------------------------------------------------------------------------------------
# write-time lifecycle rules (seed defaults)


def test_seed_importance_and_tiers() -> None:
    s = ImportanceScorer()
    assert s.score() == 0.5
    assert [
        s.score(event_type=e)
        for e in ("write", "success", "completion", "result", "error", "debug")
    ] == [0.8, 0.7, 0.7, 0.6, 0.4, 0.5]
    r = ClassificationRules()
    assert r.tier_for(kind="log", importance=1.0) is Tier.SHORT_TERM
    assert r.tier_for(event_type="result", importance=0.0) is Tier.LONG_TERM
    assert r.tier_for(event_type="debug", importance=1.0) is Tier.SHORT_TERM
    assert r.tier_for(event_type="user_message", importance=0.7) is Tier.LONG_TERM
    assert r.tier_for(event_type="user_message", importance=0.69) is Tier.SHORT_TERM
    assert r.tier_for(importance=0.1) is Tier.LONG_TERM  # a fact, not an event


def test_events_are_scored_and_classified_on_write(mem: GraphMemory) -> None:
    err = mem.runs.add_event("r1", "error", "the upload failed")
    wrote = mem.runs.add_event("r1", "write", "wrote report.pdf")
    given = mem.runs.add_event("r1", "error", "disk full", importance=0.9, tier="long_term")
    assert (err.importance, err.tier) == (0.4, Tier.SHORT_TERM)
    assert (wrote.importance, wrote.tier) == (0.8, Tier.LONG_TERM)
    assert (given.importance, given.tier) == (0.9, Tier.LONG_TERM)
    fact = mem.remember("Alice prefers tea", event_type="result")
    assert (fact.importance, fact.tier) == (0.6, Tier.LONG_TERM)


def test_configured_scorer_and_rules_are_used(mem: GraphMemory) -> None:
    mem.lifecycle.configure(
        LifecycleConfig(
            scorer=ImportanceScorer(base=0.2, event_boosts={"alert": 0.6}),
            rules=ClassificationRules(long_term_events=("alert",)),
        )
    )
    e = mem.runs.add_event("r1", "alert", "pager fired")
    assert (e.importance, e.tier) == (0.8, Tier.LONG_TERM)
    m = mem.remember("a note")
    assert m.importance == 0.2


def test_http_writes_are_reconciled_and_classified(mem: GraphMemory) -> None:
    from fastapi.testclient import TestClient

    from graphmem.server.http import create_app

    with TestClient(create_app(mem, settings=Settings())) as client:
        first = client.post("/memories", json={"content": "Alice lives in Oslo"}).json()
        again = client.post("/memories", json={"content": "Alice lives in Oslo"}).json()
        assert again["id"] == first["id"]
        moved = client.post("/memories", json={"content": "Alice lives in Bergen"}).json()
        assert mem.get(first["id"]).status is Status.SUPERSEDED
        assert mem.get(moved["id"]).status is Status.ACTIVE
        [wrote, failed] = client.post(
            "/runs/r1/events",
            json={
                "events": [
                    {"event_type": "write", "content": "wrote report.pdf"},
                    {"event_type": "error", "content": "upload failed"},
                ]
            },
        ).json()
        assert (wrote["importance"], wrote["tier"]) == (0.8, "long_term")
        assert (failed["importance"], failed["tier"]) == (0.4, "short_term")


def test_reconcile_returns_the_outcome_also_through_aio(stores: Stores) -> None:
    import asyncio

    async def scenario() -> tuple[str, str, bool]:
        async with stores.open_async("a1.db", embedder=None) as amem:
            first = await amem.writes.reconcile("Alice lives in Oslo", agent_id="a")
            again = await amem.writes.reconcile("Alice lives in Oslo", agent_id="a")
            moved = await amem.writes.reconcile("Alice lives in Bergen", agent_id="a")
            return first.action, moved.action, again.memory.id == first.memory.id

    assert asyncio.run(scenario()) == ("created", "superseded", True)


def test_agent_kind_signal_and_keyword_boosts_apply_on_write(mem: GraphMemory) -> None:
    mem.agents.register("planner", kind="planner")
    mem.lifecycle.configure(
        LifecycleConfig(
            scorer=ImportanceScorer(
                agent_boosts={"planner": 0.2},
                signal_boosts={"decision": 0.1},
                keyword_boosts={"deadline": 0.1},
            )
        )
    )
    assert mem.remember("plan the sprint", agent_id="planner").importance == 0.7
    assert mem.remember("plan the sprint", agent_id="worker").importance == 0.5
    assert mem.remember("ship it", metadata={"decision": "go"}).importance == 0.6
    assert mem.remember("the deadline is Friday").importance == 0.6


def test_user_id_over_http_and_in_batches(mem: GraphMemory) -> None:
    from fastapi.testclient import TestClient

    from graphmem.server.http import create_app

    with TestClient(create_app(mem, settings=Settings())) as client:
        client.post("/memories", json={"content": "prefers window seats", "user_id": "u1"})
        client.post(
            "/memories/batch", json={"items": [{"content": "prefers aisle seats", "user_id": "u2"}]}
        )
        hits = client.post("/recall", json={"query": "seats", "user_id": "u2"}).json()
        assert [h["memory"]["content"] for h in hits] == ["prefers aisle seats"]
    [batch] = mem.remember_many([{"content": "likes jazz", "user_id": "u3"}])
    assert batch.metadata["user_id"] == "u3"
