"""The in-memory graph: dicts in networkx's MultiDiGraph layout (:mod:`.adjacency`) with
per-field index buckets, writes applied to it after their commit, and the filter evaluated
in Python."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from itertools import chain, islice, repeat
from operator import setitem
from sys import intern
from typing import TYPE_CHECKING, Any

import numpy as np

from graphmem.backends.base import STRUCTURAL
from graphmem.backends.embedded.adjacency import Adj, Adjacency
from graphmem.backends.embedded.appends import Fresh, add_to_buckets, put_rows
from graphmem.backends.embedded.buckets import (
    Bucket,
    MemoryBucket,
    index_into,
    index_out,
    keys_of,
)
from graphmem.backends.embedded.records import Attrs, NodeTable
from graphmem.backends.embedded.time_ranges import memories_within
from graphmem.backends.embedded.vector_index import VectorIndex
from graphmem.models import (
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    Memory,
    NodeLabel,
    NodeRef,
    node_model,
)

if TYPE_CHECKING:
    import networkx as nx

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


#: fields whose values repeat across nodes (a handful of agents, namespaces, statuses,
#: runs, tags): each node holds the one interned string per value instead of its own copy,
#: about 500 bytes a memory, and the state file (a pickle, which writes a shared object
#: once) is smaller and reads back with fewer objects to make
_SHARED_FIELDS: dict[str, tuple[str, ...]] = {
    lab.value: (
        "visibility",
        *(f for f in _INDEXED.get(lab, ()) if f not in ("content_hash", "norm", "fact_id")),
    )
    for lab in NodeLabel
}


def _share_values(label: NodeLabel, attrs: dict[str, Any]) -> None:
    """Replace the repeated string values of ``attrs`` (and of its tags) by interned
    ones, and its label by the label's own string (see ``_SHARED_FIELDS``). Tags are held
    as a tuple (stored and written as a list), the model's type on every label: a tuple
    of strings is smaller than a list and unpickles faster."""
    attrs["label"] = label.value
    for f in _SHARED_FIELDS[label.value]:
        v = attrs.get(f)
        if v.__class__ is str:
            attrs[f] = intern(v)
        elif v.__class__ is list or v.__class__ is tuple:
            attrs[f] = tuple([intern(t) if t.__class__ is str else t for t in v])
    tags = attrs.get("tags")
    if tags.__class__ is list:  # a label whose tags are not indexed (an org fact's)
        attrs["tags"] = tuple([intern(t) if t.__class__ is str else t for t in tags])


def _hold(nodes: NodeTable, label: NodeLabel, key: str, attrs: dict[str, Any]) -> None:
    """Store ``attrs`` as the node's: a memory's as a row of the columns, which share
    their repeated values themselves; another node's (or a memory's that does not fit
    the columns) as the dict, its repeated values shared (:func:`_share_values`)."""
    if label is NodeLabel.MEMORY:
        attrs["label"] = label.value
        tags = attrs.get("tags")
        if tags.__class__ is list:
            attrs["tags"] = tuple(tags)
        if nodes.memories.put(key, attrs):
            nodes.dicts.pop(key, None)
            return
    _share_values(label, attrs)
    nodes[key] = attrs


def _set_head(attrs: dict[str, Any], count: int, last: str | None) -> None:
    """Set where a run's chain ends in its attributes (a run without a last memory holds
    no ``last_event_id``, as ``to_props`` leaves out a None)."""
    attrs["event_count"] = count
    if last is None:
        attrs.pop("last_event_id", None)
    else:
        attrs["last_event_id"] = last


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


#: edges without properties (structural ones, most NEXT links): one shared data dict per
#: type, never mutated (a change to an edge's properties gives it a dict of its own)
_SHARED_EDGE_DATA: dict[str, dict[str, Any]] = {t.value: {"type": t.value} for t in EdgeType}


#: the keyed dict (edge type -> data) of two nodes joined by one edge without
#: properties: one per type, shared by every such pair (most of a store's edges)
_SHARED_KEYED: dict[str, dict[str, dict[str, Any]]] = {
    t: {t: d} for t, d in _SHARED_EDGE_DATA.items()
}


def _link(
    succ: dict[str, Any],
    pred: dict[str, Any],
    u: str,
    v: str,
    k: str,
    data: dict[str, Any],
    own: Callable[[str], str] = intern,
) -> None:
    """Add edge (u, v, key k) straight into a MultiDiGraph's adjacency dicts (the layout
    networkx documents for subclasses; ``add_edge`` is several times slower). A pair's
    keyed dict is replaced, never edited (see :meth:`Adjacency.remove_edge`), so pairs
    joined by one edge without properties share their type's: about four containers
    fewer per memory to build, keep and have the garbage collector walk. Both ends are
    held as the interned node keys (see :meth:`EmbeddedGraph._put_node`): a writer builds
    its own ``"Agent:a1"`` or ``"Memory:<id>"`` string per edge, and each adjacency entry
    kept its copy — about 500k strings, ~300 bytes a memory at 100k. ``own`` gives that
    string (:meth:`NodeTable.own`; interning alone is enough where every key is interned,
    as in a read of the rows)."""
    u, v = own(u), own(v)
    keydict = succ[u].get(v)
    if keydict is None:
        new = _SHARED_KEYED[k] if data is _SHARED_EDGE_DATA.get(k) else {k: data}
    else:
        new = {**keydict, k: data}
    succ[u][v] = pred[v][u] = new


_AUTHORED, _IN_RUN, _TAGGED = (_SHARED_KEYED[t] for t in ("AUTHORED_BY", "IN_RUN", "TAGGED"))


#: a candidate set this small is checked key by key rather than narrowed by a bucket not
#: worked out yet (see ``EmbeddedGraph._candidates``)
_FEW = 64

#: STRUCTURAL as (label, edge type) text pairs, as the in-memory graph holds them
_STRUCTURAL_TEXT = frozenset((str(label), str(etype)) for label, etype in STRUCTURAL)


_MODELS: dict[str, type[GraphNode]] = {lab.value: node_model(lab) for lab in NodeLabel}


#: a batch's new memories' endpoints, each memory's as the node table's own key strings:
#: its agent, its run (None: none) and its tags
_Ends = tuple[list[str], list[str | None], list[tuple[str, ...]]]


def _walked_last(struct: dict[str, Any], keys: list[str]) -> bool:
    """Whether the plan walks the new memories ``keys`` last, the last memory first and
    nothing between them (see ``_plan_upsert``): then the endpoints' in-edges are linked in
    that order a column at a time (:func:`_link_to_ends`) as the walk links them."""
    n = len(keys)
    return (
        len(struct) >= n
        and list(islice(reversed(struct), n)) == keys
        and list(islice(reversed(struct.values()), n)).count(None) == n
    )


#: an endpoint's key -> its interned string (what :meth:`NodeTable.own` gives for it): a
#: batch of 1,000 memories names ~800 runs, and ``intern`` looks each up in the table of
#: every interned string (every memory key among them: cold at 100k, ~0.5 µs a run)
_END_KEYS: dict[str, str] = {}
_END_KEYS_MAX = 1 << 16


def _end_keys(texts: list[str]) -> list[str]:
    """The interned strings of the endpoint keys ``texts`` (see :data:`_END_KEYS`)."""
    held = _END_KEYS
    out = list(map(held.get, texts))
    if None in out:
        if len(held) > _END_KEYS_MAX:
            held.clear()
        out = [k or held.setdefault(t, intern(t)) for k, t in zip(out, texts, strict=True)]
    return out  # type: ignore[return-value]


def _ends_of(cols: dict[str, Sequence[Any]]) -> _Ends:
    """The new memories' endpoints (see :data:`_Ends`) from their agent, run and tags
    columns: each value's key made once."""
    agents, runs, tags = cols["agent_id"], cols["run_id"], cols["tags"]
    one = [*set(agents)]
    agent_of = dict(zip(one, _end_keys(["Agent:" + v for v in one]), strict=True))
    one = [v for v in set(runs) if v]
    run_of = dict(zip(one, _end_keys(["Run:" + v for v in one]), strict=True))
    one = [*set(chain.from_iterable(tags))]
    tag_of = dict(zip(one, _end_keys(["Tag:" + v for v in one]), strict=True))
    tags_of = {ts: tuple([tag_of[t] for t in ts]) for ts in set(tags)}
    return (
        list(map(agent_of.__getitem__, agents)),
        list(map(run_of.get, runs)),
        list(map(tags_of.__getitem__, tags)),
    )


def _out_edges(
    agents: list[str], runs: list[str | None], tags: list[tuple[str, ...]]
) -> list[dict[str, Any]]:
    """Each new memory's out-edges dict: its agent, its run, its tags, in that order (each
    its pair's first edge: the type's shared keyed dict)."""
    if None not in runs and set(map(len, tags)) == {1}:  # most batches: a run and one tag
        return [
            {a: _AUTHORED, r: _IN_RUN, t: _TAGGED}  # type: ignore[dict-item]
            for a, r, (t,) in zip(agents, runs, tags, strict=True)
        ]
    out = []
    for a, r, ts in zip(agents, runs, tags, strict=True):
        d = {a: _AUTHORED}
        if r is not None:
            d[r] = _IN_RUN
        for t in ts:
            d[t] = _TAGGED
        out.append(d)
    return out


def _link_to_ends(
    pred: Adj,
    keys: list[str],
    agents: list[str],
    runs: list[str | None],
    tags: list[tuple[str, ...]],
) -> None:
    """Add the new memories ``keys`` to their endpoints' in-edges, the last memory first as
    the plan walks them: each endpoint's dict gets its memories in the walk's order, an
    edge type at a time (an endpoint takes edges of one type from memories)."""
    rev = keys[::-1]
    _set_all(map(pred.__getitem__, agents[::-1]), rev, _AUTHORED)
    runs = runs[::-1]
    if None in runs:
        pairs = [(r, k) for r, k in zip(runs, rev, strict=True) if r is not None]
        _set_all(map(pred.__getitem__, [r for r, _k in pairs]), [k for _r, k in pairs], _IN_RUN)
    else:
        _set_all(map(pred.__getitem__, runs), rev, _IN_RUN)  # type: ignore[arg-type]
    tags = tags[::-1]
    if set(map(len, tags)) == {1}:
        _set_all(map(pred.__getitem__, [t for (t,) in tags]), rev, _TAGGED)
    else:
        flat = [(t, k) for ts, k in zip(tags, rev, strict=True) for t in ts]
        _set_all(map(pred.__getitem__, [t for t, _k in flat]), [k for _t, k in flat], _TAGGED)


def _set_all(dicts: Iterable[dict[str, Any]], keys: Iterable[str], value: Any) -> None:
    """``dicts[j][keys[j]] = value`` for each j, in order, in C (setitem returns None: any()
    runs the whole map)."""
    any(map(setitem, dicts, keys, repeat(value)))


def _link_next(
    g: Adjacency,
    keys: list[str],
    edges: list[tuple[str, str, str, Any]],
    held: Mapping[str, str],
) -> bool:
    """Link ``edges`` when each is a NEXT link without properties to a different one of
    the new memories ``keys`` (a batch's run links: each its pair's first edge, the type's
    shared keyed dict, as :func:`_link` gives it), a column at a time; False (nothing done)
    otherwise. ``held``: memory keys already found, each to its own string (the runs' last
    memories, which most links start from)."""
    srcs, types, dsts, props = zip(*edges, strict=True)
    n = len(edges)
    if types.count("NEXT") != n or any(props):
        return False
    mine = dict(zip(keys, keys, strict=True))  # a new memory's key -> its own string
    to = list(map(mine.get, dsts))
    if None in to or len(set(to)) != n:
        return False
    table = g._node.memories
    row_of, rows, own = table.row_of, table.keys, g._node.own
    mine.update(held)
    # each source's own key: a new memory's or a held one's as found, else looked up
    # (:meth:`NodeTable.own`, inline)
    frm = [mine.get(s) or (rows[i] if (i := row_of.get(s)) is not None else own(s)) for s in srcs]
    keyed = _SHARED_KEYED["NEXT"]
    _set_all(map(g._succ.__getitem__, frm), to, keyed)  # type: ignore[arg-type]
    _set_all(map(g._pred.__getitem__, to), frm, keyed)  # type: ignore[arg-type]
    return True


class StoredVector(tuple[float, ...]):
    """A memory's embedding as the model's tuple of floats that also hands numpy the
    float32 row it was made from: recall stacks the vectors of ~100 candidates per query,
    and ``np.asarray`` over plain tuples converts 38,400 Python floats one by one (ms),
    over these it copies rows (µs)."""

    _row: np.ndarray

    def __new__(cls, row: np.ndarray) -> StoredVector:
        # the same values (float32 widens exactly); numpy converts float64 items to Python
        # floats about twice as fast as float32 ones (~100 vectors per recall)
        self = super().__new__(cls, row.astype(np.float64).tolist())
        row = row.view()
        row.flags.writeable = False  # like the tuple: nobody changes it through numpy
        self._row = row
        return self

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        row = self._row
        if dtype is not None and row.dtype != dtype:
            return row.astype(dtype)
        return row.copy() if copy else row

    def __reduce__(self) -> tuple[Any, ...]:  # pickles and copies as the plain tuple
        return (tuple, (tuple(self),))


class EmbeddedGraph:
    """The in-memory half of :class:`NetworkXBackend` (no file access)."""

    # the in-memory state, built by the journal when it loads the file
    _g: Adjacency
    _rid_of: dict[str, int]
    _key_of: dict[int, str]
    _by_label: dict[NodeLabel, set[str]]
    _index: dict[tuple[NodeLabel, str], Bucket]
    _buckets: dict[NodeLabel, list[tuple[str, Bucket]]]
    _vindex: VectorIndex | None
    _unvectored: set[str]
    _pending_touch: dict[str, tuple[int, datetime]]

    @property
    def graph(self) -> nx.MultiDiGraph:
        """A read-only live view of the in-memory graph (node keys are ``Label:id``)."""
        return self._g.as_networkx()

    def _index_remove(self, label: NodeLabel, key: str, props: Attrs) -> None:
        index_out(self._buckets[label], key, props)

    def _put_node(self, label: NodeLabel, key: str, attrs: dict[str, Any], rid: int) -> None:
        """Set a node's attributes in memory, with its index buckets and rid maps (its
        edges are the caller's business). A dict already held for the node is updated in
        place (networkx views hold on to it); a memory's row is overwritten."""
        g = self._g
        nodes = g._node
        key = nodes.own(key)  # one string per node key, however many places hold it
        old = nodes.get(key)
        if old is not None:
            # only the buckets of fields that changed (a run's count and last memory id
            # change with every batch appended to it, its indexed fields do not); read
            # before the write: a memory's row shows the new values after it
            moved = [(f, b) for f, b in self._buckets[label] if old.get(f) != attrs.get(f)]
            if moved:
                index_out(moved, key, old)
            _hold(nodes, label, key, attrs)
        else:
            _hold(nodes, label, key, attrs)
            g._succ[key] = {}
            g._pred[key] = {}
            moved = self._buckets[label]
        prev = self._rid_of.get(key)
        if prev is not None and prev != rid:
            self._drop_rid(prev, key)
        self._rid_of[key] = rid
        self._key_of[rid] = key
        self._by_label[label].add(key)
        if moved:
            index_into(moved, key, attrs)

    def _drop_rid(self, rid: int, key: str) -> None:
        """Forget that row ``rid`` holds ``key`` — unless another node holds it by now: a
        handle catching up replays another process's changes in any order, and a freed
        row id is taken by the next new node."""
        if self._key_of.get(rid) == key:
            del self._key_of[rid]

    def _structural_edges_of(self, key: str) -> list[tuple[str, str, str]]:
        attrs = self._g._node.get(key)
        if attrs is None:
            return []
        label = attrs["label"]
        return [
            (key, dst, etype)
            for dst, keyed in self._g._succ[key].items()
            for etype in keyed
            if (label, etype) in _STRUCTURAL_TEXT
        ]

    def _forget_key(self, key: str) -> None:
        """Drop a node another process deleted from the in-memory state."""
        attrs = self._g._node[key]
        label = NodeLabel(attrs["label"])
        self._index_remove(label, key, attrs)
        self._by_label[label].discard(key)
        rid = self._rid_of.pop(key, None)
        if rid is not None:
            self._drop_rid(rid, key)
        self._pending_touch.pop(key, None)
        self._unvectored.discard(key)
        if self._vindex is not None and key in self._vindex:
            self._vindex.remove([key])
        self._g.remove_node(key)

    def _apply_plan(self, plan: dict[str, Any]) -> None:
        g = self._g
        rids: dict[str, int] = plan["rids"]
        vec_keys: list[str] = []
        vecs: list[tuple[float, ...]] = []
        succ, pred = g._succ, g._pred  # raw dicts: the API is slow here
        own = g._node.own
        fresh: Fresh | None = plan["fresh"]
        struct: dict[str, list[tuple[str, str]] | None] = plan["struct"]
        # the new memories' structural edges linked a column at a time when the plan walks
        # them last and in a row (every batch whose endpoints all exist)
        ends = None
        if fresh is not None:
            ends = self._apply_fresh(fresh, _walked_last(struct, fresh.keys))
        for key_, (label, _ident, props, vec) in plan["nodes"].items():
            key = own(key_)  # the vector index and _unvectored hold the node's key too
            # the plan's own dict (made for this write by ``to_props``, written already)
            self._put_node(label, key, props, rids[key])
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
        keyed = _SHARED_KEYED
        ends_of: dict[str, str] = {}  # a new memory's endpoints' own key strings, per batch
        by_key = {} if fresh is None else fresh.by_key
        walk: Iterable[tuple[str, list[tuple[str, str]] | None]] = struct.items()
        if ends is not None:  # (fresh is then not None)
            walk = islice(walk, len(struct) - len(by_key))
        for key_, wanted in walk:
            if wanted is None:
                # a new memory (see .appends): its key interned already; its structural
                # edges (to its agent, its run, its tags), each its pair's first edge,
                # linked as the general plan links them (the type's shared keyed dict)
                d = by_key[key_].__dict__
                out = succ[key_]
                end = "Agent:" + d["agent_id"]
                a = ends_of.get(end) or ends_of.setdefault(end, own(end))
                out[a] = pred[a][key_] = _AUTHORED
                run = d["run_id"]
                if run:
                    end = "Run:" + run
                    r = ends_of.get(end) or ends_of.setdefault(end, own(end))
                    out[r] = pred[r][key_] = _IN_RUN
                for tag in d["tags"]:
                    end = "Tag:" + tag
                    t = ends_of.get(end) or ends_of.setdefault(end, own(end))
                    out[t] = pred[t][key_] = _TAGGED
                continue
            key = own(key_)  # both ends held as the node keys' own strings (see _link)
            out = succ[key]
            for etype, dst in wanted:
                held = out.get(dst)
                if held is None:
                    # the pair's first edge (every edge of a new node): the type's shared
                    # keyed dict, as _link gives it
                    dst = own(dst)
                    out[dst] = pred[dst][key] = keyed[etype]
                elif etype not in held:
                    _link(succ, pred, key, dst, etype, shared[etype], own)
        if ends is not None:
            _link_to_ends(pred, fresh.keys, *ends)  # type: ignore[union-attr]
        edges = plan["edges"]
        if not (fresh is not None and edges and _link_next(g, fresh.keys, edges, plan["held"])):
            for src, etype, dst, props in edges:
                # replaced, never edited: edges without properties share their type's dict
                data = {**props, "type": etype} if props else shared.get(etype)
                _link(succ, pred, src, dst, etype, data or {"type": etype}, own)
        self._next_rid = plan["next_rid"]

    def _apply_fresh(self, fresh: Fresh, linked: bool = False) -> _Ends | None:
        """Hold the new memories a write made (see .appends): what ``_put_node`` does for
        each, field by field over the batch; ``linked``: each one's structural out-edges
        too, and their endpoints returned (:func:`_ends_of`) for their in-edges."""
        g = self._g
        nodes = g._node
        keys = fresh.keys  # interned when planned: no node holds them, their own strings
        misfits, cols = put_rows(nodes.memories, keys, fresh.models)
        for j in misfits:
            props = fresh.models[j].to_props()
            props.pop("embedding", None)
            _hold(nodes, NodeLabel.MEMORY, keys[j], props)  # kept as its dict
        ends = None
        if linked:
            if cols is None:  # (some memory did not fit the columns)
                dicts = [m.__dict__ for m in fresh.models]
                ends = _ends_of({f: [d[f] for d in dicts] for f in ("agent_id", "run_id", "tags")})
            else:
                ends = _ends_of(cols)
        succ, pred = g._succ, g._pred
        if ends is None:
            succ.update(zip(keys, [{} for _ in keys], strict=True))
        else:
            succ.update(zip(keys, _out_edges(*ends), strict=True))
        pred.update(zip(keys, [{} for _ in keys], strict=True))
        self._rid_of.update(zip(keys, fresh.rids, strict=True))
        self._key_of.update(zip(fresh.rids, keys, strict=True))
        self._by_label[NodeLabel.MEMORY].update(keys)
        add_to_buckets(self._buckets[NodeLabel.MEMORY], keys, fresh, cols)
        self._unvectored.update(keys)
        return ends

    def _apply_heads(self, heads: list[tuple[str, int, str | None]]) -> None:
        """Set where stored runs' chains end (see ``NetworkXBackend._heads_of``): a run is
        held as its dict, updated in place; neither field is indexed or structural."""
        dicts = self._g._node.dicts
        for key, count, last in heads:
            _set_head(dicts[key], count, last)

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
            self._drop_rid(self._rid_of.pop(k), k)
            self._pending_touch.pop(k, None)
            self._unvectored.discard(k)
            if self._vindex is not None:
                self._vindex.remove([k])
            g.remove_node(k)

    def _node(self, key: str, *, vector: bool = True, shared: bool = False) -> GraphNode:
        """The node's model; a memory with its embedding unless ``vector`` is False.
        ``shared`` (without the vector): a memory row's model may be the table's own (see
        :meth:`MemoryTable.memory`), to read and not to hand out."""
        nodes = self._g._node
        row = nodes.memories.row_of.get(key)
        node: GraphNode
        if row is not None:
            node = nodes.memories.memory(row, shared=shared and not vector)
        else:
            attrs = nodes.dicts[key]
            # validated when written by graphmem; a file edited by hand is not re-validated
            node = _MODELS[attrs["label"]].from_trusted(attrs)  # ignores "label"
        if vector and node.__class__ is Memory and self._vindex is not None:
            vec = self._vindex.get(key)
            if vec is not None:  # just built here, so setting the frozen field is safe
                node.__dict__["embedding"] = StoredVector(vec)
        return node

    def _walk(
        self, frontier: list[str], types: set[str], direction: str, depth: int, limit: int
    ) -> tuple[list[str], dict[tuple[str, str, str], dict[str, Any]]]:
        """The node keys reached from ``frontier`` (those present, first) over edges of
        ``types`` within ``depth`` hops, at most ``limit`` of them in the order reached, and
        the edges walked ``(src, type, dst) -> attrs``: what :meth:`expand` returns, as
        keys."""
        succ, pred = self._g._succ, self._g._pred
        nodes = self._g._node
        seen = [k for k in dict.fromkeys(frontier) if k in nodes]
        seen_set = set(seen)
        frontier = list(seen)
        edges: dict[tuple[str, str, str], dict[str, Any]] = {}
        for _ in range(depth):
            nxt = []
            for k in frontier:
                # the scan of a node's edges stops at the node limit, so a hub (a tag on
                # 100k memories) costs `limit`, not its degree
                for s, d, t, data in _steps(succ, pred, k, direction):
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
        return seen, edges

    def _candidates(self, flt: Filter, checked: bool = False) -> set[str] | None:
        """The smallest indexed key set the filter implies (None: the whole label).

        ``checked``: the caller checks every key against the filter anyway, so the set may
        be a superset. An equality on a bucket the columns answer whose value nobody has
        asked for yet (a new agent after a batch ingest) is then left to that check when
        the other equalities narrow to a few keys already: working the value out walks a
        column of every memory (~1 ms at 100k) to intersect it with a set of one (a
        duplicate check's content hash)."""
        label = flt.label
        sets: list[set[str]] = []
        if flt.ids is not None:
            sets.append({f"{label.value}:{i}" for i in flt.ids})
        indexed = _INDEXED.get(label, ())
        unasked: list[tuple[Bucket, Any]] = []
        for f, v in flt.equals.items():
            if f in indexed:
                bucket = self._index[(label, f)]
                # (the content hash's is worked out whole at once, and narrows to one)
                if (
                    checked
                    and f != "content_hash"
                    and isinstance(bucket, MemoryBucket)
                    and not bucket.known(v)
                ):
                    unasked.append((bucket, v))
                else:
                    sets.append(keys_of(bucket, v))
        if unasked and not (sets and min(map(len, sets)) <= _FEW):
            sets.extend(keys_of(b, v) for b, v in unasked)
        for f, vs in flt.any_of.items():
            if f in indexed:
                bucket = self._index[(label, f)]
                u: set[str] = set()
                for v in vs:
                    u |= keys_of(bucket, v)
                sets.append(u)
        if flt.tags_all and "tags" in indexed:
            for t in flt.tags_all:
                sets.append(keys_of(self._index[(label, "tags")], t))
        if flt.ranges and label is NodeLabel.MEMORY and not (sets and min(map(len, sets)) <= _FEW):
            within = memories_within(self._g._node, self._by_label, flt, _FEW)
            if within is not None:
                sets.append(within)
        if not sets:
            return None
        sets.sort(key=len)
        if len(sets) == 1:
            return sets[0]
        return sets[0].intersection(*sets[1:])  # C-speed narrowing before any predicate

    def _indexed_matches(self, flt: Filter) -> set[str] | None:
        """The keys matching ``flt`` straight from the index buckets, when they answer all
        of it (equality on indexed single-valued fields, required tags); else None and the
        predicate has to look at the nodes."""
        if not _answerable(flt):
            return None
        cand = self._candidates(flt)
        return cand if cand is not None else self._by_label.get(flt.label, set())

    def _matching_list(self, flt: Filter) -> list[str]:
        """Every key matching ``flt``: the index buckets' when they answer all of it and
        narrow to more than a few (none left unasked, see :meth:`_candidates`)."""
        cand = self._candidates(flt, checked=True)
        keys = cand if cand is not None else self._by_label.get(flt.label, set())
        if _answerable(flt) and (cand is None or len(cand) > _FEW):
            return list(keys)
        ok = self._predicate(flt)
        nodes = self._g.nodes
        return [k for k in keys if k in nodes and ok(nodes[k])]

    @staticmethod
    def _predicate(flt: Filter) -> Callable[[Attrs], bool]:
        label = flt.label.value
        equals = list(flt.equals.items())
        any_of = [(f, set(vs)) for f, vs in flt.any_of.items()]
        ranges = flt.ranges
        tags_all = set(flt.tags_all)
        ids = set(flt.ids) if flt.ids is not None else None

        def ok(a: Attrs) -> bool:
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
        cand = self._candidates(flt, checked=True)
        keys: Iterable[str] = cand if cand is not None else self._by_label.get(flt.label, ())
        ok = self._predicate(flt)
        nodes = self._g.nodes
        for k in keys:
            if k in nodes and ok(nodes[k]):
                yield k


def _answerable(flt: Filter) -> bool:
    """Whether the index buckets answer all of ``flt``: equality on indexed single-valued
    fields, required tags; no ids, no ranges."""
    indexed = _INDEXED.get(flt.label, ())
    if flt.ids is not None or flt.ranges or (flt.tags_all and "tags" not in indexed):
        return False  # (and below: tags is a list field, equality on it is not membership)
    return all(f in indexed and f != "tags" for f in (*flt.equals, *flt.any_of))


def _steps(
    succ: Adj, pred: Adj, k: str, direction: str
) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """The edges at ``k`` as ``(src, dst, type, attrs)``: leaving it, then arriving."""
    if direction != "in":
        for dst, keyed in succ.get(k, {}).items():
            for etype, attrs in keyed.items():
                yield k, dst, etype, attrs
    if direction != "out":
        for src, keyed in pred.get(k, {}).items():
            for etype, attrs in keyed.items():
                yield src, k, etype, attrs


_EDGE_TYPES = {t.value: t for t in EdgeType}
_LABELS = {lab.value: lab for lab in NodeLabel}


def _edge_of(src: str, etype: str, dst: str, data: dict[str, Any]) -> Edge:
    """An Edge value from an in-memory edge (its data dict carries ``type``). Built without
    validation: every stored edge was validated when it was written (as ``_node`` does for
    nodes), and recall's graph expansion builds thousands of them."""
    return Edge.trusted(
        _EDGE_TYPES[etype],
        _ref_of(src),
        _ref_of(dst),
        {k: v for k, v in data.items() if k != "type"},
    )


def _ref_of(key: str) -> NodeRef:
    label, _, ident = key.partition(":")
    return NodeRef(_LABELS[label], ident)


def _orderable(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return int(v)
    return v
