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
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, field_validator

from graphmem.backends.base import Expect, GraphBackend
from graphmem.errors import AccessDenied, Conflict, InvalidInput, NotFound
from graphmem.models import (
    Filter,
    Memory,
    Namespace,
    NodeLabel,
    Run,
    Visibility,
    audience_key,
    utcnow,
    validated,
)

if TYPE_CHECKING:  # the write path imports this module for the scope rule
    from graphmem.writes import Writes

__all__ = [
    "ALL_SHARED",
    "MemoryScope",
    "Namespaces",
    "Scope",
    "common_scope",
    "group_by_scope",
    "in_scope",
    "may_join_run",
    "may_read",
    "scope_filter",
    "scope_of",
]

log = logging.getLogger("graphmem.scoping")

ALL_SHARED: Literal["all"] = "all"
_AUDIENCE = "audience"


class MemoryScope(NamedTuple):
    """Whose a memory is: the one value every memory-producing path derives a new node's
    scope from. Two memories are combined (merged, summarised together, one superseding the
    other) only when their scopes are equal, and what is made from them gets that scope."""

    agent_id: str
    namespace: str
    visibility: Visibility
    user_id: str | None
    audience: str

    def fields(self) -> dict[str, Any]:
        """The Memory fields that carry this scope (``user_id`` lives in metadata). A shared
        or org scope names no author, so the new memory keeps the author it was made with."""
        out: dict[str, Any] = {"namespace": self.namespace, "visibility": self.visibility}
        if self.agent_id:
            out["agent_id"] = self.agent_id
        return out

    def describe(self) -> str:
        user = f", user {self.user_id!r}" if self.user_id is not None else ""
        owner = f" of {self.agent_id!r}" if self.agent_id else ""
        return f"{self.visibility.value}{owner} in {self.namespace!r}{user}"


def scope_of(memory: Memory) -> MemoryScope:
    """The scope of one memory. A private memory's scope is its author's; a shared or org
    memory belongs to everyone who can read it, so its author is not part of its scope
    (shared memories of several members may be merged or summarised together, and what is
    made from them stays shared with the same readers)."""
    user = memory.metadata.get("user_id")
    return MemoryScope(
        memory.agent_id if memory.visibility is Visibility.PRIVATE else "",
        memory.namespace,
        memory.visibility,
        None if user is None else str(user),
        memory.audience,
    )


def common_scope(memories: Sequence[Memory]) -> MemoryScope:
    """The one scope of ``memories``; InvalidInput when they are of different scopes (a
    merge, summary or derivation never combines memories of different scopes)."""
    if not memories:
        raise InvalidInput("no memories to take a scope from")
    scopes = dict.fromkeys(scope_of(m) for m in memories)
    if len(scopes) != 1:
        raise InvalidInput(
            "memories of different scopes cannot be combined: "
            + "; ".join(sc.describe() for sc in list(scopes)[:3])
        )
    return next(iter(scopes))


def group_by_scope(memories: Iterable[Memory]) -> dict[MemoryScope, list[Memory]]:
    """``memories`` split by scope (insertion order kept), for passes that combine."""
    out: dict[MemoryScope, list[Memory]] = {}
    for m in memories:
        out.setdefault(scope_of(m), []).append(m)
    return out


def in_scope(memory: Memory, scope: MemoryScope) -> Memory:
    """``memory`` given ``scope`` (agent, namespace, visibility and ``metadata.user_id``)."""
    meta = dict(memory.metadata)
    if scope.user_id is None:
        meta.pop("user_id", None)
    else:
        meta["user_id"] = scope.user_id
    return memory.evolve(**scope.fields(), metadata=meta)


def may_join_run(memory: Memory, run: Run, is_member: Callable[[str, str], bool]) -> bool:
    """Whether ``memory`` may be added to ``run``: only the run's agent adds to it, or, for
    a run in a shared namespace, the members of that namespace."""
    if memory.agent_id == run.agent_id:
        return True
    return run.namespace != "default" and is_member(memory.agent_id, run.namespace)


def may_read(agent_id: str, memory: Memory, is_member: Callable[[str, str], bool]) -> bool:
    """Whether agent ``agent_id`` may read ``memory`` by the rule of its default recall
    scope (``Scope(agent_id=...)``): its own private memories, the shared memories of the
    namespaces it is a member of, and org memories."""
    if memory.visibility is Visibility.ORG:
        return True
    if memory.visibility is Visibility.PRIVATE:
        return memory.agent_id == agent_id
    return is_member(agent_id, memory.namespace)


class Scope(BaseModel):
    """What one agent may read in a recall. The defaults are everything the agent is
    entitled to and nothing else: its own memories, the shared namespaces it is a member
    of, and org-wide memories.

    ``shared``: ``"all"`` (every namespace the agent is a member of), or an explicit list of
    namespace names — naming one the agent is not a member of is an AccessDenied, never a
    silent widening. ``own=False`` / ``shared=()`` / ``org=False`` narrow the scope.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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
        found = self._backend.get(Namespace, [name])
        if not found:
            raise NotFound(f"no shared namespace {name!r}")
        return found[0]

    def list(self, *, member: str | None = None) -> list[Namespace]:
        """Every shared namespace (or those ``member`` belongs to), by name."""
        spaces: list[Namespace] = self._backend.match(Namespace, Filter(label=NodeLabel.NAMESPACE))
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
        found = self._backend.get(Namespace, [name])
        return bool(found) and agent_id in found[0].members

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
            spaces = {ns.id: ns for ns in self._backend.get(Namespace, names)}
            for n in names:
                ns = spaces.get(n)
                if ns is None or sc.agent_id not in ns.members:
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
        spaces = {ns.id: ns for ns in self._backend.get(Namespace, names)}
        for m in shared:
            ns = spaces.get(m.namespace)
            if ns is None:
                raise AccessDenied(
                    f"namespace {m.namespace!r} is not shared; create it before sharing into it"
                )
            if m.agent_id not in ns.members:
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
