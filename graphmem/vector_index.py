"""In-process vector index used by the embedded backend.

Vectors live in one contiguous float32 matrix (rows addressed by string keys; deletion
swaps the last row in), searched by cosine similarity with one matrix-vector product — no
Python loop per vector. ``allowed`` restricts the search to a candidate set *before* the
top-k cut, so a scoped query still returns k results when k exist.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import numpy as np

from graphmem.errors import DimensionMismatch

__all__ = ["VectorIndex"]


class VectorIndex:
    """Exact cosine search over a contiguous float32 matrix."""

    def __init__(self, dim: int, *, capacity: int = 1024) -> None:
        self.dim = dim
        self._mat = np.zeros((max(capacity, 16), dim), dtype=np.float32)
        self._norm = np.zeros(self._mat.shape[0], dtype=np.float32)
        self._keys: list[str] = []
        self._row: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._row

    def _grow(self, need: int) -> None:
        if need <= self._mat.shape[0]:
            return
        cap = max(need, self._mat.shape[0] * 2)
        mat = np.zeros((cap, self.dim), dtype=np.float32)
        mat[: len(self._keys)] = self._mat[: len(self._keys)]
        norm = np.zeros(cap, dtype=np.float32)
        norm[: len(self._keys)] = self._norm[: len(self._keys)]
        self._mat, self._norm = mat, norm

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Insert or replace vectors (shape ``(len(keys), dim)``)."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(keys), -1)
        if vectors.shape[1] != self.dim:
            raise DimensionMismatch(
                f"embedding has {vectors.shape[1]} dimensions; this store uses {self.dim}"
            )
        self._grow(len(self._keys) + len(keys))
        norms = np.linalg.norm(vectors, axis=1)
        for key, vec, nrm in zip(keys, vectors, norms, strict=True):
            row = self._row.get(key)
            if row is None:
                row = len(self._keys)
                self._keys.append(key)
                self._row[key] = row
            self._mat[row] = vec
            self._norm[row] = nrm

    def remove(self, keys: Collection[str]) -> None:
        for key in keys:
            row = self._row.pop(key, None)
            if row is None:
                continue
            last = len(self._keys) - 1
            if row != last:
                moved = self._keys[last]
                self._mat[row] = self._mat[last]
                self._norm[row] = self._norm[last]
                self._keys[row] = moved
                self._row[moved] = row
            self._keys.pop()

    def get(self, key: str) -> np.ndarray | None:
        row = self._row.get(key)
        return None if row is None else self._mat[row].copy()

    def search(
        self,
        query: np.ndarray,
        k: int,
        *,
        candidates: Collection[str] | None = None,
        allowed: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k (key, cosine) among ``candidates`` (all when None) passing ``allowed``."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise DimensionMismatch(
                f"query vector has {q.shape[0]} dimensions; this store uses {self.dim}"
            )
        n = len(self._keys)
        if n == 0 or k <= 0:
            return []
        qn = float(np.linalg.norm(q)) or 1.0
        if candidates is not None:
            rows = np.fromiter(
                (r for r in (self._row.get(c) for c in candidates) if r is not None),
                dtype=np.int64,
            )
            if rows.size == 0:
                return []
            scores = (self._mat[rows] @ q) / (np.maximum(self._norm[rows], 1e-12) * qn)
        else:
            rows = None
            scores = (self._mat[:n] @ q) / (np.maximum(self._norm[:n], 1e-12) * qn)
        out: list[tuple[str, float]] = []
        fetch = min(len(scores), k if allowed is None else max(4 * k, 64))
        while True:
            top = np.argpartition(-scores, fetch - 1)[:fetch] if fetch < len(scores) else (
                np.arange(len(scores))
            )
            top = top[np.argsort(-scores[top], kind="stable")]
            out = []
            for idx in top:
                key = self._keys[int(rows[idx]) if rows is not None else int(idx)]
                if allowed is None or allowed(key):
                    out.append((key, float(scores[idx])))
                    if len(out) == k:
                        return out
            if fetch >= len(scores):
                return out
            fetch = min(len(scores), fetch * 4)
