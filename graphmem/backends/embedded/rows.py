"""The embedded store's SQLite rows: their schema, the stored form of edge properties, and
the in-memory state read from them (an open without a usable state file beside the store,
or a full reload)."""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from contextlib import closing
from datetime import datetime
from pathlib import Path
from sys import intern
from typing import Any

import numpy as np
import orjson

from graphmem.backends.base import structural_targets
from graphmem.backends.embedded.adjacency import Adjacency
from graphmem.backends.embedded.buckets import FROM_COLUMNS, Bucket, index_into
from graphmem.backends.embedded.graph import (
    _INDEXED,
    _SHARED_EDGE_DATA,
    _datetime_fields,
    _hold,
    _link,
    _set_head,
)
from graphmem.backends.embedded.memory_rows import memory_props
from graphmem.backends.embedded.vector_index import VectorIndex
from graphmem.errors import BackendUnavailable, GraphMemError, QueryFailed
from graphmem.models import EdgeType, NodeLabel

log = logging.getLogger("graphmem.backends.embedded")

SCHEMA = """
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
-- NEXT edges without properties (a run's chain: one into each memory) by row ids, keyed by
-- the later memory's: a small row appended at the table's end, where the edges table's
-- text keys put ~90 bytes into pages spread over the latest memories' (its WAL pages
-- doubled a batch's); a reader catching up finds a changed one by its later memory (a
-- write logs both ends of every edge it changes, see EmbeddedJournal._reload_keys)
CREATE TABLE IF NOT EXISTS next_edges (
    dst INTEGER NOT NULL,
    src INTEGER NOT NULL,
    PRIMARY KEY (dst, src)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vectors (rid INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    content, content='', tokenize='porter unicode61 remove_diacritics 2'
);
-- where a run's chain ends, set at every append to it (see statements.write_heads): these
-- two fields override the ones in the run's row
CREATE TABLE IF NOT EXISTS run_heads (
    rid INTEGER PRIMARY KEY,
    event_count INTEGER NOT NULL,
    last_event_id TEXT
);
-- the node keys each transaction changed, so that other processes refresh only those
CREATE TABLE IF NOT EXISTS changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL);
"""

#: the edges table by its target: a handle catching up reads a changed node's stored edges
#: at both ends, which without it is a scan of the whole table per changed key. Made apart
#: from SCHEMA: a store in a folder this process may not write still opens (and reads the
#: same, only slower)
EDGES_BY_DST = "CREATE INDEX IF NOT EXISTS edges_by_dst ON edges(dst)"

#: how many full-text index segments of one level FTS5 lets gather before it merges them
#: into one of the next level (its default is 4): each merge rewrites every posting of the
#: merged segments, so with 4 a posting is rewritten about log4(memories / batch) times,
#: with 16 half as often — ~0.8 µs a memory less of COMMIT at 100k memories. A term is then
#: looked up in as many segments at 100k (10) and in about twice as many at 1M (25 against
#: 13: lexical search ~2% slower there; 8 left 20 segments at 100k, ~2-5% slower). The
#: price is paid by writes of a few memories: their segments are merged 16 at once, so a
#: single ``remember`` costs ~5-10% more CPU at 100k and the rare large merge is longer. A
#: setting of the index, not of its content: the rows, BM25's statistics and so every
#: score and rank are the same under any (see benchmarks/RESULTS.md, fifteenth session, sql)
FTS_AUTOMERGE = 16


def tune_fts(db: sqlite3.Connection) -> None:
    """Give the full-text index the merge setting above, kept in its own config row (a file
    made before it, or by another setting, gets it at its first open here; one this process
    may not write reads the same, only merges differently)."""
    row = db.execute("SELECT v FROM memory_fts_config WHERE k = 'automerge'").fetchone()
    if row is None or row[0] != FTS_AUTOMERGE:
        try:
            db.execute(
                "INSERT INTO memory_fts(memory_fts, rank) VALUES ('automerge', ?)",
                (FTS_AUTOMERGE,),
            )
        except sqlite3.OperationalError as e:
            log.debug("full-text merge setting left as it is: %s", e)


#: 2: structural edges are no longer stored; 3: a write's changes are one row (see
#: ``changelog``); 4: runs' heads in ``run_heads``; 5: bare NEXT edges in ``next_edges``; 6:
#: memory rows written lean (see ``memory_rows``). A store of an older version is read as
#: it is (its log rows name one key, it has neither table's rows, its memory rows are whole)
#: and marked with this one at open.
SCHEMA_VERSION = "6"
#: versions this code opens
SCHEMA_READ = frozenset({"2", "3", "4", "5", SCHEMA_VERSION})


@functools.cache
def own_tables() -> dict[str, str]:
    """The tables SCHEMA makes, with those FTS5 keeps for ``memory_fts``, and the SQL of
    each as SQLite records it: a file without a recorded version holding another table,
    or one of these names made otherwise (another program's ``nodes``), is not a store."""
    with closing(sqlite3.connect(":memory:")) as db:
        db.executescript(SCHEMA)
        return dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))


#: the tables every store of a version this code reads has had (the later ones are made
#: at open)
_CORE_TABLES = frozenset({"meta", "nodes", "edges", "vectors", "memory_fts", "changes"})


def damaged(e: BaseException) -> bool:
    """Whether ``e``, raised while a store is opened, says the file is damaged: SQLite's
    errors, and whatever a row the reader cannot make sense of makes it raise (bad JSON, a
    field of the wrong type, an unknown label or status, a vector of the wrong size)."""
    return isinstance(
        e, sqlite3.Error | ValueError | TypeError | KeyError | IndexError | AttributeError
    ) and not isinstance(e, GraphMemError)


def connect(path: Path | None, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection to the store at ``path`` (None: in memory), refused before anything is
    written to the file or beside it when it is not a store this code opens (see
    :func:`refusal`: BackendUnavailable; sqlite3.Error when SQLite cannot read it)."""
    db = sqlite3.connect(
        str(path) if path else ":memory:",
        isolation_level=None,  # explicit BEGIN/COMMIT
        check_same_thread=False,
        timeout=busy_timeout_ms / 1000,
    )
    try:
        db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        refused = refusal(db, path)
        if refused is not None:
            raise BackendUnavailable(refused)
    except BaseException:
        db.close()
        raise
    return db


def refusal(db: sqlite3.Connection, path: object) -> str | None:
    """Why the file open on ``db`` must not be opened as a store, read before anything is
    written to it (its tables and its recorded version; None: a store of a version this
    code reads, an empty file, or a store whose creation stopped before it recorded its
    version). Another program's database or a store of a later graphmem is left exactly
    as it was: no tables added, no journal mode changed."""
    made = {
        name: sql
        for name, sql in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
        if not name.startswith("sqlite_")
    }
    tables = set(made)
    version = None
    if "meta" in tables:
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:  # a table of that name of another shape
            return f"{path} is not a graphmem store (its table meta is not graphmem's)"
        version = None if row is None else row[0]
    if version is not None:
        if version not in SCHEMA_READ:
            return f"store schema version {version} is not supported (expected {SCHEMA_VERSION})"
        lost = sorted(_CORE_TABLES - tables)
        if lost:  # made again empty, the store would read as one without those rows
            return f"{path} is damaged: its table {', '.join(lost)} is missing"
        return None
    own = own_tables()
    others = sorted(name for name, sql in made.items() if own.get(name) != sql)
    if others:
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        return f"{path} is not a graphmem store (it holds tables graphmem does not make: {shown})"
    return None


NEXT = EdgeType.NEXT.value

#: what :func:`read_rows` builds: the graph, the row id of each node key, the keys by
#: label, the index buckets and the vector index (None before the store has a dimension)
RowsState = tuple[
    Adjacency,
    dict[str, int],
    dict[NodeLabel, set[str]],
    dict[tuple[NodeLabel, str], Bucket],
    VectorIndex | None,
]


def _encode_edge_props(props: dict[str, Any]) -> str:
    if not props:  # every NEXT, IN_RUN ... edge of a batch
        return "{}"
    return json.dumps(
        {k: ({"$dt": v.isoformat()} if isinstance(v, datetime) else v) for k, v in props.items()}
    )


def _edge_data(etype: str, props_s: str) -> dict[str, Any]:
    """An in-memory edge's data dict from its stored row. Most stored edges (NEXT) carry
    no properties: no JSON to decode, and their type's one shared dict (an edge whose
    properties change is given a dict of its own, the shared one is never edited)."""
    if props_s == "{}" and etype in _SHARED_EDGE_DATA:
        return _SHARED_EDGE_DATA[etype]
    return {**_decode_edge_props(props_s), "type": etype}


def _decode_edge_props(text: str) -> dict[str, Any]:
    raw = json.loads(text)
    return {
        k: (datetime.fromisoformat(v["$dt"]) if isinstance(v, dict) and "$dt" in v else v)
        for k, v in raw.items()
    }


def read_rows(db: sqlite3.Connection, dim: int | None, *, vectors: bool = True) -> RowsState:
    """The in-memory state from every row of the store (inside the caller's snapshot); the
    vector index empty unless ``vectors``."""
    g = Adjacency()
    rid_of: dict[str, int] = {}
    key_of: dict[int, str] = {}
    by_label: dict[NodeLabel, set[str]] = defaultdict(set)
    index: dict[tuple[NodeLabel, str], Bucket] = defaultdict(dict)
    # hot loop of every open: plain strings and dicts, networkx internals filled directly
    node_attrs = g._node
    succ: dict[str, dict[str, dict[str, Any]]] = g._succ
    pred: dict[str, dict[str, dict[str, Any]]] = g._pred
    dt_fields = {lab.value: tuple(_datetime_fields(lab)) for lab in NodeLabel}
    # not the memory buckets the columns answer: worked out when asked for (see
    # MemoryBucket)
    indexed = {
        lab.value: [
            (f, index[(lab, f)])
            for f in _INDEXED.get(lab, ())
            if lab is not NodeLabel.MEMORY or f not in FROM_COLUMNS
        ]
        for lab in NodeLabel
    }
    labels = {lab.value: lab for lab in NodeLabel}
    fromiso = datetime.fromisoformat
    loads = orjson.loads
    # one datetime object per distinct text in a row (created_at, updated_at and
    # valid_from are mostly equal): fewer objects to make and to keep
    parsed: dict[str, datetime] = {}
    memory = NodeLabel.MEMORY.value
    # a memory's structural targets, read from its dict here (its row is slower to read)
    mem_links: list[tuple[str, str, str | None, tuple[str, ...]]] = []
    others: list[tuple[str, NodeLabel]] = []
    rows = db.execute("SELECT rid, label, id, props FROM nodes").fetchall()
    for rid, label_s, ident, props_s in rows:
        props = loads(props_s)
        if label_s == memory:
            memory_props(props, ident)
        for f in dt_fields[label_s]:
            v = props.get(f)
            if v is not None:
                dt = parsed.get(v)
                if dt is None:
                    dt = parsed[v] = fromiso(v)
                props[f] = dt
        parsed.clear()
        key = intern(label_s + ":" + ident)  # see _link
        label = labels[label_s]
        _hold(node_attrs, label, key, props)
        if label_s == memory and "agent_id" in props:
            mem_links.append((key, props["agent_id"], props.get("run_id"), props.get("tags", ())))
        else:
            others.append((key, label))
        succ[key] = {}
        pred[key] = {}
        rid_of[key] = rid
        key_of[rid] = key
        by_label[label].add(key)
        index_into(indexed[label_s], key, props)
    del rows
    node_attrs.memories.check_coded()  # a value no model knows: refused now, not at each read
    # a run's chain end as last set (neither field is indexed or structural)
    dicts = node_attrs.dicts
    for rid, count, last in db.execute("SELECT rid, event_count, last_event_id FROM run_heads"):
        run = dicts.get(key_of.get(rid, ""))
        if run is not None:
            _set_head(run, count, last)

    # structural edges are a function of node properties, rebuilt here, never stored
    shared = _SHARED_EDGE_DATA
    authored, in_run, tagged = (
        shared[t.value] for t in (EdgeType.AUTHORED_BY, EdgeType.IN_RUN, EdgeType.TAGGED)
    )
    for key, agent_id, run_id, tags in mem_links:  # most nodes: structural_targets inlined
        tkey = "Agent:" + agent_id
        if tkey in succ:
            _link(succ, pred, key, tkey, "AUTHORED_BY", authored)
        if run_id and (tkey := "Run:" + run_id) in succ:
            _link(succ, pred, key, tkey, "IN_RUN", in_run)
        for tag in tags:
            if (tkey := "Tag:" + tag) in succ:
                _link(succ, pred, key, tkey, "TAGGED", tagged)
    del mem_links
    for key, label in others:
        for etype, tlabel, tid, _d in structural_targets(label, node_attrs[key]):
            tkey = tlabel.value + ":" + tid
            if tkey in succ:
                _link(succ, pred, key, tkey, etype.value, shared[etype.value])
    dangling = 0
    for src, etype, dst, props_s in db.execute("SELECT src, type, dst, props FROM edges"):
        if src not in node_attrs or dst not in node_attrs:
            dangling += 1  # never invent a node without properties for such an edge
            continue
        _link(succ, pred, src, dst, etype, _edge_data(etype, props_s))
    nxt = _edge_data(NEXT, "{}")
    for dst_rid, src_rid in db.execute("SELECT dst, src FROM next_edges"):
        src, dst = key_of.get(src_rid), key_of.get(dst_rid)
        if src is None or dst is None:
            dangling += 1
            continue
        _link(succ, pred, src, dst, NEXT, nxt)
    if dangling:
        log.warning("ignored %d stored edges whose endpoints are missing", dangling)
    vindex = VectorIndex(dim) if dim else None
    if vindex is not None and vectors:
        add_stored_vectors(db, vindex, key_of)
    return g, rid_of, by_label, index, vindex


def add_stored_vectors(db: sqlite3.Connection, vindex: VectorIndex, key_of: dict[int, str]) -> None:
    """Every stored vector of a node in ``key_of`` (by row id) into the empty ``vindex``,
    each row copied into one matrix as it is read (not a million small arrays stacked at
    the end: two copies, 3 GB at 1M)."""
    held = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
    mat = np.empty((held, vindex.dim), dtype=np.float32)
    keys: list[str] = []
    for rid, blob in db.execute("SELECT rid, vec FROM vectors"):
        vkey = key_of.get(rid)
        if vkey is not None and len(keys) < held:
            mat[len(keys)] = np.frombuffer(blob, dtype=np.float32)
            keys.append(vkey)
    if keys:
        vindex.add(keys, mat[: len(keys)], adopt=True)


def stored_vectors(
    db: sqlite3.Connection, rid_of: dict[str, int], keys: Sequence[str], dim: int
) -> tuple[list[str], np.ndarray]:
    """The stored vectors of the memory keys ``keys`` that have one (QueryFailed when the
    read fails), in file order."""
    key_at = {rid_of[k]: k for k in keys if k in rid_of}
    rids = sorted(key_at)  # in file order
    rows: list[tuple[int, bytes]] = []
    try:
        for at in range(0, len(rids), 512):
            part = rids[at : at + 512]
            # padded to a power of two (a repeated rid reads once): a few statements
            # for SQLite's statement cache instead of one per count
            part += part[-1:] * ((1 << (len(part) - 1).bit_length()) - len(part))
            rows += db.execute(
                f"SELECT rid, vec FROM vectors WHERE rid IN ({','.join('?' * len(part))})",
                part,
            ).fetchall()
    except sqlite3.Error as e:
        raise QueryFailed(f"embedded store read failed: {e}") from e
    found = [key_at[rid] for rid, _ in rows]
    mat = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32)
    return found, mat.reshape(len(found), -1) if found else mat.reshape(0, dim)
