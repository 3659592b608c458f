"""GraphMemory behaviour that must be identical on every backend."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.memory import GraphMemory
from graphmem.models import Category, EdgeType, Memory, Status

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_remember_get_and_list(mem: GraphMemory) -> None:
    a = mem.remember("Alice prefers tea", agent_id="assistant", tags=["Prefs"], importance=0.7)
    assert mem.get(a.id) == a
    assert a.tags == ("prefs",) and a.status is Status.ACTIVE
    mem.remember("Bob likes coffee", agent_id="other")
    assert [m.id for m in mem.list(agent_id="assistant")] == [a.id]
    assert mem.count() == 2
    with pytest.raises(NotFound):
        mem.get("missing")


def test_remember_many_is_all_or_nothing(mem: GraphMemory) -> None:
    mem.remember("keep me")
    with pytest.raises(InvalidInput, match="item 1"):
        mem.remember_many([{"content": "fine"}, {"content": "bad", "importance": 3}])
    assert mem.count() == 1
    batch = mem.remember_many([{"content": f"m{i}", "agent_id": "x"} for i in range(50)])
    assert len(batch) == 50 and mem.count(agent_id="x") == 50


#: what a new memory cannot be given: a status other than active (a superseded memory
#: without a successor is a broken history; an archived one is archived after it is
#: written), or an access in the future
NOT_NEW = {
    "superseded": {"status": "superseded"},
    "archived": {"status": "archived"},
    "read tomorrow": {"last_accessed": datetime.now(UTC) + timedelta(days=1)},
}


@pytest.mark.parametrize("given", list(NOT_NEW))
@pytest.mark.parametrize(
    "verb", ["remember_many", "remember_many object", "reconcile", "add_events", "supersede"]
)
def test_a_new_memory_starts_active_and_unread(mem: GraphMemory, verb: str, given: str) -> None:
    """``remember_many`` wrote a new memory as superseded (a version with no head: history
    showed a chain that never had an active version) or archived, or read in the future."""
    fields = NOT_NEW[given]
    old = mem.remember("the old plan", agent_id="a")
    before = mem.backend.stats()
    with pytest.raises(InvalidInput):
        if verb == "remember_many":
            mem.remember_many([{"content": "fine"}, {"content": "the new plan", **fields}])
        elif verb == "remember_many object":
            mem.remember_many([Memory(content="the new plan", **fields)])
        elif verb == "reconcile":
            mem.writes.reconcile("the new plan", **fields)
        elif verb == "add_events":
            mem.runs.add_events("r1", [{"content": "the new plan", **fields}])
        else:
            new = Memory(content="the new plan", agent_id="a", **fields)
            mem.writes.supersede([old.id], new, reason="r")
    assert mem.backend.stats() == before
    assert mem.get(old.id).status is Status.ACTIVE
    # what a new memory may come with: an active status, an access in the past
    read = datetime.now(UTC) - timedelta(days=1)
    [m] = mem.remember_many(
        [{"content": "read yesterday", "status": "active", "last_accessed": read}]
    )
    assert (m.status, mem.get(m.id).last_accessed) == (Status.ACTIVE, read)


def test_update_creates_a_version_chain(mem: GraphMemory) -> None:
    v1 = mem.remember("Alice lives in Paris", created_at=T0, agent_id="a")
    v2 = mem.update(v1.id, "Alice lives in Lyon", reason="moved")
    v3 = mem.update(v2.id, importance=0.9, reason="reinforced")
    history = mem.history(v1.id)
    assert [m.id for m in history] == [v1.id, v2.id, v3.id]
    assert [m.status for m in history] == [Status.SUPERSEDED, Status.SUPERSEDED, Status.ACTIVE]
    old = mem.get(v1.id)
    assert old.valid_to == v2.valid_from
    assert mem.get(v1.id, current=True).id == v3.id
    assert v3.content == "Alice lives in Lyon" and v3.importance == 0.9
    sub = mem.backend.expand([v2.ref], [EdgeType.SUPERSEDES], direction="out")
    assert [e.props["reason"] for e in sub.edges] == ["moved"]
    with pytest.raises(Conflict):
        mem.update(v1.id, "edit an old version")
    with pytest.raises(InvalidInput):
        mem.update(v3.id, agent_id="someone-else")
    assert [m.id for m in mem.list(agent_id="a")] == [v3.id]


def test_forget_cascades_over_versions_and_derived(mem: GraphMemory) -> None:
    v1 = mem.remember("fact v1")
    v2 = mem.update(v1.id, "fact v2")
    summary = mem.remember("summary of v2 and other", category=Category.SUMMARY)
    other = mem.remember("other")
    mem.writes.link(summary.id, [v2.id, other.id], pass_name="summarize")
    unrelated = mem.remember("unrelated")
    dry = mem.forget(v1.id, dry_run=True)
    assert set(dry.deleted) == {v1.id, v2.id, summary.id} and dry.dry_run
    assert mem.count(status=None) == 5
    report = mem.forget(v1.id)
    assert set(report.deleted) == {v1.id, v2.id, summary.id}
    assert {m.id for m in mem.list(status=None)} == {other.id, unrelated.id}


def test_forget_a_merge_source_restores_the_other_source(mem: GraphMemory) -> None:
    a = mem.remember("Alice likes green tea")
    b = mem.remember("Alice likes tea, green")
    merged = mem.remember("Alice likes green tea (merged)")
    mem.writes.supersede([a.id, b.id], merged.id, reason="consolidated", pass_name="consolidate")
    assert mem.get(b.id).status is Status.SUPERSEDED
    report = mem.forget(a.id)
    assert set(report.deleted) == {a.id, merged.id}
    assert report.restored == (b.id,)
    restored = mem.get(b.id)
    assert restored.status is Status.ACTIVE and restored.valid_to is None


def test_forget_without_cascade_keeps_derived(mem: GraphMemory) -> None:
    a = mem.remember("source")
    d = mem.remember("derived")
    mem.writes.link(d.id, [a.id])
    assert mem.forget(a.id, cascade=False).deleted == (a.id,)
    assert mem.get(d.id).content == "derived"


def test_runs_and_events_keep_order(mem: GraphMemory) -> None:
    run = mem.runs.start("bot", run_id="s1", user_id="u1", started_at=T0)
    with pytest.raises(Conflict):
        mem.runs.start("bot", run_id="s1")
    e1 = mem.runs.add_event("s1", "user_message", "hello", created_at=T0)
    more = mem.runs.add_events(
        "s1",
        [
            {"event_type": "agent_response", "content": "hi there", "created_at": T0},
            {"event_type": "tool_call", "content": "search(weather)", "created_at": T0},
        ],
    )
    events = mem.runs.events("s1")
    assert [e.id for e in events] == [e1.id] + [m.id for m in more]
    assert [e.seq for e in events] == [0, 1, 2]
    assert all(e.category is Category.EPISODIC and e.agent_id == "bot" for e in events)
    chain = mem.backend.expand([e1.ref], [EdgeType.NEXT], direction="out", depth=5)
    assert {(e.src.id, e.dst.id) for e in chain.edges} == {
        (e1.id, more[0].id),
        (more[0].id, more[1].id),
    }
    assert [e.content for e in mem.runs.events("s1", event_types=["tool_call"])] == [
        "search(weather)"
    ]
    ended = mem.runs.end(run.id)
    assert ended.ended_at is not None and ended.status.value == "completed"
    assert [r.id for r in mem.runs.list(agent_id="bot")] == ["s1"]
    # forgetting the last event does not break the chain for the next one
    mem.forget(more[1].id)
    nxt = mem.runs.add_event("s1", "user_message", "again")
    chain = mem.backend.expand([nxt.ref], [EdgeType.NEXT], direction="in")
    assert {e.src.id for e in chain.edges} == {more[0].id}


def test_agents(mem: GraphMemory) -> None:
    mem.agents.register("lead", name="Lead", seniority="senior")
    mem.agents.register("lead", autonomy=3)
    agent = mem.agents.get("lead")
    assert (agent.name, agent.seniority, agent.autonomy) == ("Lead", "senior", 3)
    with pytest.raises(NotFound):
        mem.agents.get("nobody")


def test_export_import_round_trip(mem: GraphMemory) -> None:
    [a] = mem.remember_many(
        [
            {
                "content": "alpha",
                "tags": ["x"],
                "metadata": {"k": {"n": True}},
                "embedding": [0.5, 0.25, 0.125],
            }
        ]
    )
    b = mem.update(a.id, "alpha 2")
    mem.runs.add_event("r1", "user_message", "hi")
    buf = io.StringIO()
    report = mem.transfer.export(buf)
    assert report.nodes > 0 and report.edges > 0
    with GraphMemory.open("memory://", embedder=None) as other:
        buf.seek(0)
        assert other.transfer.import_(buf) == report
        assert other.get(b.id) == b
        assert other.get(a.id) == mem.get(a.id)
        assert other.backend.stats().nodes == mem.backend.stats().nodes
        assert other.backend.stats().edges == mem.backend.stats().edges


def test_import_rejects_bad_lines_and_writes_nothing(mem: GraphMemory) -> None:
    good = io.StringIO()
    mem.remember("one")
    mem.transfer.export(good)
    lines = good.getvalue().splitlines()
    bad = "\n".join([*lines, '{"node": "Memory", "props": {"id": "x", "content": ""}}'])
    with GraphMemory.open("memory://", embedder=None) as other:
        with pytest.raises(InvalidInput, match="line"):
            other.transfer.import_(io.StringIO(bad))
        assert other.backend.stats().nodes == {}
        with pytest.raises(InvalidInput):
            other.transfer.import_(io.StringIO('{"nope": 1}\n'))


HEADER = '{"format": "graphmem-jsonl", "version": 1}'


@pytest.mark.parametrize(
    "text",
    [
        "[1]\n",  # a header line that is JSON but not an object
        '"graphmem-jsonl"\n',
        HEADER + '\n{"node": "Memory", "props": [1]}\n',  # props not an object
        HEADER + '\n{"node": "Memory", "props": null}\n',
        HEADER + '\n{"edge": "TAGGED", "src": ["Memory", "m"], "dst": ["Tag", "t"], '
        '"props": [1]}\n',
    ],
    ids=["header-list", "header-str", "props-list", "props-null", "edge-props-list"],
)
def test_import_of_lines_that_are_not_objects_is_invalid_input(mem: GraphMemory, text: str) -> None:
    """Each of these raised AttributeError (``rec.get`` / ``props.items`` on a list)."""
    mem.remember("one")
    before = mem.backend.stats()
    with pytest.raises(InvalidInput, match="line"):
        mem.transfer.import_(io.StringIO(text))
    assert mem.backend.stats() == before


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (HEADER.encode() + b"\n" + bytes([0xFF, 0xFE]) + b"\n", "not UTF-8"),
        (HEADER.encode() + b"\n" + b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 2"),
    ],
    ids=["not-utf8", "nested-100k"],
)
def test_import_of_a_file_json_cannot_read_is_invalid_input(
    mem: GraphMemory, raw: bytes, says: str, tmp_path: Path
) -> None:
    # found by probing the CLI: `graphmem import` of these ended in a traceback
    # (UnicodeDecodeError while reading lines, RecursionError in json.loads)
    mem.remember("one")
    before = mem.backend.stats()
    path = tmp_path / "bad.jsonl"
    path.write_bytes(raw)
    with pytest.raises(InvalidInput, match=says):
        mem.transfer.import_(path)
    assert mem.backend.stats() == before


def _edge_line(etype: str, src: tuple[str, str], dst: tuple[str, str]) -> str:
    return json.dumps({"edge": etype, "src": list(src), "dst": list(dst), "props": {}})


@pytest.mark.parametrize("edge", ["AUTHORED_BY", "TAGGED", "IN_RUN", "RUN_BY"])
def test_an_import_whose_structural_edge_disagrees_with_its_node_writes_nothing(
    mem: GraphMemory, edge: str
) -> None:
    """The nodes were written, then the edge batch was refused (InvalidInput after the
    memory and its agent were in the store): an import validates everything first."""
    mem.remember("already here", agent_id="a0")
    m = Memory(id="imp-1", content="imported", agent_id="a1", tags=("t1",), run_id="r1")
    lines = [HEADER]
    for label, props in [
        ("Agent", {"id": "a1", "created_at": {"$dt": "2026-01-01T00:00:00+00:00"}}),
        ("Agent", {"id": "a2", "created_at": {"$dt": "2026-01-01T00:00:00+00:00"}}),
        ("Tag", {"id": "t2"}),
        ("Run", {"id": "r2", "agent_id": "a1", "started_at": {"$dt": "2026-01-01T00:00:00+00:00"}}),
    ]:
        lines.append(json.dumps({"node": label, "props": props}))
    dated = {
        k: {"$dt": v.isoformat()} if isinstance(v, datetime) else v for k, v in m.to_props().items()
    }
    lines.append(json.dumps({"node": "Memory", "props": dated}))
    wrong = {  # an edge the memory's (or the run's) fields do not imply
        "AUTHORED_BY": (("Memory", m.id), ("Agent", "a2")),
        "TAGGED": (("Memory", m.id), ("Tag", "t2")),
        "IN_RUN": (("Memory", m.id), ("Run", "r2")),
        "RUN_BY": (("Run", "r2"), ("Agent", "a2")),
    }[edge]
    lines.append(_edge_line(edge, *wrong))
    before = mem.backend.stats()
    with pytest.raises(InvalidInput, match=f"{edge} edges follow the node's fields"):
        mem.transfer.import_(io.StringIO("\n".join(lines) + "\n"))
    assert mem.backend.stats() == before
    with pytest.raises(NotFound):
        mem.get(m.id)
    with pytest.raises(NotFound):
        mem.agents.get("a2")


def test_provenance_and_link_errors(mem: GraphMemory) -> None:
    a = mem.remember("a")
    b = mem.remember("b")
    s = mem.remember("s", category="summary")
    mem.writes.link(s.id, [a.id, b.id], pass_name="summarize")
    prov = mem.lifecycle.provenance(s.id)
    assert {n.id for n in prov.nodes} == {a.id, b.id, s.id}
    assert all(e.props["pass"] == "summarize" for e in prov.edges)
    with pytest.raises(NotFound):
        mem.writes.link(s.id, ["missing"])


def test_memory_node_shape_is_flat(mem: GraphMemory) -> None:
    m = mem.remember("x", metadata={"a": {"b": [1, 2]}, "c": 1})
    props = m.to_props()
    assert props["metadata.a"] == '{"b": [1, 2]}' and props["metadata.c"] == 1
    assert not any(isinstance(v, dict) for v in props.values())
    [got] = mem.backend.get(Memory, [m.id])
    assert isinstance(got, Memory) and got.metadata == m.metadata


def test_recall_lexical_scoped(mem: GraphMemory) -> None:
    mem.remember("Alice drinks green tea every morning", agent_id="a")
    mem.remember("Bob drinks tea too", agent_id="b")
    results = mem.recall("green tea", agent_id="a")
    assert [r.memory.agent_id for r in results] == ["a"]
    assert mem.get(results[0].memory.id).access_count == 1
    assert results[0].score > 0
    assert mem.recall("zebra crossing", agent_id="a") == []
    past = mem.recall("tea", agent_id="a", as_of=T0 - timedelta(days=1))
    assert past == []


def test_the_graph_view_shows_tags_as_the_models_tuple(mem: GraphMemory) -> None:
    m = mem.remember("tea at noon", tags=["drink", "habit"])
    mem.agents.register("cto", seniority="lead")
    f = mem.org.publish("Never log secrets.", author="cto", fact_id="no-secrets", tags=["sec"])
    nodes = mem.graph.nodes
    assert nodes[m.ref.key]["tags"] == ("drink", "habit")
    assert nodes[f.ref.key]["tags"] == ("sec",)
    assert nodes[m.ref.key]["content"] == "tea at noon"


@pytest.mark.parametrize("etype", ["SUPERSEDES", "DERIVED_FROM"])
def test_an_import_with_a_version_or_provenance_cycle_writes_nothing(
    mem: GraphMemory, etype: str
) -> None:
    """A cycle of SUPERSEDES (or DERIVED_FROM) edges was loaded as it was: three memories
    each the newer version of the next, none of them current (``get(current=True)`` was
    NotFound for all three)."""
    mem.remember("already here", agent_id="a0")
    lines = [HEADER]
    for i in range(3):
        m = Memory(id=f"cyc-{i}", content=f"version {i}", agent_id="a1")
        dated = {
            k: {"$dt": v.isoformat()} if isinstance(v, datetime) else v
            for k, v in m.to_props().items()
        }
        lines.append(json.dumps({"node": "Memory", "props": dated}))
    for i in range(3):
        lines.append(_edge_line(etype, ("Memory", f"cyc-{i}"), ("Memory", f"cyc-{(i + 1) % 3}")))
    before = mem.backend.stats()
    with pytest.raises(InvalidInput, match="cycle"):
        mem.transfer.import_(io.StringIO("\n".join(lines) + "\n"))
    assert mem.backend.stats() == before
