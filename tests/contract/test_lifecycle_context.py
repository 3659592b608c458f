"""The fleeting tier, the query-less context window, the role-tagged messages form and
the trust score, through the public API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from graphmem.config import RankWeights, RecallConfig
from graphmem.lifecycle import Scratchpad
from graphmem.memory import GraphMemory
from graphmem.models import Memory
from graphmem.retrieval import estimate_tokens, trust_score

NOW = datetime(2024, 6, 1, tzinfo=UTC)


@pytest.fixture
def mem_options() -> dict[str, Any]:
    return {"clock": lambda: NOW}


def test_fleeting_tier_has_keys_recall_and_forget(mem: GraphMemory) -> None:
    pad = mem.runs.scratchpad("r1")
    assert pad is mem.runs.scratchpad("r1") and pad is not mem.runs.scratchpad("r2")
    pad.put("plan", "book the flight to Oslo, then the hotel")
    k = pad.add("the user asked for a window seat")
    pad.add({"tool": "search", "query": "hotel prices"})
    assert pad.get("plan").startswith("book") and k == "note-0"
    assert [key for key, _ in pad.recall("which hotel")] == ["note-1", "plan"]
    assert pad.recall("nothing matches") == []
    assert pad.forget("plan") and not pad.forget("plan") and "plan" not in pad
    pad.put("note-2", "taken")
    assert pad.add("next") == "note-3"  # made-up keys never overwrite a given one
    assert mem.count(status=None) == 0  # never persisted
    assert mem.lifecycle.on_turn_end("r1").cleared == 4 and len(pad) == 0
    with pytest.raises(ValueError):
        Scratchpad().put("", "x")


def test_a_scoped_recall_reads_only_the_scratchpads_of_runs_the_scope_may_read(
    mem: GraphMemory,
) -> None:
    """The fleeting tier was added without the scope: alice's scoped recall named bob's
    run and got his scratchpad's notes."""
    mem.namespaces.create("team", owner="alice", members=["bob"])
    mem.runs.start("bob", run_id="bobs")
    mem.runs.start("bob", run_id="teams", namespace="team")
    mem.runs.scratchpad("bobs").put("pw", "bob's note: the vault code is 1234")
    mem.runs.scratchpad("teams").put("pw", "team note: the vault code is 5678")
    mem.runs.scratchpad("unstarted").put("pw", "a note of no run: the vault code is 9")

    def notes(scope: str | None, run: str) -> list[str]:
        found = mem.recall("vault code", scope=scope, run_id=run, tiers=["fleeting"])
        return [r.memory.content for r in found]

    assert notes("alice", "bobs") == []
    assert notes("alice", "unstarted") == []
    assert notes("alice", "teams") == ["team note: the vault code is 5678"]
    assert notes("bob", "bobs") == ["bob's note: the vault code is 1234"]
    assert notes(None, "bobs") == ["bob's note: the vault code is 1234"]  # unscoped: all


def test_a_scoped_messages_context_has_only_the_turns_the_scope_may_read(
    mem: GraphMemory,
) -> None:
    """The conversation of ``run_id`` was read without the scope: alice's scoped context
    of bob's run carried his private turns as her chat history."""
    mem.runs.start("bob", run_id="bobs")
    mem.runs.add_event("bobs", "user_message", "bob's turn: my pin is 1234")
    mem.runs.add_event("bobs", "agent_response", "noted, 1234")
    alices = mem.context("hello", format="messages", run_id="bobs", scope="alice", policies=[])
    assert not any("1234" in m["content"] for m in alices)
    assert alices[-1] == {"role": "user", "content": "hello"}
    bobs = mem.context("hello", format="messages", run_id="bobs", scope="bob", policies=[])
    assert [m["role"] for m in bobs[-3:]] == ["user", "assistant", "user"]
    assert "1234" in bobs[-2]["content"]


def test_context_without_a_query(mem: GraphMemory) -> None:
    low = mem.remember("the office plant needs water", importance=0.1)
    high = mem.remember(
        "Alice is allergic to peanuts", importance=0.9, created_at=NOW - timedelta(days=1)
    )
    other = mem.remember("bob's secret", agent_id="bob", importance=1.0)
    window = mem.context(policies=[], agent_id="default", touch=False)
    text = mem.context("", policies=[], agent_id="default")  # the same, touching
    for block in (window, text):
        assert high.content in block and low.content in block
        assert other.content not in block
        assert block.index(high.content) < block.index(low.content)  # most relevant first
    assert mem.get(high.id).access_count == 1  # what was packed (with touch) was touched
    full = estimate_tokens(window)
    tight = mem.context(max_tokens=full - 5, policies=[], agent_id="default", touch=False)
    assert high.content in tight and low.content not in tight


def test_messages_form(mem: GraphMemory) -> None:
    mem.remember("Alice is allergic to peanuts")
    mem.runs.add_event("chat", "user_message", "Can you suggest a snack?")
    mem.runs.add_event("chat", "agent_response", "How about trail mix?")
    mem.runs.add_event("chat", "tool_call", "search(snacks)")
    msgs = mem.context(
        "Is that safe for Alice?",
        format="messages",
        run_id="chat",
        system="You are a helpful assistant.",
        policies=[],
    )
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[0]["content"].startswith("You are a helpful assistant.")
    assert "allergic to peanuts" in msgs[0]["content"]
    assert msgs[1:] == [
        {"role": "user", "content": "Can you suggest a snack?"},
        {"role": "assistant", "content": "How about trail mix?"},
        {"role": "user", "content": "Is that safe for Alice?"},
    ]
    [only] = mem.context("", format="messages", policies=[], agent_id="nobody")
    assert only["role"] == "system" and "allergic" not in only["content"]


def test_trust_rises_with_recall_and_can_rank(mem: GraphMemory) -> None:
    m = mem.remember("the deploy key rotates monthly")
    assert trust_score(mem.get(m.id)) == 0.5
    for _ in range(3):
        mem.recall("deploy key")
    assert trust_score(mem.get(m.id)) == pytest.approx(0.56)
    assert trust_score(Memory(content="x", access_count=1000)) == 1.0
    [hit] = mem.recall("deploy key", touch=False)
    assert hit.breakdown["trust"] == pytest.approx(0.56)
    # a ranking that weighs only trust puts the more recalled of two equals first
    a = mem.remember("rotate the backup key monthly", agent_id="t")
    b = mem.remember("rotate the backup key weekly", agent_id="t")
    for _ in range(10):
        mem.recall("weekly", agent_id="t")
    cfg = RecallConfig(
        weights=RankWeights(recency=0, frequency=0, importance=0, decay=0, trust=1.0),
        signal_weight=1.0,
    )
    ranked = [
        r.memory.id for r in mem.recall("rotate backup key", agent_id="t", config=cfg, touch=False)
    ]
    assert ranked == [b.id, a.id]
