"""Multi-agent scoping: private memories, shared namespaces, org-wide memories.

Every memory has a ``visibility``:

- ``private`` (the default): readable only by its author (``agent_id``);
- ``shared``: readable by the members of its namespace (a :class:`~graphmem.models.Namespace`
  node lists them); only a member may write a shared memory into a namespace;
- ``org``: readable by every agent.

The model derives one scalar from these, ``Memory.audience`` (``agent:<id>``, ``ns:<name>``
or ``org``), so that a scope is a single ``any_of`` condition of a
:class:`~graphmem.models.Filter`. A scoped recall ANDs that condition into the filter that
every candidate source (lexical, vector, graph expansion) applies *before* its top-k cut, so
another agent's private memory can never reach the ranking, let alone the result.

>>> from graphmem import GraphMemory
>>> from graphmem.scoping import Scope
>>> with GraphMemory.open("memory://", embedder=None) as mem:
...     _ = mem.remember("alice likes tea", agent_id="a")
...     _ = mem.remember("bob likes tea", agent_id="b")
...     [r.memory.content for r in mem.recall("tea", scope=Scope(agent_id="a"))]
['alice likes tea']
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from graphmem.backends.base import Expect, GraphBackend
from graphmem.errors import AccessDenied, Conflict, InvalidInput, NotFound
from graphmem.models import (
    Filter,
    Memory,
    Namespace,
    NodeLabel,
    Visibility,
    audience_key,
    utcnow,
    validated,
)
from graphmem.writes import Writes

__all__ = ["ALL_SHARED", "Namespaces", "Scope", "scope_filter"]

log = logging.getLogger("graphmem.scoping")

ALL_SHARED: Literal["all"] = "all"
_AUDIENCE = "audience"


class Scope(BaseModel):
    """What one agent may read in a recall. The defaults are everything the agent is
    entitled to and nothing else: its own memories, the shared namespaces it is a member
    of, and org-wide memories.

    ``shared``: ``"all"`` (every namespace the agent is a member of), or an explicit list of
    namespace names — naming one the agent is not a member of is an AccessDenied, never a
    silent widening. ``own=False`` / ``shared=()`` / ``org=False`` narrow the scope.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str
    own: bool = True
    shared: tuple[str, ...] | Literal["all"] = ALL_SHARED
    org: bool = True

    @field_validator("agent_id")
    @classmethod
    def _valid_agent(cls, v: str) -> str:
        if not isinstance(v, str) or not v.strip() or v.strip() != v or len(v) > 256:
            raise ValueError("agent_id must be a non-empty id without surrounding whitespace")
        return v

    @field_validator("shared", mode="before")
    @classmethod
    def _valid_shared(cls, v: Any) -> Any:
        if v == ALL_SHARED:
            return v
        if isinstance(v, str):
            return (v,)
        return tuple(v or ())


def _scope(value: Scope | str) -> Scope:
    if isinstance(value, Scope):
        return value
    if isinstance(value, str):
        sc: Scope = validated(Scope, {"agent_id": value})
        return sc
    raise InvalidInput(f"scope must be a Scope or an agent id, got {type(value).__name__}")


class Namespaces:
    """Shared namespaces and their members, stored as Namespace nodes through the backend.

    Membership changes are made by the namespace's owner (``by``); ``by=None`` is the
    application itself (a trusted, unscoped call, like every other call without an agent).
    """

    def __init__(
        self, backend: GraphBackend, writes: Writes, *, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._backend = backend
        self._writes = writes
        self._clock = clock

    # -- membership -------------------------------------------------------------------

    def create(self, name: str, *, owner: str, members: Iterable[str] = ()) -> Namespace:
        """Create a shared namespace owned (and joined) by ``owner``; Conflict if it exists."""
        ns: Namespace = validated(
            Namespace,
            {"id": name, "owner": owner, "members": [owner, *members], "created_at": self._clock()},
        )
        try:
            self._writes.put([ns], expect=[Expect(ns.ref, exists=False)])
        except Conflict as e:
            raise Conflict(f"namespace {name!r} already exists") from e
        log.info("created shared namespace with %d members", len(ns.members))
        return ns

    def get(self, name: str) -> Namespace:
        """The shared namespace ``name``; NotFound if it was never created."""
        found = self._backend.get(NodeLabel.NAMESPACE, [name])
        if not found:
            raise NotFound(f"no shared namespace {name!r}")
        return found[0]  # type: ignore[return-value]

    def list(self, *, member: str | None = None) -> list[Namespace]:
        """Every shared namespace (or those ``member`` belongs to), by name."""
        spaces: list[Namespace] = self._backend.match(  # type: ignore[assignment]
            Filter(label=NodeLabel.NAMESPACE)
        )
        if member is None:
            return spaces
        return [ns for ns in spaces if member in ns.members]

    def add_members(self, name: str, agents: Sequence[str], *, by: str | None = None) -> Namespace:
        """Add agents to a namespace (only its owner may, when ``by`` is given)."""
        return self._change(name, by, add=agents)

    def remove_members(
        self, name: str, agents: Sequence[str], *, by: str | None = None
    ) -> Namespace:
        """Remove agents from a namespace; they lose read access to its shared memories at
        once. The owner cannot be removed."""
        return self._change(name, by, remove=agents)

    def _change(
        self,
        name: str,
        by: str | None,
        *,
        add: Sequence[str] = (),
        remove: Sequence[str] = (),
    ) -> Namespace:
        if isinstance(add, str) or isinstance(remove, str):
            raise InvalidInput("agents must be a list of agent ids")
        for _attempt in range(16):
            ns = self.get(name)
            if by is not None and by != ns.owner:
                raise AccessDenied(f"only the owner of namespace {name!r} changes its members")
            if ns.owner in remove:
                raise InvalidInput(f"the owner of namespace {name!r} cannot be removed")
            members = (set(ns.members) | set(add)) - set(remove)
            new = ns.evolve(members=sorted(members))
            try:  # a concurrent membership change is re-applied, never overwritten
                self._writes.put([new], expect=[Expect(ns.ref, props={"members": ns.members})])
                return new
            except Conflict:
                continue
        raise Conflict(f"namespace {name!r} keeps changing; try again")

    def is_member(self, agent_id: str, name: str) -> bool:
        found = self._backend.get(NodeLabel.NAMESPACE, [name])
        return bool(found) and agent_id in found[0].members  # type: ignore[attr-defined]

    # -- reading and writing under a scope --------------------------------------------

    def audiences(self, scope: Scope | str) -> tuple[str, ...]:
        """The audience keys a scope may read (see :func:`graphmem.models.audience_key`)."""
        sc = _scope(scope)
        keys: list[str] = []
        if sc.own:
            keys.append(audience_key(Visibility.PRIVATE, sc.agent_id, ""))
        if sc.shared == ALL_SHARED:
            names = [ns.id for ns in self.list(member=sc.agent_id)]
        else:
            names = list(dict.fromkeys(sc.shared))
            spaces = {ns.id: ns for ns in self._backend.get(NodeLabel.NAMESPACE, names)}
            for n in names:
                ns = spaces.get(n)
                if ns is None or sc.agent_id not in ns.members:  # type: ignore[attr-defined]
                    raise AccessDenied(f"agent {sc.agent_id!r} is not a member of namespace {n!r}")
        keys.extend(audience_key(Visibility.SHARED, "", n) for n in names)
        if sc.org:
            keys.append(audience_key(Visibility.ORG, "", ""))
        return tuple(keys)

    def filter(self, scope: Scope | str, base: Filter | None = None) -> Filter:
        """``base`` (a Memory filter) narrowed to what ``scope`` may read."""
        return scope_filter(self.audiences(scope), base)

    def memory_filter(
        self,
        *,
        scope: Scope | str | None = None,
        status: str | Sequence[str] | None = "active",
        user_id: str | None = None,
        **fields: Any,
    ) -> Filter:
        """The one Memory filter of every read path (recall, list, count, events,
        entities): the fields of :meth:`Filter.for_memories`, ``user_id`` as
        ``metadata.user_id``, narrowed to what ``scope`` may read when given."""
        if user_id is not None:
            fields["metadata"] = {**(fields.get("metadata") or {}), "user_id": user_id}
        flt = Filter.for_memories(status=status, **fields)
        return self.filter(scope, flt) if scope is not None else flt

    def can_read(self, scope: Scope | str, memory: Memory) -> bool:
        """Whether the scope may read this memory."""
        return memory.audience in self.audiences(scope)

    def check_writes(self, memories: Sequence[Memory]) -> None:
        """AccessDenied unless the author of every shared memory is a member of its
        namespace. Called before any write, so a denied batch writes nothing."""
        shared = [m for m in memories if m.visibility is Visibility.SHARED]
        if not shared:
            return
        names = list(dict.fromkeys(m.namespace for m in shared))
        spaces = {ns.id: ns for ns in self._backend.get(NodeLabel.NAMESPACE, names)}
        for m in shared:
            ns = spaces.get(m.namespace)
            if ns is None:
                raise AccessDenied(
                    f"namespace {m.namespace!r} is not shared; create it before sharing into it"
                )
            if m.agent_id not in ns.members:  # type: ignore[attr-defined]
                raise AccessDenied(
                    f"agent {m.agent_id!r} is not a member of namespace {m.namespace!r}"
                )


def scope_filter(audiences: Sequence[str], base: Filter | None = None) -> Filter:
    """AND "audience is one of ``audiences``" into a Memory filter.

    An existing audience condition in ``base`` is intersected, never widened; an empty
    ``audiences`` gives a filter that matches nothing.
    """
    base = base or Filter()
    if base.label is not NodeLabel.MEMORY:
        raise InvalidInput("a scope filters Memory nodes")
    allowed = list(dict.fromkeys(audiences))
    equals = dict(base.equals)
    any_of = dict(base.any_of)
    if _AUDIENCE in equals:
        pinned = equals.pop(_AUDIENCE)
        allowed = [a for a in allowed if a == pinned]
    if _AUDIENCE in any_of:
        prior = set(any_of[_AUDIENCE])
        allowed = [a for a in allowed if a in prior]
    any_of[_AUDIENCE] = tuple(allowed)
    flt: Filter = validated(
        Filter,
        {
            "label": base.label,
            "ids": base.ids,
            "equals": equals,
            "any_of": any_of,
            "ranges": base.ranges,
            "tags_all": base.tags_all,
        },
    )
    return flt
