"""Reading the knowledge layer: which entities a scope knows, and what is known about one.

Both functions read through the backend seam only and take the caller's *memory* filter
(the one recall uses, scope included): an entity is shown only when a memory the caller
may read mentions it, so scoping never depends on the entity nodes alone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from graphmem.backends.base import GraphBackend
from graphmem.errors import InvalidInput, NotFound
from graphmem.models import (
    EdgeType,
    Entity,
    EntityType,
    Filter,
    Memory,
    NodeLabel,
    validated,
)

from .channel import audiences_of
from .extract import normalise
from .indexer import KnowledgeIndexer

__all__ = ["About", "Knowledge", "RelationView", "about", "entities"]


class RelationView(BaseModel):
    """One RELATES edge seen from an entity: ``subject -[predicate]-> object``."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    subject: str
    predicate: str
    object: str
    memory_id: str | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class About(BaseModel):
    """What the store knows about one entity: the entity, the memories that mention it
    (oldest first) and its relations."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    entity: Entity
    memories: tuple[Memory, ...] = ()
    relations: tuple[RelationView, ...] = ()


def _entity_filter(flt: Filter, **equals: Any) -> Filter:
    audiences = audiences_of(flt)
    data: dict[str, Any] = {"label": NodeLabel.ENTITY, "equals": equals}
    if audiences is not None:
        data["any_of"] = {"audience": audiences}
    return validated(Filter, data)


def _readable(backend: GraphBackend, flt: Filter, ids: list[str]) -> list[Memory]:
    if not ids:
        return []
    allowed = set(ids) if flt.ids is None else set(ids) & set(flt.ids)
    data = flt.model_dump()
    data["ids"] = tuple(allowed)
    found = backend.match(Memory, validated(Filter, data), limit=len(allowed))
    return [m for m in found if isinstance(m, Memory)]


def entities(
    backend: GraphBackend,
    flt: Filter,
    *,
    type: EntityType | str | None = None,
    limit: int = 100,
) -> list[Entity]:
    """The entities mentioned by memories ``flt`` admits, most mentioned first."""
    if not 1 <= limit <= 10_000:
        raise InvalidInput("limit must be in 1..10000")
    try:
        equals = {"type": EntityType(type).value} if type is not None else {}
    except ValueError:
        kinds = ", ".join(t.value for t in EntityType)
        raise InvalidInput(f"unknown entity type {type!r}; one of {kinds}") from None
    # over-fetch: some entities may be mentioned only by memories the filter refuses
    found = [
        e
        for e in backend.match(
            Entity,
            _entity_filter(flt, **equals),
            limit=limit * 4,
            order_by="mention_count",
            descending=True,
        )
        if isinstance(e, Entity)
    ]
    if not found:
        return []
    sub = backend.expand(
        [e.ref for e in found], [EdgeType.MENTIONS], direction="in", depth=1, limit=1 << 30
    )
    mentioned_by: dict[str, set[str]] = {}
    for edge in sub.edges:
        mentioned_by.setdefault(edge.dst.id, set()).add(edge.src.id)
    readable = {
        m.id for m in _readable(backend, flt, sorted(set().union(*mentioned_by.values(), set())))
    }
    return [e for e in found if mentioned_by.get(e.id, set()) & readable][:limit]


def about(backend: GraphBackend, name: str, flt: Filter, *, limit: int = 200) -> About:
    """The entity called ``name`` (normalised name or alias) in the filter's scope, the
    memories mentioning it that ``flt`` admits (oldest first, at most ``limit``) and the
    relations recorded by those memories. NotFound when no readable memory mentions it."""
    norm = normalise(name)
    if not norm:
        raise InvalidInput("an entity name is required")
    candidates = [
        e
        for e in backend.match(Entity, _entity_filter(flt, norm=norm), limit=100)
        if isinstance(e, Entity)
    ]
    if not candidates:
        candidates = [
            e
            for e in backend.match(Entity, _entity_filter(flt), limit=100_000)
            if isinstance(e, Entity) and norm in {normalise(a) for a in e.aliases}
        ]
    for entity in sorted(candidates, key=lambda e: -e.mention_count):
        sub = backend.expand(
            [entity.ref],
            [EdgeType.MENTIONS, EdgeType.RELATES],
            direction="both",
            depth=1,
            limit=100_000,
        )
        mem_ids = [e.src.id for e in sub.edges if e.type is EdgeType.MENTIONS]
        memories = sorted(_readable(backend, flt, mem_ids), key=lambda m: m.created_at)
        if not memories:
            continue
        seen = {m.id for m in memories}
        names = {n.id: n.name for n in sub.nodes if isinstance(n, Entity)}
        relations = [
            RelationView(
                subject=names.get(e.src.id, e.src.id),
                predicate=str(e.props.get("predicate")),
                object=names.get(e.dst.id, e.dst.id),
                memory_id=e.props.get("memory_id"),
                valid_from=e.props.get("valid_from"),
                valid_to=e.props.get("valid_to"),
            )
            for e in sub.edges
            if e.type is EdgeType.RELATES and e.props.get("memory_id") in seen
        ]
        relations.sort(key=lambda r: (r.valid_from is None, r.valid_from or datetime.min))
        return About(entity=entity, memories=tuple(memories[:limit]), relations=tuple(relations))
    raise NotFound(f"no entity {name!r} in this scope")


class Knowledge:
    """The knowledge layer of a store (``mem.knowledge``): :meth:`entities` and
    :meth:`about` read it with the filters of ``mem.recall``; :attr:`indexer` writes it
    after each commit (None when the store was opened with ``knowledge=False``)."""

    def __init__(
        self,
        backend: GraphBackend,
        memory_filter: Callable[..., Filter],
        indexer: KnowledgeIndexer | None = None,
    ) -> None:
        self._backend = backend
        self._filter = memory_filter
        self.indexer = indexer

    def entities(
        self, *, type: EntityType | str | None = None, limit: int = 100, **filters: Any
    ) -> list[Entity]:
        """The entities mentioned by the memories the filters (those of ``mem.recall``,
        ``scope`` included) admit, most mentioned first; ``type`` narrows to person,
        place, organisation, event, object or other."""
        return entities(self._backend, self._filter(**filters), type=type, limit=limit)

    def about(self, name: str, *, limit: int = 200, **filters: Any) -> About:
        """What the store says about an entity (by name or alias): the memories that
        mention it, oldest first, and the relations they record. NotFound when no memory
        the filters admit mentions it."""
        return about(self._backend, name, self._filter(**filters), limit=limit)
