"""Writes: a WriteBatch planned into composed statements, its preconditions locked and
checked by guards in the same statement, deletes, and the deferred access records."""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from graphmem.backends.base import (
    STRUCTURAL,
    Expect,
    WriteBatch,
    checked_heads,
    expect_failure,
    spelled_out,
    structural_targets,
)
from graphmem.backends.neo4j.filters import (
    allowed_label,
    compile_where,
    param_value,
    where_clause,
)
from graphmem.backends.neo4j.queries import (
    EDGE_UPSERT_QUERIES,
    LOCK_PROPERTY,
    Q_DELETE_EDGES,
    Q_DELETE_NODES,
    Q_HUBS,
    Q_RUN_HEAD_SET,
    Q_TOUCH,
    Q_VECTORS,
    STRUCTURAL_SHAPES,
    UPSERT_QUERIES,
)
from graphmem.backends.neo4j.schema import Neo4jSchema
from graphmem.backends.neo4j.statements import (
    WritePart,
    WriteStatement,
    chunks,
    compose,
    create_edge_variant,
    create_variant,
    times_as_text,
    times_from_text,
)
from graphmem.backends.neo4j.values import check_props, check_value, props_from_db
from graphmem.errors import Conflict, DimensionMismatch, GraphMemError, InvalidInput, QueryFailed
from graphmem.models import (
    Agent,
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    Memory,
    NodeLabel,
    NodeRef,
    OrgFact,
    Run,
)

log = logging.getLogger("graphmem.backends.neo4j")


# explicit nodes first, so that structural defaults are not created only to be replaced
_UPSERT_ORDER = (
    NodeLabel.AGENT,
    NodeLabel.TAG,
    NodeLabel.RUN,
    NodeLabel.MEMORY,
    NodeLabel.ORG_FACT,
    NodeLabel.ORG_OPERATION,
    NodeLabel.LOG_ENTRY,
    NodeLabel.PAYLOAD,
    NodeLabel.NAMESPACE,
    NodeLabel.ENTITY,
)


def compile_check(expects: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """The statement that locks the nodes of these preconditions (``Expect`` values) and
    returns, per existing node, ``label, id, props`` and ``sources``: ``{type, id}`` of each
    edge of the expected types into it. One ``UNION ALL`` branch per label; labels and
    types are allowlisted, ids are parameters."""
    by_label: dict[NodeLabel, dict[str, set[str]]] = defaultdict(dict)
    for ex in expects:
        types = by_label[ex.ref.label].setdefault(ex.ref.id, set())
        types.update(EdgeType(t).value for t in ex.incoming)
    branches: list[str] = []
    params: dict[str, Any] = {}
    for i, (label, ids) in enumerate(sorted(by_label.items(), key=lambda kv: kv[0].value)):
        lab = allowed_label(label)
        params[f"ids{i}"] = sorted(ids)
        params[f"types{i}"] = sorted({t for ts in ids.values() for t in ts})
        branches.append(
            f"UNWIND $ids{i} AS id\n"
            f"MATCH (n:{lab} {{id: id}})\n"
            f"REMOVE n.{LOCK_PROPERTY}\n"
            f"RETURN '{lab}' AS label, n.id AS id, properties(n) AS props,\n"
            f"       [(s)-[r]->(n) WHERE type(r) IN $types{i} | {{type: type(r), id: s.id}}]"
            " AS sources"
        )
    return "\nUNION ALL\n".join(branches), params


GUARD_ERROR = "ArithmeticError"
"""The error code a failed guard raises (its ``1 / 0``)."""


def compile_guard(
    label: NodeLabel, rows: Sequence[Mapping[str, Any]]
) -> tuple[str, dict[str, Any]]:
    """A write part that locks the nodes of preconditions on ``label`` nodes and stops the
    whole statement (and so its transaction) when one does not hold, by evaluating
    ``1 / 0`` (Cypher has no assertion clause without APOC; the backend reads the resulting
    ArithmeticError as a Conflict and then names the failing precondition). The nodes are
    locked first, in id order, by a plain ``MATCH`` and a property removal (see
    :data:`LOCK_PROPERTY`): locked inside the check instead (an ``OPTIONAL MATCH``, then a
    ``FOREACH`` that set the property), a node
    got its relationship-group lock before its node lock, and such a guard deadlocked with a
    write that held the node and then linked it (the background vector writer's guard
    against ``remember`` of the run's next memory; benchmarks/RESULTS.md, issue 19). Rows
    come from :func:`guard_rows`. A node's incoming edges are read only for a precondition
    that names its sources (a Run's hundreds of IN_RUN edges are not read to check its
    counters). The label is allowlisted; everything else is a parameter."""
    lab = allowed_label(label)
    text = (
        "UNWIND $ids AS id\n"
        f"MATCH (l:{lab} {{id: id}})\n"
        f"REMOVE l.{LOCK_PROPERTY}\n"
        "WITH count(*) AS locked\n"
        "UNWIND $rows AS row\n"
        f"OPTIONAL MATCH (n:{lab} {{id: row.id}})\n"
        "WITH row, n, CASE WHEN n IS NULL OR row.sources IS NULL THEN []\n"
        "  ELSE [(s)-[r]->(n) WHERE type(r) IN row.types | s.id] END AS sources\n"
        "WHERE 1 / CASE WHEN (n IS NULL AND NOT row.exists)\n"
        "  OR (n IS NOT NULL AND row.exists\n"
        "      AND all(k IN keys(row.props) WHERE n[k] = row.props[k])\n"
        "      AND all(k IN row.nulls WHERE n[k] IS NULL)\n"
        "      AND (row.sources IS NULL OR (all(x IN sources WHERE x IN row.sources)\n"
        "                                   AND all(x IN row.sources WHERE x IN sources))))\n"
        "  THEN 1 ELSE 0 END = 1"
    )
    ordered = sorted((dict(r) for r in rows), key=_by_id)
    return text, {"ids": [r["id"] for r in ordered], "rows": ordered}


def compile_absent(flt: Filter) -> tuple[str, dict[str, Any]]:
    """A write part that stops the whole statement (as :func:`compile_guard` does) when a
    node matches ``flt``: reconcile's "unless an exact duplicate exists", an index seek
    inside the write instead of a read before it."""
    clauses, params = compile_where(flt)
    text = (
        f"OPTIONAL MATCH (n:{allowed_label(flt.label)}){where_clause(clauses)}\n"
        "WITH count(n) AS found\n"
        "WHERE 1 / CASE WHEN found = 0 THEN 1 ELSE 0 END = 1"
    )
    return text, params


def guard_rows(expects: Sequence[Any]) -> dict[NodeLabel, list[dict[str, Any]]]:
    """The rows of :func:`compile_guard` per label for these ``Expect`` values."""
    out: dict[NodeLabel, list[dict[str, Any]]] = defaultdict(list)
    for ex in expects:
        props = {k: check_value(k, param_value(v)) for k, v in ex.props.items() if v is not None}
        out[ex.ref.label].append(
            {
                "id": ex.ref.id,
                "exists": bool(ex.exists),
                "props": props,
                "nulls": sorted(k for k, v in ex.props.items() if v is None),
                "types": sorted({EdgeType(t).value for t in ex.incoming}),
                "sources": None if ex.sources is None else sorted(ex.sources),
            }
        )
    return out


class _Hubs:
    """The Agent, Tag and Run nodes a batch points to (created once per batch)."""

    def __init__(self) -> None:
        self.agents: dict[str, None] = {}
        self.tags: dict[str, None] = {}
        self.runs: dict[str, dict[str, Any]] = {}

    def params(self, agent_defaults: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "agent_defaults": dict(agent_defaults),
            "agents": list(self.agents),
            "tags": list(self.tags),
            "runs": list(self.runs.values()),
        }

    def __bool__(self) -> bool:
        return bool(self.agents or self.tags or self.runs)


@lru_cache(maxsize=16)
def _row_shape(label: NodeLabel) -> tuple[frozenset[tuple[EdgeType, NodeLabel]], bool, bool]:
    """The structural edges ``label``'s upsert maintains, and whether its rows carry
    ``tags`` and ``run`` (looked up once per label, not once per row)."""
    shapes = STRUCTURAL_SHAPES.get(label, frozenset())
    return (
        shapes,
        any(tl is NodeLabel.TAG for _t, tl in shapes),
        any(tl is NodeLabel.RUN for _t, tl in shapes),
    )


def _structural_row(label: NodeLabel, props: Mapping[str, Any], hubs: _Hubs) -> dict[str, Any]:
    """The structural targets of a node as upsert row keys (see :data:`STRUCTURAL_SHAPES`):
    ``agent`` (Agent id), ``run`` (Run id or None), ``tags``; the targets join ``hubs``."""
    shapes, tagged, in_run = _row_shape(label)
    row: dict[str, Any] = {}
    if tagged:
        row["tags"] = []
    if in_run:
        row["run"] = None
    for etype, tlabel, tid, defaults in structural_targets(label, props):
        if (etype, tlabel) not in shapes:
            raise QueryFailed(
                f"internal error: the Neo4j upsert of {label.value} does not maintain "
                f"{etype.value} -> {tlabel.value} (cypher/nodes is out of date)"
            )
        if tlabel is NodeLabel.AGENT:
            row["agent"] = tid
            hubs.agents[tid] = None
        elif tlabel is NodeLabel.RUN:
            row["run"] = tid
            if tid not in hubs.runs:
                run = Run(id=tid, **defaults).to_props()
                hubs.runs[tid] = run
                hubs.agents[str(run["agent_id"])] = None
        else:
            row["tags"].append(tid)
            hubs.tags[tid] = None
    return row


def _implied(label: NodeLabel, props: Mapping[str, Any]) -> set[tuple[EdgeType, NodeRef]]:
    return {
        (etype, NodeRef(tlabel, tid))
        for etype, tlabel, tid, _defaults in structural_targets(label, props)
    }


def _vector_rows(vectors: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
    rows = []
    for ident, vec in vectors.items():
        values = [float(x) for x in vec]
        if not values or not all(math.isfinite(x) for x in values):
            raise InvalidInput(f"embedding of {ident!r} must be a non-empty finite vector")
        rows.append({"id": str(ident), "embedding": values})
    return sorted(rows, key=_by_id)


def _head_rows(heads: Mapping[str, tuple[int, str | None]]) -> list[dict[str, Any]]:
    return [
        {"id": run_id, "event_count": count, "last_event_id": last}
        for run_id, count, last in checked_heads(heads)
    ]


def _by_id(row: Mapping[str, Any]) -> str:
    """The order rows are written in: by id, in every statement (see :data:`LOCK_ORDER`)."""
    return str(row["id"])


LOCK_ORDER = "id"
"""Every statement that writes existing nodes (upserts, vectors, access records) sends its
rows sorted by id, so that two transactions lock the nodes they share in the same order:
``remember`` (its access records, the previous memory its NEXT edge ends at) and the
background vector writer (embeddings of recent memories) deadlocked now and then when they
locked the same memories in opposite orders (``DeadlockDetected``, retried by the driver)."""


_HUB_LABELS = frozenset({NodeLabel.AGENT, NodeLabel.TAG, NodeLabel.RUN})


class _GuardFailed(GraphMemError):
    """A write's guard part stopped it (see :func:`compile_guard`)."""


class Neo4jWrites(Neo4jSchema):
    """The write path: one managed write transaction per :class:`WriteBatch`."""

    def _node_parts(
        self,
        nodes: Sequence[GraphNode],
        create: frozenset[NodeRef] = frozenset(),
        runs: frozenset[str] = frozenset(),
    ) -> list[WritePart]:
        """The upsert parts that write ``nodes``: the hubs they point to (once), then one
        part per label and chunk of ``batch_rows`` rows. Nodes in ``create`` must be new:
        their part CREATEs instead of MERGEs, so that the id's uniqueness constraint stops
        a concurrent writer of the same id (a Conflict) instead of letting one overwrite
        the other. ``runs``: ids of runs the write expects to exist (no hub for them)."""
        latest: dict[NodeRef, GraphNode] = {}
        for node in nodes:
            if not isinstance(node, GraphNode):
                raise InvalidInput(f"upsert takes graph nodes, got {type(node).__name__}")
            latest[node.ref] = node  # the last of duplicate ids wins
        by_label: dict[NodeLabel, list[dict[str, Any]]] = defaultdict(list)
        hubs = _Hubs()
        for node in latest.values():
            props = node.to_props()  # a dict of its own: converted in place
            check_props(props)
            row: dict[str, Any] = {"id": node.id, "props": props}
            row.update(_structural_row(node.label, props, hubs))
            times_as_text(node.label, props)
            by_label[node.label].append(row)
        for ref in latest:  # written explicitly, with their own properties
            if ref.label is NodeLabel.AGENT:
                hubs.agents.pop(ref.id, None)
            elif ref.label is NodeLabel.TAG:
                hubs.tags.pop(ref.id, None)
            elif ref.label is NodeLabel.RUN:
                hubs.runs.pop(ref.id, None)
        for run_id in runs:
            hubs.runs.pop(run_id, None)
        parts: list[WritePart] = []
        if hubs:
            agent_defaults = {k: v for k, v in Agent(id="default").to_props().items() if k != "id"}
            parts.append(WritePart(Q_HUBS, *self._bind(Q_HUBS, **hubs.params(agent_defaults))))
        for label in _UPSERT_ORDER:
            name = UPSERT_QUERIES[label]
            rows = sorted(by_label.get(label, []), key=_by_id)
            fresh = {ref.id for ref in create if ref.label is label}
            new = [r for r in rows if r["id"] in fresh]
            old = [r for r in rows if r["id"] not in fresh]
            for chunk in chunks(new, self._batch_rows):
                text, params = self._bind(name, rows=list(chunk))
                text = times_from_text(create_variant(text, label), label)
                parts.append(WritePart(f"{name} (create)", text, params, rows=len(chunk)))
            for chunk in chunks(old, self._batch_rows):
                text, params = self._bind(name, rows=list(chunk))
                text = times_from_text(text, label)
                parts.append(WritePart(name, text, params, rows=len(chunk)))
        return parts

    def _edge_parts(
        self, edges: Sequence[Edge], create: frozenset[NodeRef] = frozenset()
    ) -> list[WritePart]:
        """The upsert parts that write (non-structural) ``edges``, endpoints matched by id.
        An edge with an end in ``create`` (a node this write creates) is CREATEd: it cannot
        exist yet."""
        groups: dict[tuple[EdgeType, NodeLabel, NodeLabel, bool], dict[Any, tuple[Edge, Any]]] = (
            defaultdict(dict)
        )
        for e in edges:
            key = (e.type, e.src.label, e.dst.label)
            if key not in EDGE_UPSERT_QUERIES:
                if (e.src.label, e.type) in STRUCTURAL:
                    raise InvalidInput(
                        f"{e.src.label.value} {e.type.value} edges are written by the node upserts"
                    )
                raise InvalidInput(
                    f"no {e.type.value} edge from {e.src.label.value} to {e.dst.label.value}"
                )
            props = {k: check_value(k, v) for k, v in e.props.items()}
            new = e.src in create or e.dst in create
            groups[(*key, new)][e.key] = (e, {"src": e.src.id, "dst": e.dst.id, "props": props})
        parts: list[WritePart] = []
        for key, name in EDGE_UPSERT_QUERIES.items():
            for new in (True, False):
                for chunk in chunks(list(groups.get((*key, new), {}).values()), self._batch_rows):
                    text, params = self._bind(name, rows=[row for _e, row in chunk])
                    parts.append(
                        WritePart(
                            f"{name} (create)" if new else name,
                            create_edge_variant(text) if new else text,
                            params,
                            rows=len(chunk),
                            edges=tuple(e for e, _row in chunk),
                        )
                    )
        return parts

    def _pack(self, parts: Sequence[WritePart]) -> list[WriteStatement]:
        """Parts packed into statements of at most ``batch_rows`` rows (a part is never
        split here; the planners chunk them), each composed into one round trip."""
        groups: list[list[WritePart]] = []
        rows = 0
        for part in parts:
            if not groups or (rows + part.rows > self._batch_rows and groups[-1]):
                groups.append([])
                rows = 0
            groups[-1].append(part)
            rows += part.rows
        return [
            WriteStatement(
                tuple(g),
                *compose(
                    [(p.text, p.params) for p in g],
                    counted=[i for i, p in enumerate(g) if p.edges],
                ),
            )
            for g in groups
        ]

    def plan_writes(
        self, nodes: Sequence[GraphNode] = (), edges: Sequence[Edge] = ()
    ) -> list[WriteStatement]:
        """The statements an upsert of ``nodes`` and ``edges`` sends, in order (no server
        needed; public so that tests and curious users can see exactly what is sent)."""
        plain = [e for e in edges if (e.src.label, e.type) not in STRUCTURAL]
        return self._pack([*self._node_parts(nodes), *self._edge_parts(plain)])

    def write(self, batch: WriteBatch) -> None:
        """Apply a :class:`~graphmem.backends.base.WriteBatch` in one managed write
        transaction: lock and check its preconditions (Conflict, nothing written, when one
        fails), upsert nodes and edges, then delete. A write of N nodes without
        preconditions or deletes is ceil(N / batch_rows) statements."""
        self._apply(batch)

    def write_unless(self, batch: WriteBatch, absent: Filter) -> None:
        """:meth:`write`, unless a node matches ``absent`` (then Conflict, nothing written):
        checked first in the write's own statement, so still one round trip."""
        self._apply(batch, absent=absent)

    def _apply(self, batch: WriteBatch, absent: Filter | None = None) -> int:
        """Apply a batch (unless a node matches ``absent``); returns how many nodes it
        deleted."""
        if not isinstance(batch, WriteBatch):
            raise InvalidInput(f"write takes a WriteBatch, got {type(batch).__name__}")
        batch = spelled_out(batch)  # each new memory's precondition, each link's edge
        nodes = list(batch.nodes)
        edges = list(batch.edges)
        for e in (*edges, *batch.delete_edges):
            if not isinstance(e, Edge):
                raise InvalidInput(f"write takes Edge values, got {type(e).__name__}")
        for ex in batch.expect:
            if not isinstance(ex, Expect):
                raise InvalidInput(f"preconditions are Expect values, got {type(ex).__name__}")
        doomed = list(
            dict.fromkeys(NodeRef(NodeLabel(allowed_label(r[0])), r[1]) for r in batch.delete_nodes)
        )
        if {n.ref for n in nodes if isinstance(n, GraphNode)} & set(doomed):
            raise InvalidInput("one write cannot both upsert and delete the same node")
        vectors = _vector_rows(getattr(batch, "vectors", None) or {})
        if not batch and not batch.expect and not vectors:
            return 0
        # structural edges are accepted when the source node implies them (as an import or a
        # migration passes them) and then need no write of their own; others are refused
        structural = [e for e in edges if (e.src.label, e.type) in STRUCTURAL]
        plain = [e for e in edges if (e.src.label, e.type) not in STRUCTURAL]
        gone = set(doomed)
        for e in plain:
            for end in (e.src, e.dst):
                if end in gone:
                    raise InvalidInput(f"edge {e.type.value} refers to missing node {end.key}")
        # "must not exist" on a node this write creates: a CREATE, checked by the id's
        # uniqueness constraint (hub labels, MERGEd by other writes too, use the guard)
        upserted = {n.ref for n in nodes if isinstance(n, GraphNode)}
        create = frozenset(
            ex.ref
            for ex in batch.expect
            if not ex.exists and ex.ref in upserted and ex.ref.label not in _HUB_LABELS
        )
        guarded = [ex for ex in batch.expect if ex.exists or ex.ref not in create]
        heads = _head_rows(batch.run_heads)
        parts = self._node_parts(nodes, create, frozenset(r["id"] for r in heads))
        for chunk in chunks(heads, self._batch_rows):
            parts.append(
                WritePart(
                    Q_RUN_HEAD_SET, *self._bind(Q_RUN_HEAD_SET, rows=list(chunk)), rows=len(chunk)
                )
            )
        parts.extend(self._edge_parts(plain, create))
        # only an import or a migration passes structural edges: check those against the
        # nodes (an ordinary write does not pay for it)
        implied_here = {n.ref: _implied(n.label, n.to_props()) for n in nodes} if structural else {}
        dims = {
            len(n.embedding) for n in nodes if isinstance(n, Memory | OrgFact) and n.embedding
        } | {len(r["embedding"]) for r in vectors}
        if len(dims) > 1:
            raise DimensionMismatch(f"embeddings of different dimensions in one batch: {dims}")
        self._ready()
        if dims:
            self._ensure_dim(dims.pop())
        stored_sources = {e.src for e in structural if e.src not in implied_here}
        touches = self._take_touches()
        if touches:
            # before the node upserts: a node written back by the caller carries the counts
            # it read (touches included) and must not be counted twice
            parts.insert(
                0, WritePart(Q_TOUCH, *self._bind(Q_TOUCH, rows=touches), rows=len(touches))
            )
        for chunk in chunks(vectors, self._batch_rows):
            parts.append(
                WritePart(Q_VECTORS, *self._bind(Q_VECTORS, rows=list(chunk)), rows=len(chunk))
            )
        # preconditions first, in the same statement: a failing one stops the transaction
        guards = [
            WritePart(f"guard {label.value}", *compile_guard(label, rows), rows=len(rows))
            for label, rows in sorted(guard_rows(guarded).items(), key=lambda kv: kv[0].value)
        ]
        if absent is not None:
            guards.insert(0, WritePart("guard absent", *compile_absent(absent), rows=1))
        statements = self._pack([*guards, *parts])
        written = {n.ref for n in nodes}
        # set when a guard stops the write: the driver may report the rollback that follows
        # with an error of its own (see Neo4jSession._translated), and the guard still decides
        guard_hit: list[bool] = []

        def work(tx: Any) -> int:
            from neo4j.exceptions import ClientError

            guard_hit.clear()

            if structural:
                implied = dict(implied_here)
                for ref, (_eid, props) in self._lookup(tx, stored_sources, with_props=True).items():
                    implied[ref] = _implied(ref.label, props_from_db(props or {}))
                for e in structural:
                    if (e.type, e.dst) not in implied.get(e.src, set()):
                        raise InvalidInput(
                            f"{e.type.value} edges follow the node's fields (agent_id, run_id, "
                            f"tags); {e.src.key} does not imply one to {e.dst.key}"
                        )
            for st in statements:
                try:
                    record = self._run(tx, st.name, st.text, st.params).single()
                except ClientError as e:
                    if guards and (
                        GUARD_ERROR in str(getattr(e, "code", "")) or "/ by zero" in str(e)
                    ):
                        guard_hit.append(True)
                        raise _GuardFailed(str(e)) from e
                    raise
                for i, part in enumerate(st.parts):
                    if part.edges and int(record[f"c{i}"]) < part.rows:
                        self._missing_end(tx, part.edges, written)
            if doomed or batch.delete_edges:
                return self._delete_in(tx, doomed, batch.delete_edges)
            return 0

        try:
            deleted = self._write("write", work)
        except GraphMemError as e:
            if not (isinstance(e, _GuardFailed) or guard_hit):
                self._restore_touches(touches)
                raise
            self._restore_touches(touches)
            if absent is not None:
                # most likely the node it must not find (the caller reads next anyway)
                raise Conflict(
                    "precondition failed: a node the write must not find exists, or the "
                    "nodes its preconditions name changed concurrently"
                ) from None
            # name the precondition that failed (a read of the locked state; writes nothing)
            self._write("check", lambda tx: self._check(tx, batch.expect))
            raise Conflict("precondition failed: the nodes it names changed concurrently") from None
        except BaseException:
            self._restore_touches(touches)
            raise
        if self._fulltext_eventual and any(
            ref.label is NodeLabel.MEMORY for ref in (*written, *doomed)
        ):
            self._fulltext_behind = True  # the next lexical search waits for the index
        log.debug(
            "write: %d nodes, %d edges, %d deletes, %d preconditions in %d statements",
            len(nodes),
            len(edges),
            len(doomed) + len(batch.delete_edges),
            len(batch.expect),
            len(statements),
        )
        return deleted

    def _check(self, tx: Any, expects: Sequence[Expect]) -> None:
        """Lock the nodes the preconditions name, then check them (same transaction)."""
        text, params = compile_check(expects)
        found: dict[NodeRef, tuple[dict[str, Any], list[Any]]] = {}
        for rec in self._run(tx, "check", text, params):
            ref = NodeRef(NodeLabel(rec["label"]), rec["id"])
            found[ref] = (props_from_db(rec["props"]), list(rec["sources"]))
        for ex in expects:
            hit = found.get(ex.ref)
            props, sources = hit if hit is not None else (None, [])
            types = {EdgeType(t).value for t in ex.incoming}
            ids = [s["id"] for s in sources if s["type"] in types]
            why = expect_failure(ex, props, ids)
            if why is not None:
                raise Conflict(f"precondition failed: {why}")

    def _missing_end(self, tx: Any, edges: Sequence[Edge], written: set[NodeRef]) -> None:
        """Raise InvalidInput naming an endpoint of ``edges`` that does not exist."""
        ends = [end for e in edges for end in (e.src, e.dst) if end not in written]
        found = self._lookup(tx, ends)
        for e in edges:
            for end in (e.src, e.dst):
                if end not in found and end not in written:
                    raise InvalidInput(f"edge {e.type.value} refers to missing node {end.key}")
        raise QueryFailed("an edge upsert wrote fewer edges than it was sent")

    def _delete_in(self, tx: Any, refs: Sequence[NodeRef], edges: Sequence[Edge]) -> int:
        found = self._lookup(tx, [*refs, *(x for e in edges for x in (e.src, e.dst))])
        rows = [
            {"src": found[e.src][0], "dst": found[e.dst][0], "type": e.type.value}
            for e in {e.key: e for e in edges}.values()
            if e.src in found and e.dst in found
        ]
        for chunk in chunks(rows, self._batch_rows):
            self._run_file(tx, Q_DELETE_EDGES, rows=list(chunk)).consume()
        node_eids = [found[r][0] for r in refs if r in found]
        deleted = 0
        for eid_chunk in chunks(node_eids, self._batch_rows):
            deleted += int(
                self._run_file(tx, Q_DELETE_NODES, eids=list(eid_chunk)).single()["deleted"]
            )
        return deleted

    def touch(self, ids: Sequence[str], at: datetime) -> None:
        """Record an access of these memories: access_count += 1, last_accessed = at.

        Kept in this process (reads through this backend see them at once) and written with
        the next write transaction, by :meth:`flush`, at :meth:`close`, or when
        ``touch_flush_rows`` are pending or the oldest is ``touch_flush_s`` old; so recall
        adds no write transaction of its own to the read path."""
        if not ids:
            return
        if not isinstance(at, datetime) or at.tzinfo is None or at.utcoffset() is None:
            raise InvalidInput("touch time must be a timezone-aware datetime")
        at = at.astimezone(UTC)
        now = time.monotonic()
        with self._touch_lock:
            for ident in dict.fromkeys(ids):
                entry = self._touches.get(ident)
                if entry is None:
                    self._touches[ident] = [1, at]
                else:
                    entry[0] += 1
                    entry[1] = at
            if self._touches_since is None:
                self._touches_since = now
            due = (
                len(self._touches) >= self._touch_flush_rows
                or now - self._touches_since >= self._touch_flush_s
            )
        if due:
            self.flush()

    def pending_touches(self) -> int:
        """How many memories have access records not yet written to the server."""
        return len(self._touches)

    def flush(self) -> None:
        """Write the deferred access records now (one write transaction)."""
        rows = self._take_touches()
        if not rows:
            return
        try:
            self._ready()
            self._write(
                "touch",
                lambda tx: [
                    self._run_file(tx, Q_TOUCH, rows=list(chunk)).consume()
                    for chunk in chunks(rows, self._batch_rows)
                ],
            )
        except BaseException:
            self._restore_touches(rows)
            raise

    def _take_touches(self) -> list[dict[str, Any]]:
        with self._touch_lock:
            taken, self._touches, self._touches_since = self._touches, {}, None
        return sorted(({"id": i, "count": c, "at": at} for i, (c, at) in taken.items()), key=_by_id)

    def _restore_touches(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Put back access records whose write failed (newer ones keep their time)."""
        if not rows:
            return
        with self._touch_lock:
            for row in rows:
                entry = self._touches.get(row["id"])
                if entry is None:
                    self._touches[row["id"]] = [row["count"], row["at"]]
                else:
                    entry[0] += row["count"]
            if self._touches_since is None:
                self._touches_since = time.monotonic()
