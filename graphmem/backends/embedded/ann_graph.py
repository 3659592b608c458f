"""The vector index's HNSW graph: faiss's HNSW over 8-bit scalar-quantized vectors.

An HNSW graph that keeps float32 vectors (hnswlib's only kind) is 1.7 KB a 384-d vector
with its links; with each dimension quantized to one byte (faiss's ``IndexHNSWSQ``,
``QT_8bit``: a trained range per dimension) it is about 0.55 KB. The graph only proposes
candidates: the vector index rescores twice as many as it needs from the exact float32
vectors (its matrix, or the store's rows), so scores stay the exact cosines and the
quantization's ranking errors are corrected (recall@10 against exact search 1.000 at 100k,
hnswlib's 1.000; benchmarks/RESULTS.md, twelfth session).

faiss numbers the vectors of an HNSW graph by the order they were added and cannot take
one out: the index's labels are those positions, a removed or replaced vector's label is
retired by the index (its key forgotten) and the graph's searches skip it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Graph", "library"]

#: the range of each dimension is the sample's, widened by this share of it on both
#: sides: a vector added later outside the sample's range is clipped less
_RANGE_MARGIN = 0.1


def library() -> Any:
    """faiss, or None when it is not installed (vector search then stays exact)."""
    try:
        import faiss
    except ImportError:
        return None
    return faiss


class Graph:
    """An HNSW graph over unit vectors (inner product), numbered in the order added."""

    def __init__(self, lib: Any, index: Any) -> None:
        self._lib = lib
        self.index = index

    @classmethod
    def new(cls, lib: Any, dim: int, *, m: int, ef_construction: int, sample: np.ndarray) -> Graph:
        """An empty graph whose quantizer's ranges are trained on ``sample`` (unit vectors:
        with their negations, so each range holds 0 and a small sample does not make it
        one-sided)."""
        index = lib.IndexHNSWSQ(dim, lib.ScalarQuantizer.QT_8bit, m, lib.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        sq = lib.downcast_index(index.storage).sq
        sq.rangestat = lib.ScalarQuantizer.RS_minmax
        sq.rangestat_arg = _RANGE_MARGIN
        sample = np.asarray(sample, dtype=np.float32).reshape(-1, dim)
        if not len(sample):
            sample = np.eye(1, dim, dtype=np.float32)
        index.train(np.ascontiguousarray(np.concatenate([sample, -sample])))
        return cls(lib, index)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def add(self, unit: np.ndarray, first: int) -> None:
        """Add unit vectors numbered from ``first`` (which must be the graph's size)."""
        if first != len(self):
            raise RuntimeError(f"the graph holds {len(self)} vectors; labels from {first}")
        self.index.add(np.ascontiguousarray(unit, dtype=np.float32))

    def search(self, q: np.ndarray, k: int, ef: int) -> list[int]:
        """The labels of the (about) ``k`` nearest vectors to the unit vector ``q``, nearest
        first by the quantized inner product."""
        params = self._lib.SearchParametersHNSW()
        params.efSearch = max(ef, k)
        _, labels = self.index.search(q.reshape(1, -1), k, params=params)
        found: list[int] = labels[0].tolist()
        return [label for label in found if label >= 0]

    def save(self, path: str) -> None:
        self._lib.write_index(self.index, path)

    @classmethod
    def load(cls, lib: Any, path: str, dim: int) -> Graph:
        """The graph in the file ``path`` (ValueError unless it is one of these graphs of
        ``dim`` dimensions)."""
        index = lib.read_index(path)  # of its own class (a downcast would not own it)
        if not isinstance(index, lib.IndexHNSWSQ) or index.d != dim:
            raise ValueError("the file does not hold a quantized HNSW graph of this dimension")
        return cls(lib, index)
