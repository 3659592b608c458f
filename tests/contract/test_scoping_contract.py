"""Backend contract for what issue 6 stores: Namespace nodes, the Memory audience filter,
and the structural edges of log entries and org facts — run against every backend."""

from __future__ import annotations

from datetime import UTC, datetime

from graphmem.backends.base import GraphBackend, WriteBatch
from graphmem.models import (
    Agent,
    EdgeType,
    Filter,
    LogEntry,
    Memory,
    Namespace,
    NodeLabel,
    OrgFact,
    Run,
    TextQuery,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_namespace_round_trips(backend: GraphBackend) -> None:
    ns = Namespace(id="team-a", owner="p", members=["q", "p", "r"], created_at=T0)
    backend.write(WriteBatch(nodes=[ns]))
    [got] = backend.get(Namespace, ["team-a"])
    assert got == ns and got.members == ("p", "q", "r")
    backend.write(WriteBatch(nodes=[ns.evolve(members=["p"])]))
    assert backend.get(Namespace, ["team-a"])[0].members == ("p",)
    assert backend.count(Filter(label=NodeLabel.NAMESPACE)) == 1
    backend.write(WriteBatch(delete_nodes=[ns.ref]))
    assert backend.get(Namespace, ["team-a"]) == []


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
    backend.write(WriteBatch(nodes=mems))
    assert [m.audience for m in mems] == ["agent:a", "agent:b", "ns:t", "org"]
    flt = Filter(any_of={"audience": ("agent:a", "ns:t")})
    assert {m.id for m in backend.match(Memory, flt)} == {mems[0].id, mems[2].id}
    assert {h.node.id for h in backend.search_text(TextQuery(text="blue", filter=flt))} == {
        mems[0].id,
        mems[2].id,
    }
    none = Filter(any_of={"audience": ()})
    assert backend.match(Memory, none) == [] and backend.count(none) == 0
    assert backend.search_text(TextQuery(text="blue", filter=none)) == []


def test_log_entries_and_org_facts_have_structural_edges(backend: GraphBackend) -> None:
    e = LogEntry(agent_id="bot", event_type="tool_call", run_id="r1", at=T0)
    backend.write(WriteBatch(nodes=[e]))
    [run] = backend.get(Run, ["r1"])  # created with defaults
    assert run.agent_id == "bot"  # type: ignore[attr-defined]
    sub = backend.expand([e.ref], [EdgeType.IN_RUN], direction="out")
    assert [x.dst.id for x in sub.edges] == ["r1"]
    backend.write(WriteBatch(nodes=[e.evolve(run_id="r2")]))  # the edge follows the field
    sub = backend.expand([e.ref], [EdgeType.IN_RUN], direction="out")
    assert [x.dst.id for x in sub.edges] == ["r2"]
    backend.write(WriteBatch(nodes=[Agent(id="cto", seniority="human", created_at=T0)]))
    f = OrgFact(fact_id="f", content="c", author="cto", created_at=T0)
    backend.write(WriteBatch(nodes=[f]))
    sub = backend.expand([f.ref], [EdgeType.AUTHORED_BY], direction="out")
    assert [x.dst.id for x in sub.edges] == ["cto"]
    assert backend.get(Agent, ["cto"])[0].seniority == "human"  # type: ignore[attr-defined]
