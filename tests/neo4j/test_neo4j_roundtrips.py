"""What the Neo4j backend sends, without a server: the statements of each operation and
its round-trip budget (remember 1, recall <= 2, a batch of N <= ceil(N / batch_rows) + 1),
preconditions checked first in the write's own transaction, access records deferred to
the next write, and misspelled options refused. The recording driver is
tests/neo4j/fake_driver.py; the live tests (test_neo4j_live.py) run the same statements on
a real server."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import neo4j
import numpy as np
import pytest

from graphmem.backends import open_backend
from graphmem.backends.base import Expect, VectorQueue, WriteBatch
from graphmem.backends.neo4j import Neo4jBackend, compose
from graphmem.backends.neo4j.expansion import COSINE_PROBE
from graphmem.backends.neo4j.queries import strip_literals
from graphmem.backends.neo4j.values import META_PAIRS
from graphmem.config import RecallConfig
from graphmem.errors import BackendUnavailable, Conflict, InvalidInput, QueryFailed
from graphmem.memory import GraphMemory
from graphmem.models import (
    METADATA_PREFIX,
    Edge,
    EdgeType,
    Filter,
    Memory,
    NodeLabel,
    NodeRef,
    Run,
    Status,
    TextQuery,
    VectorQuery,
)
from tests.neo4j.fake_driver import SPEC, FakeDriver, guard_failure, schema_rows, server_error


def _put(backend: Any, nodes: Any) -> None:
    """Store ``nodes`` through the one write entry."""
    backend.write(WriteBatch(nodes=list(nodes)))


T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _backend(driver: FakeDriver, **options: Any) -> Neo4jBackend:
    b = Neo4jBackend("bolt://127.0.0.1:7687", driver=driver, **options)
    b.ensure_schema()  # first use: connect, version, schema (not part of any budget)
    driver.recorder.reset()
    return b


@pytest.fixture
def fake() -> FakeDriver:
    return FakeDriver()


@pytest.fixture
def neo(fake: FakeDriver) -> Iterator[Neo4jBackend]:
    b = _backend(fake, touch_flush_s=3600)
    yield b
    b.close()


def test_the_fake_driver_has_the_real_api() -> None:
    """Every method the fake offers exists on the real driver class and accepts the
    parameters the fake declares (so the backend cannot rely on an API that does not
    exist)."""
    for fake_cls, real_name in SPEC:
        real = getattr(neo4j, real_name)
        for name, member in inspect.getmembers(fake_cls, inspect.isfunction):
            if name.startswith("_") and name not in ("__iter__", "__enter__", "__exit__"):
                continue
            assert hasattr(real, name), f"neo4j.{real_name} has no {name}"
            fake_params = set(inspect.signature(member).parameters) - {"self"}
            real_sig = inspect.signature(getattr(real, name))
            real_params = set(real_sig.parameters) - {"self"}
            has_var_kw = any(p.kind is p.VAR_KEYWORD for p in real_sig.parameters.values())
            for p in fake_params:
                kind = inspect.signature(member).parameters[p].kind
                if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                    continue
                assert p in real_params or has_var_kw, f"neo4j.{real_name}.{name} has no {p}"


# -- first use --------------------------------------------------------------------------


def test_first_use_connects_once_before_any_transaction() -> None:
    fake = FakeDriver()
    b = Neo4jBackend("bolt://127.0.0.1:7687", driver=fake)
    b.count(Filter())
    assert fake.recorder.events[0] == "verify"  # one bounded attempt, no retry loop
    assert fake.recorder.names()[0] == "admin/components"
    fake.recorder.reset()
    b.count(Filter())
    assert "verify" not in fake.recorder.events and fake.recorder.names() == ["count"]


@pytest.mark.parametrize("known", [False, True])
def test_first_use_makes_the_lock_property_known_on_a_new_database(known: bool) -> None:
    """The guards lock by removing a property no node has, which Neo4j skips, lock and all,
    while the database has never seen the name: first use asks, in the version check's
    transaction, and makes the name known (no node written) only where it is new."""
    from graphmem.backends.neo4j.queries import LOCK_PROPERTY

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        return [{"known": known}] if name == "admin/property_key_known" else None

    fake = FakeDriver(respond)
    Neo4jBackend("bolt://127.0.0.1:7687", driver=fake).ensure_schema()
    names = fake.recorder.names()
    asked = next(s for s in fake.recorder.statements if s.name == "admin/property_key_known")
    version = next(s for s in fake.recorder.statements if s.name == "admin/components")
    assert asked.tx == version.tx and asked.params == {"key": LOCK_PROPERTY}
    made = [s for s in fake.recorder.statements if s.name == "admin/create_property_key"]
    assert len(made) == (0 if known else 1)
    if made:
        assert made[0].params == {"key": LOCK_PROPERTY}
        assert fake.recorder.transactions[made[0].tx].mode == "write"
        assert names.index("admin/create_property_key") < names.index("admin/show_indexes")


def test_the_vector_index_is_the_servers_quantized_one_unless_asked_otherwise() -> None:
    for version, quantization, expected in (
        ("5.26.0", True, "schema/memory_embedding_vector"),
        ("5.26.0", False, "schema/memory_embedding_vector_exact"),
        ("5.18.1", False, "schema/memory_embedding_vector"),  # no such option before 5.23
    ):
        fake = FakeDriver(version=version)
        b = _backend(fake, vector_quantization=quantization)
        b.ensure_schema(embedding_dim=4)
        assert expected in fake.recorder.names()
        created = next(s for s in fake.recorder.statements if s.name == expected)
        assert ("quantization.enabled`: false" in created.text) is expected.endswith("_exact")
    with pytest.raises(InvalidInput, match="vector_quantization"):
        Neo4jBackend("bolt://127.0.0.1:7687", driver=FakeDriver(), vector_quantization="no")


def test_a_vector_search_asks_the_index_for_at_least_100_neighbours(fake: FakeDriver) -> None:
    """60 neighbours of a quantized index missed some of the exact top 30 on hard data;
    100 found them all (benchmarks/RESULTS.md, issue 19)."""
    neo = _backend(fake)
    assert neo._vector_fetch(10) == 100 and neo._vector_fetch(30) == 100
    assert neo._vector_fetch(80) == 160


def _fulltext_rows(eventual: bool | None, dim: int | None = None) -> Any:
    """A responder whose SHOW INDEXES has the full-text index refreshed behind commits
    (True), at commit (False), or not at all (None: the first use makes it), and a vector
    index of ``dim`` dimensions."""

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name != "admin/show_indexes":
            return None
        rows = [r for r in schema_rows(dim)[name] if r["name"] != "memory_fulltext"]
        if eventual is None:
            return rows
        config = {"fulltext.analyzer": "english", "fulltext.eventually_consistent": eventual}
        return [
            *rows,
            {
                "name": "memory_fulltext",
                "type": "FULLTEXT",
                "state": "ONLINE",
                "options": {"indexConfig": config},
            },
        ]

    return respond


def test_an_eventual_full_text_index_is_made_only_when_asked() -> None:
    for refresh, made in (
        ("background", "schema/memory_fulltext_eventual"),
        ("commit", "schema/memory_fulltext"),
    ):
        fake = FakeDriver(_fulltext_rows(None))
        Neo4jBackend("bolt://127.0.0.1:7687", driver=fake, fulltext_refresh=refresh).ensure_schema()
        names = fake.recorder.names()
        created = [n for n in names if n.startswith("schema/memory_fulltext")]
        assert created == [made], names
        text = next(s.text for s in fake.recorder.statements if s.name == made)
        assert ("eventually_consistent" in text) is (refresh == "background")
    with pytest.raises(InvalidInput, match="fulltext_refresh"):
        Neo4jBackend("bolt://127.0.0.1:7687", driver=FakeDriver(), fulltext_refresh="later")


@pytest.mark.parametrize("refresh", ["commit", "background"])
@pytest.mark.parametrize("eventual", [True, False])
def test_a_handle_waits_for_an_eventual_full_text_index_after_its_own_writes_only(
    refresh: str, eventual: bool
) -> None:
    """With the full-text index updated behind commits (as the server reports it, whatever
    this handle asked), the first lexical search after a memory write waits for the index
    in the same read transaction; the next one and a vector-only write do not. A store
    whose index is updated at commit never waits."""
    fake = FakeDriver(_fulltext_rows(eventual, dim=2), dim=2)
    neo = _backend(fake, fulltext_refresh=refresh, touch_flush_s=3600)
    flt = Filter.for_memories()

    def searched() -> list[str]:
        fake.recorder.reset()
        neo.search_text(TextQuery(text="tea", k=5, filter=flt))
        neo.search_both(
            TextQuery(text="tea", k=5, filter=flt),
            VectorQuery(vector=[1.0, 0.0], k=5, filter=flt),
        )
        return [n for n in fake.recorder.names() if "search" in n or "await" in n]

    assert searched() == ["search/text (bounded)", "recall search"]
    _put(neo, [Memory(id="m1", content="tea", created_at=T0)])
    after = searched()
    if eventual:
        assert after == ["admin/await_fulltext", "search/text (bounded)", "recall search"]
        reads = [t for t in fake.recorder.transactions if t.mode == "read"]
        assert [s.name for s in reads[0].statements][:1] == ["admin/await_fulltext"]
    else:
        assert after == ["search/text (bounded)", "recall search"]
    neo.write(WriteBatch(vectors={"m1": [1.0, 0.0]}))
    assert searched() == ["search/text (bounded)", "recall search"]
    neo.close()


def test_a_store_with_the_content_only_full_text_index_moves_to_the_scoped_one() -> None:
    """An older store has ``memory_content_fulltext`` (content only): the first use creates
    the index with the scope fields, awaits it, then drops the old one (a write then
    updates one Lucene index); a store without it sends no drop."""

    def older(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name != "admin/show_indexes":
            return None
        rows = [r for r in schema_rows(None)[name] if r["name"] != "memory_fulltext"]
        return [*rows, {"name": "memory_content_fulltext", "type": "FULLTEXT", "state": "ONLINE"}]

    fake = FakeDriver(older)
    Neo4jBackend("bolt://127.0.0.1:7687", driver=fake).ensure_schema()
    names = fake.recorder.names()
    assert names.index("schema/memory_fulltext") < names.index("admin/await_indexes")
    assert names.index("admin/await_indexes") < names.index("schema/memory_content_fulltext_drop")
    fresh = FakeDriver()
    Neo4jBackend("bolt://127.0.0.1:7687", driver=fresh).ensure_schema()
    assert "schema/memory_content_fulltext_drop" not in fresh.recorder.names()


# -- options ----------------------------------------------------------------------------


def test_misspelled_options_are_refused_with_a_hint() -> None:
    with pytest.raises(InvalidInput, match=r"connection_timout.*connection_timeout"):
        Neo4jBackend("bolt://localhost:7687", connection_timout=2)
    with pytest.raises(InvalidInput, match="retries"):
        open_backend("bolt://localhost:7687", retries=3)
    with pytest.raises(InvalidInput):
        Neo4jBackend("bolt://localhost:7687", retry_s=-1)
    # real driver options and the backend's own are accepted, and nothing connects
    b = Neo4jBackend(
        "bolt://localhost:7687", max_connection_pool_size=5, retry_s=0.5, connect_timeout_s=1
    )
    assert b._driver is None
    b.close()


def test_an_unreachable_server_is_one_bounded_attempt_with_a_typed_error() -> None:
    """A real driver against a closed local port, with the backend's default budget: the
    first use fails in the connectivity check (no transaction retry loop)."""
    backend = Neo4jBackend("bolt://127.0.0.1:1", auth=("neo4j", "pw"))
    with pytest.raises(BackendUnavailable, match="cannot reach Neo4j"):
        backend.count(Filter())
    with pytest.raises(BackendUnavailable):
        backend.write(WriteBatch(nodes=[Memory(content="x")]))
    backend.close()


# -- writes -----------------------------------------------------------------------------


def test_remember_is_one_statement_in_one_transaction(neo: Neo4jBackend, fake: FakeDriver) -> None:
    neo.write(
        WriteBatch(
            nodes=[
                Memory(
                    content="Alice prefers tea", agent_id="a", run_id="r1", tags=["drinks", "prefs"]
                )
            ]
        )
    )
    assert len(fake.recorder.statements) == 1
    (tx,) = fake.recorder.transactions
    assert tx.mode == "write" and tx.outcome == "committed"
    st = tx.statements[0]
    assert st.name == "write nodes/hubs + nodes/memory_upsert"
    # the hubs go once per batch; the memory row only names them
    assert st.params["p0_agents"] == ["a"] and st.params["p0_tags"] == ["drinks", "prefs"]
    assert [r["id"] for r in st.params["p0_runs"]] == ["r1"]
    row = st.params["p1_rows"][0]
    assert row["agent"] == "a" and row["run"] == "r1" and row["tags"] == ["drinks", "prefs"]


def test_remember_through_graphmemory_is_one_round_trip(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    # the memory's own write; the knowledge layer's entity write is measured below
    mem = GraphMemory(neo, embedder=None, owns_backend=False, knowledge=False)
    # reconciling with similar memories reads the store first (its own budget); the write
    # itself is one statement
    options = (
        {"reconcile": "off"} if "reconcile" in inspect.signature(mem.remember).parameters else {}
    )
    mem.remember("Alice prefers tea", agent_id="a", **options)
    assert len(fake.recorder.statements) == 1, fake.recorder.names()
    assert len(fake.recorder.writes()) == 1


def test_remember_with_reconcile_on_is_one_round_trip(neo: Neo4jBackend, fake: FakeDriver) -> None:
    """Reconcile's exact-duplicate lookup travels inside the write (an index seek that
    stops the statement when a duplicate exists): a new memory is one statement in one
    transaction, with reconcile at its default (on)."""
    mem = GraphMemory(neo, embedder=None, owns_backend=False, knowledge=False)
    written = mem.remember("the 3 kettles are blue", agent_id="a", namespace="home")
    assert fake.recorder.names() == [
        "write guard absent + nodes/hubs + nodes/memory_upsert (create)"
    ]
    (tx,) = fake.recorder.transactions
    assert tx.mode == "write" and tx.outcome == "committed"
    (st,) = tx.statements
    guard = st.text[: st.text.index("CREATE (m:Memory")]
    assert "OPTIONAL MATCH (n:Memory)" in guard and "1 / CASE WHEN found = 0" in guard
    # the duplicate's scope and content are parameters of the guard
    assert {written.content_hash, "a", "home", "active"} <= set(
        v for k, v in st.params.items() if k.startswith("p0_")
    )
    assert mem.last_reconcile is not None and mem.last_reconcile.action == "created"


@pytest.mark.parametrize("run_id", [None, "s1"])
def test_a_duplicate_found_by_the_write_guard_is_reconciled_by_reading(
    neo: Neo4jBackend, fake: FakeDriver, run_id: str | None
) -> None:
    """When the guard finds an exact duplicate, nothing is written; reconcile then reads
    as before and returns the existing memory. In a run too: a duplicate is not another
    writer's append to the run, so the write is refused once, not ordered and sent again."""
    old = Memory(content="the 3 kettles are blue", agent_id="a", run_id=run_id)

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name.startswith("write guard absent"):
            raise guard_failure()
        if name == "match":
            return [{"props": old.to_props()}]
        if name == "nodes/memory_get":
            return [{"id": old.id, "eid": "e1", "props": old.to_props()}]
        return None

    fake.respond = respond
    mem = GraphMemory(neo, embedder=None, owns_backend=False, knowledge=False)
    again = mem.remember("the 3 kettles are blue", agent_id="a", run_id=run_id)
    assert again.id == old.id
    assert mem.last_reconcile is not None and mem.last_reconcile.action == "duplicate"
    refused = [t for t in fake.recorder.writes() if t.statements[0].name.startswith("write")]
    assert [t.outcome for t in refused] == ["rolled back"], fake.recorder.names()
    assert not [
        t for t in fake.recorder.transactions if t.outcome == "committed" and t.mode == "write"
    ]


@pytest.mark.parametrize(("n", "batch_rows"), [(10_000, 1000), (10_000, 5000), (2500, 1000)])
def test_a_batch_is_at_most_ceil_n_over_batch_plus_one_statements(n: int, batch_rows: int) -> None:
    fake = FakeDriver()
    neo = _backend(fake, batch_rows=batch_rows)
    ms = [
        Memory(
            content=f"m{i}",
            agent_id=f"a{i % 20}",
            run_id=f"r{i % 7}",
            tags=[f"t{i % 50}"],
            created_at=T0 + timedelta(seconds=i),
        )
        for i in range(n)
    ]
    edges = [Edge(type=EdgeType.NEXT, src=ms[i], dst=ms[i + 1]) for i in range(n - 1)]
    neo.write(WriteBatch(nodes=ms))
    assert len(fake.recorder.statements) == math.ceil(n / batch_rows)
    assert len(fake.recorder.transactions) == 1
    hubs = fake.recorder.statements[0].params
    assert len(hubs["p0_agents"]) == 20 and len(hubs["p0_tags"]) == 50  # once, not per row
    sent = [
        r["id"]
        for s in fake.recorder.statements
        for k, v in s.params.items()
        if k.endswith("_rows")
        for r in v
    ]
    assert sorted(sent) == sorted(m.id for m in ms)
    fake.recorder.reset()
    neo.write(
        WriteBatch(nodes=ms, edges=edges)
    )  # relationships after the nodes, in the same transaction
    assert len(fake.recorder.statements) <= math.ceil(n / batch_rows) + math.ceil(
        (n - 1) / batch_rows
    )
    assert len(fake.recorder.transactions) == 1
    names = [s.name for s in fake.recorder.statements]
    first_edge = next(i for i, nm in enumerate(names) if "next_upsert" in nm)
    assert all("memory_upsert" not in nm for nm in names[first_edge + 1 :])


def test_remember_many_through_graphmemory_keeps_the_batch_budget() -> None:
    fake = FakeDriver()
    neo = _backend(fake, batch_rows=1000)
    mem = GraphMemory(neo, embedder=None, owns_backend=False, knowledge=False)
    mem.remember_many([{"content": f"memory {i}", "agent_id": f"a{i % 3}"} for i in range(3000)])
    assert len(fake.recorder.statements) <= math.ceil(3000 / 1000) + 1, fake.recorder.names()


def test_the_knowledge_layer_writes_entities_in_one_more_transaction(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    """With the knowledge layer on (opt-in), a remember that names an entity costs the
    memory's write, the entity write after it (a second transaction), and the reads that
    resolve the name against the store (the scope's entities once per process, then the
    named ones)."""
    mem = GraphMemory(neo, embedder=None, owns_backend=False, knowledge=True)
    mem.remember("Yesterday I met Alice in Paris", agent_id="a", reconcile="off")
    assert len(fake.recorder.writes()) == 2, fake.recorder.names()
    assert len(fake.recorder.statements) <= 4, fake.recorder.names()


def test_statements_carry_values_only_as_parameters() -> None:
    crafted = "'}) MATCH (n) DETACH DELETE n //"
    neo = Neo4jBackend("bolt://localhost:7687")
    m = Memory(
        content=crafted,
        agent_id=crafted,
        run_id=crafted,
        tags=["a//b"],
        metadata={crafted: crafted},
    )
    other = Memory(content="x")
    for st in neo.plan_writes([m, other], [Edge(type=EdgeType.NEXT, src=m, dst=other)]):
        assert crafted not in st.text
        used = set(re.findall(r"\$([A-Za-z_]\w*)", strip_literals(st.text)))
        assert used == set(st.params)


def test_compose_keeps_parts_in_order_and_counts_edges() -> None:
    text, params = compose(
        [
            ("UNWIND $rows AS row\nMERGE (n:Agent {id: row})", {"rows": ["a"]}),
            (
                "UNWIND $rows AS row\nMATCH (a:Memory {id: row.src})\n"
                "MATCH (b:Memory {id: row.dst})\n"
                "MERGE (a)-[r:NEXT]->(b)",
                {"rows": [{"src": "x", "dst": "y"}]},
            ),
        ],
        counted=[1],
    )
    assert params == {"p0_rows": ["a"], "p1_rows": [{"src": "x", "dst": "y"}]}
    assert text.index("$p0_rows") < text.index("WITH count(*) AS c0") < text.index("$p1_rows")
    assert text.endswith("WITH count(*) AS c1\nRETURN c1")


def test_an_edge_to_a_missing_node_writes_nothing(neo: Neo4jBackend, fake: FakeDriver) -> None:
    m = Memory(content="a")

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name.startswith("write ") and "next_upsert" in name:
            return [{f"c{i}": 0 for i in range(4)}]  # no node at the other end
        return None

    fake.respond = respond
    with pytest.raises(InvalidInput, match="missing node Memory:gone"):
        neo.write(
            WriteBatch(
                nodes=[m], edges=[Edge(type=EdgeType.NEXT, src=m, dst=(NodeLabel.MEMORY, "gone"))]
            )
        )
    assert fake.recorder.transactions[-1].outcome == "rolled back"


def test_preconditions_travel_in_the_write_statement_and_a_broken_one_is_named(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    old = Memory(content="Alice lives in Oslo", agent_id="a")
    new = Memory(content="Alice lives in Paris", agent_id="a")
    expect = Expect(
        ref=old.ref,
        props={"status": Status.ACTIVE, "valid_to": None},
        incoming=(EdgeType.SUPERSEDES,),
        sources=frozenset(),
    )
    batch = WriteBatch(
        nodes=[old.evolve(status=Status.SUPERSEDED), new],
        edges=[Edge(type=EdgeType.SUPERSEDES, src=new, dst=old)],
        expect=[expect],
    )
    neo.write(batch)  # an update: one round trip, guard first
    (tx,) = fake.recorder.transactions
    (st,) = tx.statements
    assert st.name.startswith("write guard Memory + nodes/hubs + nodes/memory_upsert")
    assert (
        st.text.index("REMOVE l._graphmem_lock")
        < st.text.index("OPTIONAL MATCH (n:Memory")
        < st.text.index("1 / CASE")
        < st.text.index("MERGE (m:Memory")
    )  # locked, then checked, then written
    assert st.params["p0_rows"] == [
        {
            "id": old.id,
            "exists": True,
            "props": {"status": "active"},
            "nulls": ["valid_to"],
            "types": ["SUPERSEDES"],
            "sources": [],
        }
    ]

    stored = {**old.to_props(), "status": "superseded"}  # another writer got there first

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name.startswith("write guard"):
            raise guard_failure()
        if name == "check":
            return [{"label": "Memory", "id": old.id, "props": stored, "sources": []}]
        return None

    fake.respond = respond
    fake.recorder.reset()
    with pytest.raises(Conflict, match="status"):
        neo.write(batch)
    first, diagnosis = fake.recorder.transactions
    assert first.outcome == "rolled back"
    assert [s.name for s in diagnosis.statements] == ["check"]
    assert "REMOVE n._graphmem_lock" in diagnosis.statements[0].text
    # the lock is taken without writing a property (no record written and deleted per node)
    assert "_graphmem_lock =" not in st.text + diagnosis.statements[0].text

    stored["status"] = "active"

    def derived(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name.startswith("write guard"):
            raise guard_failure()
        if name == "check":
            return [
                {
                    "label": "Memory",
                    "id": old.id,
                    "props": stored,
                    "sources": [{"type": "SUPERSEDES", "id": "someone-else"}],
                }
            ]
        return None

    fake.respond = derived
    with pytest.raises(Conflict, match="changed since it was read"):
        neo.write(batch)


def test_a_batch_of_new_memories_creates_their_edges_instead_of_merging_them(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    """remember_many into runs: the new memories, their structural edges and the NEXT
    edges that end at them are CREATEd (a MERGE of an edge reads the other end's edges,
    a Run's hundreds); nothing removes stale edges a new node cannot have; an existing
    memory written with them is still MERGEd, its stale edges removed. One statement."""
    mem = GraphMemory(neo, embedder=None)
    first = mem.remember_many([{"content": "a", "run_id": "r1", "tags": ["t"]}])[0]
    fake.recorder.reset()
    mem.remember_many([{"content": f"m{i}", "run_id": "r1", "tags": ["t"]} for i in range(3)])
    write = next(s for s in fake.recorder.statements if s.name.startswith("write"))
    assert "nodes/memory_upsert (create)" in write.name
    assert "edges/next_upsert (create)" in write.name
    created = write.text.split("CREATE (m:Memory {id: row.id})", 1)[1]
    for edge in ("AUTHORED_BY", "IN_RUN", "TAGGED", "NEXT"):
        assert f"CREATE (m)-[:{edge}]->" in created or f"CREATE (a)-[r:{edge}]->" in created
        assert f"MERGE (m)-[:{edge}]" not in created and f"MERGE (a)-[r:{edge}]" not in created
    assert "FOREACH (stale" not in created and "REMOVE m:Unvectored" not in created
    # a created edge's properties are added: its empty map is not written again
    next_part = created.split("CREATE (a)-[r:NEXT]->(b)", 1)[1]
    assert next_part.lstrip().startswith("SET r += row.props")
    fake.recorder.reset()
    neo.write(WriteBatch(nodes=[first.evolve(tags=["u"])]))
    (update,) = fake.recorder.statements
    assert "MERGE (m:Memory {id: row.id})" in update.text
    assert "FOREACH (stale" in update.text and "MERGE (m)-[:TAGGED]" in update.text


def test_a_new_node_is_created_so_that_a_concurrent_creator_conflicts(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    m = Memory(content="x")
    neo.write(WriteBatch(nodes=[m], expect=[Expect(ref=m.ref, exists=False)]))
    (st,) = fake.recorder.statements
    assert st.name == "write nodes/hubs + nodes/memory_upsert (create)"  # no guard row
    assert "\nCREATE (m:Memory {id: row.id})\n" in st.text and "MERGE (m:Memory" not in st.text

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if "(create)" in name:  # another writer committed the same id first
            from neo4j.exceptions import Neo4jError

            raise Neo4jError._hydrate_neo4j(
                code="Neo.ClientError.Schema.ConstraintValidationFailed",
                message=f"Node(1) already exists with label `Memory` and property `id` = '{m.id}'",
            )
        return None

    fake.respond = respond
    with pytest.raises(Conflict, match="already exists"):
        neo.write(WriteBatch(nodes=[m], expect=[Expect(ref=m.ref, exists=False)]))
    assert fake.recorder.transactions[-1].outcome == "rolled back"


def test_a_guard_reads_incoming_edges_only_for_a_precondition_on_sources() -> None:
    """remember_many checks each run's counters (event_count, last_event_id): the guard
    does not read the run's incoming edges (hundreds of IN_RUN) for that; a precondition
    naming the sources of a node still gets them."""
    from graphmem.backends.neo4j.writes import compile_guard, guard_rows

    run = NodeRef(NodeLabel.RUN, "r1")
    rows = guard_rows([Expect(run, props={"event_count": 3})])[NodeLabel.RUN]
    assert rows[0]["sources"] is None
    text, _params = compile_guard(NodeLabel.RUN, rows)
    assert "CASE WHEN n IS NULL OR row.sources IS NULL THEN []" in text
    memory = NodeRef(NodeLabel.MEMORY, "m1")
    derived = [Expect(memory, incoming=[EdgeType.DERIVED_FROM], sources=["m0"])]
    assert guard_rows(derived)[NodeLabel.MEMORY][0]["sources"] == ["m0"]


def test_a_hub_that_must_not_exist_is_guarded(neo: Neo4jBackend, fake: FakeDriver) -> None:
    """Runs, Agents and Tags are also MERGEd as hubs by other writes: checked by the guard."""
    run = Run(id="r1", agent_id="a", started_at=T0)
    neo.write(WriteBatch(nodes=[run], expect=[Expect(ref=run.ref, exists=False)]))
    (st,) = fake.recorder.statements
    assert st.name == "write guard Run + nodes/hubs + nodes/run_upsert"
    assert st.params["p0_rows"][0]["exists"] is False

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name.startswith("write guard"):
            raise guard_failure()
        if name == "check":
            return [{"label": "Run", "id": run.id, "props": run.to_props(), "sources": []}]
        return None

    fake.respond = respond
    with pytest.raises(Conflict, match="must not exist"):
        neo.write(WriteBatch(nodes=[run], expect=[Expect(ref=run.ref, exists=False)]))


def test_one_write_cannot_upsert_and_delete_a_node(neo: Neo4jBackend, fake: FakeDriver) -> None:
    m = Memory(content="x")
    with pytest.raises(InvalidInput):
        neo.write(WriteBatch(nodes=[m], delete_nodes=[m.ref]))
    with pytest.raises(InvalidInput, match="missing node"):
        neo.write(
            WriteBatch(
                nodes=[m],
                edges=[Edge(type=EdgeType.NEXT, src=m, dst=(NodeLabel.MEMORY, "d"))],
                delete_nodes=[NodeRef(NodeLabel.MEMORY, "d")],
            )
        )
    assert fake.recorder.statements == []


# -- deferred access records ------------------------------------------------------------


def test_touch_is_deferred_and_rides_on_the_next_write(neo: Neo4jBackend, fake: FakeDriver) -> None:
    m = Memory(content="x", created_at=T0)
    fake.respond = lambda name, text, params: (
        [{"id": m.id, "eid": "4:x:1", "props": m.to_props()}]
        if name == "nodes/memory_get"
        else None
    )
    neo.touch([m.id], T0 + timedelta(days=1))
    neo.touch([m.id, m.id], T0 + timedelta(days=2))
    assert fake.recorder.statements == [] and neo.pending_touches() == 1
    (got,) = neo.get(Memory, [m.id])  # this process sees its own accesses
    assert got.access_count == 2 and got.last_accessed == T0 + timedelta(days=2)
    fake.recorder.reset()
    neo.write(WriteBatch(nodes=[Run(id="r", agent_id="a", started_at=T0)]))
    (st,) = fake.recorder.statements
    assert st.name.startswith("write nodes/touch + ")
    assert st.params["p0_rows"] == [{"id": m.id, "count": 2, "at": T0 + timedelta(days=2)}]
    assert neo.pending_touches() == 0


def test_a_retryable_failure_runs_the_transaction_again_within_retry_s(fake: FakeDriver) -> None:
    """A deadlock the server broke (or a lost leader) is retried, the session closed between
    attempts; the failed attempt was rolled back, the second committed."""
    neo = _backend(fake, initial_retry_delay=0.001)
    fake.recorder.reset()
    fake.fail = server_error("Neo.TransientError.Transaction.DeadlockDetected", "deadlock")
    neo.write(WriteBatch(nodes=[Run(id="r", agent_id="a", started_at=T0)]))
    assert [t.outcome for t in fake.recorder.writes()] == ["rolled back", "committed"]
    assert fake.recorder.events.count("session") == 2


def test_a_read_of_one_statement_is_auto_commit_and_retried_as_a_transaction(
    fake: FakeDriver,
) -> None:
    """A one-statement read runs without an explicit transaction (one round trip, not
    BEGIN + statement + COMMIT), in a read session, and a retryable failure runs it again
    in a new session."""
    neo = _backend(fake, initial_retry_delay=0.001)
    fake.recorder.reset()
    fake.fail = server_error("Neo.TransientError.Transaction.DeadlockDetected", "deadlock")
    assert neo.count(Filter.for_memories()) == 0
    assert [(t.mode, t.access) for t in fake.recorder.transactions] == [("auto", "read")] * 2
    assert fake.recorder.names() == ["count", "count"]
    assert fake.recorder.events.count("session") == 2


def test_a_retryable_failure_past_retry_s_is_reported_not_retried(fake: FakeDriver) -> None:
    neo = _backend(fake, retry_s=0)
    fake.recorder.reset()
    fake.fail = server_error("Neo.TransientError.Transaction.DeadlockDetected", "deadlock")
    with pytest.raises(QueryFailed, match="transient"):
        neo.write(WriteBatch(nodes=[Run(id="r", agent_id="a", started_at=T0)]))
    assert [t.outcome for t in fake.recorder.writes()] == ["rolled back"]


def test_touches_survive_a_failed_write_and_are_written_at_close(fake: FakeDriver) -> None:
    neo = _backend(fake, touch_flush_s=3600, retry_s=0)  # no second attempt
    neo.touch(["m1"], T0)
    fake.fail = neo4j.exceptions.ServiceUnavailable("gone")
    with pytest.raises(BackendUnavailable):
        neo.write(WriteBatch(nodes=[Run(id="r", agent_id="a", started_at=T0)]))
    assert neo.pending_touches() == 1
    fake.recorder.reset()
    neo.close()
    assert fake.recorder.names() == ["nodes/touch"]
    assert fake.recorder.statements[0].params["rows"][0]["id"] == "m1"
    assert not fake.closed  # a driver passed in belongs to the caller


def test_touch_flushes_once_enough_are_pending(fake: FakeDriver) -> None:
    neo = _backend(fake, touch_flush_s=3600, touch_flush_rows=3)
    neo.touch(["a", "b"], T0)
    assert fake.recorder.statements == []
    neo.touch(["c"], T0)
    assert fake.recorder.names() == ["nodes/touch"] and neo.pending_touches() == 0
    neo2 = _backend(FakeDriver(), touch_flush_s=0)
    neo2.touch(["a"], T0)
    assert neo2.pending_touches() == 0


# -- recall -----------------------------------------------------------------------------


def _server_cosine(m: Memory, vector: Any) -> float | None:
    """What the server reports for ``vector.similarity.cosine``: (1 + cos) / 2."""
    if not m.embedding or not vector or len(vector) != len(m.embedding):
        return None
    a, b = np.asarray(m.embedding), np.asarray(vector)
    return float((1 + a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) / 2)


def _lean_props(m: Memory) -> dict[str, Any]:
    """A memory as a lean projection returns it (see ``props_projection``): every field but
    the embedding and the metadata by name, null when not stored, the metadata as pairs."""
    props = m.to_props()
    named = [name for name in Memory.model_fields if name not in ("embedding", "metadata")]
    row: dict[str, Any] = {name: props.get(name) for name in named}
    row[META_PAIRS] = [[k, v] for k, v in props.items() if k.startswith(METADATA_PREFIX)]
    return row


def _is_lean(text: str) -> bool:
    """Whether a statement projects memories without reading every property."""
    return META_PAIRS in text and ".*" not in text and "properties(n)" not in text


def test_a_lean_row_rebuilds_the_memory_without_its_embedding() -> None:
    """A lean projection names each field (``.*`` would read the embedding only to drop
    it): every field of the model but the embedding is named, and a row of that shape (null
    where nothing is stored, the metadata as pairs) rebuilds the memory it came from."""
    from graphmem.backends.neo4j.expansion import LEAN_PROPS
    from graphmem.backends.neo4j.values import node_from_db

    for name in Memory.model_fields:
        if name in ("embedding", "metadata"):
            assert f".{name}" not in LEAN_PROPS
        else:
            assert f".{name}," in LEAN_PROPS or f"{name}: toString(n.{name})" in LEAN_PROPS
    m = Memory(
        content="tea at five",
        agent_id="a",
        run_id="r1",
        tags=["tea"],
        metadata={"key": "D1:3", "n": 2},
        embedding=[1.0, 0.0],
        created_at=T0,
    )
    row = _lean_props(m)
    assert row["valid_to"] is None and row["event_type"] is None  # not stored: null
    got = node_from_db("Memory", row)
    assert got == m.model_copy(update={"embedding": None})
    assert got.metadata == {"key": "D1:3", "n": 2}


def _recall_server(
    memories: list[Memory],
    tagged: list[Memory],
    about: tuple[Memory, ...] = (),
    linked: Callable[[Memory], bool] = lambda m: True,
) -> Any:
    """Answers recall's two statements as the server would: a lean statement (its
    projections name their fields) gets memories without their embedding and each one's
    score against ``$vector`` as ``sim``; a search row says whether its memory has an edge
    the expansion could follow (``linked``)."""

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        lean = _is_lean(text)
        vector = params.get("vector")

        def found(m: Memory) -> dict[str, Any]:
            props = _lean_props(m) if lean else m.to_props()
            sim = _server_cosine(m, vector) if lean else None
            return {"props": props, "sim": sim, "linked": linked(m)}

        if name == "recall search":
            rows = [
                {
                    "channel": "lexical",
                    **found(m),
                    "score": 2.0 - i / 10,
                    "fetched": None,
                    "probe": 0.0 if lean else None,
                }
                for i, m in enumerate(memories)
            ]
            if "fetch" in params:
                rows += [
                    {
                        "channel": "vector",
                        **found(m),
                        "score": 0.9 - i / 100,
                        "fetched": len(memories),  # all the index had
                        "probe": 0.0,
                    }
                    for i, m in enumerate(memories)
                ]
            return rows
        if name == "recall expansion":
            return [
                {
                    "seed": s,
                    "linked": [],
                    "tagged": [found(t) for t in tagged],
                    "entities": [{"entity": "Alice", **found(m)} for m in about],
                    "probe": 0.0,
                }
                for s in params["seeds"][:1]
            ]
        return None

    return respond


def test_recall_is_at_most_two_round_trips_and_writes_nothing(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    hits = [Memory(content=f"alice drinks tea {i}", agent_id="a", tags=["tea"]) for i in range(5)]
    neighbour = Memory(content="the kettle is blue", agent_id="a", tags=["tea"])
    sister = Memory(content="Alice's sister visits on Sundays", agent_id="a")
    fake.respond = _recall_server(hits, [neighbour], (sister,))
    mem = GraphMemory(neo, embedder=None, owns_backend=False)
    results = mem.recall("what does alice drink", k=10)
    assert len(fake.recorder.statements) <= 2, fake.recorder.names()
    assert fake.recorder.names() == ["recall search", "recall expansion"]
    # each statement an auto-commit read: one network round trip (an explicit transaction
    # is three: BEGIN, the statement, COMMIT)
    assert [(t.mode, t.access, len(t.statements)) for t in fake.recorder.transactions] == [
        ("auto", "read", 1),
        ("auto", "read", 1),
    ]
    ids = [r.memory.id for r in results]
    assert set(ids) >= {h.id for h in hits} and neighbour.id in ids  # the expansion counted
    by_id = {r.memory.id: r for r in results}
    if sister.id in by_id:  # an entity hop, when the knowledge layer expands entities
        assert by_id[sister.id].breakdown.get("entity:Alice") == 1.0
    assert neo.pending_touches() == len(results)  # deferred, not a write on the read path
    fake.recorder.reset()
    mem.close()
    neo.close()
    assert fake.recorder.names() == ["nodes/touch"]


def test_recall_expands_only_the_seeds_with_an_edge_to_follow(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    """The search reports which memories have an edge the expansion follows; a seed with
    none is not sent, and with no such seed there is no expansion round trip at all."""
    hits = [Memory(content=f"alice drinks tea {i}", agent_id="a") for i in range(5)]
    mem = GraphMemory(neo, embedder=None, owns_backend=False)
    fake.respond = _recall_server(hits, [], linked=lambda m: False)
    alone = mem.recall("what does alice drink", k=10, touch=False)
    assert fake.recorder.names() == ["recall search"]
    (search,) = fake.recorder.statements
    assert "EXISTS { (n)-[:NEXT|DERIVED_FROM|TAGGED|MENTIONS]-() } AS linked" in search.text
    assert {r.memory.id for r in alone} == {h.id for h in hits}
    fake.recorder.reset()
    fake.respond = _recall_server(hits, [], linked=lambda m: m.id == hits[2].id)
    mem.recall("what does alice drink", k=10, touch=False)
    assert fake.recorder.names() == ["recall search", "recall expansion"]
    assert fake.recorder.statements[1].params["seeds"] == [hits[2].id]


def test_recall_leaves_embeddings_on_the_server_and_uses_its_cosines(fake: FakeDriver) -> None:
    """Recall's statements return no embedding (a 384-float list per row was most of the
    client's time); each memory's cosine to the query comes back instead and is the
    similarity recall ranks and filters by."""
    from graphmem.embeddings import HashEmbedder

    emb = HashEmbedder(32)
    texts = [f"alice drinks tea {i}" for i in range(5)]
    hits = [
        Memory(content=t, agent_id="a", tags=["tea"], embedding=list(v))
        for t, v in zip(texts, emb.embed(texts), strict=True)
    ]
    kettle = Memory(
        content="the kettle is blue",
        agent_id="a",
        tags=["tea"],
        embedding=list(emb.embed(["the kettle is blue"])[0]),
    )
    fake.dim = 32
    neo = _backend(fake, touch_flush_s=3600)
    fake.respond = _recall_server(hits, [kettle])
    mem = GraphMemory(neo, embedder=emb, owns_backend=False)
    mem.recall("warm-up", k=10, touch=False)  # a handle's first recall reads the model record
    assert fake.recorder.names()[0] == "admin/get_meta"
    fake.recorder.reset()
    results = mem.recall("what does alice drink", k=10, touch=False)
    assert fake.recorder.names() == ["recall search", "recall expansion"]
    for st in fake.recorder.statements:
        # every field named: `.*` would read the embedding too, only to drop it
        assert _is_lean(st.text) and not re.search(r"[{,] *\.embedding\b", st.text)
        # each memory's cosine, its embedding read once (each n.embedding reads it again)
        assert "[e IN [n.embedding] |" in st.text
        assert "vector.similarity.cosine(e, $vector)" in st.text
        cosines = st.text.count("vector.similarity.cosine(") - st.text.count(COSINE_PROBE)
        assert st.text.count("n.embedding") == cosines
    q = emb.embed(["what does alice drink"])[0]
    by_id = {r.memory.id: r for r in results}
    assert kettle.id in by_id  # the expansion's memory, scored by the server's cosine
    for m in [*hits, kettle]:
        if m.id in by_id:
            assert by_id[m.id].memory.embedding is None  # nothing crossed the wire
            cos = float(np.dot(m.embedding or (), q) / np.linalg.norm(m.embedding or ()))
            assert by_id[m.id].breakdown["similarity"] == pytest.approx(cos, abs=1e-5)
    fake.recorder.reset()
    mem.recall("what does alice drink", k=10, touch=False, config=RecallConfig(mmr=True))
    # MMR compares the memories' own vectors: then they are read
    assert not _is_lean(fake.recorder.statements[0].text)


def test_recall_topic_search_is_one_vector_statement_of_the_recall_search(
    fake: FakeDriver,
) -> None:
    """The topic channel (the question without the names most hits hold) searches by vector
    with recall's own vector statement, one round trip sized by the scope's count, not
    with search_vector's count of every memory the filter passes and then the index."""
    from graphmem.embeddings import HashEmbedder

    emb = HashEmbedder(32)
    texts = [f"Melanie: I went {w} today" for w in ("swimming", "painting", "running")]
    turns = [
        Memory(content=t, agent_id="a", embedding=list(v))
        for t, v in zip(texts, emb.embed(texts), strict=True)
    ]

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name != "recall search":
            return [] if name == "recall expansion" else None
        rows = [
            {"channel": "vector", "props": m.to_props(), "score": 0.9 - i / 100}
            for i, m in enumerate(turns)
        ]
        if "db.index.fulltext.queryNodes" in text:
            rows += [{"channel": "lexical", "props": m.to_props(), "score": 1.0} for m in turns]
        return [{"fetched": 3, "probe": 0.0, "sim": None, "linked": True, **r} for r in rows]

    fake.dim = 32
    fake.respond = respond
    mem = GraphMemory(_backend(fake), embedder=emb, owns_backend=False)
    mem.recall("warm-up", k=3, touch=False)
    fake.recorder.reset()
    question = "What activities does Melanie partake in?"
    cfg = RecallConfig(topic_weight=1.0, mmr=True)
    results = mem.recall(question, k=3, touch=False, agent_id="a", config=cfg)
    assert fake.recorder.names() == ["recall search", "recall search", "recall expansion"]
    topic = fake.recorder.statements[1]
    assert "db.index.fulltext.queryNodes" not in topic.text
    assert "COUNT {" in topic.text  # the agent's entries counted in its index
    assert topic.params["vector"] == pytest.approx(
        emb.embed(["What activities does partake in?"])[0]
    )
    assert all("topic" in r.breakdown for r in results)


def test_recall_topic_search_leaves_embeddings_on_the_server(fake: FakeDriver) -> None:
    """The topic channel's search (by the question without its names) returns no embedding
    either: each memory's cosine to the whole question comes back instead, computed on the
    server, and is the similarity recall ranks by."""
    from graphmem.embeddings import HashEmbedder

    emb = HashEmbedder(32)
    texts = [f"Melanie: I went {w} today" for w in ("swimming", "painting", "running")]
    turns = [
        Memory(content=t, agent_id="a", embedding=list(v))
        for t, v in zip(texts, emb.embed(texts), strict=True)
    ]
    topic_only = Memory(
        content="pottery class on Sunday",
        agent_id="a",
        embedding=list(emb.embed(["pottery class on Sunday"])[0]),
    )

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name != "recall search":
            return [] if name == "recall expansion" else None
        lean = _is_lean(text)
        target = params.get("similar", params["vector"])
        found = turns if "db.index.fulltext.queryNodes" in text else [*turns, topic_only]
        rows = []
        for i, m in enumerate(found):
            props = _lean_props(m) if lean else m.to_props()
            sim = _server_cosine(m, target) if lean else None
            rows.append({"channel": "vector", "props": props, "score": 0.9 - i / 100, "sim": sim})
        return [{"fetched": 4, "probe": 0.0, "linked": True, **r} for r in rows]

    fake.dim = 32
    fake.respond = respond
    mem = GraphMemory(_backend(fake), embedder=emb, owns_backend=False)
    mem.recall("warm-up", k=3, touch=False)
    fake.recorder.reset()
    question = "What activities does Melanie partake in?"
    cfg = RecallConfig(topic_weight=1.0, min_similarity=-1.0)
    results = mem.recall(question, k=4, touch=False, agent_id="a", config=cfg)
    assert fake.recorder.names() == ["recall search", "recall search", "recall expansion"]
    topic = fake.recorder.statements[1]
    assert _is_lean(topic.text)  # no embedding crosses the wire
    q = emb.embed([question])[0]
    topic_q = emb.embed(["What activities does partake in?"])[0]
    assert topic.params["vector"] == pytest.approx(topic_q)
    assert topic.params["similar"] == pytest.approx(q)  # the cosines are the question's
    by_id = {r.memory.id: r for r in results}
    assert topic_only.id in by_id and by_id[topic_only.id].memory.embedding is None
    v = np.asarray(topic_only.embedding)
    cos = float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))
    assert by_id[topic_only.id].breakdown["similarity"] == pytest.approx(cos, abs=1e-5)


def test_recall_search_runs_both_channels_in_one_statement(fake: FakeDriver) -> None:
    fake.dim = 2
    neo = _backend(fake)
    m = Memory(content="tea", embedding=[1.0, 0.0])
    fake.respond = _recall_server([m], [])
    flt = Filter.for_memories(agent_id="a")
    lexical, vector = neo.search_both(
        TextQuery(text="tea", filter=flt, k=5), VectorQuery(vector=(1.0, 0.0), filter=flt, k=1)
    )
    (st,) = fake.recorder.statements
    assert "db.index.fulltext.queryNodes" in st.text and "db.index.vector.queryNodes" in st.text
    assert "vector.similarity.cosine(n.embedding, $vector)" in st.text  # exact re-scoring
    assert st.params["fetch"] >= 10  # over-fetched from the index
    assert [h.node.id for h in lexical] == [m.id] == [h.node.id for h in vector]
    assert vector[0].score == pytest.approx(0.8)  # (1 + cos) / 2 = 0.9 -> cos 0.8


def test_neighbours_limit_each_seed_inside_the_query(neo: Neo4jBackend, fake: FakeDriver) -> None:
    neo.neighbours(["m1", "m2"], Filter.for_memories(agent_id="a"), tag_limit=8)
    (st,) = fake.recorder.statements
    collect = st.text[st.text.index("COLLECT {\n    MATCH (s)-[:TAGGED]") :]
    assert "LIMIT $tag_limit" in collect and st.params["tag_limit"] == 8
    assert "n.agent_id = $f" in collect  # the caller's scope applies inside the query
    fake.recorder.reset()
    neo.neighbours(["m1"], Filter.for_memories(agent_id="a"), tag_limit=8, entity_hub_limit=25)
    (st,) = fake.recorder.statements
    entities = st.text[st.text.index("MATCH (s)-[:MENTIONS]->(e)") :]
    assert "e.mention_count <= $entity_hub_limit" in entities
    assert "LIMIT $entity_limit" in entities and "n.agent_id = $f" in entities
    assert st.params["entity_hub_limit"] == 25 and st.params["entity_limit"] == 8


def test_vectors_alone_are_one_statement_that_keeps_other_properties(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    assert isinstance(neo, VectorQueue)
    fake.dim = 2
    neo.write(WriteBatch(vectors={"m1": [0.6, 0.8], "m2": (1.0, 0.0)}))
    (st,) = [s for s in fake.recorder.statements if s.name.startswith("write")]
    assert st.name == "write nodes/memory_vectors"
    assert "SET m.embedding = row.embedding" in st.text and "SET m = " not in st.text
    assert st.params["p0_rows"] == [
        {"id": "m1", "embedding": [0.6, 0.8]},
        {"id": "m2", "embedding": [1.0, 0.0]},
    ]
    with pytest.raises(InvalidInput):
        neo.write(WriteBatch(vectors={"m1": [float("nan"), 1.0]}))  # type: ignore[call-arg]


def test_every_vector_statement_rescores_exactly_and_reports_the_score_rule() -> None:
    from graphmem.backends.neo4j import (
        CYPHER_DIR,
        compile_recall_search,
        compile_vector_exact_search,
        compile_vector_index_search,
        parse_cypher,
    )

    flt = Filter.for_memories(agent_id="a")
    texts = [
        compile_vector_index_search(flt, [1.0, 0.0], 40, 5)[0],
        compile_vector_exact_search(flt, [1.0, 0.0], 5)[0],
        compile_recall_search(
            flt, lucene=None, text_k=0, vector=[1.0, 0.0], vector_fetch=100, vector_k=5
        )[0],
        parse_cypher((CYPHER_DIR / "search" / "vector.cypher").read_text()).text,
    ]
    for text in texts:
        assert "vector.similarity.cosine(" in text and "AS probe" in text
        assert re.search(r"ORDER BY score DESC", text)


def test_recall_search_branches_are_independent_with_the_same_columns() -> None:
    from graphmem.backends.neo4j import compile_recall_search

    text, params = compile_recall_search(
        Filter.for_memories(agent_id="a"),
        lucene='"tea"',
        text_k=5,
        vector=[1.0, 0.0],
        vector_fetch=100,
        vector_k=5,
    )
    branches = text.split("\nUNION ALL\n")
    assert len(branches) == 2  # an empty channel cannot empty the other

    def columns(branch: str) -> list[str]:
        tail = re.sub(r"\([^()]*\)", "", branch[branch.rindex("RETURN") + 6 :])
        items = re.sub(r"\{[^{}]*\}", "", tail).split(",")  # a map projection is one item
        return [item.split(" AS ")[-1].strip() for item in items]

    assert (
        columns(branches[0])
        == columns(branches[1])
        == ["channel", "props", "score", "fetched", "probe", "sim", "linked"]
    )
    assert set(re.findall(r"\$(\w+)", text)) == set(params)


def test_a_filtered_vector_search_reads_the_server_scores(fake: FakeDriver) -> None:
    fake.dim = 2
    neo = _backend(fake)
    m = Memory(content="x", agent_id="a", embedding=[0.6, 0.8])

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name == "vector plan":
            return [{"matched": 3, "total": 1000}]
        if name == "vector exact":
            return [{"props": m.to_props(), "score": 0.95, "probe": 0.0}]
        return None

    fake.respond = respond
    (hit,) = neo.search_vector(
        VectorQuery(vector=(1.0, 0.0), k=5, filter=Filter.for_memories(agent_id="a"))
    )
    assert fake.recorder.names() == ["vector plan", "vector exact"]
    assert hit.score == pytest.approx(0.9)  # no cosine recomputed here


def test_the_check_statement_returns_what_the_check_reads() -> None:
    from graphmem.backends.neo4j import compile_check

    m = Memory(content="x")
    text, params = compile_check(
        [Expect(ref=m.ref, incoming=(EdgeType.SUPERSEDES,), sources=frozenset())]
    )
    assert "RETURN 'Memory' AS label, n.id AS id, properties(n) AS props," in text
    assert "| {type: type(r), id: s.id}] AS sources" in text  # _check reads both keys
    assert text.index("REMOVE n._graphmem_lock") < text.index("properties(n)")
    assert params == {"ids0": [m.id], "types0": ["SUPERSEDES"]}


def test_memories_without_a_vector_are_queued_by_a_label(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    from graphmem.backends.neo4j import UNVECTORED

    fake.respond = lambda name, text, params: (
        [{"id": "m1", "content": "Alice prefers tea"}][: params["limit"]]
        if name == "nodes/memory_missing_vectors"
        else None
    )
    assert neo.missing_vectors(5) == [("m1", "Alice prefers tea")]
    (st,) = fake.recorder.statements
    assert f"MATCH (m:{UNVECTORED})" in st.text and "LIMIT $limit" in st.text  # no scan
    assert neo.missing_vectors(0) == [] and len(fake.recorder.statements) == 1
    (write,) = neo.plan_writes([Memory(content="x")])
    assert f"SET m:{UNVECTORED}" in write.text and f"REMOVE m:{UNVECTORED}" in write.text
    vectors = neo._q("nodes/memory_vectors").text
    assert f"REMOVE m:{UNVECTORED}" in vectors


@pytest.mark.parametrize(
    ("fetched", "expected"),
    [
        (0, ["recall search"]),  # nothing embedded: nothing more to look for
        (40, ["recall search"]),  # the index returned all it had
        (100, ["recall search", "vector plan", "vector exact"]),  # more beyond: search exactly
    ],
)
def test_recall_search_redoes_the_vector_search_only_when_the_index_had_more(
    fake: FakeDriver, fetched: int, expected: list[str]
) -> None:
    fake.dim = 2
    neo = _backend(fake, vector_overfetch=10)
    m = Memory(content="tea", agent_id="a", embedding=[1.0, 0.0])

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name == "recall search":  # the filter passed none of the neighbours read
            return [
                {
                    "channel": "vector",
                    "props": None,
                    "score": None,
                    "fetched": fetched,
                    "probe": 0.0,
                }
            ]
        if name == "vector plan":
            return [{"matched": 1, "total": 1000}]
        if name == "vector exact":
            return [{"props": m.to_props(), "score": 1.0, "probe": 0.0}]
        return None

    fake.respond = respond
    _lexical, near = neo.search_both(
        None, VectorQuery(vector=(1.0, 0.0), k=5, filter=Filter.for_memories(agent_id="a"))
    )
    assert fake.recorder.names() == expected
    assert [h.node.id for h in near] == ([m.id] if len(expected) > 1 else [])


def test_a_batch_over_many_runs_reads_its_runs_once() -> None:
    fake = FakeDriver()
    neo = _backend(fake, batch_rows=1000)
    mem = GraphMemory(neo, embedder=None, owns_backend=False, knowledge=False)
    mem.remember_many(
        [{"content": f"turn {i}", "agent_id": "a", "run_id": f"s{i % 50}"} for i in range(1000)]
    )
    reads = fake.recorder.reads()
    assert len(reads) == 1, fake.recorder.names()  # the runs with their last memories
    assert len(fake.recorder.writes()) == 1


def test_remember_in_a_run_reads_the_run_and_its_last_memory_in_one_round_trip() -> None:
    """Appending to a run reads the run and whether its last memory still exists in one
    statement, then writes in one: two round trips, not three."""
    last = "m-last"

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name == "nodes/run_heads":
            run = Run(id="s1", agent_id="a", last_event_id=last, event_count=0)
            return [{"id": "s1", "props": run.to_props(), "alive": True}]
        return None

    fake = FakeDriver(respond)
    neo = _backend(fake)
    mem = GraphMemory(neo, embedder=None, owns_backend=False, knowledge=False)
    written = mem.remember("the kettle is blue", agent_id="a", run_id="s1")
    names = fake.recorder.names()
    assert names[0] == "nodes/run_heads" and len(names) == 2, names
    assert [(t.mode, t.access) for t in fake.recorder.transactions] == [
        ("auto", "read"),
        ("write", ""),
    ]
    (st,) = fake.recorder.writes()[0].statements
    # the NEXT edge from the run's last memory, checked to exist in the write's guard
    assert {"src": last, "dst": written.id, "props": {}} in [
        row for k, v in st.params.items() if k.endswith("_rows") for row in v if "src" in row
    ]


def _part_rows(st: Any, text: str) -> list[dict[str, Any]]:
    """The rows of the part of a composed statement whose text holds ``text``."""
    for i, part in enumerate(st.text.split("WITH count(*) AS c")):
        if text in part:
            return list(st.params[f"p{i}_rows"])
    raise AssertionError(f"no part with {text!r} in {st.name}")


def test_a_handle_appends_to_a_run_it_wrote_last_in_one_round_trip() -> None:
    """The next remember into a run this handle appended to last, reconcile on, sends its
    write alone: the write's guard expects the run as the handle left it and the previous
    memory to exist, and sets only the run's event count and last memory (its other
    properties are not rewritten: a run another handle ended stays ended)."""

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        return [] if name == "nodes/run_heads" else None  # the run is new

    fake = FakeDriver(respond)
    neo = _backend(fake)
    mem = GraphMemory(neo, embedder=None, owns_backend=False, knowledge=False)
    first = mem.remember("the kettle is blue", agent_id="a", run_id="s1")
    fake.recorder.reset()
    second = mem.remember("the teapot is green", agent_id="a", run_id="s1")
    assert [t.mode for t in fake.recorder.transactions] == ["write"], fake.recorder.names()
    (st,) = fake.recorder.statements
    assert "guard absent" in st.name  # reconcile's duplicate check rides along
    assert "nodes/run_head_set" in st.name and "nodes/run_upsert" not in st.name
    assert _part_rows(st, "SET r.event_count") == [
        {"id": "s1", "event_count": 0, "last_event_id": second.id}
    ]
    (run_guard,) = _part_rows(st, "OPTIONAL MATCH (n:Run")
    assert run_guard["props"] == {
        "event_count": 0,
        "last_event_id": first.id,
        "agent_id": "a",
        "namespace": "default",
    }
    assert first.id in [r["id"] for r in _part_rows(st, "OPTIONAL MATCH (n:Memory {id")]
    assert {"src": first.id, "dst": second.id, "props": {}} in _part_rows(st, ":NEXT]")
    neo.close()


def test_a_stale_run_head_is_read_again_and_the_write_sent_again() -> None:
    """When another writer changed the run since this handle appended to it, the guard
    refuses the write (nothing written); the handle reads the run and writes again after
    the other writer's memory."""
    other = Run(id="s1", agent_id="a", last_event_id="m-other", event_count=0)
    state = {"heads": 0, "fail": 0}

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name == "nodes/run_heads":
            state["heads"] += 1
            return [{"id": "s1", "props": other.to_props(), "alive": True}] if state["fail"] else []
        if name.startswith("write") and state["fail"] == 1:
            state["fail"] = 2
            raise guard_failure()
        return None

    fake = FakeDriver(respond)
    neo = _backend(fake)
    mem = GraphMemory(neo, embedder=None, owns_backend=False, knowledge=False)
    mem.remember("the kettle is blue", agent_id="a", run_id="s1", reconcile="off")
    state["fail"] = 1
    fake.recorder.reset()
    second = mem.remember("the teapot is green", agent_id="a", run_id="s1", reconcile="off")
    names = fake.recorder.names()
    assert names[0].startswith("write") and names[-2:][0] == "nodes/run_heads", names
    outcomes = [t.outcome for t in fake.recorder.writes()]
    assert outcomes[0] == "rolled back" and outcomes[-1] == "committed", outcomes
    st = fake.recorder.writes()[-1].statements[-1]
    assert {"src": "m-other", "dst": second.id, "props": {}} in _part_rows(st, ":NEXT]")
    assert state["heads"] == 2
    neo.close()


def test_every_write_locks_the_nodes_it_shares_in_id_order(fake: FakeDriver) -> None:
    """Access records, node upserts and vectors go in id order, whatever order the caller
    used: a remember and the background vector writer that both lock some of the same
    memories then lock them in the same order, and cannot deadlock on each other."""
    neo = _backend(fake, touch_flush_s=3600)
    fake.dim = 2
    ids = ["m5", "m1", "m4", "m2", "m3"]
    neo.touch(list(reversed(ids)), T0)
    ms = [Memory(id=i, content=f"memory {i}", agent_id="a", created_at=T0) for i in ids]
    _put(neo, ms)
    (st,) = fake.recorder.statements
    assert [r["id"] for r in st.params["p0_rows"]] == sorted(ids)  # access records
    upsert = next(k for k in st.params if k.endswith("_rows") and k != "p0_rows")
    assert [r["id"] for r in st.params[upsert]] == sorted(ids)
    fake.recorder.reset()
    neo.write(WriteBatch(vectors={i: [1.0, 0.0] for i in ids}))  # type: ignore[call-arg]
    (st,) = [s for s in fake.recorder.statements if s.name.startswith("write")]
    assert [r["id"] for r in st.params["p0_rows"]] == sorted(ids)
    fake.recorder.reset()
    # the vector writer's guard (each memory's content) locks its memories in id order too,
    # all of them before it checks any
    neo.write(
        WriteBatch(
            vectors={i: [0.0, 1.0] for i in ids},  # type: ignore[call-arg]
            expect=[Expect(m.ref, props={"content_hash": m.content_hash}) for m in ms],
        )
    )
    (st,) = [s for s in fake.recorder.statements if s.name.startswith("write")]
    assert st.name == "write guard Memory + nodes/memory_vectors"
    assert st.params["p0_ids"] == sorted(ids)
    assert st.text.index("REMOVE l._graphmem_lock") < st.text.index("OPTIONAL MATCH")
    neo.close()


@pytest.mark.parametrize(
    ("flt", "start"),
    [
        (Filter.for_memories(agent_id="a"), "MATCH (n:Memory) USING INDEX SEEK n:Memory(agent_id)"),
        (
            Filter.for_memories(agent_id="a", run_id="r"),
            "MATCH (n:Memory) USING INDEX SEEK n:Memory(run_id)",
        ),
        (
            Filter.for_memories(namespace="ns"),
            "MATCH (n:Memory) USING INDEX SEEK n:Memory(namespace)",
        ),
        (
            Filter.for_memories(namespace="ns", tags=["t"]),
            "MATCH (:Tag {id: $scope_tag})<-[:TAGGED]-(n:Memory)",
        ),
    ],
)
def test_a_scoped_recall_reads_its_scope_through_an_index_never_the_status_one(
    flt: Filter, start: str
) -> None:
    """The scoped vector branch first reads a bounded part of the scope; it must seek the
    most selective field's index (every memory is in the status index), and say seek: a
    plain index hint lets a planner on stale statistics scan the whole index instead."""
    from graphmem.backends.neo4j.search import VECTOR_SCOPE_EXACT, compile_recall_search

    text, params = compile_recall_search(
        flt, lucene=None, text_k=0, vector=[1.0, 0.0], vector_fetch=50, vector_k=10
    )
    assert start in text and "WITH n LIMIT $vector_scope" in text
    assert params["vector_scope"] == VECTOR_SCOPE_EXACT
    assert set(re.findall(r"\$(\w+)", text)) == set(params)
    if flt.tags_all:
        assert params["scope_tag"] == "t"
    # unscoped (the status alone): the plain index branch, no scope read
    plain, _ = compile_recall_search(
        Filter.for_memories(),
        lucene=None,
        text_k=0,
        vector=[1.0, 0.0],
        vector_fetch=50,
        vector_k=10,
    )
    assert "$vector_scope" not in plain


@pytest.mark.parametrize(
    ("flt", "counted", "values", "always_read"),
    [
        (Filter.for_memories(agent_id="a"), "c.agent_id IN $scope_values", ["a"], False),
        (Filter.for_memories(namespace=["n1", "n2"]), "c.namespace IN", ["n1", "n2"], False),
        (Filter.for_memories(tags=["t"]), "(:Tag {id: $scope_tag})<-[:TAGGED]-(c)", None, False),
        (Filter.for_memories(namespace="ns", tags=["t"]), "<-[:TAGGED]-(c)", None, True),
        (Filter.for_memories(agent_id="a", namespace="ns"), "c.agent_id IN", ["a"], True),
    ],
)
def test_a_scoped_recall_sizes_its_vector_fetch_by_the_count_of_its_scope(
    flt: Filter, counted: str, values: list[str] | None, always_read: bool
) -> None:
    """The scoped vector branch counts the scope's entries in the index it starts from
    (capped) and asks the vector index for enough neighbours that about
    ``scope_expected_hits(k)`` of the scope are among them; it reads the scope itself only
    when the count may be below the exact-search threshold, or when the rest of the filter
    narrows the counted entries (then only the read knows the scope is small)."""
    from graphmem.backends.neo4j.search import (
        SCOPE_COUNT_MAX,
        SCOPE_SAMPLE,
        VECTOR_EXACT_MIN,
        VECTOR_NEIGHBOUR_COST,
        compile_recall_search,
        scope_expected_hits,
    )

    text, params = compile_recall_search(
        flt, lucene=None, text_k=0, vector=[1.0, 0.0], vector_fetch=50, vector_k=10
    )
    assert counted in text and params["scope_cap"] == SCOPE_COUNT_MAX
    assert params["vector_mu"] == scope_expected_hits(10)
    assert set(re.findall(r"\$(\w+)", text)) == set(params)
    read = "true AS read" if always_read else "entries IS NULL OR entries < $vector_scope AS read"
    assert read in text
    assert params.get("scope_values") == values
    # a filter narrower than the counted entries measures the share it keeps of them
    assert params.get("scope_sample") == (SCOPE_SAMPLE if always_read else None)
    assert params["vector_exact"] == pytest.approx(VECTOR_NEIGHBOUR_COST * scope_expected_hits(10))
    assert params["vector_exact_min"] == VECTOR_EXACT_MIN


@pytest.mark.parametrize("k", [1, 10, 30, 100])
def test_the_scoped_fetch_expects_the_least_poisson_mean_some_deviations_above_k(
    k: int,
) -> None:
    from graphmem.backends.neo4j.search import VECTOR_SCOPE_SIGMAS, scope_expected_hits

    m, z = scope_expected_hits(k), VECTOR_SCOPE_SIGMAS
    assert m - z * math.sqrt(m) >= k - 1e-9
    assert (m - 0.5) - z * math.sqrt(m - 0.5) < k


def test_a_scoped_recall_answered_completely_is_one_round_trip(fake: FakeDriver) -> None:
    """``fetched`` 0 from the scoped branch means its answer is complete (the scope was
    searched exactly): fewer than k hits and no second statement."""
    fake.dim = 2
    neo = _backend(fake)
    m = Memory(content="tea", agent_id="a", embedding=[1.0, 0.0])
    fake.respond = lambda name, text, params: (
        [
            {
                "channel": "vector",
                "props": m.to_props(),
                "score": 1.0,
                "fetched": 0,
                "probe": 0.0,
                "sim": None,
            }
        ]
        if name == "recall search"
        else None
    )
    _lex, near = neo.search_both(
        None, VectorQuery(vector=(1.0, 0.0), k=5, filter=Filter.for_memories(agent_id="a"))
    )
    assert fake.recorder.names() == ["recall search"]
    assert [h.node.id for h in near] == [m.id]
