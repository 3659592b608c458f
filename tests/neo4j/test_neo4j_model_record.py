"""The Neo4j backend keeps the embedding model's record on a ``GraphmemMeta`` node: the
statements it sends and the refusal of another model against the recording fake driver,
then the same on a live server (tests/contract/test_embedding_model.py runs the rest of
the contract there with ``--backend neo4j``)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from graphmem.backends.neo4j import Neo4jBackend
from graphmem.embeddings import HashEmbedder
from graphmem.errors import EmbedderMismatch
from graphmem.fingerprint import ModelGuard, describe, recorded
from graphmem.memory import GraphMemory
from tests.neo4j.fake_driver import FakeDriver
from tests.neo4j_support import Neo4jTarget, neo4j_target


class Reversed(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(32)
        self.name = "reversed-32"

    def _compute(self, texts: list[str]) -> np.ndarray:
        return np.ascontiguousarray(super()._compute(texts)[:, ::-1])


class MetaServer:
    """Answers the meta statements from a dict, and says the store holds memories."""

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}

    def __call__(self, name: str, text: str, params: dict[str, Any]) -> Any:
        if name == "admin/set_meta":
            self.meta[params["key"]] = params["value"]
            return []
        if name == "admin/get_meta":
            value = self.meta.get(params["key"])
            return [] if value is None else [{"value": value}]
        if name == "admin/clear":
            return [{"deleted": 0}]
        if name == "admin/stats":
            return [{"nodes": {"Memory": 3}, "edges": {}}]
        return None


@pytest.fixture
def served() -> tuple[FakeDriver, MetaServer, Neo4jBackend]:
    server = MetaServer()
    fake = FakeDriver(server)
    neo = Neo4jBackend("bolt://127.0.0.1:7687", driver=fake)
    neo.ensure_schema()
    fake.recorder.reset()
    return fake, server, neo


def test_the_record_is_one_parameterised_write_on_a_meta_node(
    served: tuple[FakeDriver, MetaServer, Neo4jBackend],
) -> None:
    fake, server, neo = served
    ModelGuard(neo, HashEmbedder(32)).before_vectors()
    sets = [s for s in fake.recorder.statements if s.name == "admin/set_meta"]
    assert len(sets) == 1
    assert "MERGE (m:GraphmemMeta {key: $key})" in sets[0].text
    assert fake.recorder.transactions[sets[0].tx].mode == "write"
    stored = json.loads(server.meta["embedding_model"])
    assert (stored["name"], stored["dim"], len(stored["probe"])) == ("hash-32", 32, 32)
    have = recorded(neo)
    assert have is not None and have.fingerprint == stored["fingerprint"]


def test_another_model_is_refused_with_the_reindex_command(
    served: tuple[FakeDriver, MetaServer, Neo4jBackend],
) -> None:
    fake, server, neo = served
    ModelGuard(neo, HashEmbedder(32)).before_vectors()
    fake.recorder.reset()
    with pytest.raises(EmbedderMismatch, match="graphmem reindex --all --embedder reversed-32"):
        ModelGuard(neo, Reversed()).check_open()
    assert "admin/set_meta" not in fake.recorder.names()  # the record is left as it was
    assert json.loads(server.meta["embedding_model"])["name"] == "hash-32"
    ModelGuard(neo, HashEmbedder(32)).before_vectors()  # the same model passes


def test_clear_removes_the_record_with_the_graph(
    served: tuple[FakeDriver, MetaServer, Neo4jBackend],
) -> None:
    fake, _server, neo = served
    neo.clear()
    clear = next(s for s in fake.recorder.statements if s.name == "admin/clear")
    assert "GraphmemMeta" in clear.params["labels"]


# -- the same on a live server ----------------------------------------------------------


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Neo4jTarget:
    t = neo4j_target(request)  # skips, saying how to enable it, without a server
    t.wipe()
    return t


def _meta_values(target: Neo4jTarget) -> list[str]:
    records, _s, _k = target.driver.execute_query(
        "MATCH (m:GraphmemMeta {key: 'embedding_model'}) RETURN m.value AS value",
        database_=target.database,
    )
    return [r["value"] for r in records]


@pytest.mark.neo4j
def test_live_the_record_is_one_meta_node_every_handle_reads(target: Neo4jTarget) -> None:
    with target.backend() as neo:
        ModelGuard(neo, HashEmbedder(32)).before_vectors()
        ModelGuard(neo, HashEmbedder(32)).before_vectors()  # the same model: no second node
    values = _meta_values(target)
    assert len(values) == 1
    stored = json.loads(values[0])
    assert (stored["name"], stored["dim"], len(stored["probe"])) == ("hash-32", 32, 32)
    with target.backend() as other:  # another driver
        have = recorded(other)
    assert have is not None and have.fingerprint == stored["fingerprint"]
    assert have.same_model(describe(HashEmbedder(32)))


@pytest.mark.neo4j
def test_live_another_model_is_refused_and_the_record_kept(target: Neo4jTarget) -> None:
    with target.backend() as neo:
        mem = GraphMemory(neo, embedder=HashEmbedder(32), owns_backend=False)
        mem.remember("Alice drinks green tea", agent_id="alice")
        mem.close()
    before = _meta_values(target)
    with target.backend() as neo:
        with pytest.raises(EmbedderMismatch, match="graphmem reindex --all --embedder reversed-32"):
            ModelGuard(neo, Reversed()).check_open()
        with pytest.raises(EmbedderMismatch):
            ModelGuard(neo, Reversed()).before_vectors()
    assert _meta_values(target) == before


@pytest.mark.neo4j
def test_live_clear_removes_the_record_with_the_graph(target: Neo4jTarget) -> None:
    with target.backend() as neo:
        ModelGuard(neo, HashEmbedder(32)).before_vectors()
        assert recorded(neo) is not None
        neo.clear()
        assert recorded(neo) is None
    assert _meta_values(target) == []
    with target.backend() as neo:
        ModelGuard(neo, Reversed()).before_vectors()  # an empty store takes any model
        have = recorded(neo)
    assert have is not None and have.name == "reversed-32"
