"""The journal: one SQLite file (WAL) that makes every acknowledged write durable, the
change log other processes catch up from, and the load of the in-memory graph."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson

import graphmem.backends.embedded.changelog as changelog
import graphmem.backends.embedded.forks as forks
import graphmem.backends.embedded.hnsw_file as hnsw_file
import graphmem.backends.embedded.state_file as state_file
from graphmem.backends.base import STRUCTURAL, structural_targets
from graphmem.backends.embedded.adjacency import Adjacency
from graphmem.backends.embedded.appends import fresh_rows, fresh_texts
from graphmem.backends.embedded.buckets import FROM_COLUMNS, Bucket, MemoryBucket
from graphmem.backends.embedded.commit import Committer, Pending, open_lock_file, writer_turn
from graphmem.backends.embedded.graph import (
    _INDEXED,
    _SHARED_EDGE_DATA,
    EmbeddedGraph,
    _datetime_fields,
    _link,
    _set_head,
)
from graphmem.backends.embedded.memory_rows import memory_props, memory_row
from graphmem.backends.embedded.records import NodeTable
from graphmem.backends.embedded.rows import (
    EDGES_BY_DST,
    NEXT,
    SCHEMA,
    SCHEMA_READ,
    SCHEMA_VERSION,
    _edge_data,
    add_stored_vectors,
    connect,
    damaged,
    read_rows,
    stored_vectors,
    tune_fts,
)
from graphmem.backends.embedded.statements import forget_heads, forget_texts, write_edges
from graphmem.backends.embedded.vector_index import VectorIndex, lean_from
from graphmem.errors import BackendUnavailable, Conflict, DimensionMismatch, QueryFailed
from graphmem.gcpause import gc_paused, promote_all
from graphmem.models import EdgeType, NodeLabel

log = logging.getLogger("graphmem.backends.embedded")


Durability = Literal["normal", "full", "off"]


#: changes kept for processes that fall behind (further behind: a full reload)
_CHANGES_KEPT = 100_000

#: nodes from which a closing process keeps its state beside the file (read at the next
#: open instead of the rows; below this the rows read in a fraction of a second anyway)
STATE_MIN_NODES = 5_000
#: changes logged after the state file's position that the next open may catch up with
#: instead of writing the file again at close (a short session should not pay the write)
STATE_LAG = 2_000


#: a node's stored edges, both ends (the reload's read: by index at both ends, see
#: ``rows.EDGES_BY_DST``)
EDGES_OF_NODE = "SELECT src, type, dst, props FROM edges WHERE src = ? OR dst = ?"


def _dumps(props: dict[str, Any]) -> str:
    """Node properties as JSON text (orjson writes aware datetimes as ISO 8601)."""
    return orjson.dumps(props).decode()


class EmbeddedJournal(EmbeddedGraph):
    """SQLite persistence of :class:`NetworkXBackend` (opened by the constructor)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "normal",
        busy_timeout_ms: int = 10_000,
    ) -> None:
        """Open (creating if needed) the store at ``path``; ``None`` or ``":memory:"`` keeps it
        in memory. Opening reads the file; it makes no network call."""
        self._path = None if path is None or str(path) == ":memory:" else Path(path)
        self._lock = threading.RLock()
        self._closed = False
        self._pending_touch: dict[str, tuple[int, datetime]] = {}
        self._touch_since: float | None = None
        self._changed: set[str] = set()
        #: what a write does to the in-memory state, run at its commit (see _transaction)
        self._then: list[Callable[[], None]] = []
        #: the change log's counter when the current write began
        self._last_seq = 0
        self._committer = Committer(
            None if self._path is None else str(self._path), busy_timeout_ms / 1000
        )
        self._seen_seq = 0
        self._busy_timeout = busy_timeout_ms / 1000
        self._lock_fd: int | None = None
        self._logged_since_prune = 0
        #: the change-log position of the state file beside the store, when this process
        #: read or wrote it (None: no file known to be current enough)
        self._state_seq: int | None = None
        #: that file holds the vector rows (not only their keys: see state_file)
        self._state_rows = False
        #: that file keeps the vector graph's labels (see ``hnsw_file.load``)
        self._state_graph = False
        #: that file is of an older format, read as it is (see ``state_file``)
        self._state_old = False
        self._opened = False
        db: sqlite3.Connection | None = None
        try:
            if self._path is not None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            self._db = db = connect(self._path, busy_timeout_ms)
            if self._path is not None:
                self._lock_fd = open_lock_file(self._path)
                mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise BackendUnavailable(f"cannot enable WAL journal on {self._path}")
            sync = {"normal": "NORMAL", "full": "FULL", "off": "OFF"}[durability]
            self._db.execute(f"PRAGMA synchronous={sync}")
            self._db.executescript(SCHEMA)
            try:
                self._db.execute(EDGES_BY_DST)
            except sqlite3.OperationalError as e:  # a file this process may not write
                log.debug("no index of edges by target in %s: %s", self._path, e)
            tune_fts(self._db)
            self._check_version()
            # per-connection helpers for query planning: the index's document frequencies,
            # and a scratch table that runs query words through the same tokenizer
            self._db.executescript(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_vocab "
                "USING fts5vocab(main, 'memory_fts', 'row');"
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_tokens USING fts5("
                "t, tokenize='porter unicode61 remove_diacritics 2');"
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_tokens_vocab "
                "USING fts5vocab(temp, 'query_tokens', 'instance');"
            )
            self._load()
        except BaseException as e:
            # a failed open holds nothing (an open connection keeps -wal and -shm files)
            if db is not None:
                db.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            if damaged(e):
                raise BackendUnavailable(f"cannot open embedded store {self._path}: {e}") from e
            raise
        forks.register(self)

    def _check_version(self) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self._db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                (SCHEMA_VERSION,),
            )
        elif row[0] not in SCHEMA_READ:
            raise BackendUnavailable(
                f"store schema version {row[0]} is not supported (expected {SCHEMA_VERSION})"
            )
        elif row[0] != SCHEMA_VERSION:
            # marked before any write of the newer form, so that an older graphmem refuses
            # the file instead of misreading it; a file this process may not write stays
            # as it is (it reads the same)
            try:
                self._db.execute(
                    "UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,)
                )
            except sqlite3.OperationalError as e:
                log.debug("store %s left at schema version %s: %s", self._path, row[0], e)
        # names this store in the files kept beside it (the saved vector graph)
        ident = self._db.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()
        if ident is None:
            self._db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('store_id', ?)", (uuid.uuid4().hex,)
            )
            ident = self._db.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()
        self._store_id: str = ident[0]

    def _load(self) -> None:
        """(Re)build the in-memory state from the file, from one read snapshot.

        ``data_version`` is read before the snapshot starts: a commit by another process
        in between is then in the snapshot but not in the recorded version, which costs one
        extra reload later and never a missed change. Inside a write transaction nobody
        else can commit, so the version read there is exact."""
        db = self._db
        outer = db.in_transaction
        with gc_paused():
            if not outer:
                db.execute("BEGIN")
            try:
                version = db.execute("PRAGMA data_version").fetchone()[0]
                self._load_state()
                promote_all()  # the state just built lives as long as the store
            finally:
                if not outer:
                    db.execute("COMMIT")
        self._data_version = version
        # accesses recorded here but not yet written to the file survive the reload
        for key, (n, at) in self._pending_touch.items():
            self._g._node.count_access(key, n, at)

    def _load_state(self) -> None:
        """The in-memory state from the state file beside the store when it checks out
        (at the first open only), else from the rows."""
        db = self._db
        self._seen_seq = changelog.last(db)
        dim_row = db.execute("SELECT value FROM meta WHERE key='embedding_dim'").fetchone()
        self._dim: int | None = int(dim_row[0]) if dim_row else None
        first, self._opened = not self._opened, True
        hint = self._graph_hint = hnsw_file.Hint()
        if first and self._path is not None and self._dim:
            hint.early = hnsw_file.Early.of(self._path, store_id=self._store_id, dim=self._dim)
        try:
            if not (first and self._path is not None and self._load_saved_state()):
                self._load_rows()
            vindex = self._vindex
            if vindex is not None:
                if self._path is not None and len(vindex) >= vindex.ann_threshold:
                    vindex.load_ann(
                        self._path,
                        store_id=self._store_id,
                        changes=self._memory_changes_since,
                        own=self._g._node.own,
                        hint=hint,
                    )
        finally:
            hint.drop()

    def _install(
        self,
        g: Adjacency,
        rid_of: dict[str, int],
        by_label: dict[NodeLabel, set[str]],
        index: dict[tuple[NodeLabel, str], Bucket],
        vindex: VectorIndex | None,
    ) -> None:
        """Make a freshly read state this process's. The index buckets of the memory
        fields the columns answer are worked out when asked for (see ``MemoryBucket``),
        however the state was read: until a value is asked for, writes leave its entry to
        the columns (five buckets fewer to file every new memory in)."""
        for f in FROM_COLUMNS:
            index[(NodeLabel.MEMORY, f)] = MemoryBucket(g._node, f)
        self._g = g
        self._rid_of = rid_of
        self._key_of = {rid: key for key, rid in rid_of.items()}
        self._by_label = by_label
        self._index = index
        # per label, its indexed fields with their buckets (no tuple/enum hashing per write)
        self._buckets = {
            lab: [(f, index[(lab, f)]) for f in _INDEXED.get(lab, ())] for lab in NodeLabel
        }
        self._vindex = None if vindex is None else self._hooked(vindex)
        memories = by_label.get(NodeLabel.MEMORY, set())
        self._unvectored = set(memories) if vindex is None else vindex.missing(memories)
        self._next_rid = max(self._key_of, default=0) + 1
        self._df_cache: dict[str, int] = {}
        self._df_cache_n = len(by_label.get(NodeLabel.MEMORY, ()))

    def _load_saved_state(self) -> bool:
        """Use the state file beside the store (see ``state_file``) and catch up with the
        changes logged after it; False (nothing installed that the row read does not
        replace) when it is missing, damaged, foreign, too far behind, ahead of the store
        or does not add up to the rows the file holds."""
        assert self._path is not None
        db = self._db
        saved = state_file.load(self._path, store_id=self._store_id, dim=self._dim)
        if saved is None:
            return False
        seq = saved.seq
        held = changelog.reach(db)
        reason = None
        if held is None or seq > held[1] or seq < held[0] - 1:
            reason = "its change-log position is not this store's"
        elif seq >= held[0] and not changelog.same_position(db, seq, saved.seq_key):
            reason = "the change log at its position names other changes"
        changed: set[str] = set()
        if reason is None:
            changed = changelog.keys_since(db, seq)
            if len(changed) > max(STATE_LAG, saved.nodes // 4):
                reason = f"{len(changed)} changes behind"
        if reason is None:
            try:
                self._install_saved(saved)
                self._reload_keys(db, changed)
                held = db.execute("SELECT count(*) FROM nodes").fetchone()[0]
                if held != self._g.number_of_nodes():
                    reason = f"it adds up to {self._g.number_of_nodes()} nodes, not {held}"
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
                reason = f"malformed state: {e!r}"
        if reason is not None:
            log.warning(
                "not using the saved state beside %s (%s); reading the store", self._path, reason
            )
            return False
        self._next_rid = max(self._key_of, default=0) + 1
        self._state_seq = seq
        self._state_rows = saved.vectors is not None
        self._state_graph = self._graph_hint.known is not None
        self._state_old = saved.format != state_file.FORMAT
        return True

    def _install_saved(self, saved: state_file.SavedState) -> None:
        p = saved.payload
        g = Adjacency()
        # the file holds one string per node key; interned (by the table), it is the one
        # later writes' edges and buckets use too (see _link)
        g._node = NodeTable.from_file(p["nodes"])
        g._succ, g._pred = p["succ"], p["pred"]
        labels = {lab.value: lab for lab in NodeLabel}
        by_label: dict[NodeLabel, set[str]] = defaultdict(set)
        for lab_s, keys in p["by_label"].items():
            by_label[labels[lab_s]] = keys
        index: dict[tuple[NodeLabel, str], Bucket] = defaultdict(dict)
        whole = state_file.index_whole(p["index"], p["most"], p["by_label"])
        for (lab_s, f), bucket in whole.items():
            index[(labels[lab_s], f)] = bucket
        rid_of: dict[str, int] = p["rid_of"]
        self._graph_hint.known = hnsw_file.known_of(p.get("graph"))
        vindex = self._new_vindex()
        if vindex is not None and saved.vec_keys:
            if saved.vectors is not None:
                vindex.add(saved.vec_keys, saved.vectors, adopt=True)
            else:  # the saved graph holds them, or else the rows
                self._take_vectors(vindex, g._node, rid_of, saved.vec_keys, saved.seq)
        self._install(g, rid_of, by_label, index, vindex)

    def _take_vectors(
        self,
        vindex: VectorIndex,
        nodes: NodeTable,
        rid_of: dict[str, int],
        keys: list[str] | None,
        since: int,
    ) -> None:
        """Fill the empty ``vindex`` from the HNSW graph saved beside the file when it holds
        the vectors of ``keys`` (the store's at change-log position ``since``) — no matrix
        is then read — else from every stored row."""
        self._rid_of = rid_of  # where the index reads the ones changed since the graph
        if (
            keys is None
            or self._path is None
            or not self._hooked(vindex).load_lean(
                self._path,
                store_id=self._store_id,
                keys=keys,
                since=since,
                changes=self._memory_changes_since,
                own=nodes.own,
                hint=self._graph_hint,
            )
        ):
            add_stored_vectors(self._db, vindex, {rid: key for key, rid in rid_of.items()})

    def _save_state(self) -> None:
        """Keep this process's in-memory state beside the file for the next open (see
        ``state_file``), marked with the change-log position it reflects — unless the
        store is small, or the file there is at most ``STATE_LAG`` changes behind."""
        with self._lock:
            if self._closed or self._path is None or self._pending_touch:
                return
            if self._g.number_of_nodes() < STATE_MIN_NODES:
                return
            db = self._db
            try:
                if db.execute("PRAGMA data_version").fetchone()[0] != self._data_version:
                    self._refresh()
                if self._state_seq is not None:
                    behind = changelog.last(db) - self._state_seq
                    # a file whose vectors are kept otherwise than this index keeps them is
                    # rewritten all the same: rows the graph now holds would be read at
                    # every open and dropped, and rows it no longer holds read from the store;
                    # so is one of an older format, and one without the graph's labels when
                    # they are to be had (once: labels of an older graph file are not worth
                    # a rewrite at every close)
                    vindex = self._vindex
                    lean = vindex is not None and vindex.lean
                    upgrade = self._state_old or (
                        not self._state_graph
                        and vindex is not None
                        and vindex.graph_on_disk() is not None
                    )
                    if behind <= STATE_LAG and self._state_rows != lean and not upgrade:
                        return
                seq = self._seen_seq
                seq_key = changelog.position_key(db, seq)
                g = self._g
                vindex = self._vindex
                graph = None if vindex is None else vindex.graph_on_disk()
                payload = state_file.payload_of(g, self._rid_of, self._by_label, self._index, graph)
                keys, vectors = (
                    vindex.rows() if vindex is not None else ([], np.zeros((0, 0), np.float32))
                )  # no rows when the vector graph holds them (its file is saved already)
                with gc_paused():
                    state_file.save(
                        self._path,
                        payload,
                        keys,
                        vectors,
                        store_id=self._store_id,
                        dim=self._dim,
                        seq=seq,
                        seq_key=seq_key,
                        nodes=g.number_of_nodes(),
                    )
                self._state_seq = seq
                self._state_rows = vectors is not None
                self._state_graph = graph is not None
                self._state_old = False
            except (OSError, sqlite3.Error, BackendUnavailable, QueryFailed) as e:
                # an optimisation: the next open reads the rows
                log.info("could not keep the state beside %s: %s", self._path, e)

    def _load_rows(self) -> None:
        db = self._db
        held = db.execute("SELECT count(*) FROM vectors").fetchone()[0] if self._dim else 0
        # above the lean threshold the graph file, when there, holds the vectors: reading
        # them into a matrix first would hold both copies (1.5 + 1.7 GB at 1M)
        lean = (
            self._path is not None
            and held >= lean_from()
            and all(p.exists() for p in hnsw_file.files_of(self._path))
        )
        g, rid_of, by_label, index, vindex = read_rows(db, self._dim, vectors=not lean)
        if lean and vindex is not None:
            key_of = {rid: key for key, rid in rid_of.items()}
            keys = [
                key_of[rid] for (rid,) in db.execute("SELECT rid FROM vectors") if rid in key_of
            ]
            self._take_vectors(vindex, g._node, rid_of, keys, self._seen_seq)
        self._install(g, rid_of, by_label, index, vindex)

    def _new_vindex(self) -> VectorIndex | None:
        """An empty vector index for the store's dimension (None before it has one)."""
        return self._hooked(VectorIndex(self._dim)) if self._dim else None

    def _hooked(self, vindex: VectorIndex) -> VectorIndex:
        """``vindex``, reading exact vectors from the rows once its HNSW graph holds them
        and keeping that graph beside the file once built."""
        vindex.source = self._stored_vectors
        vindex.on_ann_built = self._save_ann
        return vindex

    def _stored_vectors(self, keys: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The stored vectors of the memory keys ``keys`` that have one, read from the
        file: where the vector index reads exact values once its HNSW graph holds the one
        copy in memory (a few dozen rows a query)."""
        with self._lock:
            return stored_vectors(self._db, self._rid_of, keys, self._dim or 0)

    def _memory_changes_since(self, seq: int) -> set[str] | None:
        return changelog.memory_changes_since(self._db, seq)

    def _save_ann(self) -> None:
        """Keep the vector index's HNSW graph beside the file, marked with the change-log
        position it reflects (this process's, under the lock: every change up to it is
        applied here), so that the next open reads it instead of building it."""
        with self._lock:
            vindex = self._vindex
            if self._closed or self._path is None or vindex is None:
                return
            try:
                vindex.save_ann(self._path, store_id=self._store_id, seq=self._seen_seq)
            except OSError as e:  # a read-only folder: the next open builds the graph again
                log.info("could not keep the vector graph beside %s: %s", self._path, e)

    @contextmanager
    def _fresh(self) -> Iterator[None]:
        """Hold the lock, with the in-memory state current with the file."""
        with self._lock:
            if self._closed:
                raise BackendUnavailable("the store is closed")
            try:
                version = self._db.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as e:
                raise BackendUnavailable(f"embedded store unreadable: {e}") from e
            if version != self._data_version:
                self._refresh()
            yield

    @contextmanager
    def _transaction(self) -> Iterator[Pending]:
        """BEGIN IMMEDIATE ... COMMIT, reloading first if another process wrote. The body
        gives the statements to a :class:`Pending` and the in-memory apply to
        :meth:`_then`: both run at the commit (see ``Pending.commit``)."""
        with self._lock, writer_turn(self._lock_fd, self._busy_timeout):
            if self._closed:
                raise BackendUnavailable("the store is closed")
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                raise Conflict(f"the store is locked by another writer: {e}") from e
            tx: Pending | None = None
            try:
                # read while holding the write lock: no other process can commit until our
                # COMMIT, and our own commits do not change this connection's data_version
                version = self._db.execute("PRAGMA data_version").fetchone()[0]
                if version != self._data_version:
                    self._refresh()
                self._changed = set()
                self._then = []
                self._write_touches(self._db)
                self._last_seq = changelog.counter(self._db)
                tx = Pending(self._db, self._committer)
                yield tx
                seen = self._log_changes(tx)
                try:
                    tx.commit(self._apply_then)
                finally:
                    if tx.committed:
                        self._seen_seq = seen
                        self._pending_touch.clear()
                        self._touch_since = None
            except BaseException as e:
                if tx is not None:
                    tx.stop()
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                if tx is not None and tx.applying:
                    # the in-memory state took a write the file may not hold, or part of
                    # one the file holds: the file's state instead
                    self._reload_all()
                if isinstance(e, sqlite3.IntegrityError):
                    raise Conflict(str(e)) from e
                if isinstance(e, sqlite3.Error):
                    raise QueryFailed(f"embedded store write failed: {e}") from e
                raise

    def _apply_then(self) -> None:
        for step in self._then:
            step()

    def _reload_all(self) -> None:
        """The in-memory state built again from the file (after a failed commit)."""
        try:
            self._load()
        except Exception as e:  # the file unreadable too: nothing this handle can serve
            log.error("could not reload %s after a failed write: %s", self._path, e)
            self._closed = True

    def _log_changes(self, tx: Pending) -> int:
        """Record which node keys this transaction changed (see :meth:`_refresh`); the
        change-log position it ends at."""
        if not self._changed:
            return self._seen_seq
        seq = changelog.log(tx, self._changed, after=self._last_seq)
        # pruned by rows logged, not by writes: 100 batches of 1,000 log ~250k rows (10% of
        # the file at 100k memories) in far fewer than a thousand writes
        self._logged_since_prune += len(self._changed)
        if self._logged_since_prune >= _CHANGES_KEPT // 4:
            self._logged_since_prune = 0
            changelog.prune(tx, seq - _CHANGES_KEPT)
        return seq

    def _refresh(self) -> None:
        """Catch up with what other processes committed: reload only the nodes (with their
        edges and vectors) that the change log names, or everything when that is cheaper or
        the log no longer reaches back to what this process saw. Runs in one read snapshot
        (or inside the caller's write transaction)."""
        db = self._db
        outer = db.in_transaction
        if not outer:
            db.execute("BEGIN")
        full = False
        try:
            version = db.execute("PRAGMA data_version").fetchone()[0]
            held = changelog.reach(db)
            dim_row = db.execute("SELECT value FROM meta WHERE key='embedding_dim'").fetchone()
            if dim_row is not None and int(dim_row[0]) != self._dim:
                if self._dim is not None:
                    full = True  # another process moved the store to a new model
                self._set_dim(int(dim_row[0]))
            if not full and held is not None and held[1] > self._seen_seq:
                lo, hi = held
                if lo > self._seen_seq + 1:
                    full = True  # the log was pruned past what this process saw
                else:
                    keys = changelog.keys_since(db, self._seen_seq)
                    if len(keys) > max(2000, self._g.number_of_nodes() // 4):
                        full = True
                    else:
                        self._reload_keys(db, keys)
                        self._seen_seq = hi
            if full:
                log.info("store changed by another process; reloading it whole")
                self._load()
        finally:
            if not outer:
                db.execute("COMMIT")
        if not full:
            self._data_version = version

    def _reload_keys(self, db: sqlite3.Connection, keys: set[str]) -> None:
        g = self._g
        nodes, succ, pred = g._node, g._succ, g._pred
        labels = {lab.value: lab for lab in NodeLabel}
        present: list[str] = []
        for key_ in keys:
            key = nodes.own(key_)  # the node's own key string (see _link)
            label_s, _, ident = key.partition(":")
            row = db.execute(
                "SELECT rid, props FROM nodes WHERE label = ? AND id = ?", (label_s, ident)
            ).fetchone()
            label = labels.get(label_s)
            if label is None:
                continue
            if row is None:
                if key in g:
                    self._forget_key(key)
                continue
            rid, props_s = row
            props = orjson.loads(props_s)
            if label is NodeLabel.MEMORY:
                memory_props(props, ident)
            elif label is NodeLabel.RUN:
                head = db.execute(
                    "SELECT event_count, last_event_id FROM run_heads WHERE rid = ?", (rid,)
                ).fetchone()
                if head is not None:
                    _set_head(props, *head)
            for f in _datetime_fields(label):
                v = props.get(f)
                if v is not None:
                    props[f] = datetime.fromisoformat(v)
            props["label"] = label_s
            self._put_node(label, key, props, rid)
            pending = self._pending_touch.get(key)
            if pending is not None:
                nodes.count_access(key, *pending)
            if label is NodeLabel.MEMORY:
                vrow = db.execute("SELECT vec FROM vectors WHERE rid = ?", (rid,)).fetchone()
                if vrow is not None and self._vindex is not None:
                    self._vindex.add([key], np.frombuffer(vrow[0], dtype=np.float32)[None, :])
                    self._unvectored.discard(key)
                else:
                    if self._vindex is not None and key in self._vindex:
                        self._vindex.remove([key])
                    self._unvectored.add(key)
            present.append(key)
        shared = _SHARED_EDGE_DATA
        for key in present:
            # every edge of the node is rebuilt: stored ones from the file, structural ones
            # from its properties (incoming structural edges depend on other nodes' fields);
            # a NEXT edge into a node that did not change is kept: a write logs both ends of
            # every edge it changes, and ``next_edges`` is read by the later end
            for src, dst, etype in list(g.out_edges(key, keys=True)):
                if etype != NEXT or dst in keys:
                    g.remove_edge(src, dst, key=etype)
            for src, dst, etype in list(g.in_edges(key, keys=True)):
                if (labels[nodes[src]["label"]], EdgeType(etype)) not in STRUCTURAL:
                    g.remove_edge(src, dst, key=etype)
        key_of, nxt = self._key_of, _edge_data(NEXT, "{}")
        for key in present:
            label = labels[nodes[key]["label"]]
            for (src_rid,) in db.execute(
                "SELECT src FROM next_edges WHERE dst = ?", (self._rid_of[key],)
            ):
                src = key_of.get(src_rid)
                if src is not None and NEXT not in succ[src].get(key, ()):
                    _link(succ, pred, src, key, NEXT, nxt, nodes.own)
            for etype_, tlabel, tid, _d in structural_targets(label, nodes[key]):
                tkey = tlabel.value + ":" + tid
                if tkey in succ:
                    _link(succ, pred, key, tkey, etype_.value, shared[etype_.value], nodes.own)
            for src, etype, dst, props_s in db.execute(EDGES_OF_NODE, (key, key)):
                if src in nodes and dst in nodes and etype not in succ[src].get(dst, ()):
                    _link(succ, pred, src, dst, etype, _edge_data(etype, props_s), nodes.own)
        self._df_cache = {}
        self._df_cache_n = len(self._by_label.get(NodeLabel.MEMORY, ()))

    def _fix_dim(self, db: Pending, dim: int) -> None:
        if self._dim is None:
            db.execute("INSERT INTO meta(key, value) VALUES ('embedding_dim', ?)", (str(dim),))
        elif self._dim != dim:
            # a store whose vectors were all cleared (reindex --all) takes a new model
            if db.read("SELECT 1 FROM vectors LIMIT 1"):
                raise DimensionMismatch(
                    f"embedding has {dim} dimensions; this store holds {self._dim}-dimension "
                    "vectors (re-embed everything with `graphmem reindex --all`)"
                )
            db.execute("UPDATE meta SET value = ? WHERE key = 'embedding_dim'", (str(dim),))

    def _set_dim(self, dim: int) -> None:
        """After a commit that fixed (or, with no vector stored, changed) the dimension:
        make the in-memory index."""
        if self._dim != dim:
            self._dim = dim
            self._vindex = self._new_vindex()

    def _write_plan(self, db: Pending, plan: dict[str, Any]) -> None:
        rids: dict[str, int] = plan["rids"]
        # the file, not this process's memory, says which rids are taken
        next_rid = db.read("SELECT coalesce(max(rid), 0) + 1 FROM nodes")[0][0]
        # the new memories heading the batch first (see .appends), then the other nodes
        fresh = plan["fresh"]
        if fresh is not None:
            # the texts first (a batch's costliest statement): a big write's committing
            # thread starts on them while this one makes the node rows' JSON
            db.insert_columns(
                "INSERT INTO memory_fts(rowid, content)", fresh_texts(fresh, next_rid)
            )
            # a plain INSERT: a clash with a row this process does not know about fails
            db.insert_columns("INSERT INTO nodes(rid, label, id, props)", fresh_rows(fresh))
            next_rid += len(fresh)
        node_new: list[tuple[Any, ...]] = []
        fts_insert: list[tuple[int, str]] = []
        node_old, fts_delete, vec_upsert, vec_delete = [], [], [], []
        whole_runs: list[tuple[int]] = []
        rid_of, held, vindex = self._rid_of, self._g._node, self._vindex
        for key, (label, ident, props, vec) in plan["nodes"].items():
            rid = rid_of.get(key)
            text = memory_row(props) if label is NodeLabel.MEMORY else _dumps(props)
            if rid is None:
                rid = next_rid
                next_rid += 1
                node_new.append((rid, str(label), ident, text))
            else:
                node_old.append((text, rid, str(label), ident))
                if label is NodeLabel.RUN:
                    whole_runs.append((rid,))
            rids[key] = rid
            if label is NodeLabel.MEMORY:
                old = held.get(key)
                if old is None or old.get("content") != props["content"]:
                    if old is not None:
                        fts_delete.append((rid, old["content"]))
                    fts_insert.append((rid, props["content"]))
            if vec is not None:
                vec_upsert.append((rid, np.asarray(vec, dtype=np.float32).tobytes()))
            elif vindex is not None and key in vindex:
                vec_delete.append((rid,))
        db.insert("INSERT INTO nodes(rid, label, id, props)", node_new)
        if node_old:
            db.executemany(
                "UPDATE nodes SET props = ? WHERE rid = ? AND label = ? AND id = ?",
                node_old,
                changes=len(node_old),
            )
            forget_heads(db, whole_runs)
        forget_texts(db, fts_delete)
        db.insert("INSERT INTO memory_fts(rowid, content)", fts_insert)
        db.insert("INSERT OR REPLACE INTO vectors(rid, vec)", vec_upsert)
        db.executemany("DELETE FROM vectors WHERE rid = ?", vec_delete)
        # structural edges live only in memory (rebuilt from node properties on load);
        # work out which ones a re-upserted node loses
        struct_del = []
        for key, wanted in plan["struct"].items():
            if wanted is None or key not in held:
                continue  # a new node has no edges to lose
            for _s, dst, etype in self._structural_edges_of(key):
                if (etype, dst) not in wanted:
                    struct_del.append((key, etype, dst))
        plan["struct_del"] = struct_del
        write_edges(db, plan, self._rid_of, self._g._succ)
        plan["next_rid"] = next_rid

    def _write_touches(self, db: sqlite3.Connection) -> None:
        if not self._pending_touch:
            return
        rows = []
        for key, (n, at) in self._pending_touch.items():
            rid = self._rid_of.get(key)
            if rid is not None:
                rows.append((n, at.isoformat(), rid))
                self._changed.add(key)
        db.executemany(
            "UPDATE nodes SET props = json_set(props,"
            " '$.access_count', coalesce(json_extract(props, '$.access_count'), 0) + ?,"
            " '$.last_accessed', max(coalesce(json_extract(props, '$.last_accessed'), ''), ?)"
            ") WHERE rid = ?",
            rows,
        )

    def checkpoint(self) -> None:
        """Fold the WAL into the main file (smaller file, faster next open)."""
        with self._lock:
            if not self._closed and self._path is not None:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
