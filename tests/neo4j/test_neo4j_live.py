"""Tests against a live Neo4j 5.18+ server (GRAPHMEM_URL or NEO4J_URI, else testcontainers,
else skipped with how to enable them — see tests/neo4j_support.py). The contract suite runs
on Neo4j through the ``backend`` fixture; these cover what only a server can show."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem.backends.base import WriteBatch
from graphmem.backends.embedded import NetworkXBackend
from graphmem.backends.neo4j import CYPHER_DIR, Neo4jBackend, parse_cypher
from graphmem.backends.neo4j.queries import SCHEMA_QUERIES, VECTOR_INDEX
from graphmem.errors import BackendUnavailable, DimensionMismatch, InvalidInput
from graphmem.migrate import migrate
from graphmem.models import (
    Edge,
    EdgeType,
    Filter,
    Memory,
    NodeLabel,
    NodeRef,
    TextQuery,
    VectorQuery,
)
from tests.contract.test_migrate import populate, snapshot
from tests.neo4j_support import Neo4jTarget, neo4j_target

pytestmark = pytest.mark.neo4j

FILES = sorted(CYPHER_DIR.rglob("*.cypher"))


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Neo4jTarget:
    t = neo4j_target(request)
    t.wipe()
    return t


@pytest.fixture
def neo(target: Neo4jTarget) -> Iterator[Neo4jBackend]:
    with target.backend() as b:
        yield b


def _evaluate_params(target: Neo4jTarget, examples: dict[str, str]) -> dict[str, Any]:
    """What Browser does with `:param name => expr`: evaluate `RETURN expr` on the server."""
    values = {}
    for name, expr in examples.items():
        records, _s, _k = target.driver.execute_query(
            f"RETURN {expr} AS value", database_=target.database
        )
        values[name] = records[0]["value"]
    return values


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CYPHER_DIR)))
def test_every_query_file_runs_or_explains(
    target: Neo4jTarget, neo: Neo4jBackend, path: Path
) -> None:
    neo.ensure_schema(embedding_dim=384)
    q = parse_cypher(path.read_text(encoding="utf-8"), path.name)
    params = _evaluate_params(target, dict(q.examples))
    head = q.text.lstrip().upper()
    if head.startswith(("CREATE ", "DROP ", "SHOW ", "CALL DB.AWAITINDEXES")):
        # schema and admin commands cannot be explained; they are idempotent, so run them
        target.driver.execute_query(q.text, params, database_=target.database)
        return
    _records, summary, _keys = target.driver.execute_query(
        "EXPLAIN " + q.text, params, database_=target.database
    )
    assert summary.plan is not None
    assert not _deprecations(summary), _deprecations(summary)


def _deprecations(summary: Any) -> list[str]:
    """The deprecation notes of a result (GQL status objects on drivers that have them)."""
    statuses = getattr(summary, "gql_status_objects", None)
    if statuses is None:
        return [str(n) for n in (summary.notifications or []) if "Deprecat" in str(n.get("code"))]
    return [
        s.status_description
        for s in statuses
        if s.is_notification and "DEPRECATION" in str(s.classification)
    ]


def test_schema_is_created_once_and_the_dimension_is_fixed(
    target: Neo4jTarget, neo: Neo4jBackend
) -> None:
    neo.ensure_schema(embedding_dim=8)
    neo.ensure_schema(embedding_dim=8)  # idempotent
    records, _s, _k = target.driver.execute_query(
        "SHOW INDEXES YIELD name, state", database_=target.database
    )
    states = {r["name"]: r["state"] for r in records}
    for name in (*(q.split("/", 1)[1] for q in SCHEMA_QUERIES), VECTOR_INDEX):
        assert states.get(name) == "ONLINE", name
    neo.write(WriteBatch(nodes=[Memory(content="kept", embedding=[1.0] * 8)]))
    with target.backend() as other:  # a new process finds the dimension on the server
        assert other.stats().embedding_dim == 8
        with pytest.raises(DimensionMismatch):
            other.ensure_schema(embedding_dim=16)
        with pytest.raises(DimensionMismatch):
            other.write(WriteBatch(nodes=[Memory(content="x", embedding=[1.0] * 16)]))
        assert other.stats().embedding_dim == 8  # a refused change leaves the index as it was


def test_the_vector_index_takes_a_new_dimension_once_no_vector_is_left(
    target: Neo4jTarget, neo: Neo4jBackend
) -> None:
    old = Memory(content="old model", embedding=[1.0] * 8)
    neo.write(WriteBatch(nodes=[old]))
    with target.backend() as other:  # another handle still believes in 8 dimensions
        assert other.stats().embedding_dim == 8
        neo.write(WriteBatch(nodes=[old.evolve(embedding=None)]))  # reindex --all clears
        new = Memory(content="new model", embedding=[0.0, 1.0, 0.0, 0.0])
        other.write(WriteBatch(nodes=[new]))
        assert other.stats().embedding_dim == 4
        [hit] = other.search_vector(VectorQuery(vector=(0.0, 1.0, 0.0, 0.0), k=1))
        assert hit.node.id == new.id
    with target.backend() as third, pytest.raises(DimensionMismatch):
        # now the 4-dimension vector holds the index
        third.write(WriteBatch(nodes=[Memory(content="x", embedding=[1.0] * 8)]))


def test_health_and_version(neo: Neo4jBackend) -> None:
    h = neo.health()
    assert h["ok"] is True and h["server"] == "Neo4j Kernel"
    major, minor = (int(p) for p in h["version"].split(".")[:2])
    assert (major, minor) >= (5, 18)


# Wrong credentials are tried with a user nobody has: three failures in a row lock the
# named user for a few seconds (dbms.security.auth_max_failed_attempts), which would make
# the tests after this one fail to connect as the real test user.
NO_SUCH_USER = "graphmem-no-such-user"


def _server_checks_passwords(target: Neo4jTarget) -> bool:
    """Whether the server enforces authentication: ask it with a password nobody has (a
    server with ``dbms.security.auth_enabled=false`` accepts any)."""
    import secrets

    import neo4j

    with neo4j.GraphDatabase.driver(target.uri, auth=(NO_SUCH_USER, secrets.token_hex(16))) as drv:
        try:
            drv.verify_connectivity()
        except neo4j.exceptions.AuthError:
            return True
    return False


def test_wrong_password_is_a_clear_backend_unavailable(target: Neo4jTarget) -> None:
    if not _server_checks_passwords(target):
        pytest.skip("the server runs with authentication disabled: any password is accepted")
    with closing(
        Neo4jBackend(target.uri, auth=(NO_SUCH_USER, "not-the-password"), database=target.database)
    ) as bad:
        with pytest.raises(BackendUnavailable, match="rejected the credentials"):
            bad.count(Filter())
        assert bad.health()["ok"] is False


def test_recall_on_a_young_store_logs_no_server_notifications(
    neo: Neo4jBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """A store without some relationship type yet (no DERIVED_FROM edge) makes the server
    warn about the type on every statement naming it; the driver logs each warning, so a
    user would see one per recall."""
    import logging

    from graphmem.memory import GraphMemory

    mem = GraphMemory(neo, embedder=None, owns_backend=False)
    mem.remember_many([{"content": f"tea fact {i}", "tags": ["tea"]} for i in range(3)])
    with caplog.at_level(logging.INFO, logger="neo4j.notifications"):
        assert mem.recall("tea", k=3, touch=False)
    assert [r.getMessage() for r in caplog.records if r.name == "neo4j.notifications"] == []
    mem.close()


def _db_hits(plan: Any) -> int:
    return int(plan.get("dbHits", 0)) + sum(_db_hits(c) for c in plan.get("children", []))


@pytest.mark.parametrize("seeds", [1, 20])
def test_the_tag_hop_of_recall_expansion_reads_a_bounded_share_of_a_hub(
    target: Neo4jTarget, neo: Neo4jBackend, seeds: int
) -> None:
    """A Tag every memory has: expanding a few seeds through it reads about ``tag_limit``
    memories per seed, whatever the store size (no plan that scans every active memory)."""
    from graphmem.backends.neo4j import compile_neighbours

    ms = [
        Memory(content=f"hub member {i}", tags=["hub"], agent_id=f"a{i % 4}") for i in range(3000)
    ]
    text, params = compile_neighbours(
        Filter.for_memories(), [m.id for m in ms[:seeds]], link_types=[EdgeType.NEXT], tag_limit=8
    )
    # the server caches the plan made while the store is young (as in a new deployment)
    neo.write(WriteBatch(nodes=ms[:seeds]))
    target.driver.execute_query(text, params, database_=target.database)
    neo.write(WriteBatch(nodes=ms))
    _records, summary, _keys = target.driver.execute_query(
        "PROFILE " + text, params, database_=target.database
    )
    assert _db_hits(summary.profile) < 400 * seeds


def test_a_locked_user_is_a_clear_backend_unavailable(target: Neo4jTarget) -> None:
    """After repeated wrong passwords the server refuses even the right one for a while:
    that is the server being unavailable to this user, said as such, not a query error."""
    import secrets

    import neo4j

    if not _server_checks_passwords(target):
        pytest.skip("the server runs with authentication disabled: no user is ever locked")
    user, password = f"graphmem_lock_{secrets.token_hex(4)}", secrets.token_hex(16)
    try:
        target.driver.execute_query(
            f"CREATE USER {user} SET PASSWORD $pw CHANGE NOT REQUIRED",
            pw=password,
            database_="system",
        )
    except neo4j.exceptions.ClientError as e:
        pytest.skip(f"the test user may not create users: {e.message}")
    try:
        for _ in range(4):
            with neo4j.GraphDatabase.driver(target.uri, auth=(user, "wrong")) as drv:
                with pytest.raises(neo4j.exceptions.Neo4jError):
                    drv.verify_connectivity()
        with closing(
            Neo4jBackend(target.uri, auth=(user, password), database=target.database)
        ) as locked:
            with pytest.raises(BackendUnavailable, match="too many"):
                locked.count(Filter())
    finally:
        target.driver.execute_query(f"DROP USER {user} IF EXISTS", database_="system")


def test_crafted_tags_namespaces_and_ids_change_nothing_else(neo: Neo4jBackend) -> None:
    bystander = Memory(content="bystander", agent_id="b")
    neo.write(WriteBatch(nodes=[bystander]))
    crafted = "'}) MATCH (n) DETACH DELETE n //"
    m = Memory(
        content="x `y` 'z' \"w\" })",
        agent_id=crafted,
        namespace=crafted,
        run_id=crafted,
        tags=["a//b", "c++", "x:y", "c#", "q.e.d"],
        metadata={"`k`})": crafted},
    )
    neo.write(WriteBatch(nodes=[m]))
    assert neo.get(Memory, [m.id]) == [m]
    assert neo.get(Memory, [bystander.id]) == [bystander]
    st = neo.stats()
    assert st.nodes == {"Memory": 2, "Agent": 2, "Run": 1, "Tag": 5}
    assert neo.count(Filter.for_memories(tags=["c++", "a//b"], namespace=crafted)) == 1
    assert neo.count(Filter.for_memories(metadata={"`k`})": crafted})) == 1
    hits = neo.search_text(TextQuery(text='y" OR *:* AND z~'))
    assert [h.node.id for h in hits] == [m.id]


def test_a_failing_batch_spanning_several_statements_writes_nothing(target: Neo4jTarget) -> None:
    with target.backend(batch_rows=7) as neo:
        ms = [Memory(content=f"m{i}", agent_id=f"a{i % 3}", tags=["t"]) for i in range(50)]
        bad = Edge(type=EdgeType.NEXT, src=ms[0], dst=(NodeLabel.MEMORY, "missing"))
        with pytest.raises(InvalidInput, match="missing"):
            neo.write(WriteBatch(nodes=ms, edges=[bad]))
        assert neo.stats().nodes == {}
        neo.write(
            WriteBatch(
                nodes=ms,
                edges=[Edge(type=EdgeType.NEXT, src=ms[i], dst=ms[i + 1]) for i in range(49)],
            )
        )
        st = neo.stats()
        assert st.nodes == {"Memory": 50, "Agent": 3, "Tag": 1}
        assert st.edges == {"NEXT": 49, "AUTHORED_BY": 50, "TAGGED": 50}


@pytest.mark.parametrize("exact_search_max", [0, 100_000])
def test_filtered_vector_search_equals_brute_force(
    target: Neo4jTarget, exact_search_max: int
) -> None:
    """Both plans (index over-fetch and exact scan) return the true top-k of the filter."""
    rng = random.Random(7)
    ms = [
        Memory(
            content=f"m{i}",
            agent_id="rare" if i % 25 == 0 else "common",
            embedding=[rng.uniform(-1, 1) for _ in range(8)],
        )
        for i in range(500)
    ]
    q = [rng.uniform(-1, 1) for _ in range(8)]
    with target.backend(exact_search_max=exact_search_max) as neo:
        neo.write(WriteBatch(nodes=ms))
        hits = neo.search_vector(
            VectorQuery(vector=q, k=5, filter=Filter.for_memories(agent_id="rare"))
        )
    rare = [m for m in ms if m.agent_id == "rare"]
    qv = np.asarray(q, dtype=np.float32)
    vecs = {m.id: np.asarray(m.embedding, dtype=np.float32) for m in rare}
    cos = {i: float(v @ qv / (np.linalg.norm(v) * np.linalg.norm(qv))) for i, v in vecs.items()}
    expected = sorted(cos, key=lambda i: -cos[i])[:5]
    assert [h.node.id for h in hits] == expected
    assert [h.score for h in hits] == pytest.approx([cos[i] for i in expected], abs=1e-5)


def test_migration_round_trip_networkx_neo4j_networkx(target: Neo4jTarget, tmp_path: Path) -> None:
    with closing(NetworkXBackend(tmp_path / "src.db")) as src:
        populate(src)
        with target.backend() as neo:
            there = migrate(src, neo, batch_size=4)
            assert there.verified
            again = migrate(src, neo, batch_size=9)  # idempotent
            assert again.verified and again.destination_nodes == there.destination_nodes
            back_path = tmp_path / "back.db"
            home = migrate(neo, str(back_path), batch_size=5)
            assert home.verified
        with closing(NetworkXBackend(back_path)) as back:
            assert snapshot(back) == snapshot(src)


def test_preconditions_hold_or_nothing_is_written(neo: Neo4jBackend) -> None:
    """The guard part on a real server: locked, checked, and a broken precondition named."""
    from graphmem.backends.base import Expect, WriteBatch
    from graphmem.errors import Conflict
    from graphmem.models import Status

    old = Memory(content="Alice lives in Oslo", agent_id="a")
    neo.write(WriteBatch(nodes=[old]))
    new = Memory(content="Alice lives in Paris", agent_id="a")
    fresh = Expect(
        ref=old.ref,
        props={"status": Status.ACTIVE, "valid_to": None},
        incoming=(EdgeType.SUPERSEDES,),
        sources=frozenset(),
    )
    batch = WriteBatch(
        nodes=[old.evolve(status=Status.SUPERSEDED), new],
        edges=[Edge(type=EdgeType.SUPERSEDES, src=new, dst=old)],
        expect=[fresh],
    )
    neo.write(batch)
    assert neo.get(Memory, [old.id])[0].status is Status.SUPERSEDED
    later = Memory(content="Alice lives in Rome", agent_id="a")
    stale = WriteBatch(
        nodes=[later], edges=[Edge(type=EdgeType.SUPERSEDES, src=later, dst=old)], expect=[fresh]
    )
    with pytest.raises(Conflict, match="status"):
        neo.write(stale)
    assert neo.get(Memory, [later.id]) == []
    with pytest.raises(Conflict, match="must not exist"):
        neo.write(WriteBatch(nodes=[later], expect=[Expect(ref=old.ref, exists=False)]))
    with pytest.raises(Conflict, match="does not exist"):
        neo.write(WriteBatch(nodes=[later], expect=[Expect(ref=NodeRef(NodeLabel.MEMORY, "gone"))]))
    assert neo.get(Memory, [later.id]) == []
    stored = neo.get(Memory, [old.id])[0]
    assert "_graphmem_lock" not in stored.to_props()
    neo.write(WriteBatch(nodes=[later], expect=[Expect(ref=later.ref, exists=False)]))
    assert neo.get(Memory, [later.id]) == [later]
    with pytest.raises(Conflict):  # created already: the uniqueness constraint says so
        neo.write(
            WriteBatch(
                nodes=[later.evolve(content="again")], expect=[Expect(ref=later.ref, exists=False)]
            )
        )
    assert neo.get(Memory, [later.id]) == [later]


def _guard_lock(label: NodeLabel, ids: list[str]) -> tuple[str, dict[str, Any]]:
    """The part of a write's guard that locks the nodes its preconditions name."""
    from graphmem.backends.neo4j.writes import compile_guard

    rows = [
        {"id": i, "exists": True, "props": {}, "nulls": [], "types": [], "sources": None}
        for i in ids
    ]
    text, params = compile_guard(label, rows)
    return text.split("WITH count(*) AS locked")[0], {"ids": params["ids"]}


@contextmanager
def _held_by_a_guard(target: Neo4jTarget, ident: str, work: Callable[[], None]) -> Iterator[Any]:
    """A transaction that took a guard's lock on memory ``ident``, with ``work`` started in a
    thread meanwhile and seen waiting; yields the transaction, commits it, then waits for
    ``work``."""
    import threading

    with target.driver.session(database=target.database) as session:
        tx = session.begin_transaction()
        tx.run(*_guard_lock(NodeLabel.MEMORY, [ident])).consume()
        writer = threading.Thread(target=work)
        writer.start()
        writer.join(1.0)
        assert writer.is_alive()  # it waits for the lock this transaction holds
        yield tx
        tx.commit()
    writer.join(30)


def test_a_guard_holds_another_writer_off_the_nodes_it_names_until_it_commits(
    target: Neo4jTarget, neo: Neo4jBackend
) -> None:
    """A guard locks a node by removing a property no node has: nothing is written, and the
    lock must still be taken, or another writer could change what the guard checked before
    the guarded write commits (a lost update)."""

    m = Memory(content="the run's last memory", agent_id="a")
    neo.write(WriteBatch(nodes=[m]))
    other: list[BaseException] = []

    def write() -> None:
        try:
            neo.write(WriteBatch(nodes=[m.evolve(content="changed meanwhile")]))
        except BaseException as e:  # pragma: no cover - what the test is about
            other.append(e)

    with _held_by_a_guard(target, m.id, write) as tx:
        records = list(tx.run("MATCH (n:Memory {id: $id}) RETURN n.content AS c", id=m.id))
        assert records[0]["c"] == "the run's last memory"
    assert not other
    assert neo.get(Memory, [m.id])[0].content == "changed meanwhile"


def test_a_guard_locks_on_a_database_that_never_had_the_lock_property(
    target: Neo4jTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neo4j skips the removal of a property whose name (token) the database has never
    seen, the node's lock included: on a new database the guards locked nothing, and a
    writer changed what a guard had checked before the guarded write committed (a fresh
    Neo4j 5.26, session 17). The backend makes the name known at first use. A property
    name no database has seen stands in for a new database (a token cannot be removed)."""
    from uuid import uuid4

    from graphmem.backends.neo4j import schema, writes

    fresh = f"_graphmem_lock_probe_{uuid4().hex}"
    for module in (schema, writes):  # the first use and the guards read the name
        monkeypatch.setattr(module, "LOCK_PROPERTY", fresh)
    with target.backend() as neo:
        m = Memory(content="the run's last memory", agent_id="a")
        neo.write(WriteBatch(nodes=[m]))
        other: list[BaseException] = []

        def write() -> None:
            try:
                neo.write(WriteBatch(nodes=[m.evolve(content="changed meanwhile")]))
            except BaseException as e:  # pragma: no cover - what the test is about
                other.append(e)

        with _held_by_a_guard(target, m.id, write) as tx:
            records = list(tx.run("MATCH (n:Memory {id: $id}) RETURN n.content AS c", id=m.id))
            assert records[0]["c"] == "the run's last memory"
        assert not other
        assert neo.get(Memory, [m.id])[0].content == "changed meanwhile"
        records, _s, _k = target.driver.execute_query(
            "MATCH (n) WHERE n[$key] IS NOT NULL RETURN count(n) AS c",
            key=fresh,
            database_=target.database,
        )
        assert records[0]["c"] == 0  # the name is known; no node holds the property


def test_a_guarded_vector_write_waits_for_a_linking_write_without_a_deadlock(
    target: Neo4jTarget, neo: Neo4jBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """The background vector writer's write (embeddings guarded by the memories' content)
    against ``remember`` of a run's next memory, which locks the run's last memory in its
    guard and then links it: the vector write must wait, not make a lock cycle. The guard
    used to take the memory's relationship-group lock before its node lock, and the server
    then broke a deadlock (``DeadlockDetected``) in one of the two, which ran again."""

    from graphmem.backends.base import Expect
    from graphmem.errors import GraphMemError

    made = [Memory(content=f"turn {i} of the run", agent_id="a", run_id="r") for i in range(3)]
    neo.write(WriteBatch(nodes=made))
    last = made[-1]
    vectors = WriteBatch(
        vectors={m.id: [0.5] * 8 for m in made},  # type: ignore[call-arg]
        expect=[Expect(m.ref, props={"content_hash": m.content_hash}) for m in made],
    )
    neo.ensure_schema(embedding_dim=8)
    failed: list[BaseException] = []

    def write_vectors() -> None:
        try:
            neo.write(vectors)
        except GraphMemError as e:  # pragma: no cover - what the test is about
            failed.append(e)

    caplog.set_level(logging.INFO, logger="graphmem.backends.neo4j")
    # remember's guard on the run's last memory, then its NEXT edge to the new memory
    with _held_by_a_guard(target, last.id, write_vectors) as tx:
        tx.run(
            "MATCH (p:Memory {id: $id}) CREATE (p)-[:NEXT]->(:Memory {id: 'next'})", id=last.id
        ).consume()
    assert not failed
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]
    records, _s, _k = target.driver.execute_query(
        "MATCH (m:Memory) WHERE m.embedding IS NOT NULL RETURN collect(m.id) AS ids",
        database_=target.database,
    )
    assert sorted(records[0]["ids"]) == sorted(m.id for m in made)


def test_recall_statements_agree_with_the_separate_searches(target: Neo4jTarget) -> None:
    rng = random.Random(3)
    ms = [
        Memory(
            content=f"tea note {i} " + ("green" if i % 3 else "black"),
            agent_id="a" if i % 2 else "b",
            tags=["tea"] if i % 4 else ["other"],
            embedding=[rng.uniform(-1, 1) for _ in range(8)],
        )
        for i in range(200)
    ]
    with target.backend(touch_flush_s=3600) as neo:
        neo.write(WriteBatch(nodes=ms))
        flt = Filter.for_memories(agent_id="a")
        text = TextQuery(text="green tea", filter=flt, k=10)
        vector = VectorQuery(vector=tuple(ms[1].embedding or ()), filter=flt, k=10)
        lexical, near = neo.search_both(text, vector)
        assert [h.node.id for h in lexical] == [h.node.id for h in neo.search_text(text)]
        exact = neo.search_vector(vector)
        assert [h.node.id for h in near] == [h.node.id for h in exact]
        assert near[0].node.id == ms[1].id and near[0].score == pytest.approx(1.0, abs=1e-5)
        hops = neo.neighbours([ms[1].id, ms[3].id], flt, tag_limit=3)
        per_seed: dict[str, int] = {}
        for seed, via, m in hops:
            assert via == "tag" and m.agent_id == "a" and "tea" in m.tags and m.id != seed
            per_seed[seed] = per_seed.get(seed, 0) + 1
        assert per_seed == {ms[1].id: 3, ms[3].id: 3}
        neo.touch([ms[1].id], datetime(2025, 1, 2, tzinfo=UTC))
        assert neo.pending_touches() == 1
    with target.backend() as again:  # written at close
        assert again.get(Memory, [ms[1].id])[0].access_count == 1


def test_lean_recall_statements_return_the_same_memories_and_server_cosines(
    target: Neo4jTarget,
) -> None:
    """Recall's statements with ``similarities``: the same hits and neighbours as the
    plain ones, no embedding in what comes back, and each memory's cosine to the query as
    computed from its stored embedding."""
    rng = random.Random(5)
    ms = [
        Memory(
            content=f"tea note {i} " + ("green" if i % 3 else "black"),
            agent_id="a",
            tags=["tea"],
            embedding=[rng.uniform(-1, 1) for _ in range(8)],
        )
        for i in range(60)
    ]
    ms.append(Memory(content="tea without a vector yet", agent_id="a", tags=["tea"]))
    by_id = {m.id: m for m in ms}
    q = [rng.uniform(-1, 1) for _ in range(8)]

    def cos(m: Memory) -> float:
        a = m.embedding or ()
        dot = sum(x * y for x, y in zip(a, q, strict=True))
        return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in q)))

    with target.backend(touch_flush_s=3600) as neo:
        neo.write(WriteBatch(nodes=ms))
        flt = Filter.for_memories(agent_id="a")
        text = TextQuery(text="green tea", filter=flt, k=10)
        vector = VectorQuery(vector=tuple(q), filter=flt, k=10)
        plain = neo.search_both(text, vector)
        sims: dict[str, float] = {}
        lean = neo.search_both(text, vector, similarities=sims)
        for a, b in zip(plain, lean, strict=True):
            assert [h.node.id for h in a] == [h.node.id for h in b]
            assert all(h.node.embedding is None for h in b)
        hit_ids = {h.node.id for hits in lean for h in hits}
        assert hit_ids == set(sims) - {ms[-1].id}
        for ident, s in sims.items():
            assert s == pytest.approx(cos(by_id[ident]), abs=1e-5)
        seeds = [ms[1].id, ms[-1].id]
        hops = neo.neighbours(seeds, flt, tag_limit=70)
        sims2: dict[str, float] = {}
        lean_hops = neo.neighbours(seeds, flt, tag_limit=70, query_vector=q, similarities=sims2)
        assert [(s, v, m.id) for s, v, m in hops] == [(s, v, m.id) for s, v, m in lean_hops]
        assert all(m.embedding is None for _s, _v, m in lean_hops)
        assert set(sims2) == {m.id for _s, _v, m in lean_hops} - {ms[-1].id}
        for ident, s in sims2.items():
            assert s == pytest.approx(cos(by_id[ident]), abs=1e-5)


def test_stats_sends_no_deprecated_syntax(target: Neo4jTarget, neo: Neo4jBackend) -> None:
    neo.write(WriteBatch(nodes=[Memory(content="x", tags=["t"])]))
    st = neo.stats()
    assert st.nodes == {"Memory": 1, "Agent": 1, "Tag": 1}
    assert st.edges == {"AUTHORED_BY": 1, "TAGGED": 1}


def test_the_vector_queue_follows_the_embeddings(neo: Neo4jBackend) -> None:
    from graphmem.backends.base import WriteBatch

    bare, done = Memory(content="no vector yet"), Memory(content="has one", embedding=[1.0, 0.0])
    neo.write(WriteBatch(nodes=[bare, done]))
    assert neo.missing_vectors(10) == [(bare.id, "no vector yet")]
    neo.write(WriteBatch(vectors={bare.id: [0.0, 1.0], "gone": [1.0, 1.0]}))
    assert neo.missing_vectors(10) == []
    (got,) = neo.get(Memory, [bare.id])
    assert got.embedding == (0.0, 1.0) and got.content == "no vector yet"
    neo.write(WriteBatch(nodes=[got.evolve(embedding=None)]))
    assert neo.missing_vectors(10) == [(bare.id, "no vector yet")]
