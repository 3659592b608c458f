"""Background vectors: remember() is acknowledged before the model runs, and every memory
gets its vector eventually — also after a crash or when written without an embedder."""

from __future__ import annotations

import threading
import time
import zlib

import numpy as np

from graphmem.config import RecallConfig
from graphmem.embeddings import HashEmbedder
from tests.conftest import Stores


class GatedEmbedder:
    """A model stand-in whose background work waits until the test opens the gate (query
    embeddings on the caller's thread are not held)."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(64)
        self.gate = threading.Event()
        self.calls = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        if threading.current_thread().name.startswith("graphmem-vectorizer"):
            assert self.gate.wait(30), "the test never opened the gate"
        return self.inner.embed(texts)


class SynonymEmbedder:
    """A slow model stand-in that knows tea is a beverage: "tea", "beverage" and "drink"
    share one direction, every other word its own (a hash), so only meaning links the
    question "favourite beverage" to "Alice prefers green tea"."""

    name = "synonyms"
    dim = 64

    def embed(self, texts: list[str]) -> np.ndarray:
        if threading.current_thread().name.startswith("graphmem-vectorizer"):
            time.sleep(1.0)  # a batch behind the write takes a while (a model under load)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                j = 0 if w in ("tea", "beverage", "drink") else 1 + zlib.crc32(w.encode()) % 63
                out[i, j] += 3.0 if j == 0 else 0.3
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def test_remember_returns_before_the_vector_and_recall_finds_it_lexically(stores: Stores) -> None:
    emb = GatedEmbedder()
    with stores.open("s.db", embedder=emb) as mem:
        m = mem.remember("Alice prefers green tea", agent_id="a")
        assert mem.get(m.id).embedding is None  # acknowledged, durable, no vector yet
        # a recall told not to wait (vector_wait=0) finds the memory lexically
        no_wait = RecallConfig(vector_wait=0)
        [hit] = mem.recall("green tea", agent_id="a", touch=False, config=no_wait)
        assert hit.memory.id == m.id and "vector" not in hit.breakdown
        emb.gate.set()
        mem.vectors.wait(timeout=30)
        vec = mem.get(m.id).embedding
        assert vec is not None and len(vec) == 64
        assert np.allclose(vec, emb.inner.embed(["Alice prefers green tea"])[0], atol=1e-6)


def test_a_recall_waits_for_this_handles_vectors_within_its_bound(stores: Stores) -> None:
    emb = GatedEmbedder()
    with stores.open("s.db", embedder=emb) as mem:
        m = mem.remember("Alice prefers green tea", agent_id="a")
        # the vector cannot come (gate shut): recall gives up after its bound, lexically
        short = RecallConfig(vector_wait=0.2)
        [hit] = mem.recall("green tea", agent_id="a", touch=False, config=short)
        assert hit.memory.id == m.id and "vector" not in hit.breakdown
        # once the worker can run, the next recall waits for it and ranks by meaning
        threading.Timer(0.2, emb.gate.set).start()
        [hit] = mem.recall("green tea", agent_id="a", touch=False)
        assert hit.memory.id == m.id and "vector" in hit.breakdown
        assert mem.get(m.id).embedding is not None


def test_a_recall_after_update_finds_the_new_version_by_meaning_at_once(stores: Stores) -> None:
    """The README example: remember, update, then ask in other words; no wait call."""
    with stores.open("s.db", embedder=SynonymEmbedder()) as mem:
        m = mem.remember("Alice prefers tea", agent_id="assistant")
        v2 = mem.update(m.id, "Alice prefers green tea", reason="she said so")
        hits = mem.recall("favourite beverage", agent_id="assistant", k=5, touch=False)
        assert [h.memory.id for h in hits] == [v2.id]
        assert hits[0].breakdown["vector"] > 0.5


def test_memories_without_vectors_are_embedded_after_reopening(stores: Stores) -> None:
    with stores.open("s.db", embedder=None) as mem:  # written with no embedder at all
        ids = [m.id for m in mem.remember_many([{"content": f"note {i}"} for i in range(70)])]
    emb = GatedEmbedder()
    emb.gate.set()
    with stores.open("s.db", embedder=emb, vectors="background") as mem:
        mem.vectors.wait(timeout=30)
        assert all(m.embedding is not None for m in mem.get(ids))
    with stores.open("s.db", embedder=None) as mem:  # and they were stored durably
        assert all(m.embedding is not None for m in mem.get(ids))


def test_background_vectors_are_the_embedders_rows_bit_for_bit(stores: Stores) -> None:
    # several batches (a helper thread embeds the next while one is stored); each memory's
    # stored vector is its text's float32 row exactly, in this handle and after a reopen
    emb = GatedEmbedder()
    emb.gate.set()
    texts = [f"note {i} " + "word " * (i % 17) for i in range(700)]
    want = emb.inner.embed(texts)
    with stores.open("s.db", embedder=emb, vectors="background") as mem:
        ids = [m.id for m in mem.remember_many([{"content": t} for t in texts])]
        mem.vectors.wait(timeout=30)
        got = {m.id: m.embedding for m in mem.get(ids)}
    for i, row in zip(ids, want, strict=True):
        assert np.array_equal(np.asarray(got[i], dtype=np.float32), row)
    with stores.open("s.db", embedder=None) as mem:
        again = {m.id: m.embedding for m in mem.get(ids)}
    assert all(np.array_equal(np.asarray(again[i], dtype=np.float32), got[i]) for i in ids)


def test_a_vector_is_never_attached_to_changed_content(stores: Stores) -> None:
    emb = GatedEmbedder()
    with stores.open("s.db", embedder=emb) as mem:
        m = mem.remember("first text", agent_id="a")
        mem.forget(m.id)  # gone before its vector was computed
        m2 = mem.remember("second text", agent_id="a")
        emb.gate.set()
        mem.vectors.wait(timeout=30)
        assert mem.get([m.id]) == []
        assert np.allclose(
            mem.get(m2.id).embedding or (), emb.inner.embed(["second text"])[0], atol=1e-6
        )


def test_inline_mode_embeds_before_acknowledging(stores: Stores) -> None:
    emb = GatedEmbedder()
    emb.gate.set()
    with stores.open("s.db", embedder=emb, vectors="inline") as mem:
        m = mem.remember("Alice prefers green tea")
        assert mem.get(m.id).embedding is not None


def test_recall_right_after_remember_sees_the_new_vector(stores: Stores) -> None:
    emb = GatedEmbedder()
    emb.gate.set()
    with stores.open("s.db", embedder=emb) as mem:
        m = mem.remember("Alice prefers green tea", agent_id="a")
        [hit] = mem.recall("prefers green tea", agent_id="a", touch=False)
        assert hit.memory.id == m.id and "vector" in hit.breakdown


def test_a_store_moves_to_a_model_of_another_dimension(stores: Stores) -> None:
    with stores.open("s.db", embedder=HashEmbedder(64)) as mem:
        ids = [
            m.id for m in mem.remember_many([{"content": f"note {i} on tea"} for i in range(30)])
        ]
    with stores.open("s.db", embedder=None) as mem:
        report = mem.vectors.reindex(embedder=HashEmbedder(32), all=True)
        assert report.embedded == 30
        assert {len(m.embedding or ()) for m in mem.get(ids)} == {32}
    with stores.open("s.db", embedder=HashEmbedder(32)) as mem:  # the new model opens
        assert mem.recall("tea", k=3, touch=False)[0].breakdown.get("vector") is not None
        assert mem.backend.stats().embedding_dim == 32


def test_one_changed_memory_does_not_cost_the_batch_its_vectors(stores: Stores) -> None:
    with stores.open("m1.db", embedder=None) as mem:
        a, b = mem.remember_many([{"content": "first"}, {"content": "second"}])
        real = mem.writes.commit
        raced = False

        def commit_after_a_forget(batch, **kw):  # type: ignore[no-untyped-def]
            nonlocal raced
            if batch.vectors and not raced:  # b goes between the read and the write
                raced = True
                mem.forget(b.id)
            return real(batch, **kw)

        mem.writes.commit = commit_after_a_forget  # type: ignore[method-assign]
        mem.writes.store_vectors(
            [(a.id, "first"), (b.id, "second")], np.ones((2, 8), dtype=np.float32)
        )
        assert raced and mem.get(a.id).embedding is not None
        assert mem.get([b.id]) == []
