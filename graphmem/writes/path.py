"""The write path itself: one write is validate -> authorise -> embed -> one transaction with
preconditions -> hooks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np

from graphmem.backends.base import Expect, GraphBackend, GuardedWrite, WriteBatch
from graphmem.errors import AccessDenied, Conflict, InvalidInput, NotFound
from graphmem.gcpause import gc_paused
from graphmem.models import (
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    Memory,
    Namespace,
    NodeLabel,
    NodeRef,
    Run,
    Status,
    utcnow,
    validated,
)
from graphmem.scoping import may_join_run, may_read, scope_of
from graphmem.writes.chain import CHAIN_ATTEMPTS, Chained, RunChains

log = logging.getLogger("graphmem.writes")


@dataclass(frozen=True)
class Committed:
    """What one committed write did, as the hooks see it."""

    created: tuple[Memory, ...] = ()  # new memories (new versions, merges, summaries ...)
    changed: tuple[Memory, ...] = ()  # existing memories with new properties
    deleted: tuple[str, ...] = ()  # ids of deleted memories
    nodes: tuple[GraphNode, ...] = ()  # every other node written


@dataclass(frozen=True)
class Replacement:
    """``new`` replaces ``olds`` (SUPERSEDES with ``reason``; DERIVED_FROM with
    ``pass_name`` too, when the new content was made from the old)."""

    olds: tuple[Memory, ...]
    new: Memory
    reason: str
    pass_name: str | None = None


def retire_time(old: Memory, new: Memory, at: datetime) -> datetime:
    """``valid_to`` of ``old`` when ``new`` replaces it (the one rule for every pass).

    The old version holds until the new one starts to hold; when the new one claims to
    have started before the old one (a merge carries its earliest source's time), the
    replacement is dated when it is recorded. Never before the old version began."""
    old_from = old.valid_from or old.created_at
    new_from = new.valid_from or new.created_at
    end = new_from if new_from > old_from else at
    return max(end, old_from)


def check_new(memory: Memory, now: datetime) -> None:
    """InvalidInput unless ``memory`` may be written as a new memory: it is active (it is
    archived once written, and superseded only by a new version of it: a new memory
    written superseded would be a history without a head), and it was not read after
    ``now`` (its access statistics rank and decay it). An import writes exported
    memories as they are (:meth:`_WritePath.load`), not through this check."""
    if memory.status is not Status.ACTIVE:
        raise InvalidInput(
            f"a new memory is active, not {memory.status.value}: archive it once it is "
            "written; a memory is superseded by its new version (update, supersede)"
        )
    if memory.last_accessed is not None and memory.last_accessed > now:
        raise InvalidInput(f"last_accessed {memory.last_accessed.isoformat()} is in the future")


Hook = Callable[[Committed], None]
Embed = Callable[[list[str]], Any]


class _WritePath:
    """Validate, authorise, embed, commit with preconditions, run the hooks; the version
    operations (create, supersede, replace, derive, link, status)."""

    def __init__(
        self,
        backend: GraphBackend,
        *,
        embed: Embed | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.backend = backend
        self._embed_fn = embed
        #: checks shared memories against their namespace (set by the store's Namespaces)
        self.check_shared: Callable[[Sequence[Memory]], None] | None = None
        self._clock = clock
        self._hooks: list[Hook] = []
        #: when set, memories are written without vectors and handed to this callable
        #: (the background vectorizer) after the commit
        self.defer_vectors: Callable[[Sequence[Memory]], None] | None = None
        #: called before vectors of this handle's embedder are written: records the model
        #: in the store, or refuses another one (graphmem.fingerprint.ModelGuard)
        self.before_vectors: Callable[[], None] | None = None
        self._runs = RunChains(backend, self.check_run)

    # -- plumbing ----------------------------------------------------------------------

    def add_hook(self, hook: Hook) -> None:
        """Call ``hook(committed)`` after every committed write (in the writer's thread).
        A hook's exception is logged, never raised: the write is already durable."""
        self._hooks.append(hook)

    def commit(
        self,
        batch: WriteBatch,
        *,
        created: Sequence[Memory] = (),
        changed: Sequence[Memory] = (),
        deleted: Sequence[str] = (),
        unless: Filter | None = None,
    ) -> None:
        """Apply one batch (one transaction) and run the hooks. ``unless``: write nothing
        (Conflict) when a node matches it; only for a :class:`GuardedWrite` backend."""
        if not batch and not batch.checks:
            return
        if unless is not None:
            if not isinstance(self.backend, GuardedWrite):
                raise InvalidInput(f"the {self.backend.name} backend has no guarded writes")
            self.backend.write_unless(batch, unless)
        else:
            self.backend.write(batch)
        if created and self.defer_vectors is not None:
            todo = [m for m in created if m.embedding is None]
            if todo:
                self.defer_vectors(todo)
        if self._hooks:
            others = tuple(n for n in batch.nodes if not isinstance(n, Memory))
            done = Committed(tuple(created), tuple(changed), tuple(deleted), others)
            for hook in self._hooks:
                try:
                    hook(done)
                except Exception:  # the write is durable; a hook must not undo the ack
                    log.exception("write hook %r failed", hook)

    def embed(self, memories: Sequence[Memory]) -> list[Memory]:
        """Memories with vectors attached where they have none (when an embedder is set
        and vectors are not deferred to the background vectorizer)."""
        out = list(memories)
        if self._embed_fn is None or self.defer_vectors is not None:
            return out
        todo = [i for i, m in enumerate(out) if m.embedding is None]
        if not todo:
            return out
        if self.before_vectors is not None:
            self.before_vectors()
        vectors = np.asarray(self._embed_fn([out[i].content for i in todo]))
        self.backend.ensure_schema(embedding_dim=int(vectors.shape[1]))
        for i, vec in zip(todo, vectors, strict=True):
            out[i] = out[i].evolve(embedding=vec.tolist())
        return out

    def authorise(
        self,
        memories: Sequence[Memory],
        *,
        combines: Sequence[tuple[Memory, Sequence[Memory]]] = (),
    ) -> None:
        """AccessDenied unless the write is allowed: a shared memory only by a member of
        its namespace. ``combines`` are (new, sources) pairs — a new version, a merge, a
        summary or a fact made from existing memories, or a memory that supersedes others —
        and each new memory must be of its sources' scope (:func:`graphmem.scoping.scope_of`),
        so no path can carry a memory into another agent's, namespace's or user's scope.
        (An API that acts for an agent checks that agent before it calls the write path;
        see graphmem.server.http.Principal.)"""
        for new, sources in combines:
            want = scope_of(new)
            for src in sources:
                have = scope_of(src)
                if have != want:
                    raise InvalidInput(
                        f"memory {new.id} ({want.describe()}) cannot be made from memory "
                        f"{src.id} ({have.describe()}): memories of different scopes are "
                        "never combined"
                    )
        if self.check_shared is not None:
            self.check_shared(memories)

    def _is_member(self, agent_id: str, namespace: str) -> bool:
        found = self.backend.get(Namespace, [namespace])
        return bool(found) and agent_id in getattr(found[0], "members", ())

    def check_run(self, run: Run, memories: Sequence[Memory]) -> None:
        """AccessDenied unless every memory may be added to ``run`` (its agent, or a member
        of the run's shared namespace)."""
        # the rule once per agent, and not for the run's own (who always may, see
        # may_join_run): a batch appends many memories of one agent to a run
        owner = run.agent_id
        firsts: dict[str, Memory] = {}
        for m in memories:
            if m.agent_id != owner:
                firsts.setdefault(m.agent_id, m)
        for m in firsts.values():
            if not may_join_run(m, run, self._is_member):
                raise AccessDenied(
                    f"agent {m.agent_id!r} may not add to run {run.id!r} of agent {run.agent_id!r}"
                )

    def check_runs(self, memories: Sequence[Memory]) -> None:
        """:meth:`check_run` for memories that name a run but are not placed in it by the
        run's chain (derived ones, ones that came with a ``seq``): AccessDenied unless
        each may be added to the stored run it names."""
        by_run: dict[str, list[Memory]] = {}
        for m in memories:
            if m.run_id is not None:
                by_run.setdefault(m.run_id, []).append(m)
        if by_run:
            for run in self.backend.get(Run, list(by_run)):
                if isinstance(run, Run):
                    self.check_run(run, by_run[run.id])

    def now(self) -> datetime:
        return self._clock()

    # -- generic nodes (agents, runs, org facts, log entries, namespaces) ---------------

    def put(
        self,
        nodes: Sequence[GraphNode],
        edges: Sequence[Edge] = (),
        *,
        expect: Sequence[Expect] = (),
        delete: Sequence[NodeRef] = (),
    ) -> None:
        """Write non-memory nodes (and their edges) in one transaction."""
        if any(isinstance(n, Memory) for n in nodes):
            raise InvalidInput("memories are written with create/version/derive")
        self.commit(WriteBatch(nodes=nodes, edges=edges, delete_nodes=delete, expect=expect))

    def delete_nodes(
        self,
        refs: Sequence[NodeRef],
        *,
        expect: Sequence[Expect] = (),
        nodes: Sequence[GraphNode] = (),
    ) -> None:
        """Delete nodes (detach) — runs, log entries, an undone merge — optionally writing
        ``nodes`` (restored sources) in the same transaction."""
        deleted = tuple(r[1] for r in refs if NodeLabel(r[0]) is NodeLabel.MEMORY)
        changed = tuple(n for n in nodes if isinstance(n, Memory))
        self.commit(
            WriteBatch(nodes=nodes, delete_nodes=refs, expect=expect),
            changed=changed,
            deleted=deleted,
        )

    # -- memories ------------------------------------------------------------------------

    def create(
        self,
        memories: Sequence[Memory],
        *,
        edges: Sequence[Edge] = (),
        nodes: Sequence[GraphNode] = (),
        expect: Sequence[Expect] = (),
        replace: bool = False,
        chain: Literal["link", "events", "off"] = "link",
        unless: Filter | None = None,
    ) -> list[Memory]:
        """Write new memories (with extra nodes/edges) in one transaction. Each id must be
        new (Conflict otherwise) unless ``replace``.

        A memory with a ``run_id`` and no ``seq`` takes its place in the run's order:
        ``(previous)-[:NEXT]->(it)`` and the run's last memory updated in the same
        transaction (the run is started when missing); with ``chain="events"`` it is also
        an event of the run (the next ``seq``, counted in ``event_count``). A concurrent
        append to the same run is detected and the order made again, so a run's chain
        never forks. ``chain="off"``: written as given. ``unless``: nothing is written
        (Conflict) when a node matches this filter, checked in the write's own statement
        (a :class:`GuardedWrite` backend only)."""
        if len({m.id for m in memories}) != len(memories):
            raise InvalidInput("duplicate ids in one batch")
        self.authorise(memories)
        if chain != "off":
            # the run's chain asks the joining rule of what it places; a memory that
            # came with its place is not placed, so it is asked here
            self.check_runs([m for m in memories if m.seq is not None and m.run_id is not None])
        memories = self.embed(memories)
        with gc_paused():  # a batch builds no cyclic garbage (see graphmem.gcpause)
            return self._create(memories, edges, nodes, expect, replace, chain, unless)

    def _create(
        self,
        memories: Sequence[Memory],
        edges: Sequence[Edge],
        nodes: Sequence[GraphNode],
        expect: Sequence[Expect],
        replace: bool,
        chain: Literal["link", "events", "off"],
        unless: Filter | None,
    ) -> list[Memory]:
        new = () if replace else [m.id for m in memories]
        for attempt in range(CHAIN_ATTEMPTS):
            chained = (
                self._runs.chain(memories, events=chain == "events")
                if chain != "off"
                else Chained(list(memories))
            )
            try:
                self.commit(
                    WriteBatch(
                        nodes=[*chained.memories, *chained.new_runs, *nodes],
                        edges=edges,
                        expect=expect,
                        appends=chained.appends,
                        run_heads=chained.heads,
                        new_memories=new,
                        links=chained.links,
                    ),
                    created=chained.memories,
                    unless=unless,
                )
            except Conflict:
                self._runs.forget(chained.run_ids)
                # another writer appended to one of these runs (or this handle's view of
                # one is stale): order again; anything else (an id that exists, a
                # caller's precondition, a node ``unless`` names) is the caller's conflict
                if (
                    not chained.run_ids
                    or unless is not None
                    or attempt == CHAIN_ATTEMPTS - 1
                    or (not replace and self._ids_taken(memories))
                ):
                    raise
                continue
            self._runs.keep(chained.ends)
            return chained.memories
        raise Conflict("the run kept changing")  # pragma: no cover - the loop returns

    def _ids_taken(self, memories: Sequence[Memory]) -> bool:
        return bool(self.backend.get(Memory, [m.id for m in memories]))

    def supersede(
        self,
        olds: Sequence[Memory],
        new: Memory,
        *,
        reason: str,
        pass_name: str | None = None,
        create_new: bool = True,
    ) -> Memory:
        """``new`` replaces ``olds``: each old version becomes superseded (the one rule of
        :func:`retire_time`), with SUPERSEDES (and DERIVED_FROM when ``pass_name``) edges.
        Every old must still be active when the transaction runs (Conflict otherwise)."""
        created = self.replace(
            [Replacement(tuple(olds), new, reason, pass_name)],
            create=[new] if create_new else [],
        )
        return created[0] if created else new

    def replace(
        self,
        groups: Sequence[Replacement],
        *,
        create: Sequence[Memory] = (),
        rescope: bool = False,
    ) -> list[Memory]:
        """Several supersessions in one transaction. ``create`` are the new memories
        (written, with vectors); every other replacing memory must exist and be active.
        Each new memory must be of the scope of what it replaces (InvalidInput otherwise)
        unless ``rescope`` (an update that moves a memory on the caller's say, authorised
        for its new scope). Returns the created memories (as written)."""
        now = self._clock()
        made = {m.id for m in create}
        retired: dict[str, Memory] = {}
        edges: list[Edge] = []
        expect: list[Expect] = []
        keepers: dict[str, Memory] = {}
        for g in groups:
            if g.new.id not in made:
                keepers[g.new.id] = g.new
            for old in g.olds:
                if old.id == g.new.id:
                    raise InvalidInput("a memory cannot supersede itself")
                if old.id not in retired:
                    if old.status is not Status.ACTIVE:
                        raise Conflict(
                            f"memory {old.id} is {old.status.value}; replace its current version"
                        )
                    retired[old.id] = old.evolve(
                        status=Status.SUPERSEDED,
                        valid_to=retire_time(old, g.new, now),
                        updated_at=now,
                    )
                    expect.append(Expect(old.ref, props={"status": Status.ACTIVE}))
                edges.append(_edge(EdgeType.SUPERSEDES, g.new, old, reason=g.reason, at=now))
                if g.pass_name:
                    edges.append(
                        _edge(EdgeType.DERIVED_FROM, g.new, old, **{"pass": g.pass_name}, at=now)
                    )
        if set(keepers) & set(retired):
            raise InvalidInput("a memory cannot both replace and be replaced in one write")
        for m in create:
            check_new(m, now)
        self.authorise(
            [*create, *retired.values()],
            combines=() if rescope else [(g.new, g.olds) for g in groups],
        )
        self.check_runs(create)  # a new version keeps its place in its run: not chained
        created = self.embed(create)
        expect.extend(Expect(m.ref, exists=False) for m in created)
        expect.extend(Expect(m.ref, props={"status": Status.ACTIVE}) for m in keepers.values())
        self.commit(
            WriteBatch(nodes=[*created, *retired.values()], edges=edges, expect=expect),
            created=created,
            changed=tuple(retired.values()),
        )
        return created

    def version(
        self,
        old: Memory,
        *,
        content: str | None = None,
        reason: str = "update",
        **changes: Any,
    ) -> Memory:
        """A new version of ``old`` with ``content``/``changes`` that supersedes it."""
        from graphmem.models import new_id

        now = self._clock()
        fields = dict(changes)
        if content is not None:
            fields["content"] = content
        if "metadata" in fields:
            # the end user a memory belongs to is part of its scope: new metadata keeps it
            meta = dict(fields["metadata"] or {})
            user = old.metadata.get("user_id")
            if meta.get("user_id", user) != user:
                raise InvalidInput("the user_id of a memory cannot be changed by an update")
            if user is not None:
                meta["user_id"] = user
            fields["metadata"] = meta
        valid_from = fields.pop("valid_from", None) or now
        try:
            new = old.evolve(
                id=new_id(),
                created_at=now,
                updated_at=now,
                valid_from=valid_from,
                valid_to=None,
                content_hash="",
                status=Status.ACTIVE,
                embedding=old.embedding if content is None or content == old.content else None,
                **fields,
            )
        except (TypeError, ValueError) as e:
            raise InvalidInput(str(e)) from e
        if new.valid_from < (old.valid_from or old.created_at):  # type: ignore[operator]
            raise InvalidInput("a new version cannot be valid before the version it replaces")
        if new.content_hash != old.content_hash:
            self._refuse_duplicate(new, old)
        moved = scope_of(new) != scope_of(old)
        if moved and new.agent_id != old.agent_id:
            raise InvalidInput("an update cannot give a memory to another agent")
        self.authorise([old, new])
        [made] = self.replace([Replacement((old,), new, reason)], create=[new], rescope=moved)
        return made

    def _refuse_duplicate(self, new: Memory, old: Memory) -> None:
        """Conflict when another active memory of ``new``'s scope already says exactly
        what ``new`` says (an update never makes two identical active memories)."""
        same = self.backend.match(
            Memory,
            validated(
                Filter,
                {
                    "equals": {
                        "agent_id": new.agent_id,
                        "namespace": new.namespace,
                        "status": "active",
                        "content_hash": new.content_hash,
                    }
                },
            ),
            limit=20,
        )
        want = scope_of(new)
        for m in same:
            if isinstance(m, Memory) and m.id != old.id and scope_of(m) == want:
                raise Conflict(
                    f"memory {m.id} already says this in the same scope; update or forget "
                    "that one instead"
                )

    def derive(
        self,
        derived: Sequence[Memory],
        sources: Mapping[str, Sequence[str]],
        *,
        pass_name: str,
    ) -> list[Memory]:
        """New memories DERIVED_FROM existing ones (``sources[new id]`` = source ids); the
        sources are unchanged and must still exist when the transaction runs."""
        now = self._clock()
        edges: list[Edge] = []
        needed: dict[str, None] = {}
        for m in derived:
            for s in sources.get(m.id, ()):
                edges.append(
                    _edge(
                        EdgeType.DERIVED_FROM,
                        m,
                        NodeRef(NodeLabel.MEMORY, s),
                        **{"pass": pass_name},
                        at=now,
                    )
                )
                needed[s] = None
        found = {n.id: n for n in self.backend.get(Memory, list(needed)) if isinstance(n, Memory)}
        missing = [s for s in needed if s not in found]
        if missing:
            raise NotFound(f"no memory {missing[0]!r}")
        self.authorise(
            (),
            combines=[(m, [found[s] for s in sources.get(m.id, ())]) for m in derived],
        )
        # written outside the run's chain (below), so the joining rule is asked here: a
        # fact or summary names its run, and only who may add to that run may name it
        self.check_runs(derived)
        expect = [Expect(NodeRef(NodeLabel.MEMORY, s)) for s in needed]
        # a summary or an extracted fact of a run is about the run, not a step of it
        return self.create(derived, edges=edges, expect=expect, chain="off")

    def check_sources(self, agent_id: str, sources: Sequence[Memory]) -> None:
        """AccessDenied unless agent ``agent_id`` may read every source (the scope rule of
        its recall, :func:`graphmem.scoping.may_read`). A memory derived from another
        holds its content, and a forget of the source deletes it: a memory made from
        what its agent may not read would carry that content out of its scope, and would
        let the source's owner delete the agent's memory."""
        members: dict[str, bool] = {}

        def is_member(agent: str, namespace: str) -> bool:
            if namespace not in members:
                members[namespace] = self._is_member(agent, namespace)
            return members[namespace]

        for src in sources:
            if not may_read(agent_id, src, is_member):
                raise AccessDenied(
                    f"agent {agent_id!r} may not read memory {src.id} "
                    f"({scope_of(src).describe()}): a memory derives only from memories its "
                    "agent may read"
                )

    def link(self, derived_id: str, source_ids: Sequence[str], *, pass_name: str) -> None:
        """Provenance between existing memories: ``derived_id`` DERIVED_FROM each source.
        AccessDenied (nothing written) when the derived memory's agent may not read a
        source (:meth:`check_sources`)."""
        now = self._clock()
        ids = [derived_id, *source_ids]
        edges = [
            _edge(
                EdgeType.DERIVED_FROM,
                NodeRef(NodeLabel.MEMORY, derived_id),
                NodeRef(NodeLabel.MEMORY, s),
                **{"pass": pass_name},
                at=now,
            )
            for s in source_ids
        ]
        found = {n.id: n for n in self.backend.get(Memory, ids) if isinstance(n, Memory)}
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(f"no memory {missing[0]!r}")
        self.check_sources(found[derived_id].agent_id, [found[s] for s in source_ids])
        expect = [Expect(NodeRef(NodeLabel.MEMORY, i)) for i in dict.fromkeys(ids)]
        self.commit(WriteBatch(edges=edges, expect=expect))

    def set_status(
        self,
        memories: Sequence[Memory],
        status: Status,
        *,
        reason: str | None = None,
        pin: bool | None = None,
        extra: Mapping[str, Any] | None = None,
        nodes: Sequence[GraphNode] = (),
        expect: Sequence[Expect] = (),
    ) -> list[Memory]:
        """Archive or restore (the one definition), expecting the status each memory had
        when it was read.

        Archiving records the status it left (``archived_from``), ``archived_reason`` and
        ``archived_at`` in metadata. Restoring (``Status.ACTIVE``) returns an archived
        memory to the status it left — an archived old version comes back superseded, so a
        restore can never give a version chain a second active version — and clears
        ``valid_to`` and an expired ``expires_at`` when it becomes active. A superseded
        memory cannot be restored directly (Conflict): it comes back when what replaced it
        is forgotten or unmerged. ``superseded`` is never set here (InvalidInput): a new
        version sets it."""
        if status is Status.SUPERSEDED:
            raise InvalidInput("superseded is set by a new version (update, supersede)")
        now = self._clock()
        changed: list[Memory] = []
        expect = list(expect)
        for m in memories:
            meta = dict(m.metadata)
            target: Status = status
            if status is Status.ARCHIVED:
                if m.status is not Status.ARCHIVED:
                    meta["archived_from"] = m.status.value
                if reason is not None:
                    meta["archived_reason"] = reason
                    meta["archived_at"] = now.isoformat()
            elif m.status is Status.SUPERSEDED:
                raise Conflict(
                    f"memory {m.id} is superseded: it comes back when what replaced it is "
                    "forgotten or unmerged"
                )
            elif m.status is Status.ARCHIVED:
                target = Status(meta.pop("archived_from", Status.ACTIVE.value))
                meta.pop("archived_reason", None)
                meta.pop("archived_at", None)
            if pin is not None:
                meta["pinned"] = pin
            if extra:
                meta.update(extra)
            active = target is Status.ACTIVE
            expired = m.expires_at is not None and m.expires_at <= now
            changed.append(
                m.evolve(
                    status=target,
                    updated_at=now,
                    metadata=meta,
                    valid_to=None if active else m.valid_to,
                    expires_at=None if active and expired else m.expires_at,
                )
            )
            expect.append(Expect(m.ref, props={"status": m.status}))
        self.authorise(memories)
        self.commit(WriteBatch(nodes=[*changed, *nodes], expect=expect), changed=changed)
        return changed

    def change(
        self,
        memories: Sequence[Memory],
        *,
        expect_status: Status | None = Status.ACTIVE,
    ) -> list[Memory]:
        """Write new properties of existing memories in place (tier promotion, decayed
        importance, a vector); each must still have ``expect_status`` (or just exist)."""
        props = {"status": expect_status} if expect_status is not None else {}
        expect = [Expect(m.ref, props=props) for m in memories]
        self.authorise(memories)
        self.commit(WriteBatch(nodes=memories, expect=expect), changed=memories)
        return list(memories)

    # -- vectors -----------------------------------------------------------------------

    def store_vectors(
        self, items: Sequence[tuple[str, str]], vectors: Any, *, checked: bool = False
    ) -> None:
        """Set the vectors computed for ``items`` ((id, content) pairs) on the memories
        that still exist with that content. Only the vector is written, so concurrent
        changes to the memory's other properties are kept. ``checked``: the caller made
        sure the vectors are of the store's model (reindex); else this handle's
        embedder is checked (:attr:`before_vectors`)."""
        if not len(items):
            return
        if not checked and self.before_vectors is not None:
            self.before_vectors()
        vecs = np.asarray(vectors, dtype=np.float32)
        current = {
            m.id: m
            for m in self.backend.get(Memory, [i for i, _c in items])
            if isinstance(m, Memory)
        }
        # each vector a float32 row of ``vecs`` (a backend reads it as a sequence of
        # floats): the embedded store keeps float32 bytes, and a row of Python floats cost
        # it a conversion each way, a fifth of storing a vector
        todo: dict[str, Any] = {}
        expect: list[Expect] = []
        for (i, content), vec in zip(items, vecs, strict=True):
            m = current.get(i)
            if m is None or m.content != content:
                continue  # deleted, or changed: fetched again with its new content
            todo[i] = vec
            expect.append(Expect(m.ref, props={"content_hash": m.content_hash}))
        if not todo:
            return
        self.backend.ensure_schema(embedding_dim=int(vecs.shape[1]))
        try:
            self.commit(WriteBatch(vectors=todo, expect=expect))
        except Conflict:
            # one memory changed or went since it was read: keep the others' vectors
            for (i, vec), ex in zip(todo.items(), expect, strict=True):
                try:
                    self.commit(WriteBatch(vectors={i: vec}, expect=[ex]))
                except Conflict:
                    continue  # fetched again with its new content, or gone

    # -- import ------------------------------------------------------------------------

    def load(self, nodes: Sequence[GraphNode], edges: Sequence[Edge] = ()) -> None:
        """Write exported nodes/edges as they are (import/migration): existing ids are
        replaced, no precondition, no embedding."""
        self.commit(
            WriteBatch(nodes=nodes, edges=edges),
            created=[n for n in nodes if isinstance(n, Memory)],
        )


def _edge(
    etype: EdgeType, src: GraphNode | NodeRef, dst: GraphNode | NodeRef, **props: Any
) -> Edge:
    edge: Edge = validated(Edge, {"type": etype, "src": src, "dst": dst, "props": props})
    return edge
