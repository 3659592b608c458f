"""A bulk load on a live Neo4j (NEO4J_URI / GRAPHMEM_URL, else skipped with the reason, see
tests/neo4j_support.py): the vector index is gone during the load and back, online and
complete, when it ends; searches inside the load are exact, and the first recall after it
finds the loaded memories as a brute-force cosine ranks them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from graphmem.backends.base import WriteBatch
from graphmem.backends.neo4j import Neo4jBackend
from graphmem.backends.neo4j.queries import VECTOR_INDEX
from graphmem.memory import GraphMemory
from graphmem.models import Filter, Memory, VectorQuery
from tests.neo4j_support import Neo4jTarget, neo4j_target

pytestmark = pytest.mark.neo4j

T0 = datetime(2025, 1, 1, tzinfo=UTC)
DIM = 16


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Neo4jTarget:
    t = neo4j_target(request)
    t.wipe()
    return t


@pytest.fixture
def neo(target: Neo4jTarget) -> Iterator[Neo4jBackend]:
    with target.backend() as b:
        yield b


def _vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _memories(vectors: np.ndarray, start: int) -> list[Memory]:
    return [
        Memory(
            content=f"loaded fact number {start + i}",
            agent_id="a" if i % 3 else "b",
            created_at=T0 + timedelta(seconds=start + i),
            embedding=[float(x) for x in vec],
        )
        for i, vec in enumerate(vectors)
    ]


def _vector_index(target: Neo4jTarget) -> list[dict[str, Any]]:
    records, _s, _k = target.driver.execute_query(
        "SHOW INDEXES YIELD name, state, populationPercent, options WHERE name = $name "
        "RETURN state, populationPercent, options",
        {"name": VECTOR_INDEX},
        database_=target.database,
    )
    return [dict(r) for r in records]


def _brute(stored: list[Memory], query: np.ndarray, k: int, agent: str | None = None) -> list[str]:
    pool = [m for m in stored if agent is None or m.agent_id == agent]
    mat = np.asarray([m.embedding for m in pool], dtype=np.float64)
    cos = mat @ query / np.linalg.norm(mat, axis=1) / np.linalg.norm(query)
    order = sorted(range(len(pool)), key=lambda i: (-round(float(cos[i]), 6), pool[i].id))
    return [pool[i].id for i in order[:k]]


def test_the_index_is_rebuilt_complete_after_a_bulk_load(
    neo: Neo4jBackend, target: Neo4jTarget
) -> None:
    before = _memories(_vectors(200, 1), 0)
    neo.write(WriteBatch(nodes=before))  # an ordinary write creates the index
    assert _vector_index(target)
    loaded = _memories(_vectors(600, 2), 200)
    queries = _vectors(5, 3)
    with neo.bulk_load() as report:
        assert report.dropped and report.dimension == DIM
        assert _vector_index(target) == []
        for i in range(0, len(loaded), 250):
            neo.write(WriteBatch(nodes=loaded[i : i + 250]))
        # inside the load: exact searches over everything written so far
        for q in queries[:2]:
            hits = neo.search_vector(VectorQuery(vector=tuple(q), filter=Filter.for_memories()))
            assert [h.node.id for h in hits] == _brute(before + loaded, q, 10)
        assert _vector_index(target) == []  # no write re-created it
    [index] = _vector_index(target)
    assert index["state"] == "ONLINE" and index["populationPercent"] == 100.0
    assert index["options"]["indexConfig"]["vector.dimensions"] == DIM
    assert report.index_s > 0
    for q in queries:
        for agent in (None, "b"):
            flt = Filter.for_memories(agent_id=agent) if agent else Filter.for_memories()
            hits = neo.search_vector(VectorQuery(vector=tuple(q), filter=flt, k=10))
            assert [h.node.id for h in hits] == _brute(before + loaded, q, 10, agent)


def test_the_first_search_after_a_bulk_load_finds_what_was_loaded(target: Neo4jTarget) -> None:
    vectors = _vectors(400, 4)
    mem = GraphMemory.open(target.uri, auth=target.auth, database=target.database, embedder=None)
    try:
        backend = mem.backend
        assert isinstance(backend, Neo4jBackend)
        with backend.bulk_load():
            for i in range(0, 400, 100):
                mem.remember_many(
                    {
                        "content": f"bulk item {j} about topic{j}",
                        "agent_id": "loader",
                        "embedding": vectors[j],
                    }
                    for j in range(i, i + 100)
                )
        assert _vector_index(target)[0]["state"] == "ONLINE"
        for j in (7, 123, 399):
            hits = backend.search_vector(
                VectorQuery(vector=tuple(vectors[j]), filter=Filter.for_memories(), k=1)
            )
            assert hits and hits[0].node.content == f"bulk item {j} about topic{j}"
    finally:
        mem.close()
