"""Writes, with forget: plan the doomed set (versions and what was derived from them), then
delete it in one transaction that re-checks the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from graphmem.backends.base import Expect, WriteBatch
from graphmem.errors import Conflict, NotFound
from graphmem.models import (
    EdgeType,
    Memory,
    NodeLabel,
    NodeRef,
    Status,
)
from graphmem.writes.path import _WritePath, log

#: how often a forget re-plans when a concurrent writer changed what it was deleting
FORGET_ATTEMPTS = 8

_VERSION_EDGES = (EdgeType.SUPERSEDES, EdgeType.DERIVED_FROM)


@dataclass(frozen=True)
class ForgetPlan:
    deleted: tuple[str, ...]
    restored: tuple[Memory, ...]
    expect: tuple[Expect, ...] = field(default=())


class Writes(_WritePath):
    """The one write path of a store (see the module docstring)."""

    # -- forget --------------------------------------------------------------------------

    def plan_forget(self, memory_id: str, *, cascade: bool = True) -> ForgetPlan:
        """What forgetting ``memory_id`` deletes and restores, with the preconditions that
        make the plan still true when it is carried out.

        The doomed set and the preconditions come from one snapshot: the cascade is read
        first, then the neighbourhood the transaction will re-check; when that later read
        shows a version or a derivation the cascade did not include (another writer
        committed in between), the plan is made again, so the transaction never checks a
        snapshot its doomed set was not derived from."""
        for _attempt in range(FORGET_ATTEMPTS):
            plan = self._plan_forget_once(memory_id, cascade=cascade)
            if plan is not None:
                return plan
            log.info("forget: the store changed while planning; planning again")
        raise Conflict(f"memory {memory_id!r} kept changing while its forget was planned")

    def _plan_forget_once(self, memory_id: str, *, cascade: bool) -> ForgetPlan | None:
        """One plan, or None when the reads disagree (see :meth:`plan_forget`)."""
        b = self.backend
        if not b.get(Memory, [memory_id]):
            raise NotFound(f"no memory {memory_id!r}")
        doomed: list[str] = [memory_id]
        older_ids: set[str] = {memory_id}
        if cascade:
            older = b.expand(
                [NodeRef(NodeLabel.MEMORY, memory_id)],
                [EdgeType.SUPERSEDES],
                direction="out",
                depth=10_000,
                limit=1_000_000,
            )
            doomed = [n.id for n in older.nodes if isinstance(n, Memory)]
            older_ids = set(doomed)
            derived = b.expand(
                [NodeRef(NodeLabel.MEMORY, i) for i in doomed],
                list(_VERSION_EDGES),
                direction="in",
                depth=10_000,
                limit=1_000_000,
            )
            doomed = list(
                dict.fromkeys(doomed + [n.id for n in derived.nodes if isinstance(n, Memory)])
            )
        doomed_set = set(doomed)
        # every doomed node, and every node next to one over version edges, with its
        # incoming version edges as seen now: the transaction re-checks all of them
        around = b.expand(
            [NodeRef(NodeLabel.MEMORY, i) for i in doomed],
            list(_VERSION_EDGES),
            direction="both",
            depth=1,
            limit=1_000_000,
        )
        near = [n.ref for n in around.nodes if isinstance(n, Memory)]
        into = b.expand(near, list(_VERSION_EDGES), direction="in", depth=1, limit=1_000_000)
        keys = {r.key for r in near}
        incoming: dict[str, set[str]] = {r.id: set() for r in near}
        for e in into.edges:
            if e.dst.key in keys:
                incoming[e.dst.id].add(e.src.id)
        if cascade:
            # the cascade as this snapshot (the one the transaction checks) sees it: every
            # version of or derivation from a doomed node is doomed, and every older version
            # of the forgotten one too; anything new means the plan is stale
            if any(not srcs <= doomed_set for i, srcs in incoming.items() if i in doomed_set):
                return None
            for e in (*around.edges, *into.edges):
                if (
                    e.type is EdgeType.SUPERSEDES
                    and e.src.id in older_ids
                    and e.dst.id not in older_ids
                ):
                    return None
        now = self._clock()
        restored: list[Memory] = []
        expect: list[Expect] = []
        for n in around.nodes:
            if not isinstance(n, Memory):
                continue
            srcs = frozenset(incoming.get(n.id, ()))
            expect.append(
                Expect(n.ref, props={"status": n.status}, incoming=_VERSION_EDGES, sources=srcs)
            )
            if n.id in doomed_set:
                continue
            sup = [e for e in into.edges if e.dst.id == n.id and e.type is EdgeType.SUPERSEDES]
            if sup and n.status is Status.SUPERSEDED and all(e.src.id in doomed_set for e in sup):
                restored.append(n.evolve(status=Status.ACTIVE, valid_to=None, updated_at=now))
        return ForgetPlan(tuple(doomed), tuple(restored), tuple(expect))

    def restorable(self, doomed: Sequence[str]) -> tuple[list[Memory], list[Expect]]:
        """What deleting ``doomed`` gives back, by the rule of a forget: each memory that
        only doomed memories superseded, active again, with what the deleting transaction
        must still find of it (as read, superseded by exactly those). For deletions
        planned elsewhere (a run's memories); a forget plans its own."""
        b = self.backend
        doomed_set = set(doomed)
        older = b.expand(
            [NodeRef(NodeLabel.MEMORY, i) for i in doomed_set],
            [EdgeType.SUPERSEDES],
            direction="out",
            depth=1,
            limit=1_000_000,
        )
        candidates = [
            n
            for n in older.nodes
            if isinstance(n, Memory) and n.id not in doomed_set and n.status is Status.SUPERSEDED
        ]
        if not candidates:
            return [], []
        into = b.expand(
            [n.ref for n in candidates],
            [EdgeType.SUPERSEDES],
            direction="in",
            depth=1,
            limit=1_000_000,
        )
        by: dict[str, set[str]] = {n.id: set() for n in candidates}
        for e in into.edges:
            if e.type is EdgeType.SUPERSEDES and e.dst.id in by:
                by[e.dst.id].add(e.src.id)
        now = self._clock()
        restored: list[Memory] = []
        expect: list[Expect] = []
        for n in candidates:
            srcs = by[n.id]
            if srcs and srcs <= doomed_set:
                restored.append(n.evolve(status=Status.ACTIVE, valid_to=None, updated_at=now))
                expect.append(
                    Expect(
                        n.ref,
                        props={"status": n.status},
                        incoming=(EdgeType.SUPERSEDES,),
                        sources=frozenset(srcs),
                    )
                )
        return restored, expect

    def forget(self, memory_id: str, *, cascade: bool = True, dry_run: bool = False) -> ForgetPlan:
        """Delete a memory (and, with ``cascade``, its versions and what was derived from
        them), restoring memories superseded only by deleted ones. The plan is checked in
        the deleting transaction; when a concurrent write changed it, it is made again."""
        for attempt in range(FORGET_ATTEMPTS):
            plan = self.plan_forget(memory_id, cascade=cascade)
            if dry_run:
                return plan
            try:
                self.commit(
                    WriteBatch(
                        nodes=plan.restored,
                        delete_nodes=[NodeRef(NodeLabel.MEMORY, i) for i in plan.deleted],
                        expect=plan.expect,
                    ),
                    changed=plan.restored,
                    deleted=plan.deleted,
                )
            except Conflict:
                if attempt == FORGET_ATTEMPTS - 1:
                    raise
                log.info("forget: the store changed while planning; planning again")
                continue
            log.info("forgot %d memories, restored %d", len(plan.deleted), len(plan.restored))
            return plan
        raise Conflict("forget could not complete")  # pragma: no cover - loop returns or raises
