"""The store records the embedding model that made its vectors (name, dimension, probe
vector): another model of the same dimension is refused with the reindex command, and
nothing is written; ``reindex(all=True)`` moves the store to the new model."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem.backends.base import GraphBackend
from graphmem.consolidation import iter_memories
from graphmem.embeddings import HashEmbedder
from graphmem.errors import EmbedderMismatch
from graphmem.fingerprint import ModelGuard, describe, mismatch, recorded
from graphmem.memory import GraphMemory
from graphmem.models import Filter

DIM = 64
Store = tuple[str, dict[str, Any]]


class Reversed(HashEmbedder):
    """A second deterministic model of the same dimension: the hash embedder's vectors
    with their components reversed (cosine to the first model's about 0)."""

    def __init__(self, name: str = "reversed-64") -> None:
        super().__init__(DIM)
        self.name = name

    def _compute(self, texts: list[str]) -> np.ndarray:
        return np.ascontiguousarray(super()._compute(texts)[:, ::-1])


class Calls:
    """Counts the texts an embedder is asked for (to see that opening embeds nothing)."""

    def __init__(self, inner: HashEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.texts: list[str] = []

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def _contents(backend: GraphBackend) -> list[tuple[str, tuple[float, ...] | None]]:
    """Every memory's text and vector."""
    everything = iter_memories(backend, Filter.for_memories(status=None))
    return sorted((m.content, m.embedding and tuple(m.embedding)) for m in everything)


def test_the_first_vectors_record_the_model(backend: GraphBackend) -> None:
    a = HashEmbedder(DIM)
    with GraphMemory(backend, embedder=a, owns_backend=False) as mem:
        assert recorded(backend) is None  # nothing embedded yet, nothing recorded
        mem.remember("Alice drinks green tea", agent_id="alice")
    have = recorded(backend)
    assert have is not None
    assert (have.name, have.dim) == (a.name, DIM)
    assert have.same_model(describe(a)) and not have.same_model(describe(Reversed()))


def test_another_model_of_the_same_dimension_is_refused_and_changes_nothing(
    backend: GraphBackend,
) -> None:
    with GraphMemory(backend, embedder=HashEmbedder(DIM), owns_backend=False) as mem:
        mem.remember("Alice drinks green tea", agent_id="alice")
    before = _contents(backend)
    with GraphMemory(backend, embedder=Reversed(), owns_backend=False) as other:
        with pytest.raises(EmbedderMismatch, match="graphmem reindex --all") as err:
            other.remember("Bob drinks coffee", agent_id="bob")
        assert "hash-64" in str(err.value) and "vectors.reindex" in str(err.value)
        with pytest.raises(EmbedderMismatch):
            other.recall("tea", agent_id="alice")
    assert _contents(backend) == before
    have = recorded(backend)
    assert have is not None and have.name == "hash-64"


def test_reindex_moves_the_store_to_the_new_model(backend: GraphBackend) -> None:
    with GraphMemory(backend, embedder=HashEmbedder(DIM), owns_backend=False) as mem:
        mem.remember("Alice drinks green tea", agent_id="alice")
        mem.remember("the kettle is blue", agent_id="alice")
    b = Reversed()
    with GraphMemory(backend, embedder=None, owns_backend=False) as plain:
        report = plain.vectors.reindex(embedder=b, all=True)
    assert report.embedded == 2
    have = recorded(backend)
    assert have is not None and have.name == b.name and have.same_model(describe(b))
    with GraphMemory(backend, embedder=b, owns_backend=False) as mem:
        hits = mem.recall("green tea", agent_id="alice", k=1)
        assert hits and hits[0].memory.content == "Alice drinks green tea"
        assert hits[0].breakdown.get("vector", 0) > 0.5  # ranked by the new model's vectors
        mem.remember("Bob drinks coffee", agent_id="bob")
    with GraphMemory(backend, embedder=HashEmbedder(DIM), owns_backend=False) as old:
        with pytest.raises(EmbedderMismatch, match="reversed-64"):
            old.recall("tea", agent_id="alice")


def test_reindex_of_the_missing_vectors_keeps_to_the_store_model(backend: GraphBackend) -> None:
    with GraphMemory(backend, embedder=HashEmbedder(DIM), owns_backend=False) as mem:
        mem.remember("Alice drinks green tea", agent_id="alice")
    with GraphMemory(backend, embedder=None, owns_backend=False) as plain:
        plain.remember("written without vectors", agent_id="alice")
        with pytest.raises(EmbedderMismatch, match="--all"):
            plain.vectors.reindex(embedder=Reversed())
        assert plain.vectors.reindex(embedder=HashEmbedder(DIM)).embedded == 1


def test_the_same_model_and_no_embedder_open_fine(backend: GraphBackend) -> None:
    with GraphMemory(backend, embedder=HashEmbedder(DIM), owns_backend=False) as mem:
        mem.remember("Alice drinks green tea", agent_id="alice")
    with GraphMemory(backend, embedder=HashEmbedder(DIM), owns_backend=False) as same:
        same.remember("Bob drinks coffee", agent_id="bob")
        assert same.recall("green tea", agent_id="alice", k=1)[0].memory.content.startswith("Alice")
    with GraphMemory(backend, embedder=None, owns_backend=False) as plain:
        plain.remember("no vectors here", agent_id="alice")
        assert plain.recall("green tea", agent_id="alice", k=1)


def test_a_store_without_vectors_takes_any_model(backend: GraphBackend) -> None:
    with GraphMemory(backend, embedder=None, owns_backend=False) as plain:
        plain.remember("Alice drinks green tea", agent_id="alice")
    with GraphMemory(backend, embedder=Reversed(), owns_backend=False) as mem:
        mem.remember("Bob drinks coffee", agent_id="bob")
    have = recorded(backend)
    assert have is not None and have.name == "reversed-64"


def test_an_alias_of_the_same_model_passes(backend: GraphBackend) -> None:
    with GraphMemory(backend, embedder=Reversed("model-a"), owns_backend=False) as mem:
        mem.remember("Alice drinks green tea", agent_id="alice")
    guard = ModelGuard(backend, Reversed("model-a-alias"))
    guard.check_open()  # another name, same vectors: not refused
    guard.before_vectors()


# -- the check at open by URL, across handles and processes -----------------------------


@pytest.fixture
def store(backend: GraphBackend, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """How :meth:`GraphMemory.open` reaches ``backend``'s store: its URL and options."""
    if request.node.callspec.params["backend"] == "networkx":
        return str(tmp_path / "store.db"), {}
    from tests.neo4j_support import neo4j_target

    target = neo4j_target(request)
    return target.uri, {"auth": target.auth, "database": target.database}


def test_open_refuses_another_model_and_embeds_nothing_for_the_same_name(
    backend: GraphBackend, store: Store
) -> None:
    url, options = store
    with GraphMemory.open(url, embedder=HashEmbedder(DIM), **options) as mem:
        mem.remember("Alice drinks green tea", agent_id="alice")
    before = (_contents(backend), recorded(backend))
    with pytest.raises(EmbedderMismatch, match="graphmem reindex --all --embedder reversed-64"):
        GraphMemory.open(url, embedder=Reversed(), **options)
    assert (_contents(backend), recorded(backend)) == before  # refused before any write
    spy = Calls(HashEmbedder(DIM))
    with GraphMemory.open(url, embedder=spy, **options) as mem:
        assert spy.texts == []  # same name: no probe at open (a model would load)
        assert mem.count() == 1


def test_the_fingerprint_is_the_same_in_another_process(
    backend: GraphBackend, store: Store
) -> None:
    url, options = store
    with GraphMemory.open(url, embedder=HashEmbedder(DIM), **options) as mem:
        mem.remember("Alice drinks green tea", agent_id="alice")
    with GraphMemory.open(url, embedder=None, **options) as plain:
        have = recorded(plain.backend)  # read by another handle (another driver)
    assert have is not None
    code = (
        "from graphmem.embeddings import HashEmbedder\n"
        "from graphmem.fingerprint import describe\n"
        f"print(describe(HashEmbedder({DIM})).fingerprint)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == have.fingerprint
    with GraphMemory.open(url, embedder=HashEmbedder(DIM), **options) as mem:
        mem.remember("Bob drinks coffee", agent_id="bob")  # the record from a past process
        assert mem.count() == 2


def test_the_refusal_names_an_embedder_value_the_cli_accepts() -> None:
    have = describe(HashEmbedder(DIM))
    assert "`graphmem reindex --all --embedder hash:384`" in str(mismatch(have, "hash-384"))
    assert "--embedder onnx:int8`" in str(mismatch(have, "all-MiniLM-L6-v2-int8"))
    assert "--embedder reversed-64`" in str(mismatch(have, "reversed-64"))


def test_an_export_carries_the_model_and_its_import_records_it(backend: GraphBackend) -> None:
    """An export held the vectors without the model that made them: the imported store had
    no record, so another model of the same dimension wrote into it unchecked."""
    with GraphMemory(backend, embedder=HashEmbedder(DIM), owns_backend=False) as mem:
        mem.remember("Alice drinks green tea", agent_id="alice")
        dump = io.StringIO()
        mem.transfer.export(dump)
    with GraphMemory.open("memory://", embedder=None) as other:
        other.transfer.import_(io.StringIO(dump.getvalue()))
        have = recorded(other.backend)
        assert have is not None and have.same_model(describe(HashEmbedder(DIM)))
        with GraphMemory(other.backend, embedder=Reversed(), owns_backend=False) as mixed:
            with pytest.raises(EmbedderMismatch):
                mixed.remember("Bob drinks coffee", agent_id="bob")


def test_an_import_of_another_models_vectors_is_refused_and_writes_nothing(
    backend: GraphBackend,
) -> None:
    with GraphMemory.open("memory://", embedder=HashEmbedder(DIM)) as source:
        source.remember("Alice drinks green tea", agent_id="alice")
        dump = io.StringIO()
        source.transfer.export(dump)
    with GraphMemory(backend, embedder=Reversed(), owns_backend=False) as mem:
        mem.remember("Bob drinks coffee", agent_id="bob")
        before = _contents(backend)
        with pytest.raises(EmbedderMismatch, match="import"):
            mem.transfer.import_(io.StringIO(dump.getvalue()))
        assert _contents(backend) == before
        have = recorded(backend)
        assert have is not None and have.same_model(describe(Reversed()))


def test_a_migration_takes_the_model_along_and_refuses_another(backend: GraphBackend) -> None:
    from graphmem.migrate import migrate

    with GraphMemory(backend, embedder=HashEmbedder(DIM), owns_backend=False) as mem:
        mem.remember("Alice drinks green tea", agent_id="alice")
    with GraphMemory.open("memory://", embedder=None) as dst:
        migrate(backend, dst.backend)
        have = recorded(dst.backend)
        assert have is not None and have.same_model(describe(HashEmbedder(DIM)))
    with GraphMemory.open("memory://", embedder=Reversed()) as dst:
        dst.remember("Bob drinks coffee", agent_id="bob")
        before = _contents(dst.backend)
        with pytest.raises(EmbedderMismatch):
            migrate(backend, dst.backend)
        assert _contents(dst.backend) == before
