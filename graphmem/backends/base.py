"""The GraphBackend protocol: the one seam between memory logic and storage.

Methods are batched and at the level of memory operations, so that one call is one round
trip on a server backend. Only graphmem models cross the seam — no Cypher, no driver or
networkx types. Ranking and fusion live above the seam (``retrieval.py``) so that every
backend returns the same results for the same data.

Contract (tested for every backend by ``tests/contract``):

- ``upsert`` is atomic per call: either every node and edge is written or none is, and an
  acknowledged call is durable. Upserting an existing node replaces its properties; an
  edge is identified by (type, src, dst) and upserting it again replaces its properties.
  Edges whose endpoints do not exist (in the call or in the store) raise ``InvalidInput``.
- Structural edges are maintained by the backend from node properties, in the same
  transaction: a Memory has ``AUTHORED_BY`` -> Agent(agent_id), ``IN_RUN`` -> Run(run_id)
  when run_id is set, and ``TAGGED`` -> Tag for each tag; a Run has ``RUN_BY`` ->
  Agent(agent_id); an OrgFact has ``AUTHORED_BY`` -> Agent(author) and ``TAGGED`` -> Tag for
  each tag; a LogEntry has ``IN_RUN`` -> Run(run_id) when run_id is set. Missing Agent/Run/Tag
  endpoints are created with defaults (an existing one is never overwritten). Re-upserting
  a node replaces its structural edges (a removed tag loses its TAGGED edge). Callers pass
  only the other edges (SUPERSEDES, DERIVED_FROM, NEXT, ...).
- ``delete`` removes nodes with all their edges (detach) and the listed edges.
- ``match``/``count`` evaluate a :class:`~graphmem.models.Filter`; ``match`` orders by one
  field (ties broken by id) and pages with limit/offset.
- ``search_text``/``search_vector`` apply the filter *before* the top-k cut.
- ``expand`` returns the neighbourhood of seed nodes over the given edge types.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from graphmem.models import (
    BackendStats,
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    Hit,
    NodeLabel,
    NodeRef,
    Subgraph,
    TextQuery,
    VectorQuery,
)

__all__ = ["STRUCTURAL", "Direction", "GraphBackend", "structural_targets"]

Direction = Literal["out", "in", "both"]


@runtime_checkable
class GraphBackend(Protocol):
    """Storage for graphmem's property graph. See the module docstring for the contract."""

    name: str

    def ensure_schema(self, *, embedding_dim: int | None = None) -> None:
        """Create constraints/indexes (idempotent). ``embedding_dim`` fixes the vector
        dimension the first time it is given; a different one later is a DimensionMismatch."""
        ...

    def upsert(self, nodes: Sequence[GraphNode] = (), edges: Sequence[Edge] = ()) -> None:
        """Write nodes and edges atomically and durably (one transaction)."""
        ...

    def get(self, label: NodeLabel, ids: Sequence[str]) -> list[GraphNode]:
        """The nodes with these ids that exist, in the order of ``ids``."""
        ...

    def delete(self, nodes: Sequence[NodeRef] = (), edges: Sequence[Edge] = ()) -> int:
        """Delete nodes (with their edges) and edges; returns how many nodes were deleted."""
        ...

    def match(
        self,
        flt: Filter,
        *,
        limit: int | None = None,
        offset: int = 0,
        order_by: str = "id",
        descending: bool = False,
    ) -> list[GraphNode]:
        """Nodes of ``flt.label`` matching the filter, ordered and paged."""
        ...

    def count(self, flt: Filter) -> int:
        """How many nodes match the filter."""
        ...

    def search_text(self, query: TextQuery) -> list[Hit]:
        """Lexical full-text search over Memory content, best first (higher score better)."""
        ...

    def search_vector(self, query: VectorQuery) -> list[Hit]:
        """Cosine nearest neighbours over Memory embeddings, best first (score = cosine)."""
        ...

    def expand(
        self,
        seeds: Sequence[NodeRef],
        edge_types: Sequence[EdgeType],
        *,
        direction: Direction = "both",
        depth: int = 1,
        limit: int = 1000,
    ) -> Subgraph:
        """Nodes reachable from ``seeds`` within ``depth`` hops over ``edge_types``
        (seeds included) and the traversed edges."""
        ...

    def touch(self, ids: Sequence[str], at: datetime) -> None:
        """Record an access of these memories: access_count += 1, last_accessed = at."""
        ...

    def scan(
        self, *, batch_size: int = 1000
    ) -> Iterator[tuple[list[GraphNode], list[Edge]]]:
        """Every node, then every edge, in batches (export and migration)."""
        ...

    def stats(self) -> BackendStats:
        """Node counts per label, edge counts per type, location and size."""
        ...

    def close(self) -> None:
        """Release what the backend opened (idempotent)."""
        ...


#: (source label, edge type) pairs that backends derive from node properties
STRUCTURAL: frozenset[tuple[NodeLabel, EdgeType]] = frozenset({
    (NodeLabel.MEMORY, EdgeType.AUTHORED_BY),
    (NodeLabel.MEMORY, EdgeType.IN_RUN),
    (NodeLabel.MEMORY, EdgeType.TAGGED),
    (NodeLabel.RUN, EdgeType.RUN_BY),
    (NodeLabel.ORG_FACT, EdgeType.TAGGED),
    (NodeLabel.ORG_FACT, EdgeType.AUTHORED_BY),
    (NodeLabel.LOG_ENTRY, EdgeType.IN_RUN),
})


def structural_targets(
    label: NodeLabel, props: Mapping[str, Any]
) -> list[tuple[EdgeType, NodeLabel, str, dict[str, Any]]]:
    """The structural edges a node implies: ``(edge type, target label, target id,
    properties for creating the target when it is missing)``. Shared by every backend so
    that they maintain exactly the same edges."""
    out: list[tuple[EdgeType, NodeLabel, str, dict[str, Any]]] = []
    if label is NodeLabel.MEMORY:
        out.append((EdgeType.AUTHORED_BY, NodeLabel.AGENT, props["agent_id"], {}))
        run_id = props.get("run_id")
        if run_id:
            out.append((EdgeType.IN_RUN, NodeLabel.RUN, run_id, {
                "agent_id": props["agent_id"], "namespace": props.get("namespace", "default")}))
    elif label is NodeLabel.RUN:
        out.append((EdgeType.RUN_BY, NodeLabel.AGENT, props["agent_id"], {}))
    elif label is NodeLabel.LOG_ENTRY:
        if props.get("run_id"):
            out.append((EdgeType.IN_RUN, NodeLabel.RUN, props["run_id"],
                        {"agent_id": props["agent_id"]}))
    elif label is NodeLabel.ORG_FACT:
        out.append((EdgeType.AUTHORED_BY, NodeLabel.AGENT, props["author"], {}))
    if label in (NodeLabel.MEMORY, NodeLabel.ORG_FACT):
        out.extend((EdgeType.TAGGED, NodeLabel.TAG, t, {}) for t in props.get("tags", ()))
    return out
