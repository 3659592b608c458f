"""Backend contract for what issue 6 stores: Namespace nodes, the Memory audience filter,
and the structural edges of log entries and org facts — run against every backend."""

from __future__ import annotations

from datetime import UTC, datetime

from graphmem.backends.base import GraphBackend
from graphmem.models import (
    Agent,
    EdgeType,
    Filter,
    LogEntry,
    Memory,
    Namespace,
    NodeLabel,
    OrgFact,
    TextQuery,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_namespace_round_trips(backend: GraphBackend) -> None:
    ns = Namespace(id="team-a", owner="p", members=["q", "p", "r"], created_at=T0)
    backend.upsert([ns])
    [got] = backend.get(NodeLabel.NAMESPACE, ["team-a"])
    assert got == ns and got.members == ("p", "q", "r")  # type: ignore[attr-defined]
    backend.upsert([ns.evolve(members=["p"])])
    assert backend.get(NodeLabel.NAMESPACE, ["team-a"])[0].members == ("p",)  # type: ignore[attr-defined]
    assert backend.count(Filter(label=NodeLabel.NAMESPACE)) == 1
    assert backend.delete([ns.ref]) == 1


def test_audience_filter_in_every_search(backend: GraphBackend) -> None:
    backend.ensure_schema(embedding_dim=2)
    mems = [
        Memory(content="blue whale", agent_id="a", embedding=[1, 0], created_at=T0),
        Memory(content="blue sky", agent_id="b", embedding=[1, 0.1], created_at=T0),
        Memory(
            content="blue team",
            agent_id="b",
            namespace="t",
            visibility="shared",
            embedding=[1, 0.2],
            created_at=T0,
        ),
        Memory(
            content="blue note", agent_id="c", visibility="org", embedding=[1, 0.3], created_at=T0
        ),
    ]
    backend.upsert(mems)
    assert [m.audience for m in mems] == ["agent:a", "agent:b", "ns:t", "org"]
    flt = Filter(any_of={"audience": ("agent:a", "ns:t")})
    assert {m.id for m in backend.match(flt)} == {mems[0].id, mems[2].id}
    assert {h.node.id for h in backend.search_text(TextQuery(text="blue", filter=flt))} == {
        mems[0].id,
        mems[2].id,
    }
    none = Filter(any_of={"audience": ()})
    assert backend.match(none) == [] and backend.count(none) == 0
    assert backend.search_text(TextQuery(text="blue", filter=none)) == []


def test_log_entries_and_org_facts_have_structural_edges(backend: GraphBackend) -> None:
    e = LogEntry(agent_id="bot", event_type="tool_call", run_id="r1", at=T0)
    backend.upsert([e])
    [run] = backend.get(NodeLabel.RUN, ["r1"])  # created with defaults
    assert run.agent_id == "bot"  # type: ignore[attr-defined]
    sub = backend.expand([e.ref], [EdgeType.IN_RUN], direction="out")
    assert [x.dst.id for x in sub.edges] == ["r1"]
    backend.upsert([e.evolve(run_id="r2")])  # the edge follows the field
    sub = backend.expand([e.ref], [EdgeType.IN_RUN], direction="out")
    assert [x.dst.id for x in sub.edges] == ["r2"]
    backend.upsert([Agent(id="cto", seniority="human", created_at=T0)])
    f = OrgFact(fact_id="f", content="c", author="cto", created_at=T0)
    backend.upsert([f])
    sub = backend.expand([f.ref], [EdgeType.AUTHORED_BY], direction="out")
    assert [x.dst.id for x in sub.edges] == ["cto"]
    assert backend.get(NodeLabel.AGENT, ["cto"])[0].seniority == "human"  # type: ignore[attr-defined]
