"""all-MiniLM-L6-v2 through ONNX Runtime: export once per model (optionally int8), then encode
without torch.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from graphmem.embeddings.base import (
    DEFAULT_MODEL,
    SMALL_BATCH,
    Embedder,
    _CachedEmbedder,
    _normalise_rows,
    log,
)
from graphmem.embeddings.torch import (
    _MODELS_LOCK,
    _bundled_model,
    _default_threads,
    _Layout,
    _load_sentence_transformer,
    _read_layout,
    _sentence_transformers_available,
    default_cache_dir,
)
from graphmem.embeddings.wordpiece import LazyWordPiece
from graphmem.errors import ConfigError

# ---------------------------------------------------------------------------------------
# ONNX Runtime

# Part of the cache key: bump it when the export changes so old files are not reused.
_ONNX_FORMAT = 3
Quantize = Literal["none", "int8"]
_SAMPLE_TEXTS = (
    "Alice drinks green tea every morning.",
    "What did the team decide about the release date?",
    "x",
)
_EXPORT_LOCK = threading.Lock()


def onnx_runtime_available() -> bool:
    """True when what :class:`OnnxEmbedder` needs at query time is installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers"))


def _onnx_export_available() -> bool:
    """True when an ONNX file can be made here: for a BERT model with the onnx package alone
    (no torch), for any other model through torch and sentence-transformers."""
    return importlib.util.find_spec("onnx") is not None


def _torch_export_available() -> bool:
    return all(
        importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers", "onnx")
    )


# The files whose bytes decide a model's vectors; their digest names its cache folder.
_KEY_FILES = ("config.json", "model.safetensors", "tokenizer.json", "modules.json")
_DIGESTS_FILE = "digests.json"


def _content_key(source: Path, cache: Path) -> str:
    """A digest of the model files' *contents* (and the export format): the same model in two
    virtual environments shares one cached ONNX file, a changed model gets another.

    Hashing 90 MB costs a few tenths of a second, so the digest is remembered in
    ``cache/digests.json`` against each file's path, size and time; a file that changes gets
    hashed again."""
    files = [source / n for n in _KEY_FILES if (source / n).is_file()]
    stamp = "|".join(f"{f.resolve()}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
    stamp += f"|format {_ONNX_FORMAT}"  # a new export format is a new key, memo or not
    memo_path = cache / _DIGESTS_FILE
    try:
        memo: dict[str, str] = json.loads(memo_path.read_text())
        if not isinstance(memo, dict):
            memo = {}
    except (OSError, ValueError):
        memo = {}
    key = memo.get(stamp)
    if key is None:
        h = hashlib.sha256(f"{_ONNX_FORMAT}\0".encode())
        for f in files:
            h.update(f"{f.name}\0".encode())
            with f.open("rb") as fh:
                while block := fh.read(1 << 20):
                    h.update(block)
        key = h.hexdigest()[:16]
        memo = {k: v for k, v in memo.items() if Path(k.split(":", 1)[0]).exists()}
        memo[stamp] = key
        with contextlib.suppress(OSError):
            with _temp_beside(memo_path) as tmp:
                tmp.write_text(json.dumps(memo, indent=0))
    return key


@contextlib.contextmanager
def _temp_beside(target: Path) -> Iterator[Path]:
    """A temporary file next to ``target``, renamed onto it when the block succeeds: readers
    never see a half-written model and concurrent exporters do not clash."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=target.stem + ".", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _tokenizer(source: Path, max_length: int) -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(source / "tokenizer.json"))
    tok.enable_truncation(max_length)
    tok.no_padding()  # each call pads to its own longest text
    return tok


def _encode(tok: Any, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask of ``texts``, right-padded to the longest."""
    encs = [tok.encode(texts[0])] if len(texts) == 1 else tok.encode_batch(list(texts))
    return _padded(encs)


def _padded(encs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask of tokenizer encodings, right-padded to the longest."""
    rows = [e.ids for e in encs]
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


def _pool(tokens: np.ndarray, mask: np.ndarray, how: str) -> np.ndarray:
    if how == "cls":
        return np.ascontiguousarray(tokens[:, 0, :])
    m = mask[:, :, None].astype(np.float32)
    if how == "max":
        pooled = np.where(m > 0, tokens, np.float32(-1e9)).max(axis=1)
    else:
        pooled = (tokens * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
    return np.asarray(pooled, dtype=np.float32)


# Graph fusions a query session runs without. On the int8 graph, ONNX Runtime's fused
# SkipLayerNormalization kernel costs about 22 µs a call for a short query, against about 13
# for the Add and LayerNormalization it replaces: 12 calls, ~0.2 ms of a ~1.9 ms query. The
# vectors are as close to the full-precision model's either way (300 LoCoMo questions: mean
# cosine 0.99476 against 0.99477, the least 0.9914 both); documents keep the default, so the
# stored vectors do not change.
_QUERY_UNFUSED = ("SkipLayerNormFusion",)


def _session(path: Path, unfused: tuple[str, ...] = ()) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    # One thread per run; parallelism, when a batch wants it, comes from concurrent runs.
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Spinning threads burn the cores other processes need on a busy machine.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    opts.log_severity_level = 3
    return ort.InferenceSession(
        str(path), opts, providers=["CPUExecutionProvider"], disabled_optimizers=list(unfused)
    )


def _run(session: Any, inputs: set[str], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in inputs:
        feed["token_type_ids"] = np.zeros_like(ids)
    return np.asarray(session.run(None, feed)[0], dtype=np.float32)


def _export_onnx(source: Path, layout: _Layout, target: Path) -> None:
    """Make the fp32 ONNX file of a sentence-transformers model's transformer.

    A BERT model is built straight from its safetensors weights with the onnx package (no
    torch); any other model is exported through torch, which then must be installed. When
    sentence-transformers is installed the file is checked against it on sample texts.
    """
    from graphmem.bert_onnx import build_bert_onnx

    # a first use pays this once (seconds): say so, rather than seem to hang
    log.warning("preparing the embedding model for ONNX Runtime, once (a few seconds): %s", target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".export-") as work:
        tmp = Path(work) / "inline.onnx"
        try:
            build_bert_onnx(source, tmp)
        except ConfigError as e:
            if not _torch_export_available():
                raise ConfigError(
                    f"the ONNX file of {source.name} cannot be made here ({e}); the torch "
                    "export needs graphmem[torch] (or use embedder 'torch')"
                ) from e
            _torch_export(source, layout, tmp)
        if _sentence_transformers_available():
            _check_against_torch(source, layout, tmp)
        _save_with_external_weights(tmp, target)


def _save_with_external_weights(model_file: Path, target: Path) -> None:
    """Write an ONNX file as ``target`` plus its weights in ``target.name + ".data"``.

    ONNX Runtime reads a side file of raw weights far faster than it parses them out of a
    90 MB protobuf: a new session costs about a third of the CPU, which is most of what a cold
    ``graphmem recall`` spends on the model. Both files are staged in a private folder and
    renamed into place, weights first, so a reader that finds ``target`` finds its weights,
    and concurrent exporters (which write the same bytes) do not clash."""
    import onnx

    model = onnx.load(str(model_file))
    data_name = target.name + ".data"
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".stage-") as stage:
        staged = Path(stage) / target.name
        onnx.save_model(
            model,
            str(staged),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=data_name,
            size_threshold=1024,
        )
        os.replace(staged.with_name(data_name), target.with_name(data_name))
        os.replace(staged, target)


def _check_against_torch(source: Path, layout: _Layout, path: Path) -> None:
    ids, mask = _encode(_tokenizer(source, layout.max_length), _SAMPLE_TEXTS)
    session = _session(path)
    got = _normalise_rows(
        _pool(
            _run(session, {i.name for i in session.get_inputs()}, ids, mask), mask, layout.pooling
        )
    )
    st = _load_sentence_transformer(str(source), "cpu")
    want = np.asarray(
        st.encode(
            list(_SAMPLE_TEXTS),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
    )
    worst = float((got * want).sum(axis=1).min())
    if worst < 0.999:
        raise ConfigError(
            f"the ONNX file of {source.name} disagrees with the model "
            f"(cosine {worst:.4f}); use embedder 'torch'"
        )


def _torch_export(source: Path, layout: _Layout, target: Path) -> None:
    """Export a non-BERT transformer through torch (needs torch, sentence-transformers, onnx)."""
    import inspect

    import torch

    st = _load_sentence_transformer(str(source), "cpu")
    encoder = st[0].auto_model
    takes_types = "token_type_ids" in inspect.signature(encoder.forward).parameters
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if takes_types else [])

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, *args: Any) -> Any:
            return self.encoder(**dict(zip(names, args, strict=True))).last_hidden_state

    ids, mask = _encode(_tokenizer(source, layout.max_length), _SAMPLE_TEXTS)
    sample = [torch.from_numpy(ids), torch.from_numpy(mask)]
    if takes_types:
        sample.append(torch.zeros_like(sample[0]))
    dynamic = {n: {0: "batch", 1: "tokens"} for n in [*names, "token_embeddings"]}
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and exporter notes, not errors
        torch.onnx.export(
            TokenEmbeddings().eval(),
            tuple(sample),
            str(target),
            dynamo=False,
            input_names=names,
            output_names=["token_embeddings"],
            dynamic_axes=dynamic,
            opset_version=17,
            do_constant_folding=True,
        )


def _drop_stale_exports(folder: Path, model_name: str) -> None:
    """Remove the cached ONNX files of older versions or exports of the same model (the
    folder names end in a content digest): one cached copy per model, not one per venv."""
    import shutil

    for other in folder.parent.glob(f"{model_name}-*"):
        if other != folder and other.is_dir():
            tail = other.name[len(model_name) + 1 :]
            if all(c in "0123456789abcdef" for c in tail):
                log.info("removing a stale cached ONNX model: %s", other)
                shutil.rmtree(other, ignore_errors=True)


class _DropQuantizerNotes(logging.Filter):
    """The quantizer logs advice through the root logger; it is not a problem here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname


def _quantize_int8(fp32: Path, target: Path) -> None:
    """Dynamic int8 weights for the MatMuls, per output channel (cosine to fp32 about 0.99),
    kept as external weights like the fp32 file: a session then loads in about a third of
    the CPU (what a cold ``graphmem recall`` pays for its query model)."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        raise ConfigError("int8 quantisation needs the onnx package once") from e
    notes = _DropQuantizerNotes()
    root = logging.getLogger()
    root.addFilter(notes)
    try:
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".quantize-") as work:
            tmp = Path(work) / target.name
            quantize_dynamic(
                fp32,
                tmp,
                weight_type=QuantType.QInt8,
                op_types_to_quantize=["MatMul"],
                per_channel=True,
            )
            _save_with_external_weights(tmp, target)
    finally:
        root.removeFilter(notes)


class _Runtime(NamedTuple):
    """A loaded ONNX file: its session, its model's tokenizer (and the Python path for one
    plain text, used when the tokenizer is one it reproduces) and the session's input names."""

    session: Any
    tokenizer: Any
    inputs: set[str]
    fast: LazyWordPiece


_RUNTIMES: dict[tuple[Path, Path, int, tuple[str, ...]], _Runtime] = {}


def _onnx_runtime(
    path: Path, source: Path, max_length: int, unfused: tuple[str, ...] = ()
) -> _Runtime:
    """The runtime of an ONNX file, loaded once per process (a session holds the weights;
    stores opened in one process share it; runs are thread-safe)."""
    key = (path, source, max_length, unfused)
    with _MODELS_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            session = _session(path, unfused)
            runtime = _Runtime(
                session,
                _tokenizer(source, max_length),
                {i.name for i in session.get_inputs()},
                LazyWordPiece(source / "tokenizer.json", max_length),
            )
            _RUNTIMES[key] = runtime
        return runtime


class OnnxEmbedder(_CachedEmbedder):
    """A sentence-transformers model run by ONNX Runtime: no torch at query time.

    ``model`` is a local sentence-transformers directory (Transformer + Pooling, optionally
    Normalize); ``None`` means the bundled all-MiniLM-L6-v2. On first use the model is
    built once into ``cache_dir`` (default :func:`default_cache_dir`; a BERT model needs only
    the onnx package, others torch), keyed by the model files' contents so every virtual
    environment shares it, and later processes only load the file. ``quantize="int8"`` uses
    int8 weights: faster, with vectors at a cosine of about 0.99 to the model's (``name``
    then ends in ``-int8``). ``query_quantize`` picks the weights for search queries alone
    (:meth:`embed_query`); the stored vectors keep ``quantize``'s. Its default, ``None``, is
    ``"int8"`` for the bundled model (a query costs about 40% of the fp32 run's CPU; on
    LoCoMo dev recall@10 stays within half a point of fp32 queries) and ``quantize`` for any
    other model, whose int8 quality nobody measured here; ``"none"`` keeps fp32 queries.
    Calls of up to ``SMALL_BATCH`` texts run on the calling thread; larger ones are split
    by token count into batches that run on up to ``threads`` threads.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        quantize: Quantize = "none",
        query_quantize: Quantize | None = None,
        cache_dir: str | Path | None = None,
        batch_size: int = 32,
        threads: int | None = None,
        cache_size: int = 32_768,
        fallback: Callable[[], Embedder] | None = None,
    ) -> None:
        if model is None:
            path = _bundled_model()
            name = DEFAULT_MODEL
        else:
            path = Path(model)
            name = path.name
        layout = _read_layout(path)
        if layout is None or not (path / "tokenizer.json").is_file():
            raise ConfigError(
                f"{str(model)!r} is not a local Transformer+Pooling sentence-transformers model "
                "directory with a tokenizer.json; use embedder 'torch' for it"
            )
        if query_quantize is None:
            query_quantize = "int8" if model is None else quantize
        for what, q in (("quantize", quantize), ("query_quantize", query_quantize)):
            if q not in ("none", "int8"):
                raise ConfigError(f"{what} must be 'none' or 'int8', got {q!r}")
        if batch_size < 1:
            raise ConfigError("batch_size must be >= 1")
        if threads is not None and threads < 1:
            raise ConfigError("threads must be >= 1")
        self.source = path
        self._model_name = name
        self._bundled = model is None
        self.name = name if quantize == "none" else f"{name}-int8"
        self.quantize = quantize
        self.batch_size = batch_size
        self.threads = threads or _default_threads()
        self._layout = layout
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._onnx_path: Path | None = None
        self._lock = threading.Lock()
        self._runtime: _Runtime | None = None
        #: graph fusions its session runs without (a query embedder's: _QUERY_UNFUSED)
        self._unfused: tuple[str, ...] = ()
        self._pool: ThreadPoolExecutor | None = None
        #: the embedder to use when the ONNX file cannot be made here (``auto``: the same
        #: model through sentence-transformers), and the one in use once that happened
        self._fallback = fallback
        self._replacement: Embedder | None = None
        self.query_quantize = query_quantize
        self._queries: OnnxEmbedder | None = None
        super().__init__(cache_size)

    def embed_query(self, text: str) -> np.ndarray:
        """One search query's vector: with ``query_quantize="int8"`` (and full-precision
        stored vectors) from the int8 weights, made once beside the fp32 file; otherwise
        as :meth:`embed`. When the int8 file cannot be made here, queries use the stored
        vectors' weights (logged once)."""
        queries = self._query_embedder()
        return (self if queries is None else queries)._embed_one(text)

    def _query_embedder(self) -> OnnxEmbedder | None:
        if self.query_quantize == self.quantize or self._replacement is not None:
            return None
        with self._lock:
            if self._queries is None:
                queries = OnnxEmbedder(
                    # the same name, so the same cache folder as the stored vectors' file
                    None if self._bundled else self.source,
                    quantize=self.query_quantize,
                    cache_dir=self._cache_dir,
                    threads=1,
                    cache_size=self._cache.max_entries,
                )
                queries._unfused = _QUERY_UNFUSED
                try:
                    queries._loaded()
                except Exception as e:  # the int8 file needs the onnx package and a cache
                    log.warning(
                        "could not prepare the %s query weights (%s); queries use the "
                        "stored vectors' weights",
                        self.query_quantize,
                        e,
                    )
                    self.query_quantize = self.quantize
                    return None
                self._queries = queries
            return self._queries

    @property
    def dim(self) -> int:
        return self._layout.dim

    @property
    def onnx_path(self) -> Path:
        """The ONNX file this embedder runs (it may not exist yet)."""
        if self._onnx_path is None:
            base = self._cache_dir if self._cache_dir is not None else default_cache_dir()
            cache = base / "onnx"
            folder = cache / f"{self._model_name}-{_content_key(self.source, cache)}"
            name = "model.onnx" if self.quantize == "none" else "model-int8.onnx"
            self._onnx_path = folder / name
        return self._onnx_path

    def is_exported(self) -> bool:
        """True when the ONNX file is already in the cache (first use will not export)."""
        return self.onnx_path.is_file()

    def threads_for(self, n_texts: int) -> int:
        """Threads used for a call of ``n_texts`` texts."""
        return 1 if n_texts <= SMALL_BATCH else self.threads

    def prepare(self) -> Path:
        """Make the ONNX file if it is not cached yet, and the int8 one when queries use it
        (so that a first search does not pay for it); the file's path."""
        target = self.onnx_path
        with _EXPORT_LOCK:
            fp32 = target.with_name("model.onnx")
            if not fp32.is_file():
                _export_onnx(self.source, self._layout, fp32)
                _drop_stale_exports(fp32.parent, self._model_name)
            if not target.is_file():
                _quantize_int8(fp32, target)
            queries = fp32.with_name("model-int8.onnx")
            if self.query_quantize == "int8" and not queries.is_file():
                try:
                    _quantize_int8(fp32, queries)
                except Exception as e:  # the stored vectors' file is made: that one counts
                    log.warning("could not make the int8 query weights: %s", e)
        return target

    def _loaded(self) -> _Runtime:
        with self._lock:
            if self._runtime is None:
                path = self.onnx_path
                if not path.is_file():
                    path = self.prepare()
                self._runtime = _onnx_runtime(
                    path, self.source, self._layout.max_length, self._unfused
                )
            return self._runtime

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        runtime = self._loaded()
        return self._embed_encoded(runtime, *_encode(runtime.tokenizer, texts))

    def _embed_encoded(self, runtime: _Runtime, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return _pool(_run(runtime.session, runtime.inputs, ids, mask), mask, self._layout.pooling)

    def _compute_one(self, text: str) -> np.ndarray:
        """One text's row, bit for bit what a batch of it gives, in fewer steps (a query
        runs them with cold caches, where each numpy call costs tens of microseconds): the
        tokenizer's Python path, and for mean pooling no mask, since one text has no
        padding."""
        runtime = self._runtime  # None until the first call has loaded (or given up)
        if runtime is None or self._layout.pooling != "mean":
            return super()._compute_one(text)
        ids = runtime.fast.ids(text)
        if ids is None:
            return super()._compute_one(text)
        tokens = np.array([ids], dtype=np.int64)
        out = _run(runtime.session, runtime.inputs, tokens, np.ones_like(tokens))
        # the same float32 steps as _pool and _normalise_rows, on one row
        row: np.ndarray = out[0].sum(axis=0)
        row /= np.float32(len(ids))
        norm = np.sqrt(np.add.reduce(row * row, keepdims=True))
        np.maximum(norm, 1e-12, out=norm)
        row /= norm
        return row

    def _compute(self, texts: list[str]) -> np.ndarray:
        if self._replacement is not None:
            return self._replacement.embed(texts)
        try:
            self._loaded()
        except Exception as e:  # the export needs torch, onnx and a writable cache
            if self._fallback is None:
                raise
            log.warning(
                "could not prepare the ONNX model (%s); embedding with the same model "
                "through sentence-transformers instead",
                e,
            )
            with self._lock:
                if self._replacement is None:
                    self._replacement = self._fallback()
            return self._replacement.embed(texts)
        if len(texts) <= SMALL_BATCH:
            return _normalise_rows(self._embed_batch(texts))
        # Sorted by token count, a batch pads little (by characters it padded ~6% more
        # tokens on LoCoMo turns); a text's row does not depend on its batch's padding.
        runtime = self._loaded()
        encs = runtime.tokenizer.encode_batch(texts)
        sizes = [len(e) for e in encs]
        order = sorted(range(len(texts)), key=sizes.__getitem__)
        size = self.batch_size
        # longest batch first: the last to start are the shortest, so the threads end
        # together instead of one waiting out the longest batch alone
        chunks = [order[i : i + size] for i in range(0, len(order), size)][::-1]

        def run(chunk: list[int]) -> np.ndarray:
            return self._embed_encoded(runtime, *_padded([encs[i] for i in chunk]))

        workers = min(self.threads_for(len(texts)), len(chunks))
        if workers > 1:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.threads, "graphmem-embed")
                pool = self._pool
            parts = list(pool.map(run, chunks))
        else:
            parts = [run(c) for c in chunks]
        mat = np.empty((len(texts), self.dim), dtype=np.float32)
        mat[[i for c in chunks for i in c]] = np.concatenate(parts)
        return _normalise_rows(mat)

    def close(self) -> None:
        """Stop the batch threads (the embedder stays usable; they restart when needed)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
