"""Entity resolution: which known entity a mention names.

Entities live per *audience* (the scope key of the memories that mention them, see
:func:`graphmem.models.audience_key`), so resolution never links one agent's private
entities to another's. Inside an audience a mention resolves, in order, to:

1. the entity whose normalised name or one of whose aliases equals the mention's;
2. for people, a unique known person of whom the mention is a short form — a prefix of the
   first name (``Mel`` -> ``Melanie``, not ``Jo`` when both ``Joanna`` and ``Jon`` are
   known) or the first name of a full name (``Caroline`` <-> ``Caroline Smith``);
3. else a new entity.

Ids are a hash of (audience, normalised name), so two writers that meet the same new name
create the same node rather than two.
"""

from __future__ import annotations

import hashlib
from collections import ChainMap
from collections.abc import Iterable, Iterator, Mapping

from graphmem.models import Entity, EntityType

from .extract import normalise

__all__ = ["Gazetteer", "entity_id"]

#: a short form must have at least this many characters ("Al" is too ambiguous)
MIN_SHORT_FORM = 3
_PERSONISH = (EntityType.PERSON, EntityType.OTHER)


def entity_id(audience: str, norm: str) -> str:
    """The id of the entity named ``norm`` in ``audience`` (deterministic)."""
    return hashlib.sha256(f"{audience}\x1f{norm}".encode()).hexdigest()[:32]


class Gazetteer:
    """The known entities of one audience, by normalised name and alias.

    ``overlay()`` gives a gazetteer that reads through to this one and keeps its own
    additions apart (a batch being indexed); ``absorb`` folds those in once written."""

    def __init__(self, audience: str, parent: Gazetteer | None = None) -> None:
        self.audience = audience
        self.parent = parent
        self._entities: dict[str, Entity] = {}  # norm -> entity
        self._alias: dict[str, str] = {}  # alias norm -> norm
        self._types: dict[str, EntityType] = {}  # norm and alias norm -> type
        self._first: dict[str, set[str]] = {}  # first name -> norms of people

    @classmethod
    def of(cls, audience: str, entities: Iterable[Entity]) -> Gazetteer:
        g = cls(audience)
        for e in entities:
            g.put(e)
        return g

    def overlay(self) -> Gazetteer:
        return Gazetteer(self.audience, self)

    def absorb(self, other: Gazetteer) -> None:
        for e in other._entities.values():
            self.put(e)

    def put(self, entity: Entity) -> None:
        self._entities[entity.norm] = entity
        self._types[entity.norm] = entity.type
        for alias in entity.aliases:
            a = normalise(alias)
            if a and a != entity.norm and self._alias_of(a) is None:
                self._alias[a] = entity.norm
                self._types.setdefault(a, entity.type)
        if entity.type is EntityType.PERSON:
            self._first.setdefault(entity.norm.split(" ", 1)[0], set()).add(entity.norm)

    def get(self, norm: str) -> Entity | None:
        e = self._entities.get(norm)
        if e is None and self.parent is not None:
            return self.parent.get(norm)
        return e

    def _alias_of(self, norm: str) -> str | None:
        a = self._alias.get(norm)
        if a is None and self.parent is not None:
            return self.parent._alias_of(norm)
        return a

    def _people_named(self, first: str) -> set[str]:
        """Norms of the known people whose first name is ``first``."""
        own = self._first.get(first, set())
        return own | self.parent._people_named(first) if self.parent is not None else own

    def _people_starting(self, prefix: str) -> set[str]:
        """Norms of the known people whose first name starts with ``prefix``."""
        out = {n for name, norms in self._first.items() if name.startswith(prefix) for n in norms}
        return out | self.parent._people_starting(prefix) if self.parent is not None else out

    def __len__(self) -> int:
        return len(self._entities) + (len(self.parent) if self.parent is not None else 0)

    def entities(self) -> list[Entity]:
        return list(self._all().values())

    def _all(self) -> dict[str, Entity]:
        out = dict(self.parent._all()) if self.parent is not None else {}
        out.update(self._entities)
        return out

    def types(self) -> Mapping[str, EntityType]:
        """Normalised names and aliases -> type, for :func:`~.extract.extract`; a name
        that resolves to a known entity (a short form) is in it too."""
        return _Known(self)

    def _all_types(self) -> Mapping[str, EntityType]:
        if self.parent is None:
            return self._types
        return ChainMap(self._types, self.parent._all_types())  # type: ignore[arg-type]

    def resolve(self, norm: str, etype: EntityType) -> str | None:
        """The normalised name of the known entity ``norm`` names, or None."""
        if self.get(norm) is not None:
            return norm
        alias = self._alias_of(norm)
        if alias is not None:
            return alias
        if etype not in _PERSONISH:
            return None
        first, _, rest = norm.partition(" ")
        if rest:
            # a full name whose first name is a unique known one-word person
            return first if self._people_named(first) == {first} else None
        if len(norm) < MIN_SHORT_FORM:
            return None
        hits = self._people_starting(norm)
        return next(iter(hits)) if len(hits) == 1 else None


class _Known(Mapping[str, EntityType]):
    """The names a gazetteer recognises, short forms included (a read-only view)."""

    def __init__(self, g: Gazetteer) -> None:
        self._g = g
        self._types = g._all_types()

    def __getitem__(self, norm: str) -> EntityType:
        t = self._types.get(norm)
        if t is not None:
            return t
        canon = self._g.resolve(norm, EntityType.OTHER)
        e = self._g.get(canon) if canon is not None else None
        if e is None:
            raise KeyError(norm)
        return e.type

    def __iter__(self) -> Iterator[str]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)
