"""The passes with the configured LLM (the real Anthropic SDK against the local Messages
stub): batching within a token budget, and the offline fallback per item when a call
fails (529, a max_tokens stop), counted in the reports."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from graphmem.backends import open_backend
from graphmem.config import ConsolidationConfig, LifecycleConfig, Settings
from graphmem.consolidation import improve_memories, token_batches
from graphmem.llm import AnthropicLLM
from graphmem.memory import GraphMemory
from graphmem.models import Memory, Status
from tests.llm.anthropic_stub import Reply, StubAnthropic, auto_reply, error_reply, tool_reply

NOW = datetime(2024, 6, 1, tzinfo=UTC)
NO_RECONCILE = Settings(reconcile={"mode": "off"})  # type: ignore[arg-type]


@pytest.fixture
def stub() -> Iterator[StubAnthropic]:
    with StubAnthropic() as s:
        yield s


def store(stub: StubAnthropic, **config: object) -> GraphMemory:
    llm = AnthropicLLM(base_url=stub.url, api_key="k", max_retries=0)
    mem = GraphMemory(
        open_backend("memory://"), embedder=None, llm=llm, clock=lambda: NOW, settings=NO_RECONCILE
    )
    if config:
        mem.lifecycle.configure(LifecycleConfig(**config))  # type: ignore[arg-type]
    return mem


def similar_pair(mem: GraphMemory, agent: str) -> None:
    mem.remember("backups run nightly at two in the morning on the main server", agent_id=agent)
    mem.remember(
        "backups run nightly at two in the morning on the main host machine", agent_id=agent
    )


CFG = ConsolidationConfig(merge_threshold=0.6, duplicate_threshold=0.95)


def test_consolidate_uses_the_configured_llm(stub: StubAnthropic) -> None:
    mem = store(stub)
    similar_pair(mem, "a")
    report = mem.lifecycle.consolidate(config=CFG)
    assert len(stub.requests) == 1
    assert [g.content_source for g in report.groups] == ["llm"]
    assert report.llm_failures == 0


def test_a_failed_merge_falls_back_per_group(stub: StubAnthropic) -> None:
    mem = store(stub)
    similar_pair(mem, "a")
    similar_pair(mem, "b")
    stub.push(error_reply(529, "overloaded_error"))
    report = mem.lifecycle.consolidate(config=CFG)
    assert len(stub.requests) == 2  # the pass went on after the 529
    assert sorted(g.content_source for g in report.groups) == ["fallback", "llm"]
    assert report.llm_failures == 1
    assert all(g.merged_id for g in report.groups)


def test_improve_batches_within_the_budget_and_falls_back(stub: StubAnthropic) -> None:
    mem = store(stub)
    ms = [
        mem.remember(
            f"basically note number {i} about the {'x' * 200} project",
            created_at=NOW + timedelta(seconds=i),
        )
        for i in range(6)
    ]
    assert [len(b) for b in token_batches(ms, budget=170)] == [2, 2, 2]
    stub.push(
        tool_reply("record_improve", {"rewrites": [], "contradictions": []}, stop="max_tokens")
    )
    report = improve_memories(
        mem.writes,
        mem.llm,
        ms,
        now=NOW,  # type: ignore[arg-type]
        token_budget=170,
    )
    assert (report.batches, len(stub.requests), report.llm_failures) == (3, 3, 1)
    # the failed batch (the two oldest) was improved offline: filler words removed
    rewritten = {m.content for m in report.created}
    assert len(rewritten) == 2 and all(c.startswith("Note number") for c in rewritten)


def test_summary_falls_back_to_extractive(stub: StubAnthropic) -> None:
    mem = store(stub)
    e1 = mem.runs.add_event("r1", "user_message", "The build failed on the payments table.")
    e2 = mem.runs.add_event("r1", "user_message", "We fixed it by adding an index.")
    stub.push(error_reply(529, "overloaded_error"))
    summary = mem.lifecycle.summarize([e1.id, e2.id])
    assert summary.metadata["llm_fallback"] == "LLMUnavailable"
    assert "payments" in summary.content


def test_idle_maintenance_improves_and_consolidates_with_the_llm(stub: StubAnthropic) -> None:
    mem = store(stub, consolidation=CFG)
    similar_pair(mem, "a")
    mem.remember("Alice lives in Oslo", created_at=NOW - timedelta(days=2))
    mem.remember("Alice lives in Bergen", created_at=NOW - timedelta(days=1))
    # improve asks once per scope (agent "a"'s memories and the default agent's are never
    # rewritten together); both calls fail, so the offline pass resolves the contradiction
    stub.push(error_reply(529, "overloaded_error"))
    stub.push(error_reply(529, "overloaded_error"))
    report = mem.lifecycle.on_idle()
    names = [r["json"]["tool_choice"]["name"] for r in stub.requests]
    assert names == ["record_improve", "record_improve", "record_summarize"]
    assert report.improvement is not None and report.consolidation is not None
    assert report.llm_failures == 2
    oslo = mem.list(status=None, metadata=None)
    states = {m.content: m.status for m in oslo if m.content.startswith("Alice")}
    assert states == {
        "Alice lives in Oslo": Status.SUPERSEDED,
        "Alice lives in Bergen": Status.ACTIVE,
    }
    dry = mem.lifecycle.on_idle(dry_run=True)
    assert len(stub.requests) == 3  # a dry run makes no LLM call
    assert dry.dry_run


def test_token_batches_keep_an_oversized_memory_alone() -> None:
    big = Memory(content="y" * 4000)
    small = Memory(content="z")
    assert [len(b) for b in token_batches([small, big, small], budget=100)] == [1, 1, 1]


def contradicting_improve(body: dict[str, Any]) -> Reply:
    """The newest fenced memory contradicts every other one (what an LLM would say of
    "Alice is vegetarian" and "Alice eats steak every day")."""
    if body.get("tool_choice", {}).get("name") != "record_improve":
        return auto_reply(body)
    user = "".join(m["content"] for m in body["messages"] if isinstance(m["content"], str))
    ids = re.findall(r'<memory id="([^"]+)"', user)  # oldest first
    data = {
        "rewrites": [],
        "contradictions": [
            {"keep_id": ids[-1], "superseded_ids": ids[:-1], "reason": "diet changed"}
        ],
    }
    return tool_reply("record_improve", data)


def test_reconcile_llm_mode_asks_the_llm_and_survives_its_failure() -> None:
    with StubAnthropic(contradicting_improve) as stub:
        llm = AnthropicLLM(base_url=stub.url, api_key="k", max_retries=0)
        mem = GraphMemory(
            open_backend("memory://"),
            embedder=None,
            llm=llm,
            clock=lambda: NOW,
            settings=Settings(reconcile={"mode": "llm"}),
        )  # type: ignore[arg-type]
        old = mem.remember("Alice is vegetarian", created_at=NOW - timedelta(days=1))
        assert stub.requests == []  # nothing to compare with: no call
        new = mem.remember("Alice eats steak every day")
        assert mem.last_reconcile is not None and mem.last_reconcile.action == "superseded"
        assert mem.last_reconcile.reason == "diet changed"
        assert mem.get(old.id).status is Status.SUPERSEDED and len(stub.requests) == 1
        stub.push(error_reply(529, "overloaded_error"))
        mem.remember("Alice eats steak on Sundays")  # the call fails: the write goes on
        assert mem.last_reconcile is not None and mem.last_reconcile.action == "created"
        assert mem.get(new.id).status is Status.ACTIVE
        # auto (the default) never calls the LLM on the write path
        auto = GraphMemory(open_backend("memory://"), embedder=None, llm=llm)
        auto.remember("Alice is vegetarian")
        auto.remember("Alice eats steak every day")
        assert len(stub.requests) == 2


def test_idle_improve_sends_only_what_is_new(stub: StubAnthropic) -> None:
    clock = [NOW]
    llm = AnthropicLLM(base_url=stub.url, api_key="k", max_retries=0)
    mem = GraphMemory(
        open_backend("memory://"),
        embedder=None,
        llm=llm,
        clock=lambda: clock[0],
        settings=NO_RECONCILE,
    )
    mem.remember("the build uses python 3.11")
    mem.lifecycle.on_idle(steps=("improve",))
    mem.lifecycle.on_idle(steps=("improve",))
    assert len(stub.requests) == 1  # nothing new: no second call
    clock[0] = NOW + timedelta(hours=1)
    mem.remember("the deploy runs on Fridays")
    mem.lifecycle.on_idle(steps=("improve",))
    assert len(stub.requests) == 2
    assert "Fridays" in json.dumps(stub.requests[-1]["json"]["messages"])
    assert "python 3.11" not in json.dumps(stub.requests[-1]["json"]["messages"])


def test_a_long_summary_is_made_in_batches_within_the_budget(stub: StubAnthropic) -> None:
    mem = store(stub, llm_token_budget=200)
    events = [
        mem.runs.add_event(
            "r1",
            "user_message",
            f"step {i}: " + "details of the work " * 8,
            created_at=NOW + timedelta(minutes=i),
        )
        for i in range(6)
    ]
    batches = token_batches(events, 200)
    assert len(batches) == 2
    stub.push(error_reply(529, "overloaded_error"))  # the first batch falls back
    report = mem.lifecycle.on_run_end("r1")
    calls = [r["json"]["tool_choice"]["name"] for r in stub.requests]
    assert calls == ["record_summarize"] * 3  # one call per batch, then their summaries
    [summary_id] = report.ids("create", step="summarize")
    summary = mem.get(summary_id)
    assert summary.metadata["llm_fallback"] == "LLMUnavailable"
    assert summary.metadata["source_count"] == 6
    assert len(mem.lifecycle.provenance(summary_id).nodes) == 7  # DERIVED_FROM every source


def test_reflect_and_fact_extraction_fall_back_offline(stub: StubAnthropic) -> None:
    mem = store(stub)
    mem.remember("Carla is allergic to peanuts")
    stub.push(error_reply(529, "overloaded_error"), error_reply(529, "overloaded_error"))
    answer = mem.lifecycle.reflect("What is Carla allergic to?")
    assert answer.cited_ids  # the offline answer cites the recalled memory
    facts = mem.lifecycle.extract_facts("I am vegetarian and I live in Lisbon.")
    assert facts.created and len(stub.requests) == 2
