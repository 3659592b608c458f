"""Lifecycle: importance, classification, decay, retention, hooks, archival, dry runs and
the scheduler — graph parts on every backend through the GraphBackend seam."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from graphmem.backends.base import GraphBackend
from graphmem.config import (
    AgentRetention,
    ClassificationRules,
    DecayConfig,
    ImportanceScorer,
    LifecycleConfig,
    RetentionPolicy,
    Settings,
)
from graphmem.errors import InvalidInput, NotFound
from graphmem.lifecycle import (
    Lifecycle,
    MaintenanceReport,
    MaintenanceScheduler,
    relevance,
)
from graphmem.memory import GraphMemory
from graphmem.models import EdgeType, Memory, NodeLabel, NodeRef, Status, Tier

NOW = datetime(2024, 6, 1, tzinfo=UTC)
NO_RECONCILE = Settings(reconcile={"mode": "off"})  # type: ignore[arg-type]
DAY = timedelta(days=1)


# ---------------------------------------------------------------------------------------
# pure rules


def test_importance_scorer_boosts_and_clamps() -> None:
    s = ImportanceScorer(
        base=0.3,
        event_boosts={"error": 0.3, "tool_result": 0.1},
        signal_boosts={"error": 0.25, "result": 0.15},
        keyword_boosts={"remember": 0.2, "important": 0.15},
    )
    assert s.score() == 0.3
    assert s.score(event_type="tool_call") == 0.3
    assert s.score(event_type="error", payload={"error": "timeout"}) == 0.85
    assert s.score(event_type="tool_result", payload={"result": "ok", "error": None}) == 0.55
    assert s.score(content="Please REMEMBER: this is important!") == 0.65
    custom = ImportanceScorer(base=0.9, agent_boosts={"planner": 0.5})
    assert custom.score(agent_kind="planner") == 1.0
    assert custom.score(agent_kind="worker") == 0.9
    assert ImportanceScorer(base=0.05).score(event_type="error") == 0.0  # clamped


def test_classification_rules() -> None:
    r = ClassificationRules()
    assert r.tier_for(kind="log", importance=1.0) is Tier.SHORT_TERM
    assert r.tier_for(event_type="tool_call", importance=0.3) is Tier.SHORT_TERM
    assert r.tier_for(event_type="user_message", importance=0.5) is Tier.SHORT_TERM
    assert r.tier_for(event_type="error", importance=0.8) is Tier.LONG_TERM
    assert r.tier_for(importance=0.2) is Tier.LONG_TERM  # a fact, not an event
    custom = ClassificationRules(long_term_events=("delegation_response",))
    assert custom.tier_for(event_type="delegation_response", importance=0.0) is Tier.LONG_TERM


def test_relevance_decays_with_time_since_last_access() -> None:
    cfg = DecayConfig(half_life_days=10)
    m = Memory(content="x", importance=1.0, created_at=NOW - 10 * DAY)
    fresh = relevance(m.evolve(created_at=NOW), NOW, cfg)
    assert fresh == pytest.approx(0.7)
    assert relevance(m, NOW, cfg) == pytest.approx(0.35)  # one half-life
    touched = m.evolve(last_accessed=NOW, access_count=10)
    assert relevance(touched, NOW, cfg) == pytest.approx(1.0)  # access resets the clock
    assert relevance(m, NOW, cfg) > relevance(m, NOW + 10 * DAY, cfg)


def test_retention_precedence() -> None:
    p = RetentionPolicy(
        default=timedelta(days=365),
        by_category={"episodic": timedelta(days=30)},
        agents={
            "a1": AgentRetention(
                default=timedelta(days=7), by_category={"episodic": timedelta(days=1)}
            ),
            "a2": AgentRetention(default=timedelta(days=7)),
            "a3": AgentRetention(max_memories=5),
        },
        max_per_agent=100,
    )
    assert p.period_for("a1", "episodic") == timedelta(days=1)  # agent per-category
    assert p.period_for("a2", "episodic") == timedelta(days=30)  # company per-category
    assert p.period_for("a2", "semantic") == timedelta(days=7)  # agent default
    assert p.period_for("zz", "semantic") == timedelta(days=365)  # company default
    assert RetentionPolicy().period_for("zz", "semantic") is None  # forever
    assert (p.max_for("a3"), p.max_for("a1")) == (5, 100)


# ---------------------------------------------------------------------------------------
# graph fixtures


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def mem_options(clock: Clock) -> dict[str, Any]:
    # these tests build duplicates and contradictions on purpose
    return {"settings": NO_RECONCILE, "clock": clock}


def lifecycle(mem: GraphMemory, clock: Clock, **config: object) -> Lifecycle:
    return Lifecycle(mem.writes, config=LifecycleConfig(**config), clock=clock)  # type: ignore[arg-type]


def snapshot(backend: GraphBackend) -> list[dict[str, object]]:
    return sorted(
        (n.to_props() for ns, _ in backend.scan() for n in ns), key=lambda p: str(p["id"])
    )


def status(mem: GraphMemory, m: Memory) -> Status:
    return mem.get(m.id).status


# ---------------------------------------------------------------------------------------
# hooks


def test_scratchpad_is_fleeting(mem: GraphMemory, clock: Clock) -> None:
    lc = lifecycle(mem, clock)
    before = snapshot(mem.backend)
    pad = lc.scratchpad("r1")
    pad.add("thinking about tea")
    pad.add({"tool": "search"})
    assert lc.scratchpad("r1") is pad and len(pad) == 2
    assert snapshot(mem.backend) == before  # never persisted
    assert lc.on_turn_end("r1", dry_run=True).cleared == 2 and len(pad) == 2
    assert lc.on_turn_end("r1").cleared == 2
    assert pad.notes == []


def test_turn_end_can_store_durable_facts(mem: GraphMemory, clock: Clock) -> None:
    lc = lifecycle(mem, clock)
    turn = mem.remember(
        "I'm allergic to peanuts. Thanks!",
        run_id="r1",
        agent_id="ann",
        event_type="user_message",
        tier="short_term",
        category="episodic",
    )
    report = lc.on_turn_end(
        "r1",
        turn=turn.content,
        speaker="Ann",
        agent_id="ann",
        source_ids=[turn.id],
        extract_facts=True,
    )
    assert report.facts is not None
    [fact] = report.facts.created
    assert mem.get(fact.id).content == "Ann is allergic to peanuts."


def test_run_end_promotes_and_summarises(mem: GraphMemory, clock: Clock) -> None:
    lc = lifecycle(mem, clock)
    keep = mem.remember(
        "The customer wants invoices in EUR.", run_id="r1", tier="short_term", importance=0.6
    )
    used = mem.remember(
        "Searched the wiki for invoice templates.", run_id="r1", tier="short_term", importance=0.2
    )
    for _ in range(3):
        mem.backend.touch([used.id], NOW)
    low = mem.remember("Opened the invoices page.", run_id="r1", tier="short_term", importance=0.1)
    mem.remember("Unrelated run memory.", run_id="r2", tier="short_term", importance=0.9)

    before = snapshot(mem.backend)
    dry = lc.on_run_end("r1", dry_run=True)
    assert snapshot(mem.backend) == before
    report = lc.on_run_end("r1")
    strip = [
        (a.step, a.action, a.memory_id if a.action != "create" else None) for a in report.actions
    ]
    assert strip == [(a.step, a.action, a.memory_id) for a in dry.actions]
    assert set(report.ids("promote")) == {keep.id, used.id}
    assert mem.get(keep.id).tier is Tier.LONG_TERM
    assert mem.get(used.id).tier is Tier.LONG_TERM
    assert mem.get(low.id).tier is Tier.SHORT_TERM and status(mem, low) is Status.ACTIVE
    [summary_id] = report.ids("create")
    summary = mem.get(summary_id)
    assert summary.category.value == "summary" and summary.run_id == "r1"
    sub = mem.backend.expand(
        [NodeRef(NodeLabel.MEMORY, summary_id)], [EdgeType.DERIVED_FROM], direction="out"
    )
    assert {e.dst.id for e in sub.edges} == {keep.id, used.id, low.id}
    assert "EUR" in summary.content


def test_short_term_refresh_every_n_writes(mem: GraphMemory, clock: Clock) -> None:
    lc = lifecycle(mem, clock, refresh_every=3, short_term_max=2, refresh_min_relevance=0.05)
    written = []
    reports: list[MaintenanceReport | None] = []
    for i, imp in enumerate([0.9, 0.01, 0.5]):
        m = mem.remember(f"note {i}", run_id="r1", tier="short_term", importance=imp)
        written.append(m)
        reports.append(lc.on_write([m]))
    assert reports[:2] == [None, None]
    last = reports[2]
    assert last is not None
    # 0.01 importance -> relevance 0.007 < 0.05: dropped; the other two fit the max of 2
    assert last.ids("archive") == [written[1].id]
    assert status(mem, written[1]) is Status.ARCHIVED
    assert mem.get(written[1].id).metadata["archived_reason"] == "refresh"
    # long-term writes and other tiers do not count
    assert lc.on_write([mem.remember("fact")]) is None


# ---------------------------------------------------------------------------------------
# maintenance


def build_store(mem: GraphMemory, clock: Clock) -> dict[str, Memory]:
    old = NOW - 400 * DAY
    return {
        "expired": mem.remember(
            "Temporary code 1234 for login.",
            expires_at=NOW - DAY,
            created_at=NOW - 2 * DAY,
            importance=0.9,
        ),
        "future": mem.remember("Valid coupon SPRING.", expires_at=NOW + DAY, created_at=NOW),
        "old_episode": mem.remember(
            "Chatted about the weather.",
            category="episodic",
            agent_id="a1",
            created_at=NOW - 3 * DAY,
            importance=0.6,
        ),
        "old_fact": mem.remember(
            "Alice has a dog named Rex.", agent_id="a1", created_at=NOW - 20 * DAY, importance=0.6
        ),
        "kept_fact": mem.remember(
            "Bob's birthday is in May.", agent_id="a2", created_at=NOW - 20 * DAY, importance=0.6
        ),
        "faded": mem.remember("Saw a blue car.", agent_id="a2", created_at=old, importance=0.1),
        "stale": mem.remember(
            "The office plant was watered.",
            agent_id="a2",
            created_at=NOW - 190 * DAY,
            importance=0.3,
        ),
        "vip": mem.remember(
            "The CEO's name is Dana.", agent_id="a2", created_at=old, importance=0.95
        ),
    }


CONFIG = {
    "retention": RetentionPolicy(
        by_category={"episodic": timedelta(days=30)},
        agents={
            "a1": AgentRetention(
                default=timedelta(days=10), by_category={"episodic": timedelta(days=2)}
            )
        },
    ),
    "decay": DecayConfig(half_life_days=60),
    "prune_below": 0.01,
    "stale_after": timedelta(days=180),
}


def test_full_maintenance_dry_run_is_exact(mem: GraphMemory, clock: Clock) -> None:
    s = build_store(mem, clock)
    lc = lifecycle(mem, clock, **CONFIG)
    before = snapshot(mem.backend)
    dry = lc.maintain(dry_run=True)
    assert snapshot(mem.backend) == before
    real = lc.maintain()
    assert [a.model_dump() for a in real.actions] == [a.model_dump() for a in dry.actions]
    by_step = {a.memory_id: a.step for a in real.actions}
    assert by_step == {
        s["expired"].id: "expire",
        s["old_episode"].id: "retention",  # a1 episodic: 2 days (agent per-category)
        s["old_fact"].id: "retention",  # a1 default 10 days
        s["faded"].id: "decay",
        s["stale"].id: "stale",
    }
    for key in ("future", "kept_fact", "vip"):
        assert status(mem, s[key]) is Status.ACTIVE
    archived = mem.get(s["faded"].id)
    assert archived.status is Status.ARCHIVED and archived.content == "Saw a blue car."
    assert archived.metadata["archived_reason"] == "decay"
    assert lc.maintain(dry_run=True).actions == ()  # nothing left to do


def test_single_steps_and_hard_delete_only_when_asked(mem: GraphMemory, clock: Clock) -> None:
    s = build_store(mem, clock)
    lc = lifecycle(mem, clock, **CONFIG)
    assert lc.expire(dry_run=True).ids() == [s["expired"].id]
    assert set(lc.enforce_retention(dry_run=True).ids()) == {s["old_episode"].id, s["old_fact"].id}
    assert set(lc.decay(dry_run=True).ids()) == {s["faded"].id, s["stale"].id}
    report = lc.expire(hard_delete=True)
    assert report.ids("delete") == [s["expired"].id]
    with pytest.raises(NotFound):
        mem.get(s["expired"].id)
    lc.enforce_retention()
    assert mem.get(s["old_fact"].id).status is Status.ARCHIVED  # archived, not deleted


def test_max_memories_per_agent_archives_least_relevant(mem: GraphMemory, clock: Clock) -> None:
    ms = [
        mem.remember(f"memory number {i}", agent_id="a", importance=0.1 * (i + 1)) for i in range(5)
    ]
    mem.remember("another agent", agent_id="b", importance=0.1)
    lc = lifecycle(
        mem,
        clock,
        retention=RetentionPolicy(max_per_agent=10, agents={"a": AgentRetention(max_memories=3)}),
    )
    report = lc.maintain(steps=("limit",))
    assert report.ids("archive") == [ms[0].id, ms[1].id]
    assert mem.count(agent_id="a") == 3 and mem.count(agent_id="b") == 1


def test_archive_restore_and_pin(mem: GraphMemory, clock: Clock) -> None:
    s = build_store(mem, clock)
    lc = lifecycle(mem, clock, **CONFIG)
    lc.maintain()
    assert status(mem, s["expired"]) is Status.ARCHIVED
    assert [r.memory.id for r in mem.recall("temporary login code")] == []
    dry = lc.restore([s["expired"].id, s["faded"].id], dry_run=True)
    assert status(mem, s["expired"]) is Status.ARCHIVED and len(dry.actions) == 2
    lc.restore([s["expired"].id])
    back = mem.get(s["expired"].id)
    assert back.status is Status.ACTIVE and back.expires_at is None
    assert "archived_reason" not in back.metadata
    assert [r.memory.id for r in mem.recall("temporary login code")] == [back.id]
    lc.restore([s["faded"].id], pin=True)
    assert lc.maintain(dry_run=True).actions == ()  # pinned: never archived again
    manual = lc.archive([s["vip"].id], reason="user request")
    assert manual.ids("archive") == [s["vip"].id]
    assert mem.get(s["vip"].id).metadata["archived_reason"] == "user request"
    with pytest.raises(NotFound):
        lc.archive(["missing"])
    with pytest.raises(NotFound):
        lc.restore([s["vip"].id, "missing"])
    assert status(mem, s["vip"]) is Status.ARCHIVED  # unchanged by the failed call


def test_idle_cycle_includes_consolidation(mem: GraphMemory, clock: Clock) -> None:
    a = mem.remember("Deploys happen on Tuesdays.", created_at=NOW)
    b = mem.remember("Deploys happen on Tuesdays!", created_at=NOW)
    noisy = mem.remember("basically the build uses python 3.11", created_at=NOW)
    oslo = mem.remember("Alice lives in Oslo", created_at=NOW - DAY)
    mem.remember("Alice lives in Bergen", created_at=NOW)
    lc = lifecycle(mem, clock)
    dry = lc.on_idle(dry_run=True)
    assert dry.consolidation is not None and len(dry.consolidation.groups) == 1
    # idle includes improve: contradictions resolved, wording left alone by default
    assert dry.ids("archive", step="improve") == [oslo.id]
    real = lc.on_idle()
    assert real.ids("archive", step="improve") == [oslo.id]
    assert status(mem, oslo) is Status.SUPERSEDED and status(mem, noisy) is Status.ACTIVE
    rewriting = lifecycle(mem, clock, improve_rewrites=True)
    assert rewriting.on_idle().ids("archive", step="improve") == [noisy.id]
    assert set(real.ids("archive", step="consolidate")) == {a.id, b.id}
    assert set(dry.ids("archive", step="consolidate")) == {a.id, b.id}
    assert status(mem, a) is Status.SUPERSEDED
    with pytest.raises(InvalidInput):
        lc.maintain(steps=("nope",))


# ---------------------------------------------------------------------------------------
# scheduler


def test_scheduler_runs_on_interval_and_stops_cleanly(mem: GraphMemory, clock: Clock) -> None:
    lc = lifecycle(mem, clock)
    mem.remember("Short lived.", expires_at=NOW - DAY, created_at=NOW - 2 * DAY)
    sched = lc.scheduler(0.01, steps=("expire",))
    assert not sched.running
    with sched:
        assert sched.running
        assert sched.wait_for_runs(3, timeout=30)
        with pytest.raises(InvalidInput):
            sched.start()
    assert not sched.running and sched.errors == 0
    assert isinstance(sched.last_result, MaintenanceReport)
    assert mem.count(status="archived") == 1
    runs = sched.runs
    assert sched.stop() is True and sched.runs == runs  # idempotent, no more runs


def test_scheduler_survives_errors() -> None:
    calls = []

    def job() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")

    sched = MaintenanceScheduler(job, interval=0.01, run_immediately=True).start()
    try:
        assert sched.wait_for_runs(2, timeout=30)
    finally:
        assert sched.stop(timeout=30)
    assert sched.errors == 1 and isinstance(sched.last_error, RuntimeError)
    with pytest.raises(InvalidInput):
        MaintenanceScheduler(job, interval=0)


def test_stop_wakes_a_long_interval() -> None:
    started = threading.Event()
    sched = MaintenanceScheduler(started.set, interval=3600, run_immediately=True).start()
    assert started.wait(30)
    assert sched.stop(timeout=30) and not sched.running


def test_the_scorer_sends_no_agent_id_that_cannot_be_stored(backend: GraphBackend) -> None:
    """The write path classifies an item before validating it: the scorer read the type of
    an agent whose id holds a lone surrogate from the store, and the Neo4j driver raised an
    untyped UnicodeEncodeError (the embedded store found no such agent). Such an id names
    no agent; the item's validation refuses it right after."""
    scorer = {"agent_boosts": {"agent": 0.3}, "agent_match": "kind"}
    mem = GraphMemory(
        backend,
        embedder=None,
        owns_backend=False,
        settings=Settings(lifecycle={"scorer": scorer}),
    )
    try:
        mem.agents.register("alice", kind="agent")
        data = mem.lifecycle._classify({"content": "hello", "agent_id": "\ud800"})
        assert data["importance"] == mem.lifecycle._classify({"content": "hello"})["importance"]
        boosted = mem.lifecycle._classify({"content": "hello", "agent_id": "alice"})
        assert boosted["importance"] > data["importance"]  # the lookup still runs for alice
        with pytest.raises(InvalidInput):
            mem.writes._validate([{"content": "hello", "agent_id": "\ud800"}])
    finally:
        mem.close()
