"""In-process vector index used by the embedded backend.

Vectors live in one contiguous float32 matrix (rows addressed by string keys; deletion
swaps the last row in), searched by cosine similarity with one matrix-vector product — no
Python loop per vector. Above ``ann_threshold`` vectors, an HNSW graph over 8-bit
quantized vectors (``ann_graph``: faiss) proposes twice as many candidates as asked for
and the exact vectors rescore them, so scores are the same float32 cosines either way.
The HNSW graph is built in bulk on the first search above the threshold and maintained
incrementally afterwards.

Once the graph is in use, there are more than ``lean_threshold`` vectors and the index
has a ``source`` of exact vectors (the store's rows), the matrix is dropped: the graph
(0.55 KB a 384-d vector instead of the matrix's 1.5) is then the only structure in memory
that holds them, and what needs exact values — rescoring the graph's candidates, a small
candidate set searched exactly, a memory's embedding, the cosines recall asks for — reads
those rows from the source (a hundred or so per query).

Filters apply *before* the top-k cut, so a scoped query still returns k results when k
exist: ``candidates`` restricts the search to a key set (small sets are searched exactly;
large ones inside the HNSW traversal), and ``allowed`` is a predicate on keys.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from sys import intern
from typing import Any, cast

import numpy as np

import graphmem.backends.embedded.exact as exact
import graphmem.backends.embedded.hnsw_file as hnsw_file
from graphmem.backends.embedded.ann_graph import Graph, library
from graphmem.errors import DimensionMismatch, InvalidInput

__all__ = ["VectorIndex"]

log = logging.getLogger("graphmem.backends.embedded")

#: vectors above which searches go through the HNSW graph (read when an index is made)
ANN_THRESHOLD = 50_000
#: vectors above which an index with a source drops its matrix once the graph holds them
#: (read when an index is made): below it the matrix costs little (154 MB at 100k) and a
#: scoped search over a few thousand candidates is a slice of it instead of reads
LEAN_THRESHOLD = 500_000


def lean_from() -> int:
    """Vectors from which a new index with a source drops its matrix once its graph holds
    them."""
    return max(ANN_THRESHOLD, LEAN_THRESHOLD)


#: rows per block when vectors go into the HNSW graph: a 1M-vector build never holds a
#: second (unit-length) copy of the whole matrix beside the graph
_BLOCK = 16_384
#: vectors the graph's quantizer learns its ranges from
_SAMPLE = 32_768
#: candidates the graph proposes for each result asked for, all rescored exactly: the
#: quantized ranking's errors fall near the cut (recall@50 0.993 with 1x, 0.996 with 2x)
_RESCORE = 2
#: the most results one graph search is asked for before a filtered search that finds
#: too few scans exactly (a filter that passes under ~0.5% of a 1M index)
_FETCH_LIMIT = 65_536

#: the stored vectors of some keys: the keys that have one, and their rows in that order
Source = Callable[[Sequence[str]], tuple[list[str], np.ndarray]]


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
        lean_threshold: int | None = None,
        background_build: bool = True,
        exact_candidates_limit: int = 16_384,
        lean_exact_limit: int = 8_192,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 100,
        hnsw_ef_search: int = 128,
    ) -> None:
        if not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"vector dimension must be a positive int, got {dim!r}")
        self.dim = dim
        self.ann_threshold = ANN_THRESHOLD if ann_threshold is None else ann_threshold
        self.lean_threshold = LEAN_THRESHOLD if lean_threshold is None else lean_threshold
        self.background_build = background_build
        self.exact_candidates_limit = exact_candidates_limit
        #: the same once the matrix is dropped: those candidates' rows are read, not sliced
        self.lean_exact_limit = lean_exact_limit
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
        #: where exact vectors are read once the matrix is dropped (see ``lean``); an index
        #: without one keeps its matrix
        self.source: Source | None = None
        self._lean = False
        #: (the graph files' identity, see ``hnsw_file.SavedGraph``, the graph they hold)
        self._disk: tuple[tuple[int, int, int], Graph] | None = None
        #: the last exact scan of every row: (its unit query, the rows' cosines), until a
        #: vector changes — recall asks the cosines of its lexical hits to the same query
        self._scan: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._label) if self._lean else len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in (self._label if self._lean else self._row)

    def missing(self, keys: Collection[str]) -> set[str]:
        """The keys of ``keys`` that have no vector here (one C-level pass: an open asks
        this of every memory)."""
        with self._lock:
            return set(keys).difference(self._label if self._lean else self._row)

    def keys(self) -> list[str]:
        """The keys that have a vector here."""
        with self._lock:
            return list(self._label if self._lean else self._keys)

    @property
    def ann_active(self) -> bool:
        """Whether searches currently go through the HNSW graph."""
        return self._ann is not None and (self._lean or len(self._keys) >= self.ann_threshold)

    @property
    def lean(self) -> bool:
        """Whether the matrix is dropped: the HNSW graph holds the one copy of the vectors
        in memory, and exact values are read from ``source``."""
        return self._lean

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
        norms = exact.norms(vectors)
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
            self._scan = None
            if self._lean:
                self._ann_add(list(keys), vectors, norms)
                return
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
            self._scan = None
            for key in keys:
                if not self._lean and not self._drop_row(key):
                    continue
                label = self._label.pop(key, None)
                if label is not None and self._ann is not None:
                    self._label_keys[label] = None  # retired: searches skip it
                    self._ann_unsaved = True

    def _drop_row(self, key: str) -> bool:
        """Take ``key``'s row out of the matrix (the last row moves into its place);
        False when it has none."""
        row = self._row.pop(key, None)
        if row is None:
            return False
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
        return True

    def _read(self, keys: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The exact vectors of ``keys`` (those that have one) from the source: what the
        matrix held before it was dropped."""
        source = self.source
        if not keys or source is None:
            return [], np.zeros((0, self.dim), dtype=np.float32)
        return source(keys)

    def get(self, key: str) -> np.ndarray | None:
        """A copy of the stored vector, or None."""
        with self._lock:
            if not self._lean:
                row = self._row.get(key)
                return None if row is None else self._mat[row].copy()
            if key not in self._label:
                return None
        found, mat = self._read([key])
        return mat[0].copy() if found else None

    def cosines(self, keys: Collection[str], query: Sequence[float]) -> dict[str, float]:
        """The cosine of each key's vector to ``query``, for the keys that have one
        (nothing when the dimensions differ)."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            return {}
        q = exact.unit(q)  # as a search scales it: a vector hit's score is its cosine
        mat: np.ndarray | None = None
        with self._lock:
            if self._lean:
                present = [k for k in keys if k in self._label]
            else:
                present = [k for k in keys if k in self._row]
                if present:
                    rows = np.fromiter((self._row[k] for k in present), dtype=np.int64)
                    scan = self._scan
                    if scan is not None and np.array_equal(scan[0], q):
                        # the numbers the scan gave the same rows (the vector hits' scores)
                        return dict(zip(present, scan[1][rows].tolist(), strict=True))
                    mat = self._mat[rows]
        if mat is None:
            present, mat = self._read(present)
        if not present:
            return {}
        # as recall scores a memory's own embedding, so either way gives the same number
        sims = (mat @ q) / np.maximum(np.linalg.norm(mat, axis=1), 1e-12)
        return dict(zip(present, sims.tolist(), strict=True))

    def rows(self) -> tuple[list[str], np.ndarray | None]:
        """Every key and a copy of its vector, row by row (what a state file keeps); no
        rows once the matrix is dropped (the graph file and the source hold them)."""
        with self._lock:
            if self._lean:
                return list(self._label), None
            n = len(self._keys)
            return list(self._keys), self._mat[:n].copy()

    # -- HNSW ------------------------------------------------------------------------

    def build_ann(self) -> bool:
        """Build the HNSW graph over every stored vector now, in this thread (otherwise the
        first search above the threshold starts a background build). Returns False when
        faiss is unavailable."""
        self.wait_for_ann()
        with self._lock:
            if self._ann is not None:
                return True
            lib = self._library()
            if lib is None:
                return False
            n = len(self._keys)
            ann = self._new_ann(lib, self._sample(self._keys))
            self._ann = ann
            self._label = {}
            self._label_keys = []
            log.info("building HNSW index over %d vectors", n)
            self._ann_add(list(self._keys), self._mat[:n], self._norm[:n])
            self._go_lean()
            return True

    @staticmethod
    def _library() -> Any:
        lib = library()
        if lib is None:
            log.warning("faiss is not installed; vector search stays exact")
        return lib

    def _sample(self, keys: Sequence[str]) -> np.ndarray:
        """Unit vectors of up to ``_SAMPLE`` of ``keys`` spread over them, from the matrix
        (under the lock): what the graph's quantizer learns its ranges from."""
        step = max(1, len(keys) // _SAMPLE)
        rows = np.fromiter((self._row.get(k, 0) for k in keys[::step]), np.int64)
        unit: np.ndarray = self._mat[rows] / np.maximum(self._norm[rows], 1e-12)[:, None]
        return unit

    def _new_ann(self, lib: Any, sample: np.ndarray) -> Graph:
        """An empty HNSW graph (inner product over unit vectors), its quantizer trained on
        the unit vectors ``sample``."""
        return Graph.new(
            lib, self.dim, m=self.hnsw_m, ef_construction=self.hnsw_ef_construction, sample=sample
        )

    def _go_lean(self) -> None:
        """Drop the matrix (under the lock) once the graph holds every vector, there are
        more than ``lean_threshold`` and the source can give the exact ones back."""
        if self.source is None or self._ann is None or self._building is not None:
            return
        if self._lean or len(self._keys) < max(self.ann_threshold, self.lean_threshold):
            return
        self._lean = True
        self._mat = np.zeros((0, self.dim), dtype=np.float32)
        self._norm = np.zeros(0, dtype=np.float32)
        self._keys, self._row = [], {}
        log.info("the HNSW graph holds the %d vectors; exact ones are read", len(self._label))

    def start_background_build(self) -> bool:
        """Build the HNSW graph in a daemon thread while searches stay exact; the graph
        takes over once built (changes made meanwhile are replayed into it). Returns
        False when faiss is unavailable."""
        with self._lock:
            if self._ann is not None or self._building is not None:
                return True
            lib = self._library()
            if lib is None:
                return False
            keys = list(self._keys)
            sample = self._sample(keys)
            self._dirty = set()
            self._building = threading.Thread(
                target=self._build_in_background,
                args=(lib, keys, sample),
                name="graphmem-hnsw-build",
                daemon=True,
            )
            self._building.start()
            log.info("building HNSW index over %d vectors in the background", len(keys))
            return True

    def _build_in_background(self, lib: Any, keys: list[str], sample: np.ndarray) -> None:
        try:
            ann = self._new_ann(lib, sample)
            del sample
            # block by block, each read under the lock (no copy of the whole matrix beside
            # the graph); a key changed or removed since the snapshot is in _dirty and
            # replayed below, whatever its block read
            for start in range(0, len(keys), _BLOCK):
                part = keys[start : start + _BLOCK]
                with self._lock:
                    rows = np.fromiter((self._row.get(k, 0) for k in part), np.int64, len(part))
                    unit = self._mat[rows] / np.maximum(self._norm[rows], 1e-12)[:, None]
                ann.add(unit, start)  # the slow part, unlocked
                del unit
            with self._lock:
                self._ann = ann
                self._label = {k: i for i, k in enumerate(keys)}
                self._label_keys = list(keys)
                dirty, self._dirty = self._dirty, set()
                for key in dirty:  # replay what changed since the snapshot
                    old = self._label.pop(key, None)
                    if old is not None:
                        self._label_keys[old] = None
                for key in dirty:
                    row = self._row.get(key)
                    if row is not None:
                        self._ann_add([key], self._mat[row : row + 1], self._norm[row : row + 1])
                self._building = None
                self._go_lean()
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
            ident = hnsw_file.save(
                store, self._ann, self._label_keys, store_id=store_id, dim=self.dim, seq=seq
            )
            self._ann_unsaved = False
            self._disk = (ident, self._ann)
            return True

    def graph_on_disk(self) -> hnsw_file.Known | None:
        """The graph files' identity and a copy of their labels when this index's graph is
        the one they hold (nothing added or retired since): for the state file, whence the
        next open takes them (see ``hnsw_file.load``)."""
        with self._lock:
            disk = self._disk
            if disk is None or disk[1] is not self._ann or self._ann_unsaved:
                return None
            return disk[0], list(self._label_keys)

    def _take_graph(
        self,
        store: Path,
        saved: hnsw_file.SavedGraph,
        held: Collection[str],
        changed: set[str],
    ) -> bool:
        """Use ``saved`` as this index's graph (under the lock) when its labels name exactly
        the ``held`` keys apart from the ``changed`` ones, which it retires (the caller
        adds back those that still have a vector). Labels the state file kept (``known``)
        are those keys by construction (written with them): only counted."""
        labels = saved.label_keys
        # set operations in C: at 1M vectors each Python loop here took 0.1-0.4 s
        numbered = dict(zip(labels, range(len(labels)), strict=True))
        numbered.pop(None, None)
        label_of = cast(dict[str, int], numbered)
        if saved.known:
            same = len(label_of) == len(held)
        else:
            held_set = held if isinstance(held, set | frozenset) else set(held)
            if changed:
                same = label_of.keys() - changed == held_set - changed
            else:
                same = label_of.keys() == held_set
        if len(label_of) != len(labels) - labels.count(None) or not same:
            log.warning(
                "the saved HNSW graph beside %s does not match the stored vectors; rebuilding it",
                store,
            )
            return False
        if 2 * len(label_of) <= len(labels):
            # the graph cannot drop a node: past half retired, a new one is half the size
            log.info("the saved HNSW graph beside %s is half retired nodes; rebuilding it", store)
            return False
        for key in changed:  # retire what changed; what still has a vector comes back
            label = label_of.pop(key, None)
            if label is not None:
                labels[label] = None
        self._ann = saved.ann
        self._label = label_of
        self._label_keys = labels
        self._ann_unsaved = bool(changed)
        self._disk = (saved.ident, saved.ann)
        return True

    def load_ann(
        self,
        store: Path,
        *,
        store_id: str,
        changes: Callable[[int], Collection[str] | None],
        own: Callable[[str], str] = intern,
        hint: hnsw_file.Hint | None = None,
    ) -> bool:
        """Use the HNSW graph saved beside ``store`` instead of building one, when it checks
        out (``own`` and ``hint``: see ``hnsw_file.load``). ``changes(seq)`` gives the
        keys the store changed after ``seq`` (None when its log no longer reaches back that
        far): those are replayed into the graph; every
        other key of the graph must be exactly a vector held here. Otherwise (or when the
        file is missing or damaged) nothing changes and the graph is built as usual.
        Returns whether the saved graph is in use (the matrix is then dropped when the
        index has a source)."""
        if self._ann is not None or self._building is not None:
            return False  # in use already (an open that took the graph as its vectors)
        got = hnsw_file.load_since(
            store, store_id=store_id, dim=self.dim, changes=changes, own=own, hint=hint
        )
        if got is None:
            return False
        saved, changed = got
        with self._lock:
            if self._ann is not None or self._building is not None or self._lean:
                return False
            if not self._take_graph(store, saved, self._row.keys(), changed):
                return False
            again = [k for k in changed if k in self._row]
            if again:
                rows = np.fromiter((self._row[k] for k in again), dtype=np.int64)
                self._ann_add(again, self._mat[rows], self._norm[rows])
            self._go_lean()
            return True

    def load_lean(
        self,
        store: Path,
        *,
        store_id: str,
        keys: Collection[str],
        since: int,
        changes: Callable[[int], Collection[str] | None],
        own: Callable[[str], str] = intern,
        hint: hnsw_file.Hint | None = None,
    ) -> bool:
        """An empty index with a source takes the HNSW graph saved beside ``store`` as its
        one copy of the vectors of ``keys`` (which the store held at change-log position
        ``since``), without a matrix: the keys changed after the older of the two positions
        are retired and read back from the source. False (nothing changed) when the graph
        is missing, damaged, too old or does not name those keys."""
        if self.source is None or len(keys) < max(self.ann_threshold, self.lean_threshold):
            return False
        got = hnsw_file.load_since(
            store,
            store_id=store_id,
            dim=self.dim,
            changes=changes,
            own=own,
            hint=hint,
            since=since,
        )
        if got is None:
            return False
        saved, changed = got
        with self._lock:
            if len(self) or self._ann is not None or self._building is not None:
                return False
            if not self._take_graph(store, saved, keys, changed):
                return False
            self._lean = True
            self._keys, self._row = [], {}
            self._mat = np.zeros((0, self.dim), dtype=np.float32)
            self._norm = np.zeros(0, dtype=np.float32)
            again, vectors = self._read(sorted(changed))
            if again:
                self._ann_add(again, vectors, exact.norms(vectors))
            return True

    def wait_for_ann(self, timeout: float | None = None) -> bool:
        """Wait for a background build to finish; True when the HNSW graph is in use."""
        thread = self._building
        if thread is not None:
            thread.join(timeout)
        return self._ann is not None

    def _ann_add(self, keys: list[str], vectors: np.ndarray, norms: np.ndarray) -> None:
        ann = self._ann
        for key in keys:  # a replaced vector: its old graph node is retired, a new one added
            old = self._label.pop(key, None)
            if old is not None:
                self._label_keys[old] = None
        for start in range(0, len(keys), _BLOCK):  # one block's unit vectors at a time
            stop = start + _BLOCK
            unit = vectors[start:stop] / np.maximum(norms[start:stop], 1e-12)[:, None]
            first = len(self._label_keys)
            ann.add(unit, first)
            part = keys[start:stop]
            self._label_keys.extend(part)
            self._label.update(zip(part, range(first, first + len(part)), strict=True))
        self._ann_unsaved = True

    def _ann_keys(
        self, q: np.ndarray, k: int, accept: Callable[[str], bool] | None, share: float = 1.0
    ) -> list[str] | None:
        """Up to ``_RESCORE * k`` keys, still held and passing ``accept``, that the graph
        finds nearest to ``q`` (nearest first by the quantized vectors: the caller rescores
        them exactly); None when it cannot find k of them within ``_FETCH_LIMIT`` results.
        faiss has no filter the caller's predicate could run in, so the graph is asked for
        enough results that ``k`` of them pass: ``share`` is the part of the vectors
        expected to pass, and the ask grows until enough do."""
        ann = self._ann
        keys = self._label_keys
        held = self._label
        want = _RESCORE * k
        # retired labels (removed or replaced vectors) are still in the graph's results
        live = len(held) / max(len(keys), 1)
        fetch = min(len(keys), int(want / max(live * share, 1e-6)) + 1)
        while True:
            out: list[str] = []
            for label in ann.search(q, fetch, max(self.hnsw_ef_search, fetch)):
                key = keys[label]
                if key is not None and (accept is None or accept(key)):
                    out.append(key)
                    if len(out) == want:
                        return out
            if len(out) >= k:
                return out
            if fetch >= min(len(keys), _FETCH_LIMIT):
                return None
            # as many again as the share that passed says, and at least twice as many
            grow = max(2.0, 1.25 * want / max(len(out), 1))
            fetch = min(len(keys), _FETCH_LIMIT, int(grow * fetch))

    # -- search ----------------------------------------------------------------------

    def _rank(
        self,
        rows: np.ndarray | None,
        q: np.ndarray,
        k: int,
        allowed: Callable[[str], bool] | None,
    ) -> list[tuple[str, float]]:
        """Exact top-k over the matrix's ``rows`` (all rows when None), ``q`` unit-length."""
        n = len(self._keys)
        keys = self._keys
        if rows is None:
            scores = exact.dot(self._mat[:n], q) / np.maximum(self._norm[:n], 1e-12)
            self._scan = (q, scores)
            return exact.top(scores, keys.__getitem__, k, allowed)
        if rows.size == 0:
            return []
        scores = exact.dot(self._mat[rows], q) / np.maximum(self._norm[rows], 1e-12)
        return exact.top(scores, lambda i: keys[int(rows[i])], k, allowed)

    def _rank_read(
        self, keys: Sequence[str], allowed: Callable[[str], bool] | None, q: np.ndarray, k: int
    ) -> list[tuple[str, float]]:
        """Exact top-k over ``keys``, their vectors read from the source."""
        found, mat = self._read(keys)
        if not found:
            return []
        scores = exact.dot(mat, q) / np.maximum(exact.norms(mat), 1e-12)
        return exact.top(scores, found.__getitem__, k, allowed)

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
        q = exact.unit(q)
        with self._lock:
            n = len(self)
            if n == 0 or k <= 0:
                return []
            if not self._lean:
                return self._search_matrix(q, k, n, candidates, allowed)
            keys, check = self._lean_keys(q, k, candidates, allowed)
        # the rows are read with the lock released: the source takes the store's own
        return self._rank_read(keys, check, q, k)

    @staticmethod
    def _accepting(
        candidates: Collection[str], allowed: Callable[[str], bool] | None
    ) -> Callable[[str], bool]:
        cand = candidates if isinstance(candidates, set | frozenset | dict) else set(candidates)

        def accept(key: str) -> bool:
            return key in cand and (allowed is None or allowed(key))

        return accept

    def _search_matrix(
        self,
        q: np.ndarray,
        k: int,
        n: int,
        candidates: Collection[str] | None,
        allowed: Callable[[str], bool] | None,
    ) -> list[tuple[str, float]]:
        if n >= self.ann_threshold and self._ann is None:
            if self.background_build:
                self.start_background_build()  # exact until the graph is ready
            else:
                self.build_ann()
                if self._lean:  # the build dropped the matrix
                    return self._rank_read(*self._lean_keys(q, k, candidates, allowed), q, k)
        use_ann = n >= self.ann_threshold and self._ann is not None
        found: list[str] | None
        if candidates is not None:
            if use_ann and len(candidates) > self.exact_candidates_limit:
                accept = self._accepting(candidates, allowed)
                found = self._ann_keys(q, min(k, len(candidates)), accept, len(candidates) / n)
                if found is not None:
                    return self._rank(self._rows_of(found), q, k, None)
            return self._rank(self._rows_of(candidates), q, k, allowed)
        if use_ann:
            found = self._ann_keys(q, min(k, n), allowed)
            if found is not None:
                return self._rank(self._rows_of(found), q, k, None)
        return self._rank(None, q, k, allowed)

    def _rows_of(self, keys: Iterable[str]) -> np.ndarray:
        rows = (self._row.get(c) for c in keys)
        return np.fromiter((r for r in rows if r is not None), dtype=np.int64)

    def _lean_keys(
        self,
        q: np.ndarray,
        k: int,
        candidates: Collection[str] | None,
        allowed: Callable[[str], bool] | None,
    ) -> tuple[list[str], Callable[[str], bool] | None]:
        """Once the matrix is dropped (under the lock): the keys to score exactly from their
        rows, and the filter still to apply to them — the graph's candidates, a small
        candidate set, or every key passing a filter the graph could not satisfy."""
        held = self._label
        if candidates is None:
            found = self._ann_keys(q, min(k, len(held)), allowed)
        elif len(candidates) <= self.lean_exact_limit:
            return [c for c in candidates if c in held], allowed
        else:
            # the candidates as they are: a pass over 200k of them (a namespace at 1M) to
            # keep those held or to map them to labels costs ~0.25 s in dict lookups
            accept = self._accepting(candidates, allowed)
            share = len(candidates) / max(len(held), 1)
            found = self._ann_keys(q, min(k, len(candidates)), accept, share)
        if found is not None:
            return found, None
        # fewer than k found through the filter: every key that passes, exactly
        pool = held if candidates is None else [c for c in candidates if c in held]
        return [key for key in pool if allowed is None or allowed(key)], None
