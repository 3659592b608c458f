"""Exact cosine scoring over a float32 matrix: the matrix-vector product on the calling
thread, row lengths, a unit query, the best k of a score array (what
:class:`~graphmem.backends.embedded.vector_index.VectorIndex` ranks with).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["dot", "norms", "top", "unit"]


def dot(mat: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``mat @ q`` on the calling thread. numpy hands a matrix-vector product of this size
    to the BLAS library's thread pool; on a busy machine those threads wait for cores and
    one query's scores take tens of milliseconds instead of one. einsum's own loop does
    not thread."""
    scores: np.ndarray = np.einsum("ij,j->i", mat, q)
    return scores


def norms(vectors: np.ndarray) -> np.ndarray:
    """Each row's length, without the (n, dim) temporary of ``x * x`` (at an open that is
    150 MB of fresh pages for 100k vectors, which cost more than the arithmetic)."""
    norms: np.ndarray = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    return norms


def unit(q: np.ndarray) -> np.ndarray:
    """``q`` scaled to unit length (a zero vector as it is)."""
    unit: np.ndarray = q / (float(np.linalg.norm(q)) or 1.0)
    return unit


def top(
    scores: np.ndarray,
    key_at: Callable[[int], str],
    k: int,
    allowed: Callable[[str], bool] | None,
) -> list[tuple[str, float]]:
    """The best ``k`` of ``scores`` whose keys pass ``allowed``, best first (ties in the
    order of the scores)."""
    fetch = min(len(scores), k if allowed is None else max(4 * k, 64))
    while True:
        if fetch < len(scores):
            top = np.argpartition(-scores, fetch - 1)[:fetch]
        else:
            top = np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        out: list[tuple[str, float]] = []
        for idx in top:
            key = key_at(int(idx))
            if allowed is None or allowed(key):
                out.append((key, float(scores[idx])))
                if len(out) == k:
                    return out
        if fetch >= len(scores):
            return out
        fetch = min(len(scores), fetch * 4)
