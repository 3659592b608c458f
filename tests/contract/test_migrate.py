"""Migration between backends (networkx -> networkx here; the Neo4j round trip lives in
tests/neo4j/test_neo4j_live.py and uses the same graph)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from graphmem.backends.base import GraphBackend, WriteBatch
from graphmem.backends.embedded import NetworkXBackend
from graphmem.errors import Conflict, InvalidInput
from graphmem.migrate import MigrationMismatch, MigrationReport, migrate
from graphmem.models import (
    Agent,
    Edge,
    EdgeType,
    Entity,
    LogEntry,
    Memory,
    Namespace,
    NodeLabel,
    OrgFact,
    OrgOperation,
    Payload,
    Run,
)

pytestmark = pytest.mark.embedded(
    "networkx to networkx between store files, reopened from disk "
    "(the Neo4j round trip: tests/neo4j/test_neo4j_live.py)"
)

T0 = datetime(2025, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)


def populate(backend: GraphBackend) -> None:
    """A graph with every node label and every edge type, structural ones included."""
    backend.ensure_schema(embedding_dim=4)
    agents = [
        Agent(id="lead", name="Lead", seniority="lead", autonomy=3, created_at=T0),
        Agent(id="coder", name="Coder", created_at=T0, metadata={"team": "core"}),
    ]
    run = Run(
        id="run-1",
        agent_id="coder",
        user_id="alice",
        app_name="ide",
        started_at=T0,
        metadata={"cfg": {"temperature": 0.2}},
    )
    events = [
        Memory(
            content=f"event {i}: the user asked about tea",
            agent_id="coder",
            run_id="run-1",
            category="episodic",
            event_type="user_message",
            created_at=T0 + timedelta(seconds=i),
            tags=["chat"],
            embedding=[1.0, 0.1 * i, 0.0, 0.5],
        )
        for i in range(4)
    ]
    facts = [
        Memory(
            content="Alice prefers green tea",
            agent_id="coder",
            tags=["prefs", "alice"],
            importance=0.8,
            metadata={
                "source": "chat",
                "n": 3,
                "list": [1, 2],
                "nested": {"a": [1, {"b": 2}]},
                "odd key: ' `": "v",
            },
            created_at=T0,
            embedding=[0.0, 1.0, 0.0, 0.0],
            expires_at=T0 + timedelta(days=30),
        ),
        # run_id of a run that is never upserted: the backend creates it with defaults
        Memory(
            content="A note in another run",
            agent_id="lead",
            run_id="run-auto",
            created_at=T0,
            namespace="team",
        ),
    ]
    old = Memory(
        content="Alice prefers tea",
        agent_id="coder",
        created_at=T0,
        status="superseded",
        valid_to=T0 + timedelta(days=1),
    )
    summary = Memory(
        content="Summary of the chat",
        agent_id="coder",
        category="summary",
        created_at=T0 + timedelta(minutes=5),
    )
    fact_v1 = OrgFact(
        id="fact-1-v1",
        fact_id="fact-1",
        content="Use UTC",
        author="lead",
        tags=["time"],
        created_at=T0,
        status="superseded",
    )
    fact_v2 = OrgFact(
        id="fact-1-v2",
        fact_id="fact-1",
        version=2,
        content="Use UTC always",
        author="lead",
        tags=["time", "policy"],
        created_at=T0,
        core=True,
    )
    op = OrgOperation(
        id="op-1",
        fact_id="fact-1",
        operation="publish",
        version=2,
        author="lead",
        at=T0,
        reason="clarified",
    )
    payload = Payload(id="ab" * 32, text="a large tool result", size=19, refcount=1)
    log_parent = LogEntry(
        id="log-1",
        agent_id="coder",
        event_type="tool_call",
        run_id="run-1",
        step=1,
        at=T0,
        payload='{"tool": "search"}',
        payload_size=18,
    )
    log_child = LogEntry(
        id="log-2",
        agent_id="coder",
        event_type="tool_result",
        run_id="run-1",
        step=2,
        at=T0,
        payload_ref=payload.id,
        payload_size=19,
    )
    ns = Namespace(id="team", owner="lead", members=["coder", "lead"], created_at=T0)
    alice = Entity(
        id="ent-alice",
        name="Alice",
        norm="alice",
        type="person",
        aliases=["Ali"],
        first_seen=T0,
        last_seen=T0,
        mention_count=2,
        agent_id="coder",
    )
    tea = Entity(
        id="ent-tea",
        name="green tea",
        norm="green tea",
        type="object",
        first_seen=T0,
        last_seen=T0,
        mention_count=1,
        agent_id="coder",
    )
    backend.write(
        WriteBatch(
            nodes=[
                *agents,
                run,
                *events,
                *facts,
                old,
                summary,
                fact_v1,
                fact_v2,
                op,
                payload,
                log_parent,
                log_child,
                ns,
                alice,
                tea,
            ],
            edges=[
                *(Edge(type=EdgeType.NEXT, src=events[i], dst=events[i + 1]) for i in range(3)),
                Edge(
                    type=EdgeType.SUPERSEDES,
                    src=facts[0],
                    dst=old,
                    props={"reason": "more precise", "at": T0 + timedelta(days=1)},
                ),
                Edge(type=EdgeType.SUPERSEDES, src=fact_v2, dst=fact_v1, props={"at": T0}),
                *(
                    Edge(
                        type=EdgeType.DERIVED_FROM, src=summary, dst=e, props={"pass": "summarize"}
                    )
                    for e in events
                ),
                Edge(type=EdgeType.RECORDS, src=op, dst=fact_v2),
                Edge(type=EdgeType.REFERENCES, src=log_child, dst=payload),
                Edge(type=EdgeType.CHILD_OF, src=log_child, dst=log_parent),
                Edge(type=EdgeType.MENTIONS, src=facts[0], dst=alice),
                Edge(type=EdgeType.MENTIONS, src=facts[0], dst=tea),
                Edge(
                    type=EdgeType.RELATES,
                    src=alice,
                    dst=tea,
                    props={"predicate": "prefers", "memory_id": facts[0].id, "valid_from": T0},
                ),
            ],
        )
    )


def snapshot(backend: GraphBackend) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """Every node (by label:id) and every edge (key and properties) of a store."""
    nodes: dict[str, Any] = {}
    edges: list[tuple[Any, ...]] = []
    for ns, es in backend.scan(batch_size=5):
        for n in ns:
            assert n.ref.key not in nodes, f"{n.ref.key} scanned twice"
            nodes[n.ref.key] = n
        edges += [(e.key, tuple(sorted(e.props.items()))) for e in es]
    return nodes, sorted(edges)


@pytest.fixture
def source(tmp_path: Path) -> Iterator[NetworkXBackend]:
    b = NetworkXBackend(tmp_path / "src.db")
    populate(b)
    yield b
    b.close()


def test_the_test_graph_has_every_label_and_edge_type(source: NetworkXBackend) -> None:
    st = source.stats()
    assert set(st.nodes) == {label.value for label in NodeLabel}
    assert set(st.edges) == {t.value for t in EdgeType}


def test_round_trip_is_exact_and_reports_progress(source: NetworkXBackend, tmp_path: Path) -> None:
    calls: list[tuple[str, int, int]] = []
    dst_path = tmp_path / "dst.db"
    report = migrate(
        source,
        str(dst_path),
        batch_size=3,
        progress=lambda stage, done, total: calls.append((stage, done, total)),
    )
    assert isinstance(report, MigrationReport)
    assert report.verified and report.mismatches == {}
    assert report.nodes_copied == sum(source.stats().nodes.values())
    assert report.destination_nodes == report.source_nodes
    assert report.destination_edges == report.source_edges
    with closing(NetworkXBackend(dst_path)) as dst:  # reopened from the file: durable
        assert snapshot(dst) == snapshot(source)
        assert dst.stats().embedding_dim == 4
    node_calls = [c for c in calls if c[0] == "nodes"]
    assert [d for _s, d, _t in node_calls] == sorted(d for _s, d, _t in node_calls)
    assert node_calls[-1][1] == node_calls[-1][2] == report.nodes_copied
    edge_calls = [c for c in calls if c[0] == "edges"]
    assert edge_calls[-1][1] == edge_calls[-1][2] == report.edges_copied
    assert calls[-1] == ("verify", 1, 1)


def test_rerun_is_idempotent(source: NetworkXBackend, tmp_path: Path) -> None:
    dst = str(tmp_path / "dst.db")
    first = migrate(source, dst, batch_size=4)
    second = migrate(source, dst, batch_size=7)
    assert first.verified and second.verified
    assert second.destination_nodes == first.destination_nodes
    assert second.destination_edges == first.destination_edges
    with closing(NetworkXBackend(dst)) as back:
        assert snapshot(back) == snapshot(source)


def test_an_interrupted_migration_completes_when_run_again(
    source: NetworkXBackend, tmp_path: Path
) -> None:
    dst = str(tmp_path / "dst.db")

    def stop_after_two_batches(stage: str, done: int, total: int) -> None:
        if done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate(source, dst, batch_size=2, progress=stop_after_two_batches)
    with closing(NetworkXBackend(dst)) as partial:
        assert 0 < sum(partial.stats().nodes.values()) < sum(source.stats().nodes.values())
    report = migrate(source, dst, batch_size=2)
    assert report.verified
    with closing(NetworkXBackend(dst)) as back:
        assert snapshot(back) == snapshot(source)


def test_dry_run_writes_nothing(source: NetworkXBackend, tmp_path: Path) -> None:
    dst = str(tmp_path / "dst.db")
    report = migrate(source, dst, dry_run=True)
    assert report.dry_run and report.nodes_copied == 0 and not report.verified
    assert report.batches > 0
    with closing(NetworkXBackend(dst)) as back:
        assert back.stats().nodes == {}


def test_count_mismatch_is_a_conflict_with_the_report(
    source: NetworkXBackend, tmp_path: Path
) -> None:
    dst = str(tmp_path / "dst.db")
    with closing(NetworkXBackend(dst)) as back:
        back.write(WriteBatch(nodes=[Memory(content="already there", agent_id="someone-else")]))
    with pytest.raises(MigrationMismatch, match="node:Memory") as info:
        migrate(source, dst)
    assert isinstance(info.value, Conflict)
    report = info.value.report
    assert report.mismatches["node:Memory"][1] == report.mismatches["node:Memory"][0] + 1
    lenient = migrate(source, dst, strict=False)
    assert not lenient.verified and "node:Agent" in lenient.mismatches


def test_refuses_same_store_and_bad_arguments(source: NetworkXBackend, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        migrate(source, source)
    path = str(tmp_path / "x.db")
    with pytest.raises(InvalidInput):
        migrate(path, path)
    with pytest.raises(InvalidInput):
        migrate(source, str(tmp_path / "y.db"), batch_size=0)
    with pytest.raises(InvalidInput):
        migrate(source, "ftp://nowhere")


def test_cli_migrate_command(source: NetworkXBackend, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from graphmem.cli import app

    source.checkpoint()
    src = str(tmp_path / "src.db")
    dst = str(tmp_path / "cli-dst.db")
    result = CliRunner().invoke(app, ["migrate", src, dst, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["verified"] is True and data["mismatches"] == {}
    with closing(NetworkXBackend(dst)) as back:
        assert snapshot(back) == snapshot(source)
