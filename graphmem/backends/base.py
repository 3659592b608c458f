"""The GraphBackend protocol: the one seam between memory logic and storage.

Methods are batched and at the level of memory operations, so that one call is one round
trip on a server backend. Only graphmem models cross the seam — no Cypher, no driver or
networkx types. Ranking and fusion live above the seam (``retrieval.py``) so that every
backend returns the same results for the same data.

Contract (tested for every backend by ``tests/contract``):

- ``write`` is the one write entry. A :class:`WriteBatch` is atomic: either every change
  is made or none is, and an acknowledged call is durable. Upserting an existing node
  replaces its properties; an edge is identified by (type, src, dst) and upserting it
  again replaces its properties.
  Edges whose endpoints do not exist (in the call or in the store) raise ``InvalidInput``.
- Structural edges are maintained by the backend from node properties, in the same
  transaction: a Memory has ``AUTHORED_BY`` -> Agent(agent_id), ``IN_RUN`` -> Run(run_id)
  when run_id is set, and ``TAGGED`` -> Tag for each tag; a Run has ``RUN_BY`` ->
  Agent(agent_id); an OrgFact has ``AUTHORED_BY`` -> Agent(author) and ``TAGGED`` -> Tag for
  each tag; a LogEntry has ``IN_RUN`` -> Run(run_id) when run_id is set. Missing Agent/Run/Tag
  endpoints are created with defaults (an existing one is never overwritten). Re-upserting
  a node replaces its structural edges (a removed tag loses its TAGGED edge). Callers pass
  only the other edges (SUPERSEDES, DERIVED_FROM, NEXT, ...).
- A batch's ``delete_nodes`` go with all their edges (detach); ``delete_edges`` are the
  listed edges. Deleting what does not exist is not an error.
- Reads are typed per node kind: ``get(Memory, ids) -> list[Memory]``; ``match(kind,
  flt)`` returns ``list[kind]`` (``flt.label`` must be ``kind.label``).
- ``match``/``count`` evaluate a :class:`~graphmem.models.Filter`; ``match`` orders by one
  field (ties broken by id) and pages with limit/offset.
- ``search_text``/``search_vector`` apply the filter *before* the top-k cut.
- ``expand`` returns the neighbourhood of seed nodes over the given edge types.

Optional capabilities are Protocols below (:class:`RecallSearch`, :class:`RecallNeighbours`,
:class:`VectorQueue`, :class:`GraphView`, :class:`StoreFiles`); business code asks for one
with ``isinstance`` once, where it keeps the backend, never with ``hasattr``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from graphmem.errors import InvalidInput
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
    Run,
    Subgraph,
    TextQuery,
    VectorQuery,
    node_model,
    validated,
)

if TYPE_CHECKING:
    from pathlib import Path

    import networkx as nx

__all__ = [
    "STRUCTURAL",
    "Direction",
    "Expect",
    "GraphBackend",
    "GraphView",
    "RecallNeighbours",
    "RecallSearch",
    "RunAppend",
    "RunHeads",
    "StoreFiles",
    "VectorQueue",
    "WriteBatch",
    "appended_to",
    "check_kind",
    "checked_append",
    "expect_failure",
    "next_link",
    "spelled_out",
    "structural_targets",
]

Direction = Literal["out", "in", "both"]

N = TypeVar("N", bound=GraphNode)


#: the properties of an Expect.absent: none (shared, never changed: Expect is frozen)
_NO_PROPS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class Expect:
    """A precondition of a write, checked by the backend inside the write's transaction.

    ``exists=False`` requires the node to be absent. Otherwise the node must exist, every
    ``props`` entry must equal the stored property (enums compare by value, ``None`` means
    "unset"), and when ``sources`` is given, the ids of the nodes with an edge of a type in
    ``incoming`` *into* the node must be exactly ``sources`` (nothing was derived from it,
    and nothing superseded it, since the writer looked).
    """

    ref: NodeRef
    exists: bool = True
    props: Mapping[str, Any] = field(default_factory=dict)
    incoming: tuple[EdgeType, ...] = ()
    sources: frozenset[str] | None = None

    @classmethod
    def absent(cls, ref: NodeRef) -> Expect:
        """``Expect(ref, exists=False)`` — what a write asks of every node it creates —
        made without the dataclass's field-by-field init (a third of the cost; a batch
        asks it of each of its 1,000 new memories)."""
        return cls.quick(ref, exists=False)

    @classmethod
    def quick(
        cls, ref: NodeRef, *, exists: bool = True, props: Mapping[str, Any] = _NO_PROPS
    ) -> Expect:
        """``Expect(ref, exists=exists, props=props)`` made as :meth:`absent` makes one
        (a batch's runs and the memories they end with: hundreds a write)."""
        ex = object.__new__(cls)
        ex.__dict__.update(ref=ref, exists=exists, props=props, incoming=(), sources=None)
        return ex

    def describe(self) -> str:
        if not self.exists:
            return f"{self.ref.key} must not exist"
        parts = [f"{self.ref.key} must exist"]
        if self.props:
            parts.append("with " + ", ".join(f"{k}={_plain(v)!r}" for k, v in self.props.items()))
        if self.sources is not None:
            parts.append(
                f"and exactly {len(self.sources)} incoming "
                + "/".join(t.value for t in self.incoming)
            )
        return " ".join(parts)


#: a run a batch appends to (see :attr:`WriteBatch.appends`)
RunAppend = tuple[str, tuple[int, str | None, str, str] | None, str | None]


@dataclass(frozen=True)
class WriteBatch:
    """Everything one write changes, applied in one transaction: ``expect`` is checked
    first (a failure raises Conflict and writes nothing), then nodes and edges are
    upserted, the ``run_heads`` of existing runs set, then ``delete_edges`` and
    ``delete_nodes`` (detach) are removed, then ``vectors`` are set on memories that exist
    (others are skipped)."""

    nodes: Sequence[GraphNode] = ()
    edges: Sequence[Edge] = ()
    delete_nodes: Sequence[NodeRef] = ()
    delete_edges: Sequence[Edge] = ()
    expect: Sequence[Expect] = ()
    #: memory id -> embedding, written without rewriting the memory's other properties
    #: (the background vectorizer); only a :class:`VectorQueue` backend takes them
    vectors: Mapping[str, Sequence[float]] = field(default_factory=dict)
    #: run id -> (event_count, last_event_id): the place a write leaves a run's chain at,
    #: set on a run that exists without rewriting its other properties (a run another
    #: writer ended stays ended); a run that does not exist is skipped, so the write
    #: expects it (``Expect(run.ref, props=...)``); a count that is not a non-negative int
    #: or a last memory that is neither an id nor None is InvalidInput (:func:`checked_heads`)
    run_heads: Mapping[str, tuple[int, str | None]] = field(default_factory=dict)
    #: ids of memories that must not exist when the write runs, each as an
    #: ``Expect(ref, exists=False)`` ahead of ``expect`` would ask (a batch of new memories
    #: says it once instead of one precondition a memory)
    new_memories: Sequence[str] = ()
    #: runs' chains: ``(from id, to id)`` pairs of memories, each the NEXT edge
    #: :func:`next_link` makes, upserted ahead of ``edges`` (one a memory a batch appends)
    links: Sequence[tuple[str, str]] = ()
    #: the runs a batch appends to, each ``(run id, state, memory id)``: the run must still
    #: have ``state`` — its (event count, last memory id, agent id, namespace); None: the
    #: run must not exist — and the memory its new links start from must exist (None: no
    #: such memory); checked after ``new_memories`` and before ``expect``, as the
    #: preconditions :func:`appended_to` names (a batch appends to hundreds of runs)
    appends: Sequence[RunAppend] = ()

    @property
    def checks(self) -> bool:
        """Whether the batch has preconditions (a batch of them alone is a check)."""
        return bool(self.expect or self.new_memories or self.appends)

    def __bool__(self) -> bool:
        return bool(
            self.nodes
            or self.edges
            or self.links
            or self.delete_nodes
            or self.delete_edges
            or self.vectors
            or self.run_heads
        )


def next_link(src: str, dst: str) -> Edge:
    """``(src)-[:NEXT]->(dst)`` between two memory ids (a run's link), built without
    validating the ids again when they are plain text (the write path's, already
    validated); anything else, a memory following itself included, gets the model's
    error (InvalidInput)."""
    if src.__class__ is str and dst.__class__ is str and src != dst:
        # the refs made as the tuples they are (NodeRef's own __new__ is a Python call)
        return Edge.trusted(
            EdgeType.NEXT, _tuple(NodeRef, (_MEMORY, src)), _tuple(NodeRef, (_MEMORY, dst)), {}
        )
    ends = {"src": (NodeLabel.MEMORY, src), "dst": (NodeLabel.MEMORY, dst)}
    edge: Edge = validated(Edge, {"type": EdgeType.NEXT, **ends})
    return edge


_MEMORY = NodeLabel.MEMORY
_tuple: Callable[[type[NodeRef], tuple[NodeLabel, str]], NodeRef] = tuple.__new__


def checked_append(append: Any) -> RunAppend:
    """One of :attr:`WriteBatch.appends` as it must be shaped (InvalidInput otherwise)."""
    if append.__class__ is tuple and len(append) == 3:
        run_id, state, prev = append
        if (
            run_id.__class__ is str
            and (prev is None or prev.__class__ is str)
            and (state is None or (state.__class__ is tuple and len(state) == 4))
        ):
            return append
    raise InvalidInput(
        "a run a batch appends to is (run id, (event count, last memory id, agent id, "
        f"namespace) or None, memory id or None), got {append!r}"
    )


def appended_to(append: RunAppend) -> list[Expect]:
    """The preconditions one of :attr:`WriteBatch.appends` stands for: the run's (as it
    must be, or absent), then its links' first memory's."""
    run_id, state, prev = checked_append(append)
    ref = NodeRef(NodeLabel.RUN, run_id)
    if state is None:
        out = [Expect.absent(ref)]
    else:
        count, last, agent_id, namespace = state
        props = {
            "event_count": count,
            "last_event_id": last,
            "agent_id": agent_id,
            "namespace": namespace,
        }
        out = [Expect.quick(ref, props=props)]
    if prev is not None:
        out.append(Expect.quick(_tuple(NodeRef, (_MEMORY, prev))))
    return out


def spelled_out(batch: WriteBatch) -> WriteBatch:
    """``batch`` with its :attr:`~WriteBatch.new_memories`, :attr:`~WriteBatch.appends`
    and :attr:`~WriteBatch.links` written out as the preconditions and edges they stand
    for, in the order they stand in (for a backend that checks and writes those one by
    one)."""
    if not batch.new_memories and not batch.links and not batch.appends:
        return batch
    absent = [Expect.absent(_tuple(NodeRef, (_MEMORY, i))) for i in batch.new_memories]
    return replace(
        batch,
        expect=[*absent, *(ex for a in batch.appends for ex in appended_to(a)), *batch.expect],
        edges=[*(next_link(a, b) for a, b in batch.links), *batch.edges],
        new_memories=(),
        links=(),
        appends=(),
    )


def checked_heads(
    heads: Mapping[str, tuple[int, str | None]],
) -> list[tuple[str, int, str | None]]:
    """A batch's ``run_heads`` as (run id, event count, last memory id), by run id (the
    order every backend writes them in); InvalidInput for a count that is not a
    non-negative int or a last memory that is neither an id nor None."""
    items = sorted(heads.items())
    for run_id, (count, last) in items:
        if (
            run_id.__class__ is not str
            or count.__class__ is not int
            or count < 0
            or (last is not None and last.__class__ is not str)
        ):
            break
    else:  # every one plain (the write path's): as they are
        return [(run_id, count, last) for run_id, (count, last) in items]
    out = []
    for run_id, (count, last) in items:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidInput(f"the event count of run {run_id!r} must be a non-negative int")
        if last is not None and not isinstance(last, str):
            raise InvalidInput(f"the last event of run {run_id!r} must be a memory id or None")
        out.append((str(run_id), count, last))
    return out


def _plain(v: Any) -> Any:
    """A value in the form every backend stores: enums by value, sequences as tuples."""
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, list | tuple):
        return tuple(_plain(x) for x in v)
    return v


def expect_failure(
    expect: Expect,
    props: Mapping[str, Any] | None,
    incoming_sources: Iterator[str] | Sequence[str] = (),
) -> str | None:
    """Why ``expect`` does not hold for a node with stored ``props`` (None: absent) and
    these incoming source ids, or None when it holds. Shared by backends that check
    preconditions in Python."""
    if not expect.exists:
        return None if props is None else expect.describe() + " (it does)"
    if props is None:
        return expect.describe() + " (it does not exist)"
    for k, want in expect.props.items():
        have = props.get(k)
        # equal as held is equal as stored (an enum equals its value); the stored forms
        # are compared only when the values differ (a list against a tuple)
        if have != want and _plain(have) != _plain(want):
            return expect.describe() + f" (stored {k}={_plain(have)!r})"
    if expect.sources is not None and frozenset(incoming_sources) != expect.sources:
        return expect.describe() + " (it changed since it was read)"
    return None


@runtime_checkable
class GraphBackend(Protocol):
    """Storage for graphmem's property graph. See the module docstring for the contract."""

    name: str

    def ensure_schema(self, *, embedding_dim: int | None = None) -> None:
        """Create constraints/indexes (idempotent). ``embedding_dim`` fixes the vector
        dimension the first time it is given; a different one later is a DimensionMismatch."""
        ...

    def write(self, batch: WriteBatch) -> None:
        """Apply a :class:`WriteBatch` atomically and durably (one transaction): check its
        preconditions (Conflict, nothing written, when one fails), upsert, then delete."""
        ...

    def get(self, kind: type[N], ids: Sequence[str]) -> list[N]:
        """The ``kind`` nodes with these ids that exist, in the order of ``ids``."""
        ...

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
        """``kind`` nodes matching the filter (``flt.label`` is ``kind.label``), ordered and
        paged."""
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

    def scan(self, *, batch_size: int = 1000) -> Iterator[tuple[list[GraphNode], list[Edge]]]:
        """Every node, then every edge, in batches (export and migration)."""
        ...

    def stats(self) -> BackendStats:
        """Node counts per label, edge counts per type, location and size."""
        ...

    def close(self) -> None:
        """Release what the backend opened (idempotent)."""
        ...


def check_kind(kind: type[GraphNode], flt: Filter | None = None) -> NodeLabel:
    """The label of a node kind passed to a read (``Memory``, ``Run`` ...), checked to be one
    of graphmem's node models and, with ``flt``, to be the label the filter is over."""
    label = getattr(kind, "label", None)
    if not isinstance(label, NodeLabel) or node_model(label) is not kind:
        raise InvalidInput(f"{kind!r} is not a graphmem node kind")
    if flt is not None and flt.label is not label:
        raise InvalidInput(f"a filter over {flt.label.value} cannot read {label.value} nodes")
    return label


# -- optional capabilities -----------------------------------------------------------------


@runtime_checkable
class RecallSearch(Protocol):
    """A backend that runs recall's lexical and vector searches in one round trip, with the
    same results as ``search_text`` and ``search_vector`` (the Neo4j backend). With
    ``similarities`` (a dict it fills) the hits come without their embedding and the dict
    receives each one's cosine to ``query_vector`` (default: the vector query's), computed
    where the embeddings are, and the hits' memories may be the backend's own (the same
    objects to every such call: read them, hand out copies). ``unlinked`` (a set it may
    fill): ids of hits without any edge recall's graph expansion follows, which recall
    then does not expand (a server saves the expansion's round trip when no seed has one;
    a backend may leave it empty)."""

    def search_both(
        self,
        text: TextQuery | None,
        vector: VectorQuery | None,
        *,
        query_vector: Sequence[float] | None = ...,
        similarities: dict[str, float] | None = ...,
        unlinked: set[str] | None = ...,
    ) -> tuple[list[Hit], list[Hit]]: ...


@runtime_checkable
class RecallNeighbours(Protocol):
    """A backend that runs recall's graph expansion in one call (a server: one round trip;
    the embedded store: without building a model for every node walked): ``(seed id, via,
    memory)`` for the memories one ``link_types`` edge from each seed (via = the edge type)
    and up to ``tag_limit`` per seed sharing a tag (via = ``"tag"``; the embedded store
    bounds them as the generic expansion does, over all seeds together) or a rare entity
    (via = ``"entity:<name>"``, mentioned by at most ``entity_hub_limit`` memories; 0:
    none), all passing ``flt``. ``query_vector`` and ``similarities``: as for
    :class:`RecallSearch`."""

    def neighbours(
        self,
        seeds: Sequence[str],
        flt: Filter,
        *,
        link_types: Sequence[EdgeType] = ...,
        tag_limit: int = ...,
        entity_hub_limit: int = ...,
        query_vector: Sequence[float] | None = ...,
        similarities: dict[str, float] | None = ...,
    ) -> list[tuple[str, str, Memory]]: ...


@runtime_checkable
class RunHeads(Protocol):
    """A backend that reads the runs a write appends to and whether each one's last memory
    still exists (in any status) in one call: a server answers in one round trip what
    :meth:`GraphBackend.get` and :meth:`GraphBackend.count` answer in two."""

    def run_heads(self, run_ids: Sequence[str]) -> tuple[list[Run], set[str]]:
        """The runs among ``run_ids`` that exist, and the ids of their last memories
        (``last_event_id``) that exist."""
        ...


@runtime_checkable
class GuardedWrite(Protocol):
    """A backend that checks, inside a write's own statement, that no node matches a
    filter (a server backend: reconcile's duplicate lookup and the write become one round
    trip instead of two)."""

    def write_unless(self, batch: WriteBatch, absent: Filter) -> None:
        """Apply ``batch`` as :meth:`GraphBackend.write` does, unless a node matches
        ``absent``: then Conflict, and nothing is written."""
        ...


@runtime_checkable
class VectorQueue(Protocol):
    """A backend that stores memories without an embedding and embeds them later: it takes
    :attr:`WriteBatch.vectors` and lists the memories still waiting (the background
    vectorizer's queue)."""

    def missing_vectors(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` memories ``(id, content)`` that have no embedding yet."""
        ...


@runtime_checkable
class StoreFiles(Protocol):
    """A backend kept in files on this machine (the embedded store): the files it keeps, so
    that nothing graphmem writes on a caller's behalf (an export) lands on one of them."""

    def store_files(self) -> list[Path]:
        """The store's file and every file it keeps beside it, whether there yet or not
        (none for a store in memory)."""
        ...


@runtime_checkable
class GraphView(Protocol):
    """A backend that holds the graph in process and shows it read-only (the embedded
    store's networkx ``MultiDiGraph``, for notebooks)."""

    @property
    def graph(self) -> nx.MultiDiGraph:
        """A read-only live view of the graph (node keys are ``Label:id``)."""
        ...


#: (source label, edge type) pairs that backends derive from node properties
STRUCTURAL: frozenset[tuple[NodeLabel, EdgeType]] = frozenset(
    {
        (NodeLabel.MEMORY, EdgeType.AUTHORED_BY),
        (NodeLabel.MEMORY, EdgeType.IN_RUN),
        (NodeLabel.MEMORY, EdgeType.TAGGED),
        (NodeLabel.RUN, EdgeType.RUN_BY),
        (NodeLabel.ORG_FACT, EdgeType.TAGGED),
        (NodeLabel.ORG_FACT, EdgeType.AUTHORED_BY),
        (NodeLabel.LOG_ENTRY, EdgeType.IN_RUN),
    }
)


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
            out.append(
                (
                    EdgeType.IN_RUN,
                    NodeLabel.RUN,
                    run_id,
                    {"agent_id": props["agent_id"], "namespace": props.get("namespace", "default")},
                )
            )
    elif label is NodeLabel.RUN:
        out.append((EdgeType.RUN_BY, NodeLabel.AGENT, props["agent_id"], {}))
    elif label is NodeLabel.LOG_ENTRY:
        if props.get("run_id"):
            out.append(
                (EdgeType.IN_RUN, NodeLabel.RUN, props["run_id"], {"agent_id": props["agent_id"]})
            )
    elif label is NodeLabel.ORG_FACT:
        out.append((EdgeType.AUTHORED_BY, NodeLabel.AGENT, props["author"], {}))
    if label in (NodeLabel.MEMORY, NodeLabel.ORG_FACT):
        out.extend((EdgeType.TAGGED, NodeLabel.TAG, t, {}) for t in props.get("tags", ()))
    return out
