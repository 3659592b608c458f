"""The orchestration log: log/tail, content-addressed payloads with reference counts and
cleanup, bytes-saved statistics, parent/child entries — on every backend."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest

from graphmem.backends.base import GraphBackend
from graphmem.config import LifecycleConfig, RetentionPolicy
from graphmem.errors import InvalidInput, NotFound
from graphmem.eventlog import EventLog, canonical_json
from graphmem.memory import GraphMemory
from graphmem.models import EdgeType, Filter, LogEntry, NodeLabel, NodeRef, Payload

BIG = {"rows": [{"id": i, "text": "lorem ipsum"} for i in range(100)]}
BIG_TEXT = canonical_json(BIG)
BIG_SIZE = len(BIG_TEXT.encode("utf-8"))


def payloads(mem: GraphMemory) -> list[Payload]:
    return mem.backend.match(Payload, Filter(label=NodeLabel.PAYLOAD))


def test_log_and_tail_in_order_with_filters(mem: GraphMemory) -> None:
    for step in range(6):
        agent = "planner" if step % 2 == 0 else "coder"
        etype = "tool_call" if step < 3 else "tool_result"
        mem.log.log(agent, etype, {"step": step}, run_id="r1", step=step)
    mem.log.log("planner", "note", "elsewhere", run_id="r2")
    assert [r.payload for r in mem.log.tail(3)] == [{"step": 4}, {"step": 5}, "elsewhere"]
    assert [r.entry.step for r in mem.log.tail(100, run_id="r1")] == list(range(6))
    assert [r.entry.step for r in mem.log.tail(2, agent_id="coder")] == [3, 5]
    assert [r.entry.step for r in mem.log.tail(10, run_id="r1", event_type="tool_call")] == [
        0,
        1,
        2,
    ]
    assert mem.log.tail(0) == []
    with pytest.raises(InvalidInput):
        mem.log.tail(-1)
    # a run that did not exist was started, and the entries are IN_RUN of it
    run = mem.runs.get("r2")
    assert run.agent_id == "planner"
    sub = mem.backend.expand([run.ref], [EdgeType.IN_RUN], direction="in")
    assert [n.label for n in sub.nodes if n.id != "r2"] == [NodeLabel.LOG_ENTRY]


def test_small_payloads_stay_inline_large_ones_are_shared(mem: GraphMemory) -> None:
    small = mem.log.log("a", "tool_call", {"q": "tea"})
    assert small.payload == '{"q":"tea"}' and small.payload_ref is None
    assert payloads(mem) == []
    first = mem.log.log("a", "tool_result", BIG, run_id="r")
    second = mem.log.log("b", "tool_result", BIG, run_id="r")
    reordered = json.loads(json.dumps(BIG))  # equal value, built anew
    third = mem.log.log("c", "tool_result", reordered)
    digest = hashlib.sha256(BIG_TEXT.encode("utf-8")).hexdigest()
    assert first.payload is None and first.payload_ref == digest
    assert second.payload_ref == third.payload_ref == digest
    assert first.payload_size == BIG_SIZE
    [blob] = payloads(mem)
    assert (blob.id, blob.refcount, blob.size, blob.text) == (digest, 3, BIG_SIZE, BIG_TEXT)
    assert mem.log.entry(second.id).payload == BIG
    sub = mem.backend.expand([blob.ref], [EdgeType.REFERENCES], direction="in")
    assert {n.id for n in sub.nodes} == {digest, first.id, second.id, third.id}
    stats = mem.log.stats()
    assert (stats.entries, stats.inline_entries, stats.referencing_entries) == (4, 1, 3)
    assert stats.payloads == 1 and stats.stored_payload_bytes == BIG_SIZE
    assert stats.logical_payload_bytes == 3 * BIG_SIZE
    assert stats.bytes_saved == 2 * BIG_SIZE


def test_key_order_does_not_matter_but_content_does(mem: GraphMemory) -> None:
    a = {"b": "x" * 2000, "a": 1}
    b = {"a": 1, "b": "x" * 2000}
    c = {"a": 2, "b": "x" * 2000}
    ra, rb, rc = (mem.log.log("a", "tool_result", p).payload_ref for p in (a, b, c))
    assert ra == rb != rc
    assert sorted(p.refcount for p in payloads(mem)) == [1, 2]


def test_deleting_entries_counts_down_and_removes_unused_payloads(mem: GraphMemory) -> None:
    entries = [mem.log.log("a", "tool_result", BIG) for _ in range(3)]
    other = mem.log.log("a", "tool_result", {"other": "y" * 3000})
    assert mem.log.delete_entries([entries[0].id, entries[0].id]) == 1
    assert {p.refcount for p in payloads(mem) if p.id == entries[0].payload_ref} == {2}
    assert mem.log.delete_entries([entries[1].id, entries[2].id, "missing"]) == 2
    assert [p.id for p in payloads(mem)] == [other.payload_ref]  # the last user took it along
    assert mem.log.delete_entries([]) == 0
    stats = mem.log.stats()
    assert (stats.entries, stats.payloads, stats.bytes_saved) == (1, 1, 0)
    # logging the same payload again re-creates it from scratch
    again = mem.log.log("a", "tool_result", BIG)
    assert mem.log.entry(again.id).payload == BIG
    assert {p.id: p.refcount for p in payloads(mem)}[again.payload_ref or ""] == 1


def test_prune_by_age(mem: GraphMemory) -> None:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    log = EventLog(mem.backend, mem.writes)
    old = [log.log("a", "tool_result", BIG, at=t0 + timedelta(minutes=i)) for i in range(3)]
    new = log.log("a", "tool_result", BIG, at=t0 + timedelta(days=2))
    assert log.prune(older_than=timedelta(days=1), now=t0 + timedelta(days=2, hours=1)) == 3
    assert [r.entry.id for r in log.tail(10)] == [new.id]
    assert [p.refcount for p in payloads(mem)] == [1]
    assert old[0].payload_ref == new.payload_ref


@pytest.mark.parametrize(
    "older_than, now",
    [
        (timedelta(days=1), datetime(2025, 1, 3)),  # a naive now: a pydantic error leaked
        (timedelta(days=1), datetime(1, 1, 1, tzinfo=UTC)),  # before year 1: OverflowError
        (timedelta(days=999_999_999), None),  # the same from the other side
        (timedelta(days=-1), None),  # a cut-off in the future: pruned every entry
    ],
    ids=["naive-now", "year-1", "huge-age", "negative-age"],
)
def test_prune_refuses_an_age_or_a_time_it_cannot_use_and_deletes_nothing(
    mem: GraphMemory, older_than: timedelta, now: datetime | None
) -> None:
    mem.log.log("a", "tool_result", {"n": 1}, run_id="r")
    with pytest.raises(InvalidInput):
        mem.log.prune(older_than=older_than, now=now)
    with pytest.raises(InvalidInput):
        mem.log.expired(older_than=older_than, now=now)
    assert mem.log.count() == 1


def test_parent_and_children(mem: GraphMemory) -> None:
    root = mem.log.log("orchestrator", "delegation_request", {"task": "research"}, run_id="r")
    kids = [
        mem.log.log(f"worker{i}", "delegation_response", {"i": i}, run_id="r", parent=root.id)
        for i in range(3)
    ]
    grandchild = mem.log.log("worker0", "tool_call", None, parent=kids[0].id)
    assert [r.entry.id for r in mem.log.children(root.id)] == [k.id for k in kids]
    assert [r.entry.id for r in mem.log.children(kids[0].id)] == [grandchild.id]
    assert mem.log.entry(grandchild.id).payload is None
    sub = mem.backend.expand(
        [NodeRef(NodeLabel.LOG_ENTRY, grandchild.id)], [EdgeType.CHILD_OF], direction="out", depth=5
    )
    assert {n.id for n in sub.nodes} == {grandchild.id, kids[0].id, root.id}
    before = mem.log.count()
    with pytest.raises(NotFound):
        mem.log.log("w", "tool_call", {}, parent="no-such-entry")
    assert mem.log.count() == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"payload": {1, 2}},
        {"payload": float("nan")},
        {"payload": {"f": object()}},
        {"event_type": "Tool Call"},
        {"agent_id": ""},
        {"step": -1},
        {"step": True},
        {"run_id": " padded "},
    ],
)
def test_bad_input_is_typed_and_writes_nothing(mem: GraphMemory, kwargs: dict) -> None:
    args = {"agent_id": "a", "event_type": "tool_call", "payload": BIG, **kwargs}
    with pytest.raises(InvalidInput):
        mem.log.log(args.pop("agent_id"), args.pop("event_type"), args.pop("payload"), **args)
    assert mem.log.count() == 0 and payloads(mem) == []
    with pytest.raises(NotFound):
        mem.log.entry("nope")


def test_inline_limit_is_configurable(mem: GraphMemory) -> None:
    log = EventLog(mem.backend, mem.writes, inline_limit=0)
    e = log.log("a", "tool_call", "x")
    assert e.payload is None and e.payload_ref == hashlib.sha256(b'"x"').hexdigest()
    with pytest.raises(InvalidInput):
        EventLog(mem.backend, mem.writes, inline_limit=-1)


# ---------------------------------------------------------------------------------------
# recursive deduplication of results and responses; log retention


def test_large_results_and_responses_are_stored_once_at_any_depth(
    backend: GraphBackend,
) -> None:
    mem = GraphMemory(backend, embedder=None, owns_backend=False)
    answer = "The quarterly numbers are in: " + "revenue up, costs flat. " * 10  # > 200
    small = {"response": "ok"}
    a = mem.log.log(
        "planner",
        "tool_result",
        {"call": 1, "steps": [{"tool": "search", "result": answer}], "meta": small},
    )
    b = mem.log.log("critic", "agent_response", {"response": answer, "call": 2})
    c = mem.log.log("critic", "agent_response", {"note": answer})  # not a result: inline
    blobs = backend.match(Payload, Filter(label=NodeLabel.PAYLOAD))
    assert len(blobs) == 1 and blobs[0].refcount == 2
    entries = {e.id: e for e in backend.get(LogEntry, [a.id, b.id, c.id])}
    assert answer not in (entries[a.id].payload or "")  # a reference, not the text
    assert "$graphmem_blob" in (entries[b.id].payload or "")
    assert answer in (entries[c.id].payload or "")
    records = {r.entry.id: r.payload for r in mem.log.tail(3)}
    assert records[a.id] == {
        "call": 1,
        "steps": [{"tool": "search", "result": answer}],
        "meta": small,
    }
    assert records[b.id] == {"response": answer, "call": 2}
    stats = mem.log.stats()
    assert stats.payloads == 1 and stats.bytes_saved > 200
    mem.log.delete_entries([a.id])
    assert backend.match(Payload, Filter(label=NodeLabel.PAYLOAD))[0].refcount == 1
    mem.log.delete_entries([b.id])
    assert backend.match(Payload, Filter(label=NodeLabel.PAYLOAD)) == []


def test_log_entries_expire_with_the_retention(backend: GraphBackend) -> None:
    now = datetime(2024, 6, 1, tzinfo=UTC)
    mem = GraphMemory(backend, embedder=None, owns_backend=False, clock=lambda: now)
    old = mem.log.log("a", "tool_call", {"result": "x" * 300}, at=now - timedelta(days=40))
    new = mem.log.log("a", "tool_call", {"q": 1}, at=now - timedelta(days=2))
    assert mem.lifecycle.maintain().log_entries == ()  # no log retention configured: kept
    mem.lifecycle.configure(LifecycleConfig(retention=RetentionPolicy(logs=timedelta(days=30))))
    dry = mem.lifecycle.maintain(dry_run=True)
    assert dry.log_entries == (old.id,) and mem.log.count() == 2
    assert mem.lifecycle.maintain().log_entries == (old.id,)
    assert [r.entry.id for r in mem.log.tail(5)] == [new.id]
    assert backend.match(Payload, Filter(label=NodeLabel.PAYLOAD)) == []  # its blob went with it
    by_default = LifecycleConfig(retention=RetentionPolicy(default=timedelta(days=1)))
    assert by_default.retention.log_period == timedelta(days=1)
