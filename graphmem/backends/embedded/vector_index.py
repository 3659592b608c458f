"""In-process vector index used by the embedded backend.

Vectors live in one contiguous float32 matrix (rows addressed by string keys; deletion
swaps the last row in), searched by cosine similarity with one matrix-vector product — no
Python loop per vector. Above ``ann_threshold`` vectors, an HNSW graph (``hnswlib``) finds
the candidates and the matrix rescores them exactly, so scores are the same cosines either
way. The HNSW graph is built in bulk on the first search above the threshold and maintained
incrementally afterwards.

Filters apply *before* the top-k cut, so a scoped query still returns k results when k
exist: ``candidates`` restricts the search to a key set (small sets are searched exactly;
large ones inside the HNSW traversal), and ``allowed`` is a predicate on keys.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

import graphmem.backends.embedded.hnsw_file as hnsw_file
from graphmem.errors import DimensionMismatch, InvalidInput

__all__ = ["VectorIndex"]

log = logging.getLogger("graphmem.backends.embedded")

#: vectors above which searches go through the HNSW graph (read when an index is made)
ANN_THRESHOLD = 50_000


def _hnswlib() -> Any:
    try:
        import hnswlib
    except ImportError:  # pragma: no cover - hnswlib is a dependency
        return None
    return hnswlib


def _dot(mat: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``mat @ q`` on the calling thread. numpy hands a matrix-vector product of this size
    to the BLAS library's thread pool; on a busy machine those threads wait for cores and
    one query's scores take tens of milliseconds instead of one. einsum's own loop does
    not thread."""
    scores: np.ndarray = np.einsum("ij,j->i", mat, q)
    return scores


class VectorIndex:
    """Cosine search: exact over a contiguous float32 matrix, HNSW-accelerated at scale.

    >>> idx = VectorIndex(3)
    >>> idx.add(["a", "b"], np.array([[1, 0, 0], [0, 1, 0]], dtype=np.float32))
    >>> idx.search(np.array([1, 0.1, 0]), 1)[0][0]
    'a'
    """

    def __init__(
        self,
        dim: int,
        *,
        capacity: int = 1024,
        ann_threshold: int | None = None,
        background_build: bool = True,
        exact_candidates_limit: int = 16_384,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 100,
        hnsw_ef_search: int = 128,
    ) -> None:
        if not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"vector dimension must be a positive int, got {dim!r}")
        self.dim = dim
        self.ann_threshold = ANN_THRESHOLD if ann_threshold is None else ann_threshold
        self.background_build = background_build
        self.exact_candidates_limit = exact_candidates_limit
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self.hnsw_ef_search = hnsw_ef_search
        self._mat = np.zeros((max(capacity, 16), dim), dtype=np.float32)
        self._norm = np.zeros(self._mat.shape[0], dtype=np.float32)
        self._keys: list[str] = []
        self._row: dict[str, int] = {}
        self._lock = threading.RLock()
        # HNSW state: stable integer labels per key (rows move on delete, labels do not)
        self._ann: Any = None
        self._label: dict[str, int] = {}
        self._label_keys: list[str | None] = []
        # background build: keys added/replaced/removed after the build's snapshot
        self._building: threading.Thread | None = None
        self._dirty: set[str] = set()
        #: the graph differs from the one on disk (see save_ann)
        self._ann_unsaved = False
        #: called (from the build thread, holding no lock) once a background build is done
        self.on_ann_built: Callable[[], None] | None = None

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._row

    def missing(self, keys: Collection[str]) -> set[str]:
        """The keys of ``keys`` that have no vector here (one C-level pass: an open asks
        this of every memory)."""
        with self._lock:
            return set(keys).difference(self._row)

    @property
    def ann_active(self) -> bool:
        """Whether searches currently go through the HNSW graph."""
        return self._ann is not None and len(self._keys) >= self.ann_threshold

    def _grow(self, need: int) -> None:
        if need <= self._mat.shape[0]:
            return
        cap = max(need, self._mat.shape[0] * 2)
        mat = np.zeros((cap, self.dim), dtype=np.float32)
        mat[: len(self._keys)] = self._mat[: len(self._keys)]
        norm = np.zeros(cap, dtype=np.float32)
        norm[: len(self._keys)] = self._norm[: len(self._keys)]
        self._mat, self._norm = mat, norm

    def add(self, keys: Sequence[str], vectors: np.ndarray, *, adopt: bool = False) -> None:
        """Insert or replace vectors (shape ``(len(keys), dim)``). ``adopt``: the caller
        gives ``vectors`` up, and an empty index keeps it as its matrix instead of copying
        it (an open: 150 MB of fresh pages at 100k vectors)."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(keys), -1)
        if vectors.shape[1] != self.dim:
            raise DimensionMismatch(
                f"embedding has {vectors.shape[1]} dimensions; this store uses {self.dim}"
            )
        # without the (n, dim) temporary of x * x: at an open that is 150 MB of fresh pages
        # for 100k vectors, which cost more than the arithmetic
        norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
        # a NaN or an infinity in a row makes its norm one, so finite norms clear every
        # value without the (n, dim) boolean temporary (1.5 GB of vectors at 1M); a
        # non-finite norm may also be a finite row whose squares overflow: look closer
        if not np.isfinite(norms).all() and not np.isfinite(vectors).all():
            raise InvalidInput("embeddings must be finite numbers")
        if len(set(keys)) != len(keys):  # last one wins, like sequential adds
            last = {k: i for i, k in enumerate(keys)}
            keep = sorted(last.values())
            keys = [keys[i] for i in keep]
            vectors, norms = vectors[keep], norms[keep]
        with self._lock:
            if not self._keys and self._ann is None and self._building is None:
                # the bulk of an open: every row at once, not one numpy row view per key
                m = len(keys)
                if adopt and vectors.flags.c_contiguous and vectors.flags.writeable:
                    self._mat, self._norm = vectors, norms.astype(np.float32)
                else:
                    self._grow(m)
                    self._mat[:m] = vectors
                    self._norm[:m] = norms
                self._keys = list(keys)
                self._row = dict(zip(self._keys, range(m), strict=True))
                return
            self._grow(len(self._keys) + len(keys))
            for key, vec, nrm in zip(keys, vectors, norms, strict=True):
                row = self._row.get(key)
                if row is None:
                    row = len(self._keys)
                    self._keys.append(key)
                    self._row[key] = row
                self._mat[row] = vec
                self._norm[row] = nrm
            if self._ann is not None:
                self._ann_add(list(keys), vectors, norms)
            elif self._building is not None:
                self._dirty.update(keys)

    def remove(self, keys: Collection[str]) -> None:
        """Remove vectors; unknown keys are ignored."""
        with self._lock:
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
                if self._building is not None:
                    self._dirty.add(key)
                label = self._label.pop(key, None)
                if label is not None and self._ann is not None:
                    self._ann.mark_deleted(label)
                    self._label_keys[label] = None
                    self._ann_unsaved = True

    def get(self, key: str) -> np.ndarray | None:
        """A copy of the stored vector, or None."""
        with self._lock:
            row = self._row.get(key)
            return None if row is None else self._mat[row].copy()

    def cosines(self, keys: Collection[str], query: Sequence[float]) -> dict[str, float]:
        """The cosine of each key's vector to ``query``, for the keys that have one
        (nothing when the dimensions differ)."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            return {}
        with self._lock:
            present = [k for k in keys if k in self._row]
            if not present:
                return {}
            rows = np.fromiter((self._row[k] for k in present), dtype=np.int64)
            mat = self._mat[rows]
        # as recall scores a memory's own embedding, so either way gives the same number
        sims = (mat @ q) / np.maximum(np.linalg.norm(mat, axis=1), 1e-12)
        return dict(zip(present, sims.tolist(), strict=True))

    def rows(self) -> tuple[list[str], np.ndarray]:
        """Every key and a copy of its vector, row by row (what a state file keeps)."""
        with self._lock:
            n = len(self._keys)
            return list(self._keys), self._mat[:n].copy()

    # -- HNSW ------------------------------------------------------------------------

    def build_ann(self) -> bool:
        """Build the HNSW graph over every stored vector now, in this thread (otherwise the
        first search above the threshold starts a background build). Returns False when
        hnswlib is unavailable."""
        self.wait_for_ann()
        with self._lock:
            if self._ann is not None:
                return True
            lib = self._library()
            if lib is None:
                return False
            n = len(self._keys)
            ann = self._new_ann(lib, n)
            self._ann = ann
            self._label = {}
            self._label_keys = []
            log.info("building HNSW index over %d vectors", n)
            self._ann_add(list(self._keys), self._mat[:n], self._norm[:n])
            return True

    @staticmethod
    def _library() -> Any:
        lib = _hnswlib()
        if lib is None:
            log.warning("hnswlib is not installed; vector search stays exact")
        return lib

    def _new_ann(self, lib: Any, n: int) -> Any:
        """An empty HNSW index (inner product over unit vectors) with room for 2n."""
        ann = lib.Index(space="ip", dim=self.dim)
        ann.init_index(
            max_elements=max(2 * n, 1024),
            M=self.hnsw_m,
            ef_construction=self.hnsw_ef_construction,
            allow_replace_deleted=True,
        )
        return ann

    def start_background_build(self) -> bool:
        """Build the HNSW graph in a daemon thread while searches stay exact; the graph
        takes over once built (changes made meanwhile are replayed into it). Returns
        False when hnswlib is unavailable."""
        with self._lock:
            if self._ann is not None or self._building is not None:
                return True
            lib = self._library()
            if lib is None:
                return False
            n = len(self._keys)
            snapshot = (list(self._keys), self._mat[:n].copy(), self._norm[:n].copy())
            self._dirty = set()
            self._building = threading.Thread(
                target=self._build_in_background,
                args=(lib, *snapshot),
                name="graphmem-hnsw-build",
                daemon=True,
            )
            self._building.start()
            log.info("building HNSW index over %d vectors in the background", n)
            return True

    def _build_in_background(
        self, lib: Any, keys: list[str], mat: np.ndarray, norms: np.ndarray
    ) -> None:
        try:
            ann = self._new_ann(lib, len(keys))
            unit = mat / np.maximum(norms, 1e-12)[:, None]
            ann.add_items(unit, np.arange(len(keys), dtype=np.int64))  # the slow part, unlocked
            with self._lock:
                self._ann = ann
                self._label = {k: i for i, k in enumerate(keys)}
                self._label_keys = list(keys)
                dirty, self._dirty = self._dirty, set()
                for key in dirty:  # replay what changed since the snapshot
                    old = self._label.pop(key, None)
                    if old is not None:
                        ann.mark_deleted(old)
                        self._label_keys[old] = None
                for key in dirty:
                    row = self._row.get(key)
                    if row is not None:
                        self._ann_add([key], self._mat[row : row + 1], self._norm[row : row + 1])
        except Exception:  # the index stays exact; a failed build must not kill searches
            log.exception("HNSW build failed; vector search stays exact")
            return
        finally:
            with self._lock:
                self._building = None
        self._ann_unsaved = True
        done = self.on_ann_built
        if done is not None:
            try:
                done()
            except Exception:  # keeping the graph on disk is an optimisation
                log.exception("could not save the HNSW graph")

    # -- the graph on disk -------------------------------------------------------------

    def save_ann(self, store: Path, *, store_id: str, seq: int) -> bool:
        """Write the HNSW graph beside ``store`` (see ``hnsw_file``), recording
        that it reflects the store's change log up to ``seq``; nothing when there is no
        graph or it is the one on disk already. True when written."""
        with self._lock:
            if self._ann is None or not self._ann_unsaved:
                return False
            hnsw_file.save(
                store, self._ann, self._label_keys, store_id=store_id, dim=self.dim, seq=seq
            )
            self._ann_unsaved = False
            return True

    def load_ann(
        self,
        store: Path,
        *,
        store_id: str,
        changes: Callable[[int], Collection[str] | None],
    ) -> bool:
        """Use the HNSW graph saved beside ``store`` instead of building one, when it checks
        out. ``changes(seq)`` gives the keys the store changed after ``seq`` (None when its
        log no longer reaches back that far): those are replayed into the graph; every
        other key of the graph must be exactly a vector held here. Otherwise (or when the
        file is missing or damaged) nothing changes and the graph is built as usual.
        Returns whether the saved graph is in use."""
        lib = _hnswlib()
        if lib is None:
            return False
        saved = hnsw_file.load(lib, store, store_id=store_id, dim=self.dim)
        if saved is None:
            return False
        changed = changes(saved.seq)
        if changed is None:
            log.info("the saved HNSW graph beside %s is too old to catch up; rebuilding", store)
            return False
        with self._lock:
            if self._ann is not None or self._building is not None:
                return False
            labels = saved.label_keys
            # set operations in C: at 1M vectors each Python loop here took 0.1-0.4 s
            numbered = dict(zip(labels, range(len(labels)), strict=True))
            numbered.pop(None, None)
            label_of = cast(dict[str, int], numbered)
            changed = set(changed)
            if changed:
                same = label_of.keys() - changed == self._row.keys() - changed
            else:
                same = label_of.keys() == self._row.keys()
            if len(label_of) != len(labels) - labels.count(None) or not same:
                log.warning(
                    "the saved HNSW graph beside %s does not match the stored vectors; "
                    "rebuilding it",
                    store,
                )
                return False
            ann = saved.ann
            for key in changed:  # retire what changed; what still has a vector comes back
                label = label_of.pop(key, None)
                if label is not None:
                    ann.mark_deleted(label)
                    labels[label] = None
            self._ann = ann
            self._label = label_of
            self._label_keys = labels
            again = [k for k in changed if k in self._row]
            if again:
                rows = np.fromiter((self._row[k] for k in again), dtype=np.int64)
                self._ann_add(again, self._mat[rows], self._norm[rows])
            self._ann_unsaved = bool(changed)
            return True

    def wait_for_ann(self, timeout: float | None = None) -> bool:
        """Wait for a background build to finish; True when the HNSW graph is in use."""
        thread = self._building
        if thread is not None:
            thread.join(timeout)
        return self._ann is not None

    def _ann_add(self, keys: list[str], vectors: np.ndarray, norms: np.ndarray) -> None:
        ann = self._ann
        labels = np.empty(len(keys), dtype=np.int64)
        for i, key in enumerate(keys):
            old = self._label.get(key)
            if old is not None:  # replaced vector: retire the old graph node, add a new one
                ann.mark_deleted(old)
                self._label_keys[old] = None
            label = len(self._label_keys)
            self._label_keys.append(key)
            self._label[key] = label
            labels[i] = label
        need = ann.get_current_count() + len(keys)
        if need > ann.get_max_elements():
            ann.resize_index(max(need, 2 * ann.get_max_elements()))
        unit = vectors / np.maximum(norms, 1e-12)[:, None]
        ann.add_items(unit, labels, replace_deleted=True)
        self._ann_unsaved = True

    def _ann_search(
        self, q: np.ndarray, k: int, accept: Callable[[str], bool] | None
    ) -> list[tuple[str, float]] | None:
        """Approximate top-k, rescored exactly; None when HNSW cannot deliver k results."""
        ann = self._ann
        keys = self._label_keys
        flt: Callable[[int], bool] | None = None
        if accept is not None:

            def flt(label: int) -> bool:
                key = keys[label]
                return key is not None and accept(key)

        ann.set_ef(max(self.hnsw_ef_search, 2 * k))
        try:
            labels, _ = ann.knn_query(q, k=k, num_threads=1, filter=flt)
        except RuntimeError:  # fewer than k reachable results (very selective filter)
            return None
        found = [keys[int(lbl)] for lbl in labels[0]]
        rows = np.fromiter(
            (self._row[k_] for k_ in found if k_ is not None and k_ in self._row), dtype=np.int64
        )
        return self._rank(rows, q, k, None)

    # -- search ----------------------------------------------------------------------

    def _rank(
        self,
        rows: np.ndarray | None,
        q: np.ndarray,
        k: int,
        allowed: Callable[[str], bool] | None,
    ) -> list[tuple[str, float]]:
        """Exact top-k over ``rows`` (all rows when None), ``q`` unit-length."""
        n = len(self._keys)
        if rows is None:
            scores = _dot(self._mat[:n], q) / np.maximum(self._norm[:n], 1e-12)
        else:
            if rows.size == 0:
                return []
            scores = _dot(self._mat[rows], q) / np.maximum(self._norm[rows], 1e-12)
        fetch = min(len(scores), k if allowed is None else max(4 * k, 64))
        while True:
            if fetch < len(scores):
                top = np.argpartition(-scores, fetch - 1)[:fetch]
            else:
                top = np.arange(len(scores))
            top = top[np.argsort(-scores[top], kind="stable")]
            out: list[tuple[str, float]] = []
            for idx in top:
                key = self._keys[int(rows[idx]) if rows is not None else int(idx)]
                if allowed is None or allowed(key):
                    out.append((key, float(scores[idx])))
                    if len(out) == k:
                        return out
            if fetch >= len(scores):
                return out
            fetch = min(len(scores), fetch * 4)

    def search(
        self,
        query: np.ndarray,
        k: int,
        *,
        candidates: Collection[str] | None = None,
        allowed: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k ``(key, cosine)`` among ``candidates`` (all when None) passing ``allowed``,
        best first (ties by insertion order on the exact path)."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise DimensionMismatch(
                f"query vector has {q.shape[0]} dimensions; this store uses {self.dim}"
            )
        if not np.isfinite(q).all():
            raise InvalidInput("query vector must be finite numbers")
        q = q / (float(np.linalg.norm(q)) or 1.0)
        with self._lock:
            n = len(self._keys)
            if n == 0 or k <= 0:
                return []
            if n >= self.ann_threshold and self._ann is None:
                if self.background_build:
                    self.start_background_build()  # exact until the graph is ready
                else:
                    self.build_ann()
            use_ann = n >= self.ann_threshold and self._ann is not None
            if candidates is not None:
                if use_ann and len(candidates) > self.exact_candidates_limit:
                    cand = (
                        candidates
                        if isinstance(candidates, set | frozenset | dict)
                        else set(candidates)
                    )

                    def accept(key: str) -> bool:
                        return key in cand and (allowed is None or allowed(key))

                    hits = self._ann_search(q, min(k, len(cand)), accept)
                    if hits is not None:
                        return hits
                rows = np.fromiter(
                    (r for r in (self._row.get(c) for c in candidates) if r is not None),
                    dtype=np.int64,
                )
                return self._rank(rows, q, k, allowed)
            if use_ann:
                hits = self._ann_search(q, min(k, n), allowed)
                if hits is not None:
                    return hits
            return self._rank(None, q, k, allowed)
