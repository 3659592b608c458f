"""A bulk load on Neo4j (``Neo4jBackend.bulk_load``), without a server: the vector index is
dropped before the load, never created or fed during it, and created again (population
awaited) when the load ends, also after an error; searches of the loading handle stay exact
meanwhile. The recording driver is tests/neo4j/fake_driver.py; the live test is
test_neo4j_bulk_live.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from graphmem.backends.base import WriteBatch
from graphmem.backends.neo4j import Neo4jBackend
from graphmem.errors import DimensionMismatch, InvalidInput
from graphmem.models import Filter, Memory, TextQuery, VectorQuery
from tests.neo4j.fake_driver import FakeDriver

T0 = datetime(2025, 1, 1, tzinfo=UTC)
INDEX_NAMES = (
    "schema/memory_embedding_vector_drop",
    "schema/memory_embedding_vector",
    "admin/await_indexes",
)


def _backend(driver: FakeDriver) -> Neo4jBackend:
    b = Neo4jBackend("bolt://127.0.0.1:7687", driver=driver, touch_flush_s=3600)
    b.ensure_schema()
    driver.recorder.reset()
    return b


def _memories(n: int, dim: int = 2) -> list[Memory]:
    return [
        Memory(
            content=f"fact {i}",
            agent_id="a",
            created_at=T0 + timedelta(seconds=i),
            embedding=[1.0, float(i)] if dim == 2 else [1.0] * dim,
        )
        for i in range(n)
    ]


@pytest.fixture
def fake() -> FakeDriver:
    return FakeDriver(dim=2)


@pytest.fixture
def neo(fake: FakeDriver) -> Iterator[Neo4jBackend]:
    b = _backend(fake)
    yield b
    b.close()


def _index_statements(fake: FakeDriver) -> list[str]:
    return [n for n in fake.recorder.names() if n in INDEX_NAMES]


def test_the_index_is_dropped_before_the_load_and_populated_once_after(
    neo: Neo4jBackend, fake: FakeDriver
) -> None:
    with neo.bulk_load() as report:
        assert report.dropped and report.dimension == 2
        for chunk in (_memories(3), _memories(3)):
            neo.write(WriteBatch(nodes=chunk))
        # inside the load: dropped once, never created again by a write carrying vectors
        assert _index_statements(fake) == ["schema/memory_embedding_vector_drop"]
    names = fake.recorder.names()
    assert _index_statements(fake) == [
        "schema/memory_embedding_vector_drop",
        "schema/memory_embedding_vector",
        "admin/await_indexes",
    ]
    create = next(s for s in fake.recorder.statements if s.name == INDEX_NAMES[1])
    assert create.params["dimensions"] == 2
    # the creation and its wait come after every write of the load
    last_write = max(i for i, n in enumerate(names) if n.startswith("write "))
    assert names.index(INDEX_NAMES[1]) > last_write
    wait = next(s for s in fake.recorder.statements if s.name == "admin/await_indexes")
    assert wait.params["timeout"] == 3600
    # then the populated index is read once (its graph in memory before the first recall),
    # with a probe vector of the store's dimension
    warm = next(s for s in fake.recorder.statements if s.name == "admin/warm_vector_index")
    assert names.index("admin/warm_vector_index") > names.index("admin/await_indexes")
    assert len(warm.params["vector"]) == 2 and fake.recorder.transactions[warm.tx].mode == "read"
    assert report.index_s >= 0.0


def test_a_store_without_vectors_gets_its_index_from_the_loaded_vectors() -> None:
    fake = FakeDriver(dim=None)
    neo = _backend(fake)
    with neo.bulk_load() as report:
        assert not report.dropped and report.dimension is None
        neo.write(WriteBatch(nodes=_memories(2, dim=3)))
        assert _index_statements(fake) == []  # no drop (none existed), no creation yet
    assert report.dimension == 3
    assert _index_statements(fake) == [INDEX_NAMES[1], INDEX_NAMES[2]]
    assert fake.dim == 3
    neo.close()


def test_a_load_without_vectors_creates_no_index() -> None:
    fake = FakeDriver(dim=None)
    neo = _backend(fake)
    with neo.bulk_load():
        neo.write(WriteBatch(nodes=[Memory(content="plain", agent_id="a", created_at=T0)]))
    assert _index_statements(fake) == []
    neo.close()


def test_the_index_comes_back_when_the_load_fails(neo: Neo4jBackend, fake: FakeDriver) -> None:
    with pytest.raises(RuntimeError, match="stop"), neo.bulk_load():
        neo.write(WriteBatch(nodes=_memories(2)))
        raise RuntimeError("stop")
    assert _index_statements(fake)[-2:] == [INDEX_NAMES[1], INDEX_NAMES[2]]
    assert fake.dim == 2


def test_another_dimension_inside_the_load_is_refused(neo: Neo4jBackend, fake: FakeDriver) -> None:
    with neo.bulk_load():
        with pytest.raises(DimensionMismatch):
            neo.write(WriteBatch(nodes=_memories(1, dim=5)))
        with pytest.raises(DimensionMismatch):
            neo.search_vector(VectorQuery(vector=(1.0, 0.0, 0.0), filter=Filter.for_memories()))
    assert fake.dim == 2


def test_a_load_inside_a_load_is_refused(neo: Neo4jBackend) -> None:
    with neo.bulk_load(), pytest.raises(InvalidInput, match="already"), neo.bulk_load():
        pass


def test_searches_of_the_loading_handle_stay_exact(neo: Neo4jBackend, fake: FakeDriver) -> None:
    flt = Filter.for_memories()
    with neo.bulk_load():
        fake.recorder.reset()
        neo.search_vector(VectorQuery(vector=(1.0, 0.0), filter=flt, k=3))
        neo.search_both(
            TextQuery(text="fact", filter=flt, k=3),
            VectorQuery(vector=(1.0, 0.0), filter=flt, k=3),
            similarities={},
        )
        neo.search_both(
            TextQuery(text="fact", filter=Filter.for_memories(agent_id="a"), k=3),
            VectorQuery(vector=(1.0, 0.0), filter=Filter.for_memories(agent_id="a"), k=3),
        )
        sent = [s.text for s in fake.recorder.statements]
        assert len(sent) == 3
        assert not any("db.index.vector.queryNodes" in t for t in sent)
        assert all("vector.similarity.cosine(n.embedding, $vector)" in t for t in sent)
    fake.recorder.reset()
    neo.search_both(None, VectorQuery(vector=(1.0, 0.0), filter=flt, k=3))
    assert "db.index.vector.queryNodes" in fake.recorder.statements[-1].text
