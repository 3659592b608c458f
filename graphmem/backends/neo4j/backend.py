"""The Neo4j GraphBackend: the writes, searches and the remaining reads put together."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from graphmem.backends.base import Direction, N, check_kind
from graphmem.backends.neo4j.filters import allowed_label, compile_count, compile_match
from graphmem.backends.neo4j.queries import (
    ALL_LABELS,
    ALL_TYPES,
    META_LABEL,
    Q_CLEAR,
    Q_EXPAND,
    Q_GET_META,
    Q_MISSING_VECTORS,
    Q_RUN_HEADS,
    Q_SCAN_EDGES,
    Q_SCAN_NODES,
    Q_SET_META,
    Q_STATS,
)
from graphmem.backends.neo4j.search import Neo4jSearch
from graphmem.backends.neo4j.values import props_from_db, vanished
from graphmem.backends.neo4j.writes import Neo4jWrites
from graphmem.errors import ConfigError, GraphMemError, InvalidInput
from graphmem.models import (
    BackendStats,
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    NodeLabel,
    NodeRef,
    Run,
    Subgraph,
)

log = logging.getLogger("graphmem.backends.neo4j")


class Neo4jBackend(Neo4jWrites, Neo4jSearch):
    """GraphBackend over a Neo4j 5.18+ server. See the module docstring.

    ``url``: ``neo4j://``, ``neo4j+s://``, ``neo4j+ssc://``, ``bolt://``, ``bolt+s://`` or
    ``bolt+ssc://`` (user and password may be given in the URL). ``auth``: ``(user,
    password)`` or any ``neo4j`` auth object. ``database``: the database name (server
    default when None). ``cypher_dir``: where the query files are (default: the packaged
    ``cypher/``). ``batch_rows``: rows per statement (a write of N nodes is
    ceil(N / batch_rows) statements). ``exact_search_max``: filtered vector searches matching
    at most this many memories are exact (no index). ``connect_timeout_s``: how long to wait
    for a connection; ``retry_s``: how long the driver retries a transaction that failed on a
    transient error or a lost connection (an unreachable server fails after about
    ``connect_timeout_s``, never after minutes). ``vector_overfetch``: recall reads this many
    times k from the vector index and re-scores them exactly. ``touch_flush_s`` /
    ``touch_flush_rows``: recall's access records (``touch``) are kept in this process and
    written with the next write, at ``close()``, or once they are this old / this many
    (``touch_flush_s=0``: written at once). ``fulltext_refresh``: ``"commit"`` (a write
    updates the full-text index in its commit) or ``"background"`` (behind it: this
    handle's next lexical search waits for it, other handles may miss a write for a
    moment; see :data:`~graphmem.backends.neo4j.session.FULLTEXT_REFRESH`).
    ``vector_quantization``: ``True`` (the server's quantized vector index on 5.23+) or
    ``False`` (an index without quantization: full-precision neighbours, slower searches);
    applies when the index is made. ``driver``: an already made driver (the backend will
    not close it). Other keywords must be ``neo4j`` driver options (:data:`DRIVER_OPTIONS`).
    """

    name = "neo4j"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **options: Any) -> Neo4jBackend:
        """A backend on the server the environment names: ``GRAPHMEM_URL``,
        ``GRAPHMEM_USERNAME``, ``GRAPHMEM_PASSWORD``, ``GRAPHMEM_DATABASE``, else
        ``NEO4J_URI``, ``NEO4J_USER`` (or ``NEO4J_USERNAME``), ``NEO4J_PASSWORD``,
        ``NEO4J_DATABASE`` (read now, when asked; never at import)."""
        from graphmem.config import neo4j_from_env

        found = neo4j_from_env(env)
        if found is None:
            raise ConfigError("neither GRAPHMEM_URL nor NEO4J_URI names a Neo4j server")
        uri, auth, database = found
        options.setdefault("auth", auth)
        options.setdefault("database", database)
        return cls(uri, **options)

    def missing_vectors(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` memories (id, content) that have no embedding yet (one indexed
        read of ``limit`` rows; the background vectorizer's queue)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInput("limit must be a non-negative int")
        if limit == 0:
            return []
        self._ready()
        rows = self._query("missing vectors", *self._bound(Q_MISSING_VECTORS, limit=limit))
        return [(str(r["id"]), str(r["content"])) for r in rows]

    def run_heads(self, run_ids: Sequence[str]) -> tuple[list[Run], set[str]]:
        """The runs among ``run_ids`` that exist, and which of their last memories exist
        (any status): one read, where :meth:`get` and :meth:`count` would be two."""
        if not run_ids:
            return [], set()
        self._ready()
        rows = self._query("run heads", *self._bound(Q_RUN_HEADS, ids=list(run_ids)))
        runs: list[Run] = []
        alive: set[str] = set()
        for row in rows:
            if vanished(row["props"]):  # deleted while read: not there
                continue
            run = self._node(NodeLabel.RUN.value, row["props"])
            if isinstance(run, Run):
                runs.append(run)
                if row["alive"] and run.last_event_id:
                    alive.add(run.last_event_id)
        return runs, alive

    def get(self, kind: type[N], ids: Sequence[str]) -> list[N]:
        """The ``kind`` nodes with these ids that exist, in the order of ``ids``."""
        lab = check_kind(kind)
        if not ids:
            return []
        self._ready()
        found = self._read(
            "get", lambda tx: self._lookup(tx, [NodeRef(lab, i) for i in ids], with_props=True)
        )
        out = []
        for ident in ids:
            hit = found.get(NodeRef(lab, ident))
            if hit is not None and hit[1] is not None and not vanished(hit[1]):
                node = self._node(lab.value, hit[1])
                if isinstance(node, kind):
                    out.append(node)
        return out

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
        """``kind`` nodes matching the filter, ordered and paged."""
        check_kind(kind, flt)
        text, params = compile_match(
            flt, limit=limit, offset=offset, order_by=order_by, descending=descending
        )
        self._ready()
        rows = self._query("match", "match", text, params)
        # (a node deleted while the statement read it is left out, see vanished)
        nodes = [self._node(flt.label.value, r["props"]) for r in rows if not vanished(r["props"])]
        return [n for n in nodes if isinstance(n, kind)]

    def count(self, flt: Filter) -> int:
        """How many nodes match the filter."""
        text, params = compile_count(flt)
        self._ready()
        return int(self._query("count", "count", text, params)[0]["count"])

    def expand(
        self,
        seeds: Sequence[NodeRef],
        edge_types: Sequence[EdgeType],
        *,
        direction: Direction = "both",
        depth: int = 1,
        limit: int = 1000,
    ) -> Subgraph:
        """Nodes within ``depth`` hops of the seeds over ``edge_types`` (breadth first, at
        most ``limit`` nodes, seeds included) and the traversed edges between them."""
        if depth < 0 or limit < 1:
            raise InvalidInput("depth must be >= 0 and limit >= 1")
        if direction not in ("out", "in", "both"):
            raise InvalidInput("direction must be 'out', 'in' or 'both'")
        try:
            types = sorted({EdgeType(t).value for t in edge_types})
        except ValueError as e:
            raise InvalidInput(f"unknown edge type in {list(edge_types)!r}") from e
        seed_refs = [NodeRef(NodeLabel(allowed_label(s[0])), s[1]) for s in seeds]
        if not seed_refs:
            return Subgraph()
        self._ready()

        def work(tx: Any) -> tuple[list[tuple[str, dict[str, Any]]], list[Edge]]:
            found = self._lookup(tx, seed_refs, with_props=True)
            ref_of: dict[str, NodeRef] = {}
            seen: dict[str, tuple[str, dict[str, Any]]] = {}
            for ref in dict.fromkeys(seed_refs):
                if ref in found and not vanished(found[ref][1]):
                    eid, props = found[ref]
                    ref_of[eid] = ref
                    seen[eid] = (ref.label.value, props or {})
            frontier = list(seen)
            edges: dict[tuple[str, str, str], Edge] = {}
            for _ in range(depth):
                if not frontier or not types:
                    break
                text, params = self._bind(
                    Q_EXPAND,
                    eids=frontier,
                    types=types,
                    direction=direction,
                    labels=ALL_LABELS,
                )
                rank = {eid: i for i, eid in enumerate(frontier)}
                rows = self._run(tx, Q_EXPAND, text, params)
                records = sorted(
                    # a node deleted while the statement read it is not there (vanished)
                    (r for r in rows if not vanished(r["other_props"])),
                    key=lambda r: (
                        rank[r["from_eid"]],
                        r["type"],
                        r["other_label"],
                        str(r["other_props"].get("id")),
                    ),
                )
                nxt = []
                for r in records:
                    other = r["other_eid"]
                    if other not in ref_of:
                        ref_of[other] = NodeRef(NodeLabel(r["other_label"]), r["other_props"]["id"])
                    here, there = ref_of[r["from_eid"]], ref_of[other]
                    src, dst = (here, there) if r["outgoing"] else (there, here)
                    edge = Edge(
                        type=EdgeType(r["type"]),
                        src=src,
                        dst=dst,
                        props=props_from_db(r["props"]),
                    )
                    edges[edge.key] = edge
                    if other not in seen and len(seen) < limit:
                        seen[other] = (r["other_label"], r["other_props"])
                        nxt.append(other)
                frontier = nxt
            kept = {ref_of[eid] for eid in seen}
            return (
                list(seen.values()),
                [e for e in edges.values() if e.src in kept and e.dst in kept],
            )

        node_rows, edge_list = self._read("expand", work)
        return Subgraph(
            nodes=tuple(self._node(label, props) for label, props in node_rows),
            edges=tuple(edge_list),
        )

    def scan(self, *, batch_size: int = 1000) -> Iterator[tuple[list[GraphNode], list[Edge]]]:
        """Every node, then every edge, in batches (streamed from the server)."""
        if batch_size < 1:
            raise InvalidInput("batch_size must be >= 1")
        self._ready()
        with self._translated("scan"), self._session(write=False) as session:
            text, params = self._bind(Q_SCAN_NODES, labels=ALL_LABELS)
            result = self._run(session, Q_SCAN_NODES, text, params)
            while batch := result.fetch(batch_size):
                yield (
                    [
                        self._node(r["label"], r["props"])
                        for r in batch
                        if r["label"] and not vanished(r["props"])  # deleted while read
                    ],
                    [],
                )
            text, params = self._bind(Q_SCAN_EDGES, types=ALL_TYPES, labels=ALL_LABELS)
            result = self._run(session, Q_SCAN_EDGES, text, params)
            while batch := result.fetch(batch_size):
                yield (
                    [],
                    [
                        Edge(
                            type=EdgeType(r["type"]),
                            src=NodeRef(NodeLabel(r["src_label"]), r["src"]),
                            dst=NodeRef(NodeLabel(r["dst_label"]), r["dst"]),
                            props=props_from_db(r["props"]),
                        )
                        for r in batch
                        if r["src_label"] and r["dst_label"] and r["src"] and r["dst"]
                    ],
                )

    def stats(self) -> BackendStats:
        """Node counts per label and edge counts per type (non-zero ones), the location and
        the vector dimension."""
        self._ready()
        row = self._read("stats", lambda tx: self._run_file(tx, Q_STATS).single())
        if self._dim is None:
            self._schema_names()
        return BackendStats(
            backend=self.name,
            nodes={k: int(v) for k, v in row["nodes"].items() if v},
            edges={k: int(v) for k, v in row["edges"].items() if v},
            location=self.location,
            file_bytes=None,
            embedding_dim=self._dim,
        )

    def get_meta(self, key: str) -> str | None:
        """A value kept on a ``GraphmemMeta`` node (the embedding model's record)."""
        self._ready()
        row = self._read("read meta", lambda tx: self._run_file(tx, Q_GET_META, key=key).single())
        return None if row is None or row["value"] is None else str(row["value"])

    def set_meta(self, key: str, value: str | None) -> None:
        """Keep ``value`` on the ``GraphmemMeta`` node of ``key`` (None removes it)."""
        self._ready()
        self._write(
            "write meta", lambda tx: self._run_file(tx, Q_SET_META, key=key, value=value).consume()
        )

    def clear(self, *, batch: int = 10_000) -> int:
        """Delete every graphmem node and relationship in the database (other labels are left
        alone), in transactions of ``batch`` nodes; returns how many nodes were deleted. For
        benchmarks and throwaway stores: there is no undo."""
        if batch < 1:
            raise InvalidInput("batch must be >= 1")
        text, params = self._bind(Q_CLEAR, labels=[*ALL_LABELS, META_LABEL], batch=batch)
        total = 0
        while True:
            deleted = int(
                self._write("clear", lambda tx: self._run(tx, Q_CLEAR, text, params).single()[0])
            )
            total += deleted
            if deleted == 0:
                log.info("cleared %d nodes from %s", total, self.location)
                return total

    def close(self) -> None:
        """Write the deferred access records, then close the driver this backend created
        (idempotent)."""
        with self._lock:
            if self._closed:
                return
        if self._touches:
            try:
                self.flush()
            except GraphMemError as e:  # closing must not raise over a lost connection
                log.warning(
                    "%d access records not written at close: %s",
                    len(self._touches),
                    type(e).__name__,
                )
        with self._lock:
            if self._closed:
                return
            self._closed = True
            drv, self._driver = self._driver, None
        if drv is not None and self._owns_driver:
            try:
                drv.close()
            except Exception as e:  # closing must not raise over a lost connection
                log.warning("error while closing the Neo4j driver: %s", type(e).__name__)

    def __enter__(self) -> Neo4jBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Neo4jBackend({self.location!r})"
