"""The GraphBackend contract: every backend must pass this very file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graphmem.backends.base import GraphBackend, WriteBatch
from graphmem.errors import Conflict, DimensionMismatch, InvalidInput
from graphmem.models import (
    Agent,
    Edge,
    EdgeType,
    Filter,
    LogEntry,
    Memory,
    NodeLabel,
    NodeRef,
    OrgFact,
    OrgOperation,
    Payload,
    Range,
    Run,
    Tag,
    TextQuery,
    VectorQuery,
    node_model,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def memory(content: str, **kw: object) -> Memory:
    kw.setdefault("created_at", T0)
    return Memory(content=content, **kw)  # type: ignore[arg-type]


def test_protocol_is_implemented(backend: GraphBackend) -> None:
    assert isinstance(backend, GraphBackend)


def test_every_node_type_round_trips_exactly(backend: GraphBackend) -> None:
    m = memory(
        "Alice prefers tea",
        agent_id="a1",
        run_id="r1",
        namespace="ns",
        tags=["prefs", "drinks"],
        metadata={
            "source": "chat",
            "n": 3,
            "ratio": 0.25,
            "ok": True,
            "list": [1, 2],
            "nested": {"a": [1, {"b": 2}]},
        },
        embedding=[0.1, 0.2, 0.3],
        importance=0.7,
        confidence=0.9,
        event_type="user_message",
        seq=4,
        expires_at=T0 + timedelta(days=3),
        last_accessed=T0 + timedelta(hours=1),
    )
    agent = Agent(id="a1", name="Assistant", seniority="senior", created_at=T0)
    run = Run(id="r1", agent_id="a1", user_id="u1", started_at=T0)
    fact = OrgFact(fact_id="f1", content="Use UTC", author="a1", tags=["time"], created_at=T0)
    op = OrgOperation(fact_id="f1", operation="publish", version=1, author="a1", at=T0)
    log_entry = LogEntry(agent_id="a1", event_type="tool_call", at=T0, payload='{"x": 1}')
    payload = Payload(id="ab" * 32, text="big", size=3, refcount=2)
    backend.ensure_schema(embedding_dim=3)
    backend.write(WriteBatch(nodes=[agent, run, m, fact, op, log_entry, payload]))
    for node in (m, agent, run, fact, op, log_entry, payload, Tag(id="prefs")):
        [got] = backend.get(node_model(node.label), [node.id])
        assert got == node, node.label
    [got] = backend.get(Memory, [m.id])
    assert isinstance(got, Memory)
    assert got.metadata["nested"] == '{"a": [1, {"b": 2}]}'
    assert got.created_at.tzinfo is not None


def test_get_keeps_order_and_skips_missing(backend: GraphBackend) -> None:
    a, b = memory("one"), memory("two")
    backend.write(WriteBatch(nodes=[a, b]))
    got = backend.get(Memory, [b.id, "missing", a.id])
    assert [n.id for n in got] == [b.id, a.id]


def test_structural_edges_are_maintained(backend: GraphBackend) -> None:
    backend.write(
        WriteBatch(nodes=[Agent(id="a1", name="Keep me", seniority="lead", created_at=T0)])
    )
    m = memory("tagged", agent_id="a1", run_id="r9", tags=["x", "y"])
    backend.write(WriteBatch(nodes=[m]))
    st = backend.stats()
    assert st.nodes["Agent"] == 1 and st.nodes["Run"] == 1 and st.nodes["Tag"] == 2
    assert st.edges["AUTHORED_BY"] == 1 and st.edges["IN_RUN"] == 1 and st.edges["TAGGED"] == 2
    [agent] = backend.get(Agent, ["a1"])
    assert agent.name == "Keep me"  # not overwritten
    backend.write(WriteBatch(nodes=[m.evolve(tags=["y"])]))
    sub = backend.expand([m.ref], [EdgeType.TAGGED], direction="out")
    assert {n.id for n in sub.nodes if n.label is NodeLabel.TAG} == {"y"}
    assert backend.stats().edges["TAGGED"] == 1
    run_sub = backend.expand([NodeRef(NodeLabel.RUN, "r9")], [EdgeType.RUN_BY], direction="out")
    assert NodeRef(NodeLabel.AGENT, "a1") in {n.ref for n in run_sub.nodes}


def test_edge_to_missing_node_is_rejected_and_nothing_written(backend: GraphBackend) -> None:
    a = memory("exists")
    backend.write(WriteBatch(nodes=[a]))
    before = backend.stats()
    b = memory("new in the failing batch")
    bad = Edge(type=EdgeType.DERIVED_FROM, src=b.ref, dst=(NodeLabel.MEMORY, "nope"))
    with pytest.raises(InvalidInput):
        backend.write(WriteBatch(nodes=[b], edges=[bad]))
    assert backend.stats() == before
    assert backend.get(Memory, [b.id]) == []


def test_edges_upsert_replaces_props_and_delete_detaches(backend: GraphBackend) -> None:
    a, b = memory("source"), memory("derived")
    backend.write(
        WriteBatch(
            nodes=[a, b],
            edges=[Edge(type=EdgeType.DERIVED_FROM, src=b, dst=a, props={"pass": "x"})],
        )
    )
    backend.write(
        WriteBatch(
            nodes=[],
            edges=[Edge(type=EdgeType.DERIVED_FROM, src=b, dst=a, props={"pass": "y", "at": T0})],
        )
    )
    sub = backend.expand([b.ref], [EdgeType.DERIVED_FROM], direction="out")
    assert [e.props for e in sub.edges] == [{"pass": "y", "at": T0}]
    backend.write(WriteBatch(delete_nodes=[a.ref]))
    assert backend.get(Memory, [a.id]) == []
    assert backend.stats().edges.get("DERIVED_FROM", 0) == 0
    before = backend.stats()
    backend.write(WriteBatch(delete_nodes=[a.ref]))  # already gone: a no-op, not an error
    assert backend.stats() == before
    assert backend.search_text(TextQuery(text="source")) == []


def test_delete_single_edge(backend: GraphBackend) -> None:
    a, b = memory("first"), memory("second")
    e = Edge(type=EdgeType.NEXT, src=a, dst=b)
    backend.write(WriteBatch(nodes=[a, b], edges=[e]))
    backend.write(WriteBatch(delete_edges=[e]))
    assert backend.stats().edges.get("NEXT", 0) == 0
    assert len(backend.get(Memory, [a.id, b.id])) == 2


def test_match_filters_order_and_pages(backend: GraphBackend) -> None:
    ms = [
        memory(
            f"memory {i}",
            agent_id=f"a{i % 3}",
            namespace="even" if i % 2 == 0 else "odd",
            tags=["t"] + (["special"] if i % 4 == 0 else []),
            importance=i / 10,
            created_at=T0 + timedelta(days=i),
            metadata={"k": i % 2},
        )
        for i in range(10)
    ]
    backend.write(WriteBatch(nodes=ms))
    by = lambda **kw: {m.id for m in backend.match(Memory, Filter.for_memories(**kw))}  # noqa: E731
    assert by(agent_id="a1") == {m.id for m in ms if m.agent_id == "a1"}
    assert by(agent_id=["a1", "a2"], namespace="even") == {
        m.id for m in ms if m.agent_id in ("a1", "a2") and m.namespace == "even"
    }
    assert by(tags=["t", "special"]) == {m.id for m in ms if "special" in m.tags}
    assert by(since=T0 + timedelta(days=7)) == {m.id for m in ms[7:]}
    assert by(until=T0 + timedelta(days=1)) == {m.id for m in ms[:2]}
    assert by(metadata={"k": 1}) == {m.id for m in ms if m.metadata["k"] == 1}
    imp = Filter(ranges=(Range(field="importance", gt=0.25, lte=0.5),))
    assert {m.id for m in backend.match(Memory, imp)} == {m.id for m in ms[3:6]}
    page = backend.match(
        Memory, Filter(), order_by="created_at", descending=True, limit=3, offset=2
    )
    assert [m.id for m in page] == [m.id for m in ms[7:4:-1]]
    assert backend.count(Filter.for_memories(namespace="odd")) == 5
    missing = Filter(ranges=(Range(field="valid_to", gt=T0, or_missing=True),))
    assert backend.count(missing) == 10
    assert backend.count(Filter(equals={"valid_to": None})) == 10


def test_match_rejects_unknown_fields(backend: GraphBackend) -> None:
    with pytest.raises(ValueError):
        Filter(equals={"no_such_field": 1})
    with pytest.raises(InvalidInput):
        backend.match(Memory, Filter(), order_by="content) DETACH DELETE n //")


def test_text_search_ranks_and_filters_before_top_k(backend: GraphBackend) -> None:
    noise = [memory(f"tea tea tea party number {i}", agent_id="other") for i in range(60)]
    mine = [memory(f"I sometimes drink tea ({i})", agent_id="me") for i in range(5)]
    backend.write(WriteBatch(nodes=noise + mine + [memory("coffee only", agent_id="me")]))
    scoped = Filter.for_memories(agent_id="me")
    hits = backend.search_text(TextQuery(text="tea", k=5, filter=scoped))
    assert {h.node.id for h in hits} == {m.id for m in mine}
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    all_hits = backend.search_text(TextQuery(text="tea party", k=3))
    assert all(h.node.agent_id == "other" for h in all_hits)
    assert backend.search_text(TextQuery(text="zebra")) == []
    assert backend.search_text(TextQuery(text="!!! ??")) == []


def test_text_search_sees_new_words_after_a_miss(backend: GraphBackend) -> None:
    backend.write(WriteBatch(nodes=[memory("an ordinary memory")]))
    assert backend.search_text(TextQuery(text="zebra")) == []
    z = memory("a zebra crossed the road")
    backend.write(WriteBatch(nodes=[z]))
    assert [h.node.id for h in backend.search_text(TextQuery(text="zebra"))] == [z.id]


def test_text_search_stems_and_ignores_case(backend: GraphBackend) -> None:
    m = memory("Alice is Running marathons")
    backend.write(WriteBatch(nodes=[m]))
    assert [h.node.id for h in backend.search_text(TextQuery(text="run marathon"))] == [m.id]


def test_vector_search_cosine_and_filters(backend: GraphBackend) -> None:
    backend.ensure_schema(embedding_dim=3)
    near = [memory(f"near {i}", agent_id="other", embedding=[1, 0.01 * i, 0]) for i in range(30)]
    far = [memory(f"far {i}", agent_id="me", embedding=[0, 1, 0.1 * i]) for i in range(4)]
    backend.write(WriteBatch(nodes=near + far))
    hits = backend.search_vector(VectorQuery(vector=(1, 0, 0), k=3))
    assert [h.node.id for h in hits] == [m.id for m in near[:3]]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    scoped = backend.search_vector(
        VectorQuery(vector=(1, 0, 0), k=4, filter=Filter.for_memories(agent_id="me"))
    )
    assert {h.node.id for h in scoped} == {m.id for m in far}
    with pytest.raises(DimensionMismatch):
        backend.search_vector(VectorQuery(vector=(1, 0), k=3))
    with pytest.raises(DimensionMismatch):
        backend.write(WriteBatch(nodes=[memory("wrong dim", embedding=[1, 2])]))
    with pytest.raises(DimensionMismatch):
        backend.ensure_schema(embedding_dim=5)


def test_vector_removed_when_node_deleted(backend: GraphBackend) -> None:
    a = memory("a", embedding=[1, 0])
    b = memory("b", embedding=[0.9, 0.1])
    backend.write(WriteBatch(nodes=[a, b]))
    backend.write(WriteBatch(delete_nodes=[a.ref]))
    hits = backend.search_vector(VectorQuery(vector=(1, 0), k=5))
    assert [h.node.id for h in hits] == [b.id]


def test_expand_directions_and_depth(backend: GraphBackend) -> None:
    a, b, c = memory("a"), memory("b"), memory("c")
    backend.write(
        WriteBatch(
            nodes=[a, b, c],
            edges=[Edge(type=EdgeType.NEXT, src=a, dst=b), Edge(type=EdgeType.NEXT, src=b, dst=c)],
        )
    )
    ids = lambda sub: {n.id for n in sub.nodes}  # noqa: E731
    assert ids(backend.expand([a.ref], [EdgeType.NEXT], direction="out", depth=1)) == {a.id, b.id}
    assert ids(backend.expand([a.ref], [EdgeType.NEXT], direction="out", depth=2)) == {
        a.id,
        b.id,
        c.id,
    }
    assert ids(backend.expand([a.ref], [EdgeType.NEXT], direction="in", depth=2)) == {a.id}
    both = backend.expand([b.ref], [EdgeType.NEXT], direction="both")
    assert ids(both) == {a.id, b.id, c.id} and len(both.edges) == 2
    assert ids(backend.expand([a.ref], [EdgeType.SUPERSEDES], depth=3)) == {a.id}


def test_touch_counts_accesses(backend: GraphBackend) -> None:
    a = memory("a")
    backend.write(WriteBatch(nodes=[a]))
    at = T0 + timedelta(days=1)
    backend.touch([a.id, a.id, "missing"], at)
    backend.touch([a.id], at + timedelta(hours=1))
    [got] = backend.get(Memory, [a.id])
    assert got.access_count == 2
    assert got.last_accessed == at + timedelta(hours=1)
    assert got.content == "a"


def test_scan_yields_everything(backend: GraphBackend) -> None:
    ms = [memory(f"m{i}", tags=["t"]) for i in range(25)]
    backend.write(
        WriteBatch(
            nodes=ms, edges=[Edge(type=EdgeType.NEXT, src=ms[i], dst=ms[i + 1]) for i in range(24)]
        )
    )
    nodes, edges = [], []
    for ns, es in backend.scan(batch_size=7):
        assert len(ns) <= 7 and len(es) <= 7
        nodes += ns
        edges += es
    assert len(nodes) == 25 + 1 + 1  # memories, the default agent, the tag
    assert sum(1 for e in edges if e.type is EdgeType.NEXT) == 24
    assert len(edges) == 24 + 25 + 25


CRAFTED = [
    "quote ' and \" here",
    "back`tick`s",
    "})] MATCH (n) DETACH DELETE n //",
    "// comment",
    "$param {format} %s \\n \\u0000x",
    "unicode ✓ — 中文 😀",
]


@pytest.mark.parametrize("text", CRAFTED)
def test_crafted_strings_are_stored_verbatim(backend: GraphBackend, text: str) -> None:
    bystander = memory("bystander")
    backend.write(WriteBatch(nodes=[bystander]))
    m = Memory(
        content=text,
        agent_id=text.strip()[:200] or "x",
        tags=["ok"],
        metadata={text: text},
        created_at=T0,
    )
    backend.write(WriteBatch(nodes=[m]))
    [got] = backend.get(Memory, [m.id])
    assert got == m
    assert backend.count(Filter.for_memories(agent_id=m.agent_id)) == 1
    assert backend.count(Filter.for_memories(metadata={text: text})) == 1
    assert backend.get(Memory, [bystander.id]) == [bystander]
    backend.search_text(TextQuery(text=text))  # must not raise
    assert backend.stats().nodes["Memory"] == 2


def test_structural_edges_can_be_given_only_when_implied(backend: GraphBackend) -> None:
    m = memory("tagged", agent_id="a1", tags=["x"])
    implied = Edge(type=EdgeType.TAGGED, src=m, dst=(NodeLabel.TAG, "x"))
    backend.write(WriteBatch(nodes=[m], edges=[implied]))  # as an import or a migration passes them
    assert backend.stats().edges["TAGGED"] == 1
    backend.write(WriteBatch(nodes=[Tag(id="y")]))
    with pytest.raises(InvalidInput):
        backend.write(
            WriteBatch(
                nodes=[], edges=[Edge(type=EdgeType.TAGGED, src=m, dst=(NodeLabel.TAG, "y"))]
            )
        )
    backend.write(WriteBatch(nodes=[m.evolve(tags=[])]))
    assert backend.stats().edges.get("TAGGED", 0) == 0


@pytest.mark.parametrize("head", [(-1, None), (True, None), (2.0, None), (2, 7)])
def test_a_bad_run_head_is_refused_and_nothing_written(
    backend: GraphBackend, head: tuple[object, object]
) -> None:
    backend.write(WriteBatch(nodes=[Run(id="r1", agent_id="a")]))
    with pytest.raises(InvalidInput, match="run 'r1'"):
        backend.write(
            WriteBatch(nodes=[memory("later", id="m1")], run_heads={"r1": head})  # type: ignore[dict-item]
        )
    [run] = backend.get(Run, ["r1"])
    assert (run.event_count, run.last_event_id) == (0, None)
    assert backend.get(Memory, ["m1"]) == []


def _next_pairs(backend: GraphBackend, ids: list[str]) -> set[tuple[str, str]]:
    refs = [NodeRef(NodeLabel.MEMORY, i) for i in ids]
    sub = backend.expand(refs, [EdgeType.NEXT], direction="out")
    return {(e.src.id, e.dst.id) for e in sub.edges if e.type is EdgeType.NEXT}


def test_a_batch_names_its_new_memories_and_links_once(backend: GraphBackend) -> None:
    """``new_memories``: each must not exist (Conflict, nothing written); ``links``: NEXT
    edges between memories, refused like any edge when an end is missing or deleted."""
    backend.write(WriteBatch(nodes=[memory("one", id="m1")]))
    two, three = memory("two", id="m2"), memory("three", id="m3")
    backend.write(
        WriteBatch(
            nodes=[two, three], new_memories=["m2", "m3"], links=[("m1", "m2"), ("m2", "m3")]
        )
    )
    assert _next_pairs(backend, ["m1", "m2", "m3"]) == {("m1", "m2"), ("m2", "m3")}
    before = backend.stats()
    with pytest.raises(Conflict, match="precondition"):
        backend.write(WriteBatch(nodes=[memory("four", id="m4")], new_memories=["m4", "m2"]))
    four, gone = memory("four", id="m4"), [NodeRef(NodeLabel.MEMORY, "m1")]
    for links, delete in (
        ([("m4", "nope")], []),
        ([("m4", "m4")], []),
        ([("m1", "m4")], gone),
        ([("m4", 7)], []),
    ):
        with pytest.raises(InvalidInput):
            backend.write(
                WriteBatch(
                    nodes=[four],
                    new_memories=["m4"],
                    links=links,  # type: ignore[arg-type]
                    delete_nodes=delete,
                )
            )
    assert backend.stats() == before
    assert backend.get(Memory, ["m4"]) == []
    assert _next_pairs(backend, ["m1", "m2", "m3"]) == {("m1", "m2"), ("m2", "m3")}


def test_a_batch_appending_to_runs_names_what_each_run_must_still_be(
    backend: GraphBackend,
) -> None:
    """``appends``: each run as the writer last saw it (or absent), and the memory its new
    links start from; one that does not hold refuses the whole batch (Conflict), a
    malformed one is InvalidInput; nothing written either way."""
    run = Run(id="r1", agent_id="a", namespace="ns", event_count=2, last_event_id="m1")
    backend.write(WriteBatch(nodes=[run, memory("one", id="m1", run_id="r1", agent_id="a")]))
    state = (2, "m1", "a", "ns")
    before = backend.stats()
    later = memory("two", id="m2", run_id="r1", agent_id="a", namespace="ns")
    for appends in (
        [("r1", (3, "m1", "a", "ns"), "m1")],
        [("r1", (2, "m9", "a", "ns"), "m1")],
        [("r1", (2, "m1", "b", "ns"), "m1")],
        [("r1", (2, "m1", "a", "default"), "m1")],
        [("r1", state, "gone")],
        [("r1", None, "m1")],
        [("r1", state, "m1"), ("r2", state, None)],
    ):
        with pytest.raises(Conflict, match="precondition"):
            backend.write(WriteBatch(nodes=[later], appends=appends, links=[("m1", "m2")]))
    for bad in (("r1", state), ("r1", (2, "m1"), "m1"), (1, None, None), ("r1", state, 1)):
        with pytest.raises(InvalidInput):
            backend.write(WriteBatch(nodes=[later], appends=[bad]))  # type: ignore[list-item]
    assert backend.stats() == before
    assert backend.get(Memory, ["m2"]) == []
    backend.write(
        WriteBatch(
            nodes=[later, Run(id="r2", agent_id="a")],
            appends=[("r1", state, "m1"), ("r2", None, None)],
            links=[("m1", "m2")],
            run_heads={"r1": (2, "m2")},
        )
    )
    [stored] = backend.get(Run, ["r1"])
    assert (stored.event_count, stored.last_event_id) == (2, "m2")
    assert _next_pairs(backend, ["m1"]) == {("m1", "m2")}
