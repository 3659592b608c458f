"""From memories to the knowledge graph: entities, MENTIONS and RELATES.

:class:`KnowledgeIndexer` turns memories into the nodes and edges to write — it never
writes itself (the store's write path does, see :meth:`KnowledgeIndexer.hook`). It keeps
the known entities of each audience in memory (loaded from the store on first use) so that
extraction can resolve names against them without a round trip per memory.

Counters (``mention_count``, ``first_seen``/``last_seen``) are read from the store for
every entity a memory names and written with that reading as a precondition, so two
writers (threads or processes) never count from the same state: the loser makes its batch
again from the store.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from graphmem.backends.base import Expect, GraphBackend
from graphmem.errors import ConfigError, Conflict
from graphmem.models import (
    Edge,
    EdgeType,
    Entity,
    EntityType,
    Filter,
    Memory,
    NodeLabel,
    Status,
)
from graphmem.writes import Committed, Writes

from .extract import Extraction, extract
from .resolve import Gazetteer, entity_id

__all__ = ["KnowledgeBatch", "KnowledgeIndexer"]

log = logging.getLogger("graphmem.knowledge")

Extractor = Callable[..., Extraction]

#: how often a batch is made again when another writer changed its entities meanwhile
WRITE_ATTEMPTS = 5


@dataclass
class KnowledgeBatch:
    """What indexing some memories adds to the graph."""

    nodes: list[Entity] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    #: what the store held when the batch was made (the write's preconditions)
    expect: list[Expect] = field(default_factory=list)
    gazetteers: dict[str, Gazetteer] = field(default_factory=dict, repr=False)

    def __bool__(self) -> bool:
        return bool(self.nodes or self.edges)


class KnowledgeIndexer:
    """Extracts and resolves the entities of memories (see the module docstring).

    >>> from graphmem.backends.embedded import NetworkXBackend
    >>> ix = KnowledgeIndexer(NetworkXBackend(":memory:"))
    >>> batch = ix.index([Memory(content="Melanie: I went camping in Oregon.")])
    >>> sorted(e.name for e in batch.nodes)
    ['Melanie', 'Oregon', 'camping']
    """

    def __init__(
        self, backend: GraphBackend, *, extractor: Extractor = extract, things: bool = False
    ) -> None:
        self.backend = backend
        self.extractor = extractor
        #: also index common nouns after determiners (see :func:`~.extract.extract`)
        self.things = things
        self._gaz: dict[str, Gazetteer] = {}
        self._lock = threading.Lock()
        self._hook_lock = threading.Lock()
        self._writes: Writes | None = None

    def gazetteer(self, audience: str) -> Gazetteer:
        """The known entities of ``audience`` (loaded from the store once)."""
        with self._lock:
            g = self._gaz.get(audience)
        if g is None:
            found = self.backend.match(
                Entity, Filter(label=NodeLabel.ENTITY, equals={"audience": audience})
            )
            g = Gazetteer.of(audience, (e for e in found if isinstance(e, Entity)))
            with self._lock:
                g = self._gaz.setdefault(audience, g)
        return g

    def forget_cache(self) -> None:
        """Drop the in-memory entities (they are reloaded from the store when needed)."""
        with self._lock:
            self._gaz.clear()

    def index(self, memories: Sequence[Memory]) -> KnowledgeBatch:
        """The entities, MENTIONS and RELATES edges of ``memories``. Pure with respect to
        the store: nothing is written and the known entities change only by
        :meth:`confirm` once the batch is durable."""
        batch = KnowledgeBatch()
        touched: dict[str, Entity] = {}  # entity id -> latest version in this batch
        read: dict[str, int | None] = {}  # entity id -> stored mention count (None: absent)
        for m in memories:
            if m.status is not Status.ACTIVE:
                continue
            base = self.gazetteer(m.audience)
            g = batch.gazetteers.get(m.audience)
            if g is None:
                g = batch.gazetteers[m.audience] = base.overlay()
            ex = self.extractor(m.content, g.types(), things=self.things)
            # the stored versions of the entities this memory names: another process may
            # have written them since this one loaded the audience
            want: list[str] = []
            for mention in ex.mentions:
                key = g.resolve(mention.norm, mention.type) or mention.norm
                eid = entity_id(m.audience, key)
                if eid not in read and eid not in want:
                    want.append(eid)
            if want:
                stored = {e.id: e for e in self.backend.get(Entity, want) if isinstance(e, Entity)}
                for eid in want:
                    e = stored.get(eid)
                    read[eid] = e.mention_count if e is not None else None
                    if e is not None:
                        g.put(e)
            seen_at = m.valid_from or m.created_at
            ids: dict[str, str] = {}  # mention norm -> entity id
            for mention in ex.mentions:
                canon = g.resolve(mention.norm, mention.type)
                old = g.get(canon) if canon is not None else None
                if old is None:
                    try:
                        ent = Entity(
                            id=entity_id(m.audience, mention.norm),
                            name=mention.name,
                            norm=mention.norm,
                            type=mention.type,
                            first_seen=seen_at,
                            last_seen=seen_at,
                            mention_count=1,
                            agent_id=m.agent_id,
                            namespace=m.namespace,
                            visibility=m.visibility,
                        )
                    except ValueError:  # a name the model refuses: skip it, not the memory
                        log.debug("skipped an entity name of memory %s", m.id)
                        continue
                else:
                    aliases = old.aliases
                    if mention.norm != old.norm and mention.name not in aliases:
                        aliases = (*aliases, mention.name)
                    etype = old.type
                    if etype is EntityType.OTHER and mention.type is not EntityType.OTHER:
                        etype = mention.type
                    ent = old.model_copy(
                        update={
                            "aliases": aliases,
                            "type": etype,
                            "first_seen": min(old.first_seen, seen_at),
                            "last_seen": max(old.last_seen, seen_at),
                            "mention_count": old.mention_count + 1,
                        }
                    )
                g.put(ent)
                touched[ent.id] = ent
                if ent.id not in ids.values():
                    batch.edges.append(
                        Edge(
                            type=EdgeType.MENTIONS,
                            src=m.ref,
                            dst=ent.ref,
                            props={"role": mention.role},
                        )
                    )
                ids[mention.norm] = ent.id
            for rel in ex.relations:
                src, dst = ids.get(rel.subject), ids.get(rel.object)
                if src is None or dst is None or src == dst:
                    continue
                batch.edges.append(
                    Edge(
                        type=EdgeType.RELATES,
                        src=(NodeLabel.ENTITY, src),
                        dst=(NodeLabel.ENTITY, dst),
                        props={
                            "predicate": rel.predicate,
                            "memory_id": m.id,
                            "valid_from": seen_at,
                            "valid_to": m.valid_to,
                        },
                    )
                )
        batch.nodes = list(touched.values())
        batch.expect = [
            Expect(e.ref, exists=False)
            if read.get(e.id) is None
            else Expect(e.ref, props={"mention_count": read[e.id]})
            for e in batch.nodes
            if e.id in read
        ]
        return batch

    def _write(self, memories: Sequence[Memory], writes: Writes) -> int:
        """Index and write, again from the store's state when another writer got there
        first (the preconditions failed)."""
        for attempt in range(WRITE_ATTEMPTS):
            batch = self.index(memories)
            if not batch:
                return 0
            try:
                writes.put(batch.nodes, batch.edges, expect=batch.expect)
            except Conflict:
                self.forget_cache()
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
                continue
            self.confirm(batch)
            return len(batch.nodes)
        return 0  # pragma: no cover - the loop returns or raises

    def attach(self, writes: Writes) -> None:
        """Index every memory the write path creates, after its commit, writing the
        entities through ``writes`` (one more transaction); prune entities left without
        a mention when memories are deleted."""
        self._writes = writes
        writes.add_hook(self.on_commit)

    def backfill(self, memories: Sequence[Memory], *, batch_size: int = 500) -> int:
        """Index memories written before the layer was attached (through the attached
        write path, in batches); returns how many entities were written or updated."""
        if self._writes is None:
            raise ConfigError("attach the indexer to a write path first")
        written = 0
        for i in range(0, len(memories), batch_size):
            with self._hook_lock:
                written += self._write(memories[i : i + batch_size], self._writes)
        return written

    def on_commit(self, done: Committed) -> None:
        """The write hook (see :meth:`attach`)."""
        writes = self._writes
        if writes is None:
            return
        if any(isinstance(n, Entity) for n in done.nodes):
            # entities written by someone else (an import, a backfill elsewhere): what this
            # indexer knows may be stale; an import that brings its own is not indexed again
            if done.created:
                self.forget_cache()
                return
        if done.created:
            # one writer thread at a time: a batch is resolved against the entities the
            # previous one confirmed, so two threads never count from the same state
            with self._hook_lock:
                self._write(done.created, writes)
        if done.deleted:
            self.prune()

    def prune(self) -> int:
        """After memories were deleted: delete the entities that no memory mentions any
        more — a forget leaves no names behind — and set the others' ``mention_count`` to
        what the MENTIONS edges say. Returns how many entities were deleted.

        Every stored entity is read, not only those this handle has loaded: the memories
        deleted may have been indexed by another handle or process (a store reopened and
        forgotten from a fresh handle must not keep their counts)."""
        writes = self._writes
        if writes is None:
            return 0
        known = [
            e
            for e in self.backend.match(Entity, Filter(label=NodeLabel.ENTITY))
            if isinstance(e, Entity)
        ]
        if not known:
            return 0
        sub = self.backend.expand(
            [e.ref for e in known], [EdgeType.MENTIONS], direction="in", depth=1, limit=1 << 30
        )
        counts = Counter(edge.dst.id for edge in sub.edges)
        orphans = [e.ref for e in known if not counts[e.id]]
        recounted = [
            e.model_copy(update={"mention_count": counts[e.id]})
            for e in known
            if counts[e.id] and counts[e.id] != e.mention_count
        ]
        if orphans or recounted:
            with self._hook_lock:
                writes.put(recounted, delete=orphans)
                self.forget_cache()
            log.info(
                "pruned %d entities no memory mentions, recounted %d", len(orphans), len(recounted)
            )
        return len(orphans)

    def confirm(self, batch: KnowledgeBatch) -> None:
        """Make a written batch's entities the known ones."""
        with self._lock:
            for audience, g in batch.gazetteers.items():
                base = self._gaz.get(audience)
                if base is None:
                    self._gaz[audience] = base = Gazetteer(audience)
                base.absorb(g)
