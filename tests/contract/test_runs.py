"""Runs as sessions: get-or-create, listing, events by type, conversation context, limits
(eviction order), cleanup, statistics, deletion — on every backend — and NullMemory."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from graphmem.backends.base import GraphBackend
from graphmem.config import Settings
from graphmem.errors import InvalidInput, NotFound
from graphmem.memory import GraphMemory
from graphmem.models import EventType, Filter, NodeLabel, RunStatus, Status
from graphmem.null import NullMemory
from graphmem.runs import RunLimits

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


class Clock:
    """A settable clock, so that ages and orders are exact."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def tick(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tmem(backend: GraphBackend, clock: Clock) -> Iterator[GraphMemory]:
    m = GraphMemory(backend, embedder=None, clock=clock, owns_backend=False)
    yield m
    m.close()


def chat(mem: GraphMemory, clock: Clock, run_id: str, turns: int) -> None:
    for i in range(turns):
        clock.tick(seconds=1)
        mem.add_event(run_id, "user_message", f"question {i}")
        clock.tick(seconds=1)
        mem.add_event(run_id, "agent_response", f"answer {i}")


def test_get_or_create_and_listing_by_user_and_agent(tmem: GraphMemory, clock: Clock) -> None:
    r, created = tmem.get_or_create_run("s1", agent_id="bot", user_id="u1", app_name="chat")
    assert created and r.user_id == "u1" and r.started_at == T0
    clock.tick(minutes=1)
    again, created = tmem.get_or_create_run("s1", agent_id="other", user_id="u2")
    assert not created and again == r  # the existing run is returned unchanged
    clock.tick(minutes=1)
    tmem.get_or_create_run("s2", agent_id="bot", user_id="u2")
    clock.tick(minutes=1)
    tmem.get_or_create_run("s3", agent_id="helper", user_id="u1")
    assert [x.id for x in tmem.list_runs(user_id="u1")] == ["s3", "s1"]  # newest first
    assert [x.id for x in tmem.list_runs(agent_id="bot")] == ["s2", "s1"]
    assert [x.id for x in tmem.list_runs(agent_id="bot", user_id="u2")] == ["s2"]
    with pytest.raises(InvalidInput):
        tmem.get_or_create_run(" bad id")


def test_events_of_every_standard_type_and_listing_by_type(tmem: GraphMemory) -> None:
    types = [t.value for t in EventType if t is not EventType.OBSERVATION]
    for t in types:
        tmem.add_event("r", t, f"{t} happened", metadata={"tool": "grep", "args": {"q": 1}})
    events = tmem.events("r")
    assert [e.event_type for e in events] == types
    assert [e.seq for e in events] == list(range(len(types)))
    tools = tmem.events("r", event_types=["tool_call", "tool_result"])
    assert [e.event_type for e in tools] == ["tool_call", "tool_result"]
    assert tools[0].metadata == {"tool": "grep", "args": '{"q": 1}'}
    with pytest.raises(InvalidInput):
        tmem.add_event("r", "Not-A-Type", "x")


def test_conversation_context_renders_the_latest_turns(tmem: GraphMemory, clock: Clock) -> None:
    tmem.start_run("bot", run_id="c")
    tmem.add_event("c", "user_message", "Hi, I'm Alice.\nI like tea.")
    tmem.add_event("c", "tool_call", "lookup(alice)")
    tmem.add_event("c", "agent_response", "Hello Alice!")
    tmem.add_event("c", "user_message", "What do I like?")
    tmem.add_event("c", "agent_response", "Tea.")
    assert tmem.conversation_context("c") == (
        "User: Hi, I'm Alice. I like tea.\nAssistant: Hello Alice!\n"
        "User: What do I like?\nAssistant: Tea."
    )
    assert tmem.conversation_context("c", max_events=2) == "User: What do I like?\nAssistant: Tea."
    assert tmem.conversation_context("c", max_events=0) == ""
    assert tmem.runs.conversation_context("c", 1, speakers={"tool_call": "Tool"}) == (
        "Tool: lookup(alice)"
    )
    with pytest.raises(NotFound):
        tmem.conversation_context("nope")
    with pytest.raises(InvalidInput):
        tmem.conversation_context("c", max_events=-1)


def test_max_runs_archives_the_oldest_tenth(tmem: GraphMemory, clock: Clock) -> None:
    tmem.runs.limits = RunLimits(max_runs=10)
    for i in range(10):
        clock.tick(minutes=1)
        tmem.start_run("bot", run_id=f"r{i:02d}")
        tmem.add_event(f"r{i:02d}", "user_message", f"hello {i}")
    assert tmem.run_stats().runs_by_status["archived"] == 0
    clock.tick(minutes=1)
    tmem.start_run("bot", run_id="r10")  # 11 live runs > 10: ceil(10% of 11) = 2 archived
    archived = tmem.list_runs(status="archived")
    assert sorted(r.id for r in archived) == ["r00", "r01"]
    assert all(r.ended_at is not None for r in archived)
    # their events left recall and the conversation context, but stay in the graph
    assert tmem.events("r00", status="archived")[0].content == "hello 0"
    assert tmem.conversation_context("r00") == ""
    assert [r.memory.content for r in tmem.recall("hello", k=20)] != []
    assert "hello 0" not in {r.memory.content for r in tmem.recall("hello", k=20)}
    # the next overflow takes the next-oldest live runs, never the archived ones again
    for i in range(11, 13):
        clock.tick(minutes=1)
        tmem.start_run("bot", run_id=f"r{i}")
    assert sorted(r.id for r in tmem.list_runs(status="archived")) == ["r00", "r01", "r02", "r03"]
    assert tmem.run_stats().runs == 13


def test_runs_started_by_events_count_and_fraction_rounds_up(
    tmem: GraphMemory, clock: Clock
) -> None:
    tmem.runs.limits = RunLimits(max_runs=2)
    for i in (2, 1, 0):  # ids in reverse of age: the order must come from started_at
        clock.tick(minutes=1)
        tmem.add_event(f"auto{i}", "user_message", "hi")  # starts the run on the fly
    assert [r.id for r in tmem.list_runs(status="archived")] == ["auto2"]
    tmem.runs.limits = RunLimits(max_runs=1, archive_fraction=0.5)
    clock.tick(minutes=1)
    tmem.start_run("bot", run_id="auto3")  # 3 live > 1: max(3 - 1, ceil(0.5 * 3)) = 2
    assert {r.id for r in tmem.list_runs(status="archived")} == {"auto2", "auto1", "auto0"}
    assert [r.id for r in tmem.list_runs(status="running")] == ["auto3"]


def test_max_events_per_run_archives_the_oldest_events(tmem: GraphMemory, clock: Clock) -> None:
    tmem.runs.limits = RunLimits(max_events_per_run=4)
    chat(tmem, clock, "c", 3)  # 6 events
    active = tmem.events("c", status="active")
    assert [e.content for e in active] == ["question 1", "answer 1", "question 2", "answer 2"]
    assert [e.content for e in tmem.events("c", status="archived")] == ["question 0", "answer 0"]
    assert tmem.conversation_context("c").splitlines()[0] == "User: question 1"
    tmem.add_events("c", [{"event_type": "user_message", "content": f"bulk {i}"} for i in range(5)])
    assert [e.content for e in tmem.events("c", status="active")] == [
        "bulk 1",
        "bulk 2",
        "bulk 3",
        "bulk 4",
    ]
    assert len(tmem.events("c")) == 11  # nothing was deleted


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        RunLimits(max_runs=0)
    with pytest.raises(ValueError):
        RunLimits(archive_fraction=0)


def test_cleanup_removes_runs_inactive_for_n_hours(tmem: GraphMemory, clock: Clock) -> None:
    tmem.start_run("bot", run_id="old")
    chat(tmem, clock, "old", 1)
    tmem.log("bot", "tool_call", {"q": "x"}, run_id="old")
    tmem.start_run("bot", run_id="old-but-busy")
    clock.tick(hours=30)
    tmem.add_event("old-but-busy", "user_message", "still here")
    tmem.start_run("bot", run_id="new")
    tmem.end_run("new")
    clock.tick(hours=2)
    dry = tmem.cleanup_runs(24, dry_run=True)
    assert dry.runs == ("old",) and dry.memories == 2 and dry.log_entries == 1
    assert tmem.get_run("old")  # a dry run changes nothing
    report = tmem.cleanup_runs(24)
    assert report.runs == ("old",) and not report.dry_run
    with pytest.raises(NotFound):
        tmem.get_run("old")
    assert tmem.count(run_id="old", status=None) == 0
    assert tmem.tail(10, run_id="old") == []
    assert {r.id for r in tmem.list_runs()} == {"old-but-busy", "new"}
    # archive instead of delete
    clock.tick(hours=100)
    arch = tmem.runs.cleanup(1, archive=True)
    assert set(arch.runs) == {"old-but-busy", "new"}
    assert {r.status for r in tmem.list_runs()} == {RunStatus.ARCHIVED}
    assert tmem.runs.cleanup(1, archive=True).runs == ()  # archived runs are left alone
    with pytest.raises(InvalidInput):
        tmem.cleanup_runs(-1)


def test_statistics(tmem: GraphMemory, clock: Clock) -> None:
    assert tmem.run_stats().average_events_per_run == 0.0
    tmem.start_run("a", run_id="r1", user_id="u1")
    chat(tmem, clock, "r1", 2)  # 4 events
    tmem.start_run("b", run_id="r2", user_id="u2")
    tmem.add_event("r2", "user_message", "hi")
    tmem.end_run("r2")
    tmem.remember("not an event", run_id="r2")  # in the run, but not an event
    tmem.start_run("b", run_id="r3", user_id="u2")
    s = tmem.run_stats()
    assert s.runs == 3 and s.events == 5 and s.active_events == 5
    assert s.runs_by_status == {"running": 2, "completed": 1, "failed": 0, "archived": 0}
    assert s.average_events_per_run == pytest.approx(5 / 3, abs=1e-3)
    by_b = tmem.run_stats(agent_id="b")
    assert (by_b.runs, by_b.events, by_b.average_events_per_run) == (2, 1, 0.5)
    assert tmem.run_stats(user_id="u1").events == 4


def test_delete_run_cascades_to_derived_memories_and_log(tmem: GraphMemory, clock: Clock) -> None:
    chat(tmem, clock, "r", 2)
    events = tmem.events("r")
    summary = tmem.remember("Alice asked two questions")  # outside the run, derived from it
    tmem.link(summary.id, [e.id for e in events], pass_name="summarize")
    keep = tmem.remember("unrelated")
    big = {"blob": "x" * 5000}
    tmem.log("bot", "tool_result", big, run_id="r")
    tmem.log("bot", "tool_result", big, run_id="other")  # shares the payload
    report = tmem.delete_run("r")
    assert (report.memories, report.derived, report.log_entries) == (4, 1, 1)
    assert [m.id for m in tmem.list(status=None)] == [keep.id]
    with pytest.raises(NotFound):
        tmem.get_run("r")
    stats = tmem.eventlog.stats()
    assert (stats.entries, stats.payloads) == (1, 1)  # still referenced by "other"
    # cascade=False keeps what was derived
    chat(tmem, clock, "r2", 1)
    s2 = tmem.remember("summary 2")
    tmem.link(s2.id, [e.id for e in tmem.events("r2")])
    assert tmem.delete_run("r2", cascade=False).derived == 0
    assert tmem.get(s2.id).content == "summary 2"
    with pytest.raises(NotFound):
        tmem.delete_run("r2")


def test_archived_runs_do_not_come_back_when_events_are_appended(tmem: GraphMemory) -> None:
    tmem.start_run("bot", run_id="a")
    tmem.runs.archive(["a"])
    tmem.add_event("a", "user_message", "late message")
    assert tmem.get_run("a").status is RunStatus.ARCHIVED
    assert tmem.backend.count(Filter(label=NodeLabel.RUN)) == 1


# -- NullMemory ---------------------------------------------------------------------------


def public_names(cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls) if not n.startswith("_")}


def test_null_memory_has_the_whole_interface_and_stores_nothing() -> None:
    null = NullMemory()
    for name in public_names(GraphMemory) | {"org", "namespaces", "runs", "eventlog"}:
        assert hasattr(null, name), name
    m = null.remember("Alice prefers tea", agent_id="a", tags=["prefs"])
    assert m.content == "Alice prefers tea" and m.tags == ("prefs",)
    ev = null.add_event("r1", "user_message", "hi")
    assert ev.run_id == "r1" and ev.status is Status.ACTIVE
    run, created = null.get_or_create_run("r1", agent_id="a")
    assert created and run.id == "r1"
    assert null.log("a", "tool_call", {"x": 1}).payload == '{"x":1}'
    assert null.recall("tea") == [] and null.context("tea") == ""
    assert null.events("r1") == [] and null.list_runs() == [] and null.list() == []
    assert null.conversation_context("r1") == "" and null.tail() == []
    assert null.count() == 0 and null.run_stats().runs == 0
    assert null.forget(m.id).deleted == ()
    assert null.org.publish("p", author="x") is None  # accepted, nothing happens
    assert null.consolidate() is None  # any other GraphMemory method is accepted too
    with pytest.raises(NotFound):
        null.get(m.id)
    with pytest.raises(InvalidInput):  # bad input is still bad input
        null.remember("")
    with pytest.raises(InvalidInput):
        null.log("a", "tool_call", {1, 2})
    with NullMemory.open("anything") as n2:
        assert n2.stats()["backend"] == "null"


def test_seed_limits_are_the_defaults_and_settable(backend: GraphBackend) -> None:
    assert (RunLimits().max_runs, RunLimits().max_events_per_run) == (1000, 500)
    assert RunLimits().archive_fraction == 0.1
    mem = GraphMemory(backend, embedder=None, owns_backend=False)
    assert mem.runs.limits == RunLimits()
    mem.add_events(
        "big",
        [
            {"event_type": "result", "content": f"step {i}"}  # long-term
            for i in range(501)
        ],
    )
    # over 500: the oldest 10% go (51 of 501), not just the one in excess
    archived = mem.events("big", status="archived")
    assert len(archived) == 51 and archived[0].content == "step 0"
    unlimited = Settings.load(
        environ={"GRAPHMEM_RUNS__MAX_EVENTS_PER_RUN": "null"}, runs={"max_runs": None}
    )
    assert unlimited.runs.max_runs is None and unlimited.runs.max_events_per_run is None
    other = GraphMemory(
        backend, embedder=None, owns_backend=False, settings=Settings(runs={"max_runs": 7})
    )  # type: ignore[arg-type]
    assert other.runs.limits.max_runs == 7
