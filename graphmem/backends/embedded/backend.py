"""The embedded GraphBackend: writes planned and validated before the journal writes them,
the deferred access records, and the remaining reads."""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from sys import intern
from typing import Any, TypeVar, cast

import numpy as np

import graphmem.backends.embedded.forks as forks
import graphmem.backends.embedded.hnsw_file as hnsw_file
import graphmem.backends.embedded.state_file as state_file
from graphmem.backends.base import (
    STRUCTURAL,
    Direction,
    Expect,
    N,
    RunAppend,
    WriteBatch,
    appended_to,
    check_kind,
    checked_append,
    checked_heads,
    expect_failure,
    next_link,
    structural_targets,
)
from graphmem.backends.embedded.adjacency import Adjacency
from graphmem.backends.embedded.appends import fresh_memories
from graphmem.backends.embedded.column_order import first_by_column
from graphmem.backends.embedded.graph import (
    _edge_of,
    _orderable,
    _ref_of,
    _set_head,
)
from graphmem.backends.embedded.search import EmbeddedSearch
from graphmem.backends.embedded.statements import write_delete, write_heads
from graphmem.backends.embedded.vector_index import VectorIndex
from graphmem.errors import Conflict, DimensionMismatch, GraphMemError, InvalidInput, QueryFailed
from graphmem.gcpause import gc_paused
from graphmem.models import (
    BackendStats,
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    NodeLabel,
    NodeRef,
    Subgraph,
    check_page,
    node_model,
)

log = logging.getLogger("graphmem.backends.embedded")


_F = TypeVar("_F", bound=Callable[..., Any])


#: pending access statistics are written when this many memories have some, or when the
#: oldest is this old (checked on the next touch), besides every write and close
TOUCH_FLUSH_COUNT = 512


TOUCH_FLUSH_SECONDS = 2.0

#: a run's state as :attr:`WriteBatch.appends` names it, read from its attributes
_RUN_STATE = itemgetter("event_count", "last_event_id", "agent_id", "namespace")

#: the edge types that are structural from some label (see STRUCTURAL), as text
_STRUCTURAL_TYPES = frozenset(str(t) for _label, t in STRUCTURAL)


def _locked(method: _F) -> _F:
    """Run a write under the backend's lock, from BEGIN to the in-memory update: another
    thread must never plan against the state between a commit and its application."""

    @functools.wraps(method)
    def wrapper(self: NetworkXBackend, *args: Any, **kwargs: Any) -> Any:
        with self._lock, gc_paused():
            return method(self, *args, **kwargs)

    return cast(_F, wrapper)


class NetworkXBackend(EmbeddedSearch):
    """The embedded default backend. See the module docstring for guarantees."""

    name = "networkx"

    @property
    def vector_index(self) -> VectorIndex | None:
        """The in-memory vector index (None until the store has a vector dimension)."""
        return self._vindex

    @property
    def location(self) -> str:
        return str(self._path) if self._path else "memory://"

    def store_files(self) -> list[Path]:
        """The SQLite file, its WAL and shared-memory index, the writers' lock file and the
        two caches beside it (see ``state_file`` and ``hnsw_file``)."""
        if self._path is None:
            return []
        p = self._path
        return [
            p,
            p.with_name(p.name + "-wal"),
            p.with_name(p.name + "-shm"),
            p.with_name(p.name + ".lock"),
            state_file.file_of(p),
            *hnsw_file.files_of(p),
        ]

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
        if doomed and {n.ref.key for n in nodes} & {r.key for r in doomed}:
            raise InvalidInput("one write cannot both upsert and delete the same node")
        if not batch and not batch.checks:
            return 0
        heads_given = checked_heads(batch.run_heads) if batch.run_heads else []
        # from the instance dict: getattr on a node without the field (a Run) goes through
        # pydantic's __getattr__ and an AttributeError, per node of the batch
        dims = {len(vec) for n in nodes if (vec := n.__dict__.get("embedding"))}
        dims.update(len(v) for v in batch.vectors.values())
        if len(dims) > 1:
            raise DimensionMismatch(f"embeddings of different dimensions in one batch: {dims}")
        dim = dims.pop() if dims else None
        with self._transaction() as db:
            new_keys = self._check_new(batch.new_memories)
            lasts = self._check_appends(batch.appends)
            self._check_expectations(batch.expect)
            plan = self._plan_upsert(
                nodes,
                edges,
                batch.links,
                doomed={r.key for r in doomed},
                new=new_keys,
                held=lasts,
            )
            heads = self._heads_of(heads_given, plan)
            if dim is not None:
                self._fix_dim(db, dim)
            self._write_plan(db, plan)
            write_heads(db, self._rid_of, heads)
            dplan = self._plan_delete(doomed, batch.delete_edges, plan)
            write_delete(db, dplan, plan["edge_rids"], self._rid_of)
            vec_keys = [
                k
                for i in batch.vectors
                # the node's own key string (see _link): the vector index holds it too
                if (k := intern("Memory:" + i)) in self._rid_of and k not in dplan["keys"]
            ]
            changed = self._changed
            fresh = plan["fresh"]
            # one dict of the node keys in the batch's order, as the general plan's: the
            # change log then lists them in the same order
            changed.update(plan["nodes"] if fresh is None else fresh.with_keys(plan["nodes"]))
            changed.update(k for k, _c, _l in heads)
            changed.update(k for src, _t, dst, _p in plan["edges"] for k in (src, dst))
            changed.update(k for k, _t, _d in plan["struct_del"])
            changed.update(dplan["keys"])
            changed.update(k for src, _t, dst in dplan["edges"] for k in (src, dst))
            changed.update(vec_keys)
            db.insert(
                "INSERT OR REPLACE INTO vectors(rid, vec)",
                [
                    (
                        self._rid_of[k],
                        np.asarray(batch.vectors[k[7:]], dtype=np.float32).tobytes(),
                    )
                    for k in vec_keys
                ],
            )

            def apply() -> None:
                if dim is not None:
                    self._set_dim(dim)
                self._apply_plan(plan)
                self._apply_heads(heads)
                self._apply_delete(dplan)
                if vec_keys and self._vindex is not None:
                    self._vindex.add(
                        vec_keys,
                        np.asarray([batch.vectors[k[7:]] for k in vec_keys], dtype=np.float32),
                    )
                    self._unvectored.difference_update(vec_keys)

            self._then.append(apply)
        return len(dplan["keys"])

    def missing_vectors(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` memories (id, content) that have no vector yet."""
        with self._fresh():
            nodes = self._g._node
            keys = list(itertools.islice(self._unvectored, limit))
            return [(k[7:], nodes[k]["content"]) for k in keys]

    def _heads_of(
        self, heads: list[tuple[str, int, str | None]], plan: dict[str, Any]
    ) -> list[tuple[str, int, str | None]]:
        """The stored runs among ``heads`` ((run id, count, last memory id): where each
        chain now ends, checked) as (key, count, last memory id); a run that does not
        exist is skipped, and one this batch also writes whole takes its new end in the
        row it writes. Only those two fields
        change: a run's other fields (indexed, structural) stay as stored, so its row and
        its attributes are set in place instead of planned as a new node (a batch appends
        to hundreds of runs)."""
        out = []
        rows = plan["nodes"]
        held = self._g._node.dicts  # a run is held as its dict (so it has a row id)
        for run_id, count, last in heads:
            key = "Run:" + run_id
            row = rows.get(key)
            if row is not None:
                _set_head(row[2], count, last)
            elif key in held:
                out.append((key, count, last))
        return out

    def _check_new(self, ids: Sequence[str]) -> list[str]:
        """Inside the transaction: no memory of ``ids`` may exist (``new_memories``; the
        plan then takes them as new without looking again). Returns their keys, interned
        (each the node's own key string once applied, see the graph's ``_link``)."""
        nodes = self._g._node
        dicts, rows = nodes.dicts, nodes.memories.row_of
        if set(map(type, ids)) <= {str}:
            keys = list(map(intern, map("Memory:".__add__, ids)))
            if not (any(map(rows.__contains__, keys)) or any(map(dicts.__contains__, keys))):
                return keys
        for i in ids:  # one is refused: the first, each checked in turn
            if i.__class__ is not str:
                raise InvalidInput(f"new memories are named by their ids, got {i!r}")
            key = "Memory:" + i
            if key in rows or key in dicts:
                why = expect_failure(Expect.absent(NodeRef(NodeLabel.MEMORY, i)), nodes.get(key))
                raise Conflict(f"precondition failed: {why}")
        raise AssertionError("a new memory was refused and then found absent")

    def _check_appends(self, appends: Sequence[RunAppend]) -> dict[str, str]:
        """Inside the transaction: each run a batch appends to must be as it says
        (``appends``); one that is not is named as its precondition names it. Returns the
        keys of the memories their links start from, found held (the plan then does not
        look for them again among the store's every row id), each to the node table's
        own string for it (:meth:`NodeTable.own`: the links are applied with it)."""
        nodes = self._g._node
        dicts, rows, keys = nodes.dicts, nodes.memories.row_of, nodes.memories.keys
        lasts: dict[str, str] = {}
        for append in appends:
            run_id, state, prev = checked_append(append)
            held = dicts.get("Run:" + run_id)
            if state is None:
                ok = held is None
            elif held is None:
                ok = False
            else:
                try:
                    # equal as a tuple: a value that is the one expected (the last write's
                    # own, mostly) is not even read
                    ok = _RUN_STATE(held) == state
                except KeyError:  # a run without a last memory holds no last_event_id
                    ok = (
                        held.get("event_count") == state[0]
                        and held.get("last_event_id") == state[1]
                        and held.get("agent_id") == state[2]
                        and held.get("namespace") == state[3]
                    )
            if ok and prev is not None:
                last = "Memory:" + prev
                i = rows.get(last)
                if i is not None:
                    lasts[last] = keys[i]  # type: ignore[assignment]  # (a row's is a key)
                elif last in dicts:
                    lasts[last] = intern(last)
                else:
                    ok = False
            if not ok:  # compared as stored, and named as its precondition names it
                self._check_expectations(appended_to(append))
        return lasts

    def _check_expectations(self, expects: Sequence[Expect]) -> None:
        """Inside the transaction, with the state current: every precondition must hold."""
        g = self._g
        nodes = g._node
        dicts, rows = nodes.dicts, nodes.memories.row_of  # a NodeTable's, looked in directly
        for ex in expects:
            ref = ex.ref
            key = ref[0] + ":" + ref[1]  # a StrEnum + str is the text (ref.key, inlined)
            if ex.exists:
                if ex.sources is None and not ex.props and (key in rows or key in dicts):
                    continue  # it exists, and nothing more is asked
            elif key not in rows and key not in dicts:
                continue  # a new node's id is free (every memory of a batch asks)
            props = nodes.get(key)
            sources: list[str] = []
            if props is not None and ex.sources is not None:
                types = {t.value for t in ex.incoming}
                sources = [_ref_of(s).id for s, _d, t in g.in_edges(key, keys=True) if t in types]
            why = expect_failure(ex, props, sources)
            if why is not None:
                raise Conflict(f"precondition failed: {why}")

    def _plan_upsert(
        self,
        nodes: Sequence[GraphNode],
        edges: Sequence[Edge],
        links: Sequence[tuple[str, str]] = (),
        *,
        doomed: set[str],
        new: Sequence[str] = (),
        held: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Work out every row to write, before touching the file (validation first).
        ``new``: the keys of the memories found absent (:meth:`_check_new`); ``held``:
        keys of memories found held already (where the batch's runs end), each to its
        own string (:meth:`_check_appends`)."""
        held = held or {}
        node_rows: dict[str, tuple[NodeLabel, str, dict[str, Any], tuple[float, ...] | None]] = {}
        auto: dict[str, GraphNode] = {}
        # node key -> its structural edges as (type, target key); None for a new memory
        # whose are worked out from its fields when applied (see .appends)
        struct: dict[str, list[tuple[str, str]] | None] = {}
        rid_of = self._rid_of
        # the new memories heading the batch: planned column-wise (see .appends)
        fresh, nodes = fresh_memories(nodes, self._g._node, rid_of, new)
        born: Container[str] = () if fresh is None else fresh.by_key
        for n in nodes:
            props = n.to_props()
            vec = props.pop("embedding", None)
            label = n.label
            # str + str: the label's text without building a NodeRef (per node of a batch)
            key = label + ":" + n.id
            node_rows[key] = (label, n.id, props, tuple(vec) if vec else None)  # type: ignore[arg-type]
        queue = list(node_rows)

        def pairs(label: NodeLabel, props: Any) -> list[tuple[str, str]]:
            """The node's structural edges as (type, target key), each missing target
            made (and queued: an auto-created endpoint, a Run, may need endpoints of its
            own)."""
            out = []
            for stype, tlabel, tid, defaults in structural_targets(label, props):
                tkey = tlabel + ":" + tid
                # str(member): its text, without the slow ``.value`` descriptor
                out.append((str(stype), tkey))
                if tkey not in node_rows and tkey not in rid_of and tkey not in auto:
                    target = node_model(tlabel)(id=tid, **defaults)
                    auto[tkey] = target
                    node_rows[tkey] = (target.label, target.id, target.to_props(), None)
                    queue.append(tkey)
            return out

        def drain() -> None:
            while queue:
                key = queue.pop()
                label, _ident, props, _vec = node_rows[key]
                struct[key] = pairs(label, props)

        drain()
        if fresh is not None:
            # as the general plan walks them: the batch's last node first, each node's
            # missing endpoints made (and walked) before the node before it
            # agents, runs and tags are never memories: whether one is held, the node
            # table's dicts say (a few thousand keys) as well as the store's every row id
            missing = fresh.missing(node_rows, self._g._node.dicts)
            for i in range(len(fresh) - 1, -1, -1):
                struct[fresh.keys[i]] = None
                if missing:  # most batches: every endpoint exists, nothing to make
                    pairs(NodeLabel.MEMORY, fresh.models[i].__dict__)
                    drain()
        edge_rows: list[tuple[str, str, str, dict[str, Any]]] = []
        for a, b in links:
            if a.__class__ is not str or b.__class__ is not str or a == b:
                next_link(a, b)  # the model's error (a memory following itself)
            src, dst = "Memory:" + a, "Memory:" + b
            if (
                not (
                    (src in born or src in held or src in rid_of) and (dst in born or dst in rid_of)
                )
                or doomed
            ):
                for end in (src, dst):  # a memory of the general plan, or one deleted
                    if end in doomed or not (end in born or end in node_rows or end in rid_of):
                        raise InvalidInput(f"edge NEXT refers to missing node {end}")
            edge_rows.append((src, "NEXT", dst, {}))
        memory, nxt = NodeLabel.MEMORY, EdgeType.NEXT
        for e in edges:
            d = e.__dict__
            if d["type"] is nxt and not d["props"] and not doomed:
                # a run's link between two memories (most edges of a batch): the keys from
                # the ids, without a NodeRef's key and the enum's text
                s_, t_ = d["src"], d["dst"]
                src, dst = "Memory:" + s_[1], "Memory:" + t_[1]
                if (
                    s_[0] is memory
                    and t_[0] is memory
                    and (src in born or src in rid_of)
                    and (dst in born or dst in rid_of)
                ):
                    edge_rows.append((src, "NEXT", dst, {}))
                    continue
            src, dst, etype = e.src.key, e.dst.key, str(e.type)
            # most edges of a batch are NEXT links: the text test first, the pair's after
            if etype in _STRUCTURAL_TYPES and (e.src.label, e.type) in STRUCTURAL:
                # implied by the source node's properties: accepted when they agree (as in an
                # import or migration), never stored on their own
                implied = struct.get(src)
                if src in struct and implied is None and fresh is not None:
                    implied = [
                        (str(t), tl + ":" + ti)
                        for t, tl, ti, _d in structural_targets(
                            NodeLabel.MEMORY, fresh.by_key[src].__dict__
                        )
                    ]
                elif implied is None and src in self._g:
                    implied = [(t, d) for _s, d, t in self._structural_edges_of(src)]
                if (etype, dst) not in (implied or ()):
                    raise InvalidInput(
                        f"{e.type.value} edges follow the node's fields (agent_id, run_id, "
                        f"tags); {src} does not imply one to {dst}"
                    )
                continue
            for end in (src, dst):
                if end in doomed or (
                    end not in node_rows and end not in rid_of and end not in born
                ):
                    raise InvalidInput(f"edge {etype} refers to missing node {end}")
            edge_rows.append((src, etype, dst, dict(e.props)))
        return {
            "nodes": node_rows,
            "fresh": fresh,
            "struct": struct,
            "edges": edge_rows,
            "held": held,
            "rids": {},
        }

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

    def get(self, kind: type[N], ids: Sequence[str]) -> list[N]:
        label = check_kind(kind)
        with self._fresh():
            keys = [f"{label.value}:{ident}" for ident in ids]
            found = [self._node(k) for k in keys if k in self._g]
            return [n for n in found if isinstance(n, kind)]

    def match(
        self,
        kind: type[N],
        flt: Filter,
        *,
        limit: int | None = None,
        offset: int = 0,
        order_by: str = "id",
        descending: bool = False,
    ) -> list[N]:
        check_kind(kind, flt)
        check_page(
            node_model(flt.label),
            limit=limit,
            offset=offset,
            order_by=order_by,
            descending=descending,
        )
        with self._fresh():
            nodes = self._g.nodes
            keys = self._matching_list(flt)

            def sort_key(k: str) -> tuple[Any, ...]:
                v = nodes[k].get(order_by)
                # missing values sort last in both directions
                missing = v is None
                return (missing != descending, _orderable(v), nodes[k].get("id"))

            few = None
            if limit is not None and limit + offset < len(keys) // 4:
                if flt.label is NodeLabel.MEMORY:
                    table = nodes.memories
                    few = first_by_column(table, keys, order_by, limit + offset, descending)
                if few is None:
                    pick = heapq.nlargest if descending else heapq.nsmallest
                    keys = pick(limit + offset, keys, key=sort_key)
                else:
                    keys = few
                    keys.sort(key=sort_key, reverse=descending)
            else:
                keys.sort(key=sort_key, reverse=descending)
            end = None if limit is None else offset + limit
            found = [self._node(k) for k in keys[offset:end]]
            return [n for n in found if isinstance(n, kind)]

    def count(self, flt: Filter) -> int:
        with self._fresh():
            exact = self._indexed_matches(flt)
            if exact is not None:
                return len(exact)
            return sum(1 for _ in self._matching_keys(flt))

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
            frontier = [NodeRef(NodeLabel(s[0]), s[1]).key for s in seeds]
            seen, edges = self._walk(frontier, types, direction, depth, limit)
            seen_set = set(seen)
            out_edges = [
                _edge_of(s, t, d, data)
                for (s, t, d), data in edges.items()
                if s in seen_set and d in seen_set
            ]
            # built from validated state: constructing skips a second validation per node
            return Subgraph.model_construct(
                nodes=tuple(self._node(k) for k in seen), edges=tuple(out_edges)
            )

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
                if key not in nodes:
                    continue
                nodes.count_access(key, 1, at)
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

    def get_meta(self, key: str) -> str | None:
        """A value kept in the store's meta table (the embedding model's record)."""
        with self._fresh():
            try:
                row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as e:
                raise QueryFailed(f"embedded store read failed: {e}") from e
            return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str | None) -> None:
        """Keep ``value`` under ``key`` in the meta table (None removes it)."""
        with self._transaction() as db:
            if value is None:
                db.execute("DELETE FROM meta WHERE key = ?", (key,))
            else:
                db.execute(
                    "INSERT INTO meta(key, value) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
            except GraphMemError as e:  # never lose the close; the accesses are advisory
                log.warning("could not write access statistics at close: %s", e)
            # the graph first: the state file then keeps its labels with its identity (the
            # next open takes them from there); again after, for what a catch-up added
            self._save_ann()
            self._save_state()
            self._save_ann()
            self._closed = True
            forks.forget(self)
            self._committer.close()
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
            # the in-memory state (2 GB at 1M memories) goes with the close, not with the
            # handle: a handle sits in reference cycles (its facades, the vector index's
            # hooks) that only a full collection frees, so a process that opens the store
            # again held both states meanwhile (and faulted in fresh memory for the second)
            self._install(Adjacency(), {}, defaultdict(set), defaultdict(dict), None)

    def __repr__(self) -> str:
        return f"NetworkXBackend({self.location!r})"
