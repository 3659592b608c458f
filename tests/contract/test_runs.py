"""Runs as sessions: get-or-create, listing, events by type, conversation context, limits
(eviction order), cleanup, statistics, deletion — on every backend — and NullMemory."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from graphmem.backends.base import GraphBackend
from graphmem.config import RunLimits, Settings
from graphmem.errors import InvalidInput, NotFound
from graphmem.memory import GraphMemory
from graphmem.models import EdgeType, EventType, Filter, Memory, NodeLabel, RunStatus, Status
from graphmem.null import NullMemory
from graphmem.protocol import (
    AgentsAPI,
    KnowledgeAPI,
    LifecycleAPI,
    LogAPI,
    MemoryAPI,
    NamespacesAPI,
    OrgAPI,
    RunsAPI,
    VectorsAPI,
    WritesAPI,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
PARTS: dict[str, type] = {
    "runs": RunsAPI,
    "agents": AgentsAPI,
    "org": OrgAPI,
    "namespaces": NamespacesAPI,
    "lifecycle": LifecycleAPI,
    "knowledge": KnowledgeAPI,
    "log": LogAPI,
    "vectors": VectorsAPI,
    "writes": WritesAPI,
}


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
        mem.runs.add_event(run_id, "user_message", f"question {i}")
        clock.tick(seconds=1)
        mem.runs.add_event(run_id, "agent_response", f"answer {i}")


def test_get_or_create_and_listing_by_user_and_agent(tmem: GraphMemory, clock: Clock) -> None:
    r, created = tmem.runs.get_or_create("s1", agent_id="bot", user_id="u1", app_name="chat")
    assert created and r.user_id == "u1" and r.started_at == T0
    clock.tick(minutes=1)
    again, created = tmem.runs.get_or_create("s1", agent_id="other", user_id="u2")
    assert not created and again == r  # the existing run is returned unchanged
    clock.tick(minutes=1)
    tmem.runs.get_or_create("s2", agent_id="bot", user_id="u2")
    clock.tick(minutes=1)
    tmem.runs.get_or_create("s3", agent_id="helper", user_id="u1")
    assert [x.id for x in tmem.runs.list(user_id="u1")] == ["s3", "s1"]  # newest first
    assert [x.id for x in tmem.runs.list(agent_id="bot")] == ["s2", "s1"]
    assert [x.id for x in tmem.runs.list(agent_id="bot", user_id="u2")] == ["s2"]
    assert [x.id for x in tmem.runs.list(agent_id="bot", limit=1, offset=1)] == ["s1"]
    assert [x.id for x in tmem.runs.list(agent_id=None, status="running")] == ["s3", "s2", "s1"]
    with pytest.raises(InvalidInput):
        tmem.runs.get_or_create(" bad id")


@pytest.mark.parametrize("bad", [{"agent": "bot"}, {"status": 3}, {"user_id": ["u1"]}])
def test_a_run_filter_that_does_not_fit_is_refused_on_both_faces(
    tmem: GraphMemory, bad: dict[str, object]
) -> None:
    for face in (tmem, NullMemory()):
        with pytest.raises(InvalidInput, match=r"runs\.list"):
            face.runs.list(**bad)  # type: ignore[arg-type]


def test_events_of_every_standard_type_and_listing_by_type(tmem: GraphMemory) -> None:
    types = [t.value for t in EventType if t is not EventType.OBSERVATION]
    for t in types:
        tmem.runs.add_event("r", t, f"{t} happened", metadata={"tool": "grep", "args": {"q": 1}})
    events = tmem.runs.events("r")
    assert [e.event_type for e in events] == types
    assert [e.seq for e in events] == list(range(len(types)))
    tools = tmem.runs.events("r", event_types=["tool_call", "tool_result"])
    assert [e.event_type for e in tools] == ["tool_call", "tool_result"]
    assert tools[0].metadata == {"tool": "grep", "args": '{"q": 1}'}
    with pytest.raises(InvalidInput):
        tmem.runs.add_event("r", "Not-A-Type", "x")


def test_conversation_context_renders_the_latest_turns(tmem: GraphMemory, clock: Clock) -> None:
    tmem.runs.start("bot", run_id="c")
    tmem.runs.add_event("c", "user_message", "Hi, I'm Alice.\nI like tea.")
    tmem.runs.add_event("c", "tool_call", "lookup(alice)")
    tmem.runs.add_event("c", "agent_response", "Hello Alice!")
    tmem.runs.add_event("c", "user_message", "What do I like?")
    tmem.runs.add_event("c", "agent_response", "Tea.")
    assert tmem.runs.conversation_context("c") == (
        "User: Hi, I'm Alice. I like tea.\nAssistant: Hello Alice!\n"
        "User: What do I like?\nAssistant: Tea."
    )
    assert (
        tmem.runs.conversation_context("c", max_events=2)
        == "User: What do I like?\nAssistant: Tea."
    )
    assert tmem.runs.conversation_context("c", max_events=0) == ""
    assert tmem.runs.conversation_context("c", 1, speakers={"tool_call": "Tool"}) == (
        "Tool: lookup(alice)"
    )
    with pytest.raises(NotFound):
        tmem.runs.conversation_context("nope")
    with pytest.raises(InvalidInput):
        tmem.runs.conversation_context("c", max_events=-1)


def test_max_runs_archives_the_oldest_tenth(tmem: GraphMemory, clock: Clock) -> None:
    tmem.runs.limits = RunLimits(max_runs=10)
    for i in range(10):
        clock.tick(minutes=1)
        tmem.runs.start("bot", run_id=f"r{i:02d}")
        tmem.runs.add_event(f"r{i:02d}", "user_message", f"hello {i}")
    assert tmem.runs.stats().runs_by_status["archived"] == 0
    clock.tick(minutes=1)
    tmem.runs.start("bot", run_id="r10")  # 11 live runs > 10: ceil(10% of 11) = 2 archived
    archived = tmem.runs.list(status="archived")
    assert sorted(r.id for r in archived) == ["r00", "r01"]
    assert all(r.ended_at is not None for r in archived)
    # their events left recall and the conversation context, but stay in the graph
    assert tmem.runs.events("r00", status="archived")[0].content == "hello 0"
    assert tmem.runs.conversation_context("r00") == ""
    assert [r.memory.content for r in tmem.recall("hello", k=20)] != []
    assert "hello 0" not in {r.memory.content for r in tmem.recall("hello", k=20)}
    # the next overflow takes the next-oldest live runs, never the archived ones again
    for i in range(11, 13):
        clock.tick(minutes=1)
        tmem.runs.start("bot", run_id=f"r{i}")
    assert sorted(r.id for r in tmem.runs.list(status="archived")) == ["r00", "r01", "r02", "r03"]
    assert tmem.runs.stats().runs == 13


def test_runs_started_by_events_count_and_fraction_rounds_up(
    tmem: GraphMemory, clock: Clock
) -> None:
    tmem.runs.limits = RunLimits(max_runs=2)
    for i in (2, 1, 0):  # ids in reverse of age: the order must come from started_at
        clock.tick(minutes=1)
        tmem.runs.add_event(f"auto{i}", "user_message", "hi")  # starts the run on the fly
    assert [r.id for r in tmem.runs.list(status="archived")] == ["auto2"]
    tmem.runs.limits = RunLimits(max_runs=1, archive_fraction=0.5)
    clock.tick(minutes=1)
    tmem.runs.start("bot", run_id="auto3")  # 3 live > 1: max(3 - 1, ceil(0.5 * 3)) = 2
    assert {r.id for r in tmem.runs.list(status="archived")} == {"auto2", "auto1", "auto0"}
    assert [r.id for r in tmem.runs.list(status="running")] == ["auto3"]


def test_max_events_per_run_archives_the_oldest_events(tmem: GraphMemory, clock: Clock) -> None:
    tmem.runs.limits = RunLimits(max_events_per_run=4)
    chat(tmem, clock, "c", 3)  # 6 events
    active = tmem.runs.events("c", status="active")
    assert [e.content for e in active] == ["question 1", "answer 1", "question 2", "answer 2"]
    assert [e.content for e in tmem.runs.events("c", status="archived")] == [
        "question 0",
        "answer 0",
    ]
    assert tmem.runs.conversation_context("c").splitlines()[0] == "User: question 1"
    tmem.runs.add_events(
        "c", [{"event_type": "user_message", "content": f"bulk {i}"} for i in range(5)]
    )
    assert [e.content for e in tmem.runs.events("c", status="active")] == [
        "bulk 1",
        "bulk 2",
        "bulk 3",
        "bulk 4",
    ]
    assert len(tmem.runs.events("c")) == 11  # nothing was deleted


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        RunLimits(max_runs=0)
    with pytest.raises(ValueError):
        RunLimits(archive_fraction=0)


def test_cleanup_removes_runs_inactive_for_n_hours(tmem: GraphMemory, clock: Clock) -> None:
    tmem.runs.start("bot", run_id="old")
    chat(tmem, clock, "old", 1)
    tmem.log.log("bot", "tool_call", {"q": "x"}, run_id="old")
    tmem.runs.start("bot", run_id="old-but-busy")
    clock.tick(hours=30)
    tmem.runs.add_event("old-but-busy", "user_message", "still here")
    tmem.runs.start("bot", run_id="new")
    tmem.runs.end("new")
    clock.tick(hours=2)
    dry = tmem.runs.cleanup(24, dry_run=True)
    assert dry.runs == ("old",) and dry.memories == 2 and dry.log_entries == 1
    assert tmem.runs.get("old")  # a dry run changes nothing
    report = tmem.runs.cleanup(24)
    assert report.runs == ("old",) and not report.dry_run
    with pytest.raises(NotFound):
        tmem.runs.get("old")
    assert tmem.count(run_id="old", status=None) == 0
    assert tmem.log.tail(10, run_id="old") == []
    assert {r.id for r in tmem.runs.list()} == {"old-but-busy", "new"}
    # archive instead of delete
    clock.tick(hours=100)
    arch = tmem.runs.cleanup(1, archive=True)
    assert set(arch.runs) == {"old-but-busy", "new"}
    assert {r.status for r in tmem.runs.list()} == {RunStatus.ARCHIVED}
    assert tmem.runs.cleanup(1, archive=True).runs == ()  # archived runs are left alone
    with pytest.raises(InvalidInput):
        tmem.runs.cleanup(-1)


def test_cleanup_refuses_a_naive_now_and_changes_nothing(tmem: GraphMemory) -> None:
    """``now`` without a timezone reached the filter's model, whose pydantic error leaked."""
    tmem.runs.start("a", run_id="r")
    with pytest.raises(InvalidInput):
        tmem.runs.cleanup(older_than_hours=1, now=datetime(2030, 1, 1))
    assert [r.id for r in tmem.runs.list()] == ["r"]


def test_statistics(tmem: GraphMemory, clock: Clock) -> None:
    assert tmem.runs.stats().average_events_per_run == 0.0
    tmem.runs.start("a", run_id="r1", user_id="u1")
    chat(tmem, clock, "r1", 2)  # 4 events
    tmem.runs.start("b", run_id="r2", user_id="u2")
    tmem.runs.add_event("r2", "user_message", "hi")
    tmem.runs.end("r2")
    tmem.remember("not an event", agent_id="b", run_id="r2")  # in the run, not an event
    tmem.runs.start("b", run_id="r3", user_id="u2")
    s = tmem.runs.stats()
    assert s.runs == 3 and s.events == 5 and s.active_events == 5
    assert s.runs_by_status == {"running": 2, "completed": 1, "failed": 0, "archived": 0}
    assert s.average_events_per_run == pytest.approx(5 / 3, abs=1e-3)
    by_b = tmem.runs.stats(agent_id="b")
    assert (by_b.runs, by_b.events, by_b.average_events_per_run) == (2, 1, 0.5)
    assert tmem.runs.stats(user_id="u1").events == 4


def test_delete_run_cascades_to_derived_memories_and_log(tmem: GraphMemory, clock: Clock) -> None:
    chat(tmem, clock, "r", 2)
    events = tmem.runs.events("r")
    summary = tmem.remember("Alice asked two questions")  # outside the run, derived from it
    tmem.writes.link(summary.id, [e.id for e in events], pass_name="summarize")
    keep = tmem.remember("unrelated")
    big = {"blob": "x" * 5000}
    tmem.log.log("bot", "tool_result", big, run_id="r")
    tmem.log.log("bot", "tool_result", big, run_id="other")  # shares the payload
    report = tmem.runs.delete("r")
    assert (report.memories, report.derived, report.log_entries) == (4, 1, 1)
    assert [m.id for m in tmem.list(status=None)] == [keep.id]
    with pytest.raises(NotFound):
        tmem.runs.get("r")
    stats = tmem.log.stats()
    assert (stats.entries, stats.payloads) == (1, 1)  # still referenced by "other"
    # cascade=False keeps what was derived
    chat(tmem, clock, "r2", 1)
    s2 = tmem.remember("summary 2")
    tmem.writes.link(s2.id, [e.id for e in tmem.runs.events("r2")])
    assert tmem.runs.delete("r2", cascade=False).derived == 0
    assert tmem.get(s2.id).content == "summary 2"
    with pytest.raises(NotFound):
        tmem.runs.delete("r2")


@pytest.mark.parametrize("cascade", [True, False])
@pytest.mark.parametrize("how", ["reconcile", "merge"])
def test_deleting_a_run_restores_what_only_its_memories_superseded(
    tmem: GraphMemory, how: str, cascade: bool
) -> None:
    """A memory outside the run that only the run's memories (or what was derived from
    them) superseded comes back, as a forget gives it back; it stayed superseded with no
    successor, out of every recall and beyond restore."""
    tmem.runs.start("alice", run_id="r")
    if how == "reconcile":
        outside = tmem.remember("Alice lives in Oslo", agent_id="alice")
        tmem.remember("Alice lives in Bergen", agent_id="alice", run_id="r")
        assert tmem.last_reconcile is not None and tmem.last_reconcile.action == "superseded"
    else:
        tmem.remember(
            "Alice drinks green tea every morning", agent_id="alice", run_id="r", reconcile="off"
        )
        outside = tmem.remember(
            "Alice drinks green tea every single morning", agent_id="alice", reconcile="off"
        )
        assert tmem.lifecycle.consolidate(agent_id="alice").groups
    assert tmem.get(outside.id).status is Status.SUPERSEDED
    tmem.runs.delete("r", cascade=cascade)
    found = [r.memory for r in tmem.recall(outside.content, agent_id="alice")]
    if how == "merge" and not cascade:  # the merge is kept, and it still says it
        assert tmem.get(outside.id).status is Status.SUPERSEDED
        assert any(outside.content in m.content for m in found)
        return
    back = tmem.get(outside.id)
    assert back.status is Status.ACTIVE and back.valid_to is None
    assert outside.id in {m.id for m in found}


def test_archived_runs_do_not_come_back_when_events_are_appended(tmem: GraphMemory) -> None:
    tmem.runs.start("bot", run_id="a")
    tmem.runs.archive(["a"])
    tmem.runs.add_event("a", "user_message", "late message")
    assert tmem.runs.get("a").status is RunStatus.ARCHIVED
    assert tmem.backend.count(Filter(label=NodeLabel.RUN)) == 1


def _next_edges(backend: GraphBackend, memories: list[Memory]) -> set[tuple[str, str]]:
    sub = backend.expand([m.ref for m in memories], [EdgeType.NEXT], direction="both")
    return {(e.src.id, e.dst.id) for e in sub.edges}


def test_a_run_another_handle_ended_stays_ended_when_this_handle_appends(
    backend: GraphBackend, twin: GraphBackend
) -> None:
    """A handle appends to a run it appended to last without reading the run again; what
    it writes is only where the chain now ends, so a run another handle ended meanwhile
    does not come back running."""
    mine = GraphMemory(backend, embedder=None, owns_backend=False)
    other = GraphMemory(twin, embedder=None, owns_backend=False)
    first = mine.remember("the kettle is blue", agent_id="bot", run_id="s1")
    ended = other.runs.end("s1")
    second = mine.remember("the teapot is green", agent_id="bot", run_id="s1")
    run = other.runs.get("s1")
    assert run.status is RunStatus.COMPLETED and run.ended_at == ended.ended_at
    assert run.last_event_id == second.id
    assert _next_edges(backend, [first, second]) == {(first.id, second.id)}


def test_appends_of_two_handles_to_one_run_make_one_chain(
    backend: GraphBackend, twin: GraphBackend
) -> None:
    """A handle whose view of a run is stale (another handle appended since) is refused by
    its write's precondition, reads the run and appends after the other handle's memory:
    the chain never forks."""
    mine = GraphMemory(backend, embedder=None, owns_backend=False)
    other = GraphMemory(twin, embedder=None, owns_backend=False)
    made = [mine.remember("turn one is about tea", agent_id="bot", run_id="s1")]
    made.append(other.remember("turn two is about coffee", agent_id="bot", run_id="s1"))
    made.append(mine.remember("turn three is about cocoa", agent_id="bot", run_id="s1"))
    made.append(mine.remember("turn four is about juice", agent_id="bot", run_id="s1"))
    assert _next_edges(backend, made) == {(a.id, b.id) for a, b in itertools.pairwise(made)}
    assert other.runs.get("s1").last_event_id == made[-1].id


@pytest.mark.parametrize("n", [3, 60])
def test_forgetting_a_runs_last_memory_never_forks_its_chain(tmem: GraphMemory, n: int) -> None:
    """When the run's last memory is gone, the next one follows the end of the chain that
    remains, not the run's newest memory by time: a memory written earlier in time (a
    writer whose batch committed later, a given ``created_at``) may stand after it, and a
    second NEXT edge out of it would fork the chain. (60: the end is the oldest of many.)"""
    made = tmem.remember_many(
        [
            {
                "content": f"turn {i}",
                "agent_id": "bot",
                "run_id": "s1",
                "created_at": T0 + timedelta(seconds=n - i),
            }
            for i in range(n)
        ]
    )
    tmem.forget(made[-1].id)
    made[-1] = tmem.remember("turn after", agent_id="bot", run_id="s1")
    assert _next_edges(tmem.backend, made) == {(a.id, b.id) for a, b in itertools.pairwise(made)}


# -- NullMemory ---------------------------------------------------------------------------


def public_names(cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls) if not n.startswith("_")}


def test_null_memory_has_the_whole_interface_and_stores_nothing() -> None:
    null = NullMemory()
    face = {n for n in public_names(MemoryAPI)} - {"count", "index"}
    for name in face | {"count"}:
        assert hasattr(null, name), name
    for part, proto in PARTS.items():
        for name in public_names(proto):
            assert callable(getattr(getattr(null, part), name)), f"{part}.{name}"
    with pytest.raises(AttributeError):
        null.remmeber("x")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        null.runs.strat("r1")  # type: ignore[attr-defined]
    m = null.remember("Alice prefers tea", agent_id="a", tags=["prefs"])
    assert m.content == "Alice prefers tea" and m.tags == ("prefs",)
    assert null.last_reconcile is not None and null.last_reconcile.action == "created"
    ev = null.runs.add_event("r1", "user_message", "hi")
    assert ev.run_id == "r1" and ev.status is Status.ACTIVE
    run, created = null.runs.get_or_create("r1", agent_id="a")
    assert created and run.id == "r1"
    assert null.log.log("a", "tool_call", {"x": 1}).payload == '{"x":1}'
    assert null.recall("tea") == [] and null.context("tea") == ""
    assert null.context("tea", format="messages") == [{"role": "user", "content": "tea"}]
    assert null.runs.events("r1") == [] and null.runs.list() == [] and null.list() == []
    assert null.runs.conversation_context("r1") == "" and null.log.tail() == []
    assert null.count() == 0 and null.runs.stats().runs == 0
    assert null.forget(m.id).deleted == ()
    assert null.org.publish("p", author="x").content == "p"  # accepted, nothing stored
    assert null.org.list() == [] and null.knowledge.entities() == []
    assert null.lifecycle.consolidate().groups == ()
    assert null.lifecycle.maintain(dry_run=True).actions == ()
    with pytest.raises(NotFound):
        null.get(m.id)
    assert null.get([m.id]) == []
    with pytest.raises(NotFound):
        null.runs.get("r1")
    with pytest.raises(InvalidInput):  # bad input is still bad input
        null.remember("")
    with pytest.raises(InvalidInput):
        null.log.log("a", "tool_call", {1, 2})
    with NullMemory.open("anything") as n2:
        assert n2.stats()["backend"] == "null"


def test_graph_memory_implements_the_face(tmem: GraphMemory) -> None:
    assert isinstance(tmem, MemoryAPI) and isinstance(NullMemory(), MemoryAPI)
    for part, proto in PARTS.items():
        assert isinstance(getattr(tmem, part), proto), part
        assert isinstance(getattr(NullMemory(), part), proto), part


def test_seed_limits_are_the_defaults_and_settable(backend: GraphBackend) -> None:
    assert (RunLimits().max_runs, RunLimits().max_events_per_run) == (1000, 500)
    assert RunLimits().archive_fraction == 0.1
    mem = GraphMemory(backend, embedder=None, owns_backend=False)
    assert mem.runs.limits == RunLimits()
    mem.runs.add_events(
        "big",
        [
            {"event_type": "result", "content": f"step {i}"}  # long-term
            for i in range(501)
        ],
    )
    # over 500: the oldest 10% go (51 of 501), not just the one in excess
    archived = mem.runs.events("big", status="archived")
    assert len(archived) == 51 and archived[0].content == "step 0"
    unlimited = Settings.load(
        environ={"GRAPHMEM_RUNS__MAX_EVENTS_PER_RUN": "null"}, runs={"max_runs": None}
    )
    assert unlimited.runs.max_runs is None and unlimited.runs.max_events_per_run is None
    other = GraphMemory(
        backend, embedder=None, owns_backend=False, settings=Settings(runs={"max_runs": 7})
    )  # type: ignore[arg-type]
    assert other.runs.limits.max_runs == 7


@pytest.mark.parametrize("append", ["event", "memory", "derived"])
def test_a_run_delete_never_orphans_what_was_appended_while_it_planned(
    tmem: GraphMemory, monkeypatch: pytest.MonkeyPatch, append: str
) -> None:
    """An event (counted) or a plain memory of the run (not counted: only the run's last
    memory changes) appended after the delete listed the run's memories is deleted with
    the run, and so is a memory derived from one of them meanwhile (the cascade). Before,
    the delete read the run after listing and checked only the event count, so it
    committed and left the acknowledged memory behind, its run gone: the next append
    started a new chain beside it (two heads of one run); a derivation survived the
    cascade."""
    first = tmem.runs.add_event("r", "note", "first", agent_id="a")
    tmem.remember("a plain memory of the run", agent_id="a", run_id="r", reconcile="off")
    real = tmem.writes.restorable  # what the delete reads last, once it has listed
    late: list[Memory] = []

    def listed_then_appended(doomed: list[str]) -> object:
        if not late:
            if append == "event":
                late.append(tmem.runs.add_event("r", "note", "late event", agent_id="a"))
            elif append == "derived":
                late.append(tmem.remember("about the run", agent_id="a", reconcile="off"))
                tmem.writes.link(late[0].id, [first.id], pass_name="summarize")
            else:
                late.append(tmem.remember("late memory", agent_id="a", run_id="r", reconcile="off"))
        return real(doomed)

    monkeypatch.setattr(tmem.writes, "restorable", listed_then_appended)
    report = tmem.runs.delete("r")
    monkeypatch.undo()
    assert late and (report.memories, report.derived) == ((2, 1) if append == "derived" else (3, 0))
    assert tmem.list(run_id="r", status=None, limit=None) == []
    with pytest.raises(NotFound):
        tmem.get(late[0].id)
    again = tmem.runs.add_event("r", "note", "a new run of the same id", agent_id="a")
    assert again.seq == 0 and [m.id for m in tmem.list(run_id="r", limit=None)] == [again.id]
