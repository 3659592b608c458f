"""Embedded backend: a networkx MultiDiGraph in memory, journalled to one SQLite file.

Every ``upsert``/``delete``/``touch`` is one SQLite transaction (WAL mode); the in-memory
graph is changed only after the commit succeeds, so a failed write changes nothing and an
acknowledged write survives a crash of the process (``durability="normal"``, SQLite's
``synchronous=NORMAL``) or of the machine (``durability="full"``, an fsync per commit).
Lexical search uses an FTS5 index (BM25, porter stemming) in the same file; vectors live in
a contiguous float32 matrix (:class:`~graphmem.vector_index.VectorIndex`).

Several threads may share one backend (a lock serialises access). Several *processes* may
open the same file: SQLite's locking keeps the file consistent, and each call first checks
``PRAGMA data_version`` — when another process has committed since, this process reloads
the graph from the file before it reads or writes, so it sees every committed write
(a reload costs about as much as opening the file).

``memory://`` keeps the same SQLite machinery in memory (for tests and throwaway stores).
"""

from __future__ import annotations

import functools
import gc
import heapq
import itertools
import json
import logging
import os
import sqlite3
import threading
import time

try:
    import fcntl
except ImportError:  # Windows: SQLite's own locking and busy handler only
    fcntl = None  # type: ignore[assignment]
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import networkx as nx
import numpy as np
import orjson

from graphmem.backends.base import (
    STRUCTURAL,
    Direction,
    Expect,
    WriteBatch,
    expect_failure,
    structural_targets,
)
from graphmem.errors import (
    BackendUnavailable,
    Conflict,
    DimensionMismatch,
    GraphMemError,
    InvalidInput,
    QueryFailed,
)
from graphmem.models import (
    BackendStats,
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    Hit,
    Memory,
    NodeLabel,
    NodeRef,
    Subgraph,
    TextQuery,
    VectorQuery,
    check_page,
    node_model,
)
from graphmem.text import query_terms
from graphmem.vector_index import VectorIndex

__all__ = ["NetworkXBackend"]

log = logging.getLogger("graphmem.backends.networkx")

Durability = Literal["normal", "full", "off"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (
    rid INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    id TEXT NOT NULL,
    props TEXT NOT NULL,
    UNIQUE (label, id)
);
CREATE TABLE IF NOT EXISTS edges (
    src TEXT NOT NULL,
    type TEXT NOT NULL,
    dst TEXT NOT NULL,
    props TEXT NOT NULL,
    PRIMARY KEY (src, type, dst)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vectors (rid INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    content, content='', tokenize='porter unicode61 remove_diacritics 2'
);
-- the node keys each transaction changed, so that other processes refresh only those
CREATE TABLE IF NOT EXISTS changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL);
"""

#: changes kept for processes that fall behind (further behind: a full reload)
_CHANGES_KEPT = 100_000

_SCHEMA_VERSION = "2"  # 2: structural edges are no longer stored

# fields indexed in memory for fast filtering (value -> set of node keys)
_INDEXED: dict[NodeLabel, tuple[str, ...]] = {
    NodeLabel.MEMORY: (
        "agent_id",
        "namespace",
        "run_id",
        "status",
        "category",
        "tier",
        "event_type",
        "content_hash",
        "tags",
        "audience",
    ),
    NodeLabel.RUN: ("agent_id", "user_id", "status"),
    NodeLabel.ORG_FACT: ("fact_id", "category", "status"),
    NodeLabel.LOG_ENTRY: ("agent_id", "run_id"),
    NodeLabel.ENTITY: ("norm", "audience", "agent_id", "namespace", "type"),
}


_DT_FIELDS: dict[NodeLabel, frozenset[str]] = {}


def _datetime_fields(label: NodeLabel) -> frozenset[str]:
    fields = _DT_FIELDS.get(label)
    if fields is None:
        model = node_model(label)
        fields = frozenset(
            name for name, f in model.model_fields.items() if "datetime" in str(f.annotation)
        )
        _DT_FIELDS[label] = fields
    return fields


def _dumps(props: dict[str, Any]) -> str:
    """Node properties as JSON text (orjson writes aware datetimes as ISO 8601)."""
    return orjson.dumps(props).decode()


def _encode_edge_props(props: dict[str, Any]) -> str:
    return json.dumps(
        {k: ({"$dt": v.isoformat()} if isinstance(v, datetime) else v) for k, v in props.items()}
    )


def _decode_edge_props(text: str) -> dict[str, Any]:
    raw = json.loads(text)
    return {
        k: (datetime.fromisoformat(v["$dt"]) if isinstance(v, dict) and "$dt" in v else v)
        for k, v in raw.items()
    }


def fts_query(terms: Sequence[str]) -> str | None:
    """An FTS5 MATCH expression: the terms quoted (so no operator syntax gets through) and
    OR-ed. None when there is no term."""
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


#: a query term in more than this share of the memories (and more than _COMMON_MIN of
#: them) is left out of the BM25 match: its IDF is near zero, so it barely changes the
#: ranking, but scoring it means visiting most of the index
_COMMON_SHARE = 0.05
_COMMON_MIN = 1000


#: structural edges carry no properties: one shared, never mutated, data dict per type
_SHARED_EDGE_DATA: dict[str, dict[str, Any]] = {t.value: {"type": t.value} for t in EdgeType}


def _link(
    succ: dict[str, Any], pred: dict[str, Any], u: str, v: str, k: str, data: dict[str, Any]
) -> None:
    """Add edge (u, v, key k) straight into a MultiDiGraph's adjacency dicts (the layout
    networkx documents for subclasses; ``add_edge`` is several times slower)."""
    keydict = succ[u].get(v)
    if keydict is None:
        keydict = succ[u][v] = pred[v][u] = {}
    keydict[k] = data


_F = TypeVar("_F", bound=Callable[..., Any])


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building graph state. Those bursts allocate
    many small acyclic containers; each collection they trigger would traverse the whole
    in-memory graph for nothing (it halves ingest speed at 100k memories)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _index_into(
    buckets: list[tuple[str, dict[Any, set[str]]]], key: str, props: dict[str, Any]
) -> None:
    """Add a node key to the index buckets (defaultdicts) of its indexed fields; a list
    value indexes each item, as for tags."""
    for f, bucket in buckets:
        v = props.get(f)
        if v.__class__ is list:
            for item in v:
                bucket[item].add(key)
        else:
            bucket[v].add(key)


def _count_access(attrs: dict[str, Any], n: int, at: datetime) -> None:
    """Add ``n`` accesses at ``at`` to a memory's in-memory attributes."""
    attrs["access_count"] = int(attrs.get("access_count", 0)) + n
    last = attrs.get("last_accessed")
    attrs["last_accessed"] = at if last is None or last < at else last


#: pending access statistics are written when this many memories have some, or when the
#: oldest is this old (checked on the next touch), besides every write and close
TOUCH_FLUSH_COUNT = 512
TOUCH_FLUSH_SECONDS = 2.0

_MODELS: dict[str, type[GraphNode]] = {lab.value: node_model(lab) for lab in NodeLabel}


def _locked(method: _F) -> _F:
    """Run a write under the backend's lock, from BEGIN to the in-memory update: another
    thread must never plan against the state between a commit and its application."""

    @functools.wraps(method)
    def wrapper(self: NetworkXBackend, *args: Any, **kwargs: Any) -> Any:
        with self._lock, _gc_paused():
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class NetworkXBackend:
    """The embedded default backend. See the module docstring for guarantees."""

    name = "networkx"
    capabilities = frozenset({"vectors", "graph_view"})

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
        self._seen_seq = 0
        self._busy_timeout = busy_timeout_ms / 1000
        self._lock_fd: int | None = None
        self._writes_since_prune = 0
        try:
            if self._path is not None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            if self._path is not None and fcntl is not None:
                try:
                    self._lock_fd = os.open(f"{self._path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                except OSError as e:  # a read-only folder: SQLite's locking alone
                    log.debug("no writer lock file beside %s: %s", self._path, e)
            self._db = sqlite3.connect(
                str(self._path) if self._path else ":memory:",
                isolation_level=None,  # explicit BEGIN/COMMIT
                check_same_thread=False,
                timeout=busy_timeout_ms / 1000,
            )
            self._db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            if self._path is not None:
                mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise BackendUnavailable(f"cannot enable WAL journal on {self._path}")
            sync = {"normal": "NORMAL", "full": "FULL", "off": "OFF"}[durability]
            self._db.execute(f"PRAGMA synchronous={sync}")
            self._db.executescript(_SCHEMA)
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
        except sqlite3.Error as e:
            raise BackendUnavailable(f"cannot open embedded store {self._path}: {e}") from e
        self._load()

    # -- loading ---------------------------------------------------------------------

    def _check_version(self) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self._db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                (_SCHEMA_VERSION,),
            )
        elif row[0] != _SCHEMA_VERSION:
            raise BackendUnavailable(
                f"store schema version {row[0]} is not supported (expected {_SCHEMA_VERSION})"
            )

    def _load(self) -> None:
        """(Re)build the in-memory state from the file, from one read snapshot.

        ``data_version`` is read before the snapshot starts: a commit by another process
        in between is then in the snapshot but not in the recorded version, which costs one
        extra reload later and never a missed change. Inside a write transaction nobody
        else can commit, so the version read there is exact."""
        db = self._db
        outer = db.in_transaction
        with _gc_paused():
            if not outer:
                db.execute("BEGIN")
            try:
                version = db.execute("PRAGMA data_version").fetchone()[0]
                self._load_state()
            finally:
                if not outer:
                    db.execute("COMMIT")
        self._data_version = version
        # accesses recorded here but not yet written to the file survive the reload
        for key, (n, at) in self._pending_touch.items():
            attrs = self._g._node.get(key)
            if attrs is not None:
                _count_access(attrs, n, at)

    def _load_state(self) -> None:
        g = nx.MultiDiGraph()
        rid_of: dict[str, int] = {}
        key_of: dict[int, str] = {}
        by_label: dict[NodeLabel, set[str]] = defaultdict(set)
        index: dict[tuple[NodeLabel, str], dict[Any, set[str]]] = defaultdict(
            lambda: defaultdict(set)
        )
        # hot loop of every open: plain strings and dicts, networkx internals filled directly
        node_attrs: dict[str, dict[str, Any]] = g._node
        succ: dict[str, dict[str, dict[str, Any]]] = g._succ
        pred: dict[str, dict[str, dict[str, Any]]] = g._pred
        dt_fields = {lab.value: tuple(_datetime_fields(lab)) for lab in NodeLabel}
        indexed = {
            lab.value: [(f, index[(lab, f)]) for f in _INDEXED.get(lab, ())] for lab in NodeLabel
        }
        labels = {lab.value: lab for lab in NodeLabel}
        fromiso = datetime.fromisoformat
        loads = orjson.loads
        rows = self._db.execute("SELECT rid, label, id, props FROM nodes").fetchall()
        for rid, label_s, ident, props_s in rows:
            props = loads(props_s)
            for f in dt_fields[label_s]:
                v = props.get(f)
                if v is not None:
                    props[f] = fromiso(v)
            key = label_s + ":" + ident
            props["label"] = label_s
            node_attrs[key] = props
            succ[key] = {}
            pred[key] = {}
            rid_of[key] = rid
            key_of[rid] = key
            by_label[labels[label_s]].add(key)
            _index_into(indexed[label_s], key, props)
        del rows

        # structural edges are a function of node properties, rebuilt here, never stored
        shared = _SHARED_EDGE_DATA
        for key, attrs in node_attrs.items():
            for etype, tlabel, tid, _d in structural_targets(labels[attrs["label"]], attrs):
                tkey = tlabel.value + ":" + tid
                if tkey in succ:
                    _link(succ, pred, key, tkey, etype.value, shared[etype.value])
        dangling = 0
        for src, etype, dst, props_s in self._db.execute("SELECT src, type, dst, props FROM edges"):
            if src not in node_attrs or dst not in node_attrs:
                dangling += 1  # never invent a node without properties for such an edge
                continue
            g.add_edge(src, dst, key=etype, type=etype, **_decode_edge_props(props_s))
        if dangling:
            log.warning("ignored %d stored edges whose endpoints are missing", dangling)
        self._seen_seq = self._db.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0]
        dim_row = self._db.execute("SELECT value FROM meta WHERE key='embedding_dim'").fetchone()
        self._dim: int | None = int(dim_row[0]) if dim_row else None
        vindex = VectorIndex(self._dim) if self._dim else None
        if vindex is not None:
            keys: list[str] = []
            vecs: list[np.ndarray] = []
            for rid, blob in self._db.execute("SELECT rid, vec FROM vectors"):
                vkey = key_of.get(rid)
                if vkey is not None:
                    keys.append(vkey)
                    vecs.append(np.frombuffer(blob, dtype=np.float32))
            if keys:
                vindex.add(keys, np.vstack(vecs))
        self._g = g
        self._rid_of = rid_of
        self._key_of = key_of
        self._by_label = by_label
        self._index = index
        # per label, its indexed fields with their buckets (no tuple/enum hashing per write)
        self._buckets = {
            lab: [(f, index[(lab, f)]) for f in _INDEXED.get(lab, ())] for lab in NodeLabel
        }
        self._vindex = vindex
        self._unvectored = {
            k for k in by_label.get(NodeLabel.MEMORY, ()) if vindex is None or k not in vindex
        }
        self._next_rid = max(key_of, default=0) + 1
        self._df_cache: dict[str, int] = {}
        self._df_cache_n = len(by_label.get(NodeLabel.MEMORY, ()))

    def _index_add(self, label: NodeLabel, key: str, props: dict[str, Any]) -> None:
        _index_into(self._buckets[label], key, props)

    def _index_remove(self, label: NodeLabel, key: str, props: dict[str, Any]) -> None:
        for f, bucket in self._buckets[label]:
            v = props.get(f)
            for item in v if isinstance(v, list) else [v]:
                keys = bucket.get(item)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del bucket[item]

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
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, reloading first if another process wrote."""
        with self._lock, self._writer_turn():
            if self._closed:
                raise BackendUnavailable("the store is closed")
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                raise Conflict(f"the store is locked by another writer: {e}") from e
            try:
                # read while holding the write lock: no other process can commit until our
                # COMMIT, and our own commits do not change this connection's data_version
                version = self._db.execute("PRAGMA data_version").fetchone()[0]
                if version != self._data_version:
                    self._refresh()
                self._changed = set()
                self._write_touches(self._db)
                yield self._db
                self._log_changes(self._db)
                self._db.execute("COMMIT")
                self._pending_touch.clear()
                self._touch_since = None
            except BaseException as e:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                if isinstance(e, sqlite3.IntegrityError):
                    raise Conflict(str(e)) from e
                if isinstance(e, sqlite3.Error):
                    raise QueryFailed(f"embedded store write failed: {e}") from e
                raise

    @contextmanager
    def _writer_turn(self) -> Iterator[None]:
        """Writers of several processes take turns on a lock file beside the store before
        SQLite's write lock: a waiter gets the lock within a fraction of a millisecond of
        its release, where SQLite's own busy handler sleeps 1, 2, 5, 10 ... ms between tries
        (p50 ~25 ms per write with three writer processes)."""
        fd = self._lock_fd
        if fd is None:
            yield
            return
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.0001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Conflict("the store is locked by another writer") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.001)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _log_changes(self, db: sqlite3.Connection) -> None:
        """Record which node keys this transaction changed (see :meth:`_refresh`)."""
        if not self._changed:
            return
        db.executemany("INSERT INTO changes(key) VALUES (?)", [(k,) for k in self._changed])
        self._seen_seq = db.execute("SELECT max(seq) FROM changes").fetchone()[0]
        self._writes_since_prune += 1
        if self._writes_since_prune >= 1024:
            self._writes_since_prune = 0
            db.execute("DELETE FROM changes WHERE seq <= ?", (self._seen_seq - _CHANGES_KEPT,))

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
            lo, hi = db.execute("SELECT min(seq), max(seq) FROM changes").fetchone()
            dim_row = db.execute("SELECT value FROM meta WHERE key='embedding_dim'").fetchone()
            if dim_row is not None and int(dim_row[0]) != self._dim:
                if self._dim is not None:
                    full = True  # another process moved the store to a new model
                self._set_dim(int(dim_row[0]))
            if not full and hi is not None and hi > self._seen_seq:
                if lo is not None and lo > self._seen_seq + 1:
                    full = True  # the log was pruned past what this process saw
                else:
                    keys = {
                        k
                        for (k,) in db.execute(
                            "SELECT key FROM changes WHERE seq > ?", (self._seen_seq,)
                        )
                    }
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
        for key in keys:
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
            for f in _datetime_fields(label):
                v = props.get(f)
                if v is not None:
                    props[f] = datetime.fromisoformat(v)
            props["label"] = label_s
            self._put_node(label, key, props, rid)
            pending = self._pending_touch.get(key)
            if pending is not None:
                _count_access(nodes[key], *pending)
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
            # from its properties (incoming structural edges depend on other nodes' fields)
            label = labels[nodes[key]["label"]]
            for src, dst, etype in list(g.out_edges(key, keys=True)):
                g.remove_edge(src, dst, key=etype)
            for src, dst, etype in list(g.in_edges(key, keys=True)):
                if (labels[nodes[src]["label"]], EdgeType(etype)) not in STRUCTURAL:
                    g.remove_edge(src, dst, key=etype)
            for etype_, tlabel, tid, _d in structural_targets(label, nodes[key]):
                tkey = tlabel.value + ":" + tid
                if tkey in succ:
                    _link(succ, pred, key, tkey, etype_.value, shared[etype_.value])
            for src, etype, dst, props_s in db.execute(
                "SELECT src, type, dst, props FROM edges WHERE src = ? OR dst = ?", (key, key)
            ):
                if src in nodes and dst in nodes and etype not in succ[src].get(dst, ()):
                    _link(
                        succ, pred, src, dst, etype, {**_decode_edge_props(props_s), "type": etype}
                    )
        self._df_cache = {}
        self._df_cache_n = len(self._by_label.get(NodeLabel.MEMORY, ()))

    def _forget_key(self, key: str) -> None:
        """Drop a node another process deleted from the in-memory state."""
        attrs = self._g._node[key]
        label = NodeLabel(attrs["label"])
        self._index_remove(label, key, attrs)
        self._by_label[label].discard(key)
        rid = self._rid_of.pop(key, None)
        if rid is not None:
            self._key_of.pop(rid, None)
        self._pending_touch.pop(key, None)
        self._unvectored.discard(key)
        if self._vindex is not None and key in self._vindex:
            self._vindex.remove([key])
        self._g.remove_node(key)

    # -- protocol --------------------------------------------------------------------

    @property
    def graph(self) -> nx.MultiDiGraph:
        """A read-only live view of the in-memory graph (node keys are ``Label:id``)."""
        view: nx.MultiDiGraph = self._g.copy(as_view=True)
        return view

    @property
    def vector_index(self) -> VectorIndex | None:
        """The in-memory vector index (None until the store has a vector dimension)."""
        return self._vindex

    @property
    def location(self) -> str:
        return str(self._path) if self._path else "memory://"

    @_locked
    def ensure_schema(self, *, embedding_dim: int | None = None) -> None:
        if embedding_dim is None:
            return
        if embedding_dim <= 0:
            raise InvalidInput("embedding_dim must be positive")
        if self._dim == embedding_dim:
            return
        with self._transaction() as db:
            self._fix_dim(db, embedding_dim)
        self._set_dim(embedding_dim)

    def _fix_dim(self, db: sqlite3.Connection, dim: int) -> None:
        if self._dim is None:
            db.execute("INSERT INTO meta(key, value) VALUES ('embedding_dim', ?)", (str(dim),))
        elif self._dim != dim:
            # a store whose vectors were all cleared (reindex --all) takes a new model
            if db.execute("SELECT 1 FROM vectors LIMIT 1").fetchone() is not None:
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
            self._vindex = VectorIndex(dim)

    def upsert(self, nodes: Sequence[GraphNode] = (), edges: Sequence[Edge] = ()) -> None:
        self.write(WriteBatch(nodes=nodes, edges=edges))

    def delete(self, nodes: Sequence[NodeRef] = (), edges: Sequence[Edge] = ()) -> int:
        refs = [NodeRef(NodeLabel(r[0]), r[1]) for r in nodes]
        return self._write(WriteBatch(delete_nodes=refs, delete_edges=edges))

    def write(self, batch: WriteBatch) -> None:
        self._write(batch)

    @_locked
    def _write(self, batch: WriteBatch) -> int:
        """Apply a batch; returns how many nodes it deleted."""
        nodes, edges = batch.nodes, batch.edges
        for n in nodes:
            if not isinstance(n, GraphNode):
                raise InvalidInput(f"upsert takes graph nodes, got {type(n).__name__}")
        for e in (*edges, *batch.delete_edges):
            if not isinstance(e, Edge):
                raise InvalidInput(f"upsert takes Edge values, got {type(e).__name__}")
        doomed = [NodeRef(NodeLabel(r[0]), r[1]) for r in batch.delete_nodes]
        if {n.ref.key for n in nodes} & {r.key for r in doomed}:
            raise InvalidInput("one write cannot both upsert and delete the same node")
        if not batch and not batch.expect:
            return 0
        dims = {len(vec) for n in nodes if (vec := getattr(n, "embedding", None))}
        dims.update(len(v) for v in batch.vectors.values())
        if len(dims) > 1:
            raise DimensionMismatch(f"embeddings of different dimensions in one batch: {dims}")
        dim = dims.pop() if dims else None
        with self._transaction() as db:
            self._check_expectations(batch.expect)
            plan = self._plan_upsert(nodes, edges, doomed={r.key for r in doomed})
            if dim is not None:
                self._fix_dim(db, dim)
            self._write_plan(db, plan)
            dplan = self._plan_delete(doomed, batch.delete_edges, plan)
            self._write_delete(db, dplan)
            vec_keys = [
                k
                for i in batch.vectors
                if (k := "Memory:" + i) in self._rid_of and k not in dplan["keys"]
            ]
            changed = self._changed
            changed.update(plan["nodes"])
            changed.update(k for src, _t, dst, _p in plan["edges"] for k in (src, dst))
            changed.update(k for k, _t, _d in plan["struct_del"])
            changed.update(dplan["keys"])
            changed.update(k for src, _t, dst in dplan["edges"] for k in (src, dst))
            changed.update(vec_keys)
            if vec_keys:
                db.executemany(
                    "INSERT OR REPLACE INTO vectors(rid, vec) VALUES (?, ?)",
                    [
                        (
                            self._rid_of[k],
                            np.asarray(batch.vectors[k[7:]], dtype=np.float32).tobytes(),
                        )
                        for k in vec_keys
                    ],
                )
        if dim is not None:
            self._set_dim(dim)
        self._apply_plan(plan)
        self._apply_delete(dplan)
        if vec_keys and self._vindex is not None:
            self._vindex.add(
                vec_keys, np.asarray([batch.vectors[k[7:]] for k in vec_keys], dtype=np.float32)
            )
            self._unvectored.difference_update(vec_keys)
        return len(dplan["keys"])

    def missing_vectors(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` memories (id, content) that have no vector yet."""
        with self._fresh():
            nodes = self._g._node
            keys = list(itertools.islice(self._unvectored, limit))
            return [(k[7:], nodes[k]["content"]) for k in keys]

    def _check_expectations(self, expects: Sequence[Expect]) -> None:
        """Inside the transaction, with the state current: every precondition must hold."""
        g = self._g
        for ex in expects:
            key = ex.ref.key
            props = g._node.get(key)
            sources: list[str] = []
            if props is not None and ex.sources is not None:
                types = {t.value for t in ex.incoming}
                sources = [_ref_of(s).id for s, _d, t in g.in_edges(key, keys=True) if t in types]
            why = expect_failure(ex, props, sources)
            if why is not None:
                raise Conflict(f"precondition failed: {why}")

    def _plan_upsert(
        self, nodes: Sequence[GraphNode], edges: Sequence[Edge], *, doomed: set[str]
    ) -> dict[str, Any]:
        """Work out every row to write, before touching the file (validation first)."""
        node_rows: dict[str, tuple[NodeLabel, str, dict[str, Any], tuple[float, ...] | None]] = {}
        auto: dict[str, GraphNode] = {}
        struct: dict[str, list[tuple[str, str]]] = {}
        for n in nodes:
            props = n.to_props()
            vec = props.pop("embedding", None)
            key = n.ref.key
            node_rows[key] = (n.label, n.id, props, tuple(vec) if vec else None)  # type: ignore[arg-type]
        queue = list(node_rows)
        while queue:  # auto-created endpoints (a Run) may need endpoints of their own
            key = queue.pop()
            label, _ident, props, _vec = node_rows[key]
            targets = structural_targets(label, props)
            struct[key] = [(etype.value, f"{tl.value}:{tid}") for etype, tl, tid, _d in targets]
            for _etype, tlabel, tid, defaults in targets:
                tkey = f"{tlabel.value}:{tid}"
                if tkey not in node_rows and tkey not in self._rid_of and tkey not in auto:
                    target = node_model(tlabel)(id=tid, **defaults)
                    auto[tkey] = target
                    node_rows[tkey] = (target.label, target.id, target.to_props(), None)
                    queue.append(tkey)
        edge_rows: list[tuple[str, str, str, dict[str, Any]]] = []
        for e in edges:
            src, dst = e.src.key, e.dst.key
            if (e.src.label, e.type) in STRUCTURAL:
                # implied by the source node's properties: accepted when they agree (as in an
                # import or migration), never stored on their own
                implied = struct.get(src)
                if implied is None and src in self._g:
                    implied = [(t, d) for _s, d, t in self._structural_edges_of(src)]
                if (e.type.value, dst) not in (implied or ()):
                    raise InvalidInput(
                        f"{e.type.value} edges follow the node's fields (agent_id, run_id, "
                        f"tags); {src} does not imply one to {dst}"
                    )
                continue
            for end in (src, dst):
                if end in doomed or (end not in node_rows and end not in self._rid_of):
                    raise InvalidInput(f"edge {e.type.value} refers to missing node {end}")
            edge_rows.append((src, e.type.value, dst, dict(e.props)))
        return {"nodes": node_rows, "struct": struct, "edges": edge_rows, "rids": {}}

    def _write_plan(self, db: sqlite3.Connection, plan: dict[str, Any]) -> None:
        rids: dict[str, int] = plan["rids"]
        # the file, not this process's memory, says which rids are taken
        next_rid = db.execute("SELECT coalesce(max(rid), 0) + 1 FROM nodes").fetchone()[0]
        node_new = []
        node_old = []
        fts_delete = []
        fts_insert = []
        vec_upsert = []
        vec_delete = []
        for key, (label, ident, props, vec) in plan["nodes"].items():
            rid = self._rid_of.get(key)
            if rid is None:
                rid = next_rid
                next_rid += 1
                node_new.append((rid, label.value, ident, _dumps(props)))
            else:
                node_old.append((_dumps(props), rid, label.value, ident))
            rids[key] = rid
            if label is NodeLabel.MEMORY:
                old = self._g.nodes[key] if key in self._g else None
                if old is None or old.get("content") != props["content"]:
                    if old is not None:
                        fts_delete.append((rid, old["content"]))
                    fts_insert.append((rid, props["content"]))
            if vec is not None:
                vec_upsert.append((rid, np.asarray(vec, dtype=np.float32).tobytes()))
            elif self._vindex is not None and key in self._vindex:
                vec_delete.append((rid,))
        # a plain INSERT: a clash with a row this process does not know about fails loudly
        db.executemany("INSERT INTO nodes(rid, label, id, props) VALUES (?, ?, ?, ?)", node_new)
        if node_old:
            cur = db.executemany(
                "UPDATE nodes SET props = ? WHERE rid = ? AND label = ? AND id = ?", node_old
            )
            if cur.rowcount != len(node_old):
                raise Conflict("the store changed underneath this write; retry")
        if fts_delete:
            db.executemany(
                "INSERT INTO memory_fts(memory_fts, rowid, content) VALUES ('delete', ?, ?)",
                fts_delete,
            )
        if fts_insert:
            db.executemany("INSERT INTO memory_fts(rowid, content) VALUES (?, ?)", fts_insert)
        if vec_upsert:
            db.executemany("INSERT OR REPLACE INTO vectors(rid, vec) VALUES (?, ?)", vec_upsert)
        if vec_delete:
            db.executemany("DELETE FROM vectors WHERE rid = ?", vec_delete)
        # structural edges live only in memory (rebuilt from node properties on load);
        # work out which ones a re-upserted node loses
        struct_del = []
        for key, wanted in plan["struct"].items():
            for _s, dst, etype in self._structural_edges_of(key):
                if (etype, dst) not in wanted:
                    struct_del.append((key, etype, dst))
        plan["struct_del"] = struct_del
        edge_params = [
            (src, etype, dst, _encode_edge_props(props)) for src, etype, dst, props in plan["edges"]
        ]
        db.executemany(
            "INSERT INTO edges(src, type, dst, props) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(src, type, dst) DO UPDATE SET props = excluded.props",
            edge_params,
        )
        plan["next_rid"] = next_rid

    def _put_node(self, label: NodeLabel, key: str, attrs: dict[str, Any], rid: int) -> None:
        """Set a node's attributes in memory, with its index buckets and rid maps (its
        edges are the caller's business). An existing attribute dict is updated in place:
        networkx views hold on to it."""
        g = self._g
        old = g._node.get(key)
        if old is not None:
            self._index_remove(label, key, old)
            old.clear()
            old.update(attrs)
            attrs = old
        else:
            g._node[key] = attrs
            g._succ[key] = {}
            g._pred[key] = {}
        prev = self._rid_of.get(key)
        if prev is not None and prev != rid:
            self._key_of.pop(prev, None)
        self._rid_of[key] = rid
        self._key_of[rid] = key
        self._by_label[label].add(key)
        self._index_add(label, key, attrs)

    def _structural_edges_of(self, key: str) -> list[tuple[str, str, str]]:
        if key not in self._g:
            return []
        label = NodeLabel(self._g.nodes[key]["label"])
        return [
            (key, dst, etype)
            for _s, dst, etype in self._g.out_edges(key, keys=True)
            if (label, EdgeType(etype)) in STRUCTURAL
        ]

    def _apply_plan(self, plan: dict[str, Any]) -> None:
        g = self._g
        rids: dict[str, int] = plan["rids"]
        vec_keys: list[str] = []
        vecs: list[tuple[float, ...]] = []
        succ, pred = g._succ, g._pred  # raw dicts: the API is slow here
        for key, (label, _ident, props, vec) in plan["nodes"].items():
            attrs = dict(props)
            attrs["label"] = label.value
            self._put_node(label, key, attrs, rids[key])
            if vec is not None:
                vec_keys.append(key)
                vecs.append(vec)
                self._unvectored.discard(key)
            else:
                if self._vindex is not None and key in self._vindex:
                    self._vindex.remove([key])
                if label is NodeLabel.MEMORY:
                    self._unvectored.add(key)
        if vec_keys and self._vindex is not None:
            self._vindex.add(vec_keys, np.asarray(vecs, dtype=np.float32))
        for src, etype, dst in plan["struct_del"]:
            if etype in succ[src].get(dst, ()):
                g.remove_edge(src, dst, key=etype)
        shared = _SHARED_EDGE_DATA
        for key, wanted in plan["struct"].items():
            out = succ[key]
            for etype, dst in wanted:
                if etype not in out.get(dst, ()):
                    _link(succ, pred, key, dst, etype, shared[etype])
        for src, etype, dst, props in plan["edges"]:
            data = succ[src].get(dst, {}).get(etype)
            if data is not None:
                data.clear()
                data.update(props, type=etype)
            else:
                _link(succ, pred, src, dst, etype, {**props, "type": etype})
        self._next_rid = plan["next_rid"]

    def get(self, label: NodeLabel, ids: Sequence[str]) -> list[GraphNode]:
        label = NodeLabel(label)
        with self._fresh():
            out = []
            for ident in ids:
                key = f"{label.value}:{ident}"
                if key in self._g:
                    out.append(self._node(key))
            return out

    def _node(self, key: str) -> GraphNode:
        attrs = self._g._node[key]
        model = _MODELS[attrs["label"]]
        # validated when written by graphmem; a file edited by hand is not re-validated
        node = model.from_trusted(attrs)  # ignores the non-field "label"
        if model is Memory and self._vindex is not None:
            vec = self._vindex.get(key)
            if vec is not None:  # just built here, so setting the frozen field is safe
                node.__dict__["embedding"] = tuple(vec.tolist())
        return node

    def _plan_delete(
        self, refs: Sequence[NodeRef], edges: Sequence[Edge], upsert_plan: dict[str, Any]
    ) -> dict[str, Any]:
        g = self._g
        keys = [r.key for r in refs if r.key in g]
        node_rids = [(self._rid_of[k],) for k in keys]
        fts = [
            (self._rid_of[k], g._node[k]["content"])
            for k in keys
            if g._node[k]["label"] == NodeLabel.MEMORY.value
        ]
        edge_rows: set[tuple[str, str, str]] = set()
        for k in keys:
            for s_, d, t in g.out_edges(k, keys=True):
                edge_rows.add((s_, t, d))
            for s_, d, t in g.in_edges(k, keys=True):
                edge_rows.add((s_, t, d))
        for e in edges:
            edge_rows.add((e.src.key, e.type.value, e.dst.key))
        # edges this batch adds to a node it deletes cannot happen (checked when planning)
        return {"keys": keys, "rids": node_rids, "fts": fts, "edges": edge_rows}

    def _write_delete(self, db: sqlite3.Connection, plan: dict[str, Any]) -> None:
        if plan["edges"]:
            db.executemany(
                "DELETE FROM edges WHERE src=? AND type=? AND dst=?", list(plan["edges"])
            )
        if plan["fts"]:
            db.executemany(
                "INSERT INTO memory_fts(memory_fts, rowid, content) VALUES ('delete', ?, ?)",
                plan["fts"],
            )
        if plan["rids"]:
            db.executemany("DELETE FROM vectors WHERE rid = ?", plan["rids"])
            db.executemany("DELETE FROM nodes WHERE rid = ?", plan["rids"])

    def _apply_delete(self, plan: dict[str, Any]) -> None:
        g = self._g
        for src, etype, dst in plan["edges"]:
            if g.has_edge(src, dst, key=etype):
                g.remove_edge(src, dst, key=etype)
        for k in plan["keys"]:
            attrs = g._node[k]
            label = NodeLabel(attrs["label"])
            self._index_remove(label, k, attrs)
            self._by_label[label].discard(k)
            self._key_of.pop(self._rid_of.pop(k), None)
            self._pending_touch.pop(k, None)
            self._unvectored.discard(k)
            if self._vindex is not None:
                self._vindex.remove([k])
            g.remove_node(k)

    # -- filtering -------------------------------------------------------------------

    def _candidates(self, flt: Filter) -> set[str] | None:
        """The smallest indexed key set the filter implies (None: the whole label)."""
        label = flt.label
        sets: list[set[str]] = []
        if flt.ids is not None:
            sets.append({f"{label.value}:{i}" for i in flt.ids})
        indexed = _INDEXED.get(label, ())
        for f, v in flt.equals.items():
            if f in indexed:
                sets.append(self._index[(label, f)].get(v, set()))
        for f, vs in flt.any_of.items():
            if f in indexed:
                bucket = self._index[(label, f)]
                u: set[str] = set()
                for v in vs:
                    u |= bucket.get(v, set())
                sets.append(u)
        if flt.tags_all and "tags" in indexed:
            for t in flt.tags_all:
                sets.append(self._index[(label, "tags")].get(t, set()))
        if not sets:
            return None
        sets.sort(key=len)
        if len(sets) == 1:
            return sets[0]
        return sets[0].intersection(*sets[1:])  # C-speed narrowing before any predicate

    @staticmethod
    def _predicate(flt: Filter) -> Callable[[dict[str, Any]], bool]:
        label = flt.label.value
        equals = list(flt.equals.items())
        any_of = [(f, set(vs)) for f, vs in flt.any_of.items()]
        ranges = flt.ranges
        tags_all = set(flt.tags_all)
        ids = set(flt.ids) if flt.ids is not None else None

        def ok(a: dict[str, Any]) -> bool:
            if a.get("label") != label:
                return False
            if ids is not None and a.get("id") not in ids:
                return False
            for f, v in equals:
                if a.get(f) != v:
                    return False
            for f, vs in any_of:
                if a.get(f) not in vs:
                    return False
            for r in ranges:
                v = a.get(r.field)
                if v is None:
                    if r.or_missing:
                        continue
                    return False
                try:
                    if r.gte is not None and not v >= r.gte:
                        return False
                    if r.gt is not None and not v > r.gt:
                        return False
                    if r.lte is not None and not v <= r.lte:
                        return False
                    if r.lt is not None and not v < r.lt:
                        return False
                except TypeError:
                    return False
            if tags_all and not tags_all.issubset(a.get("tags", ())):
                return False
            return True

        return ok

    def _matching_keys(self, flt: Filter) -> Iterator[str]:
        cand = self._candidates(flt)
        keys: Iterable[str] = cand if cand is not None else self._by_label.get(flt.label, ())
        ok = self._predicate(flt)
        nodes = self._g.nodes
        for k in keys:
            if k in nodes and ok(nodes[k]):
                yield k

    def match(
        self,
        flt: Filter,
        *,
        limit: int | None = None,
        offset: int = 0,
        order_by: str = "id",
        descending: bool = False,
    ) -> list[GraphNode]:
        check_page(
            node_model(flt.label),
            limit=limit,
            offset=offset,
            order_by=order_by,
            descending=descending,
        )
        with self._fresh():
            nodes = self._g.nodes
            keys = list(self._matching_keys(flt))

            def sort_key(k: str) -> tuple[Any, ...]:
                v = nodes[k].get(order_by)
                # missing values sort last in both directions
                missing = v is None
                return (missing != descending, _orderable(v), nodes[k].get("id"))

            if limit is not None and limit + offset < len(keys) // 4:
                pick = heapq.nlargest if descending else heapq.nsmallest
                keys = pick(limit + offset, keys, key=sort_key)
            else:
                keys.sort(key=sort_key, reverse=descending)
            end = None if limit is None else offset + limit
            return [self._node(k) for k in keys[offset:end]]

    def count(self, flt: Filter) -> int:
        with self._fresh():
            return sum(1 for _ in self._matching_keys(flt))

    # -- search ----------------------------------------------------------------------

    def search_text(self, query: TextQuery) -> list[Hit]:
        if query.filter.label is not NodeLabel.MEMORY:
            raise InvalidInput("text search runs over Memory nodes")
        terms = query_terms(query.text)
        if not terms:
            return []
        with self._fresh():
            expr = fts_query(self._selective_terms(terms))
            if expr is None:
                return []
            ok = self._predicate(query.filter)
            cand = self._candidates(query.filter)
            nodes = self._g.nodes
            results: list[tuple[str, float]] = []
            try:
                # FTS5 evaluates ``rowid IN (...)`` badly, so the filter runs in Python over
                # a growing prefix of the BM25 ranking until k pass or the matches run out
                fetch = max(query.k * 4, 64)
                while True:
                    rows = self._db.execute(
                        "SELECT rowid, bm25(memory_fts) AS s FROM memory_fts "
                        "WHERE memory_fts MATCH ? ORDER BY s LIMIT ?",
                        (expr, fetch),
                    ).fetchall()
                    results = []
                    for rid, s in rows:
                        key = self._key_of.get(rid)
                        if key is not None and (cand is None or key in cand) and ok(nodes[key]):
                            results.append((key, -s))
                            if len(results) == query.k:
                                break
                    if len(results) == query.k or len(rows) < fetch:
                        break
                    fetch *= 8
            except sqlite3.Error as e:
                raise QueryFailed(f"text search failed: {e}") from e
            return [Hit(node=self._node(k), score=s) for k, s in results]

    def _selective_terms(self, terms: list[str]) -> list[str]:
        """The query terms worth matching: present in the index and not near-ubiquitous
        (see _COMMON_SHARE); when every term is common, the two rarest."""
        db = self._db
        try:
            db.executemany(
                "INSERT INTO temp.query_tokens(rowid, t) VALUES (?, ?)", list(enumerate(terms))
            )
            stems = db.execute("SELECT doc, term FROM temp.query_tokens_vocab").fetchall()
            db.execute("DELETE FROM temp.query_tokens")
            # document frequencies only steer which terms to match, so a cached value is
            # good enough until the store has grown or shrunk by a tenth
            n_now = len(self._by_label.get(NodeLabel.MEMORY, ()))
            cache = self._df_cache
            if abs(n_now - self._df_cache_n) > 0.1 * max(self._df_cache_n, 1000):
                cache.clear()
                self._df_cache_n = n_now
            missing = list({t for _d, t in stems if t not in cache})
            if missing:
                marks = ",".join("?" * len(missing))
                found = dict(
                    db.execute(
                        f"SELECT term, doc FROM temp.memory_vocab WHERE term IN ({marks})", missing
                    ).fetchall()
                )
                cache.update(found)  # absent terms are not cached: they may appear any time
            df = {t: cache.get(t, 0) for _d, t in stems}
        except sqlite3.Error as e:
            raise QueryFailed(f"text search planning failed: {e}") from e
        freq: dict[int, int] = {}
        for i, stem in stems:  # a token can yield several stems; keep its rarest
            n = df.get(stem, 0)
            if n:
                freq[i] = min(freq.get(i, n), n)
        if not freq:
            return []
        limit = max(_COMMON_MIN, _COMMON_SHARE * len(self._by_label.get(NodeLabel.MEMORY, ())))
        keep = [i for i, n in freq.items() if n <= limit]
        if not keep:
            keep = sorted(freq, key=freq.__getitem__)[:2]
        return [terms[i] for i in sorted(keep)]

    def search_vector(self, query: VectorQuery) -> list[Hit]:
        if query.filter.label is not NodeLabel.MEMORY:
            raise InvalidInput("vector search runs over Memory nodes")
        with self._fresh():
            if self._vindex is None:
                return []
            if len(query.vector) != self._vindex.dim:
                raise DimensionMismatch(
                    f"query vector has {len(query.vector)} dimensions; "
                    f"this store uses {self._vindex.dim}"
                )
            ok = self._predicate(query.filter)
            nodes = self._g.nodes
            cand = self._candidates(query.filter)
            if cand is not None and len(cand) > len(self._vindex) // 5:
                cand = None  # broad filter: scan everything and check while taking top-k
            found = self._vindex.search(
                np.asarray(query.vector, dtype=np.float32),
                query.k,
                candidates=cand,
                allowed=lambda k: k in nodes and ok(nodes[k]),
            )
            return [Hit(node=self._node(k), score=s) for k, s in found]

    def expand(
        self,
        seeds: Sequence[NodeRef],
        edge_types: Sequence[EdgeType],
        *,
        direction: Direction = "both",
        depth: int = 1,
        limit: int = 1000,
    ) -> Subgraph:
        if depth < 0 or limit < 1:
            raise InvalidInput("depth must be >= 0 and limit >= 1")
        types = {EdgeType(t).value for t in edge_types}
        with self._fresh():
            g = self._g
            frontier = [NodeRef(NodeLabel(s[0]), s[1]).key for s in seeds]
            seen = [k for k in dict.fromkeys(frontier) if k in g]
            seen_set = set(seen)
            frontier = list(seen)
            edges: dict[tuple[str, str, str], dict[str, Any]] = {}
            for _ in range(depth):
                nxt = []
                for k in frontier:
                    # edge views are iterated lazily and the scan stops at the node limit,
                    # so a hub (a tag on 100k memories) costs `limit`, not its degree
                    steps = itertools.chain(
                        g.out_edges(k, keys=True, data=True) if direction != "in" else (),
                        g.in_edges(k, keys=True, data=True) if direction != "out" else (),
                    )
                    for s, d, t, data in steps:
                        if t not in types:
                            continue
                        other = d if s == k else s
                        if other not in seen_set:
                            if len(seen) >= limit:
                                break
                            seen_set.add(other)
                            seen.append(other)
                            nxt.append(other)
                        edges[(s, t, d)] = data
                frontier = nxt
                if not frontier:
                    break
            out_edges = [
                _edge_of(s, t, d, data)
                for (s, t, d), data in edges.items()
                if s in seen_set and d in seen_set
            ]
            return Subgraph(nodes=tuple(self._node(k) for k in seen), edges=tuple(out_edges))

    def touch(self, ids: Sequence[str], at: datetime) -> None:
        """Record accesses in memory at once and in the file in batches: recall must not
        pay for a write transaction. Pending accesses are written with the next write
        transaction, when :data:`TOUCH_FLUSH_COUNT` are pending or the oldest is
        :data:`TOUCH_FLUSH_SECONDS` old, and at ``flush``/``close``. They are relative
        increments, so another process's writes in between are never overwritten."""
        if not ids:
            return
        if at.tzinfo is None:
            raise InvalidInput("touch time must be timezone-aware")
        at = at.astimezone(UTC)
        with self._fresh():
            nodes = self._g._node
            pending = self._pending_touch
            for i in dict.fromkeys(ids):
                key = "Memory:" + i
                attrs = nodes.get(key)
                if attrs is None:
                    continue
                _count_access(attrs, 1, at)
                n, seen = pending.get(key, (0, at))
                pending[key] = (n + 1, at if seen < at else seen)
            if self._touch_since is None:
                self._touch_since = time.monotonic()
            due = (
                len(pending) >= TOUCH_FLUSH_COUNT
                or time.monotonic() - self._touch_since >= TOUCH_FLUSH_SECONDS
            )
        if due:
            self.flush()

    @_locked
    def flush(self) -> None:
        """Write pending access statistics to the file (one transaction)."""
        if self._pending_touch and not self._closed:
            with self._transaction():
                pass  # the transaction writes pending touches first thing

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

    def scan(self, *, batch_size: int = 1000) -> Iterator[tuple[list[GraphNode], list[Edge]]]:
        if batch_size < 1:
            raise InvalidInput("batch_size must be >= 1")
        with self._fresh():
            keys = sorted(self._g.nodes, key=lambda k: self._rid_of[k])
            edge_list = sorted(
                self._g.edges(keys=True, data=True), key=lambda e: (e[0], e[2], e[1])
            )
        for i in range(0, len(keys), batch_size):
            with self._fresh():
                yield [self._node(k) for k in keys[i : i + batch_size] if k in self._g], []
        for i in range(0, len(edge_list), batch_size):
            batch = [_edge_of(s, t, d, data) for s, d, t, data in edge_list[i : i + batch_size]]
            yield [], batch

    def stats(self) -> BackendStats:
        with self._fresh():
            nodes = {lab.value: len(keys) for lab, keys in self._by_label.items() if keys}
            edges: dict[str, int] = defaultdict(int)
            for _s, _d, t in self._g.edges(keys=True):
                edges[t] += 1
            size = None
            if self._path is not None:
                size = sum(
                    p.stat().st_size for p in (self._path, Path(f"{self._path}-wal")) if p.exists()
                )
            return BackendStats(
                backend=self.name,
                nodes=nodes,
                edges=dict(edges),
                location=self.location,
                file_bytes=size,
                embedding_dim=self._dim,
            )

    def checkpoint(self) -> None:
        """Fold the WAL into the main file (smaller file, faster next open)."""
        with self._lock:
            if not self._closed and self._path is not None:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
            except GraphMemError as e:  # never lose the close; the accesses are advisory
                log.warning("could not write access statistics at close: %s", e)
            self._closed = True
            try:
                if self._path is not None:
                    self._db.execute("PRAGMA optimize")
            except sqlite3.Error as e:  # advisory: another process may hold the lock
                log.debug("PRAGMA optimize skipped at close: %s", e)
            try:
                self._db.close()
            except sqlite3.Error as e:  # closing must not lose anything already committed
                log.warning("error while closing the embedded store: %s", e)
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __repr__(self) -> str:
        return f"NetworkXBackend({self.location!r})"


def _edge_of(src: str, etype: str, dst: str, data: dict[str, Any]) -> Edge:
    """An Edge value from an in-memory edge (its data dict carries ``type``)."""
    return Edge(
        type=EdgeType(etype),
        src=_ref_of(src),
        dst=_ref_of(dst),
        props={k: v for k, v in data.items() if k != "type"},
    )


def _ref_of(key: str) -> NodeRef:
    label, _, ident = key.partition(":")
    return NodeRef(NodeLabel(label), ident)


def _orderable(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return int(v)
    return v
