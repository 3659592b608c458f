"""Run chaining: new memories placed at the end of their runs (their ``seq``, the NEXT
edges), with what each run must still be when the write commits.

A handle remembers where each run it appended to ends (the last :data:`HEADS_KEPT`), so
its next append to that run expects that state in its own write instead of reading the
run first: on a server, one round trip instead of two. A write that finds the run changed
is refused (Conflict); the write path forgets the head and orders again.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from graphmem.backends.base import GraphBackend, RunAppend, RunHeads
from graphmem.models import (
    EdgeType,
    Filter,
    Memory,
    Run,
)
from graphmem.models.values import replaced

#: how often new memories of a run are ordered again after another writer appended to it
CHAIN_ATTEMPTS = 32
#: runs whose head (event count, last memory) a handle keeps from its own writes
HEADS_KEPT = 4096


#: a run's state a write expects (:data:`RunAppend`): its event count, its last memory's
#: id, its agent and its namespace
State = tuple[int, str | None, str, str]
#: where a run's chain ends as this handle's write left it: the run as first read or
#: started (what the joining rule reads when another agent joins it) and its state then,
#: which the handle's next append to it expects as it is (a batch ends hundreds of runs:
#: the run's model is not read again, nor its state rebuilt)
Head = tuple[Run, State]


@dataclass
class Chained:
    """New memories placed in their runs (see :meth:`RunChains.chain`)."""

    memories: list[Memory]
    run_ids: list[str] = field(default_factory=list)
    new_runs: list[Run] = field(default_factory=list)
    """Runs the write starts (written whole)."""
    heads: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    """Existing runs: where their chains end after the write (only that is written)."""
    links: list[tuple[str, str]] = field(default_factory=list)
    """The NEXT edges as (from id, to id) pairs (:attr:`WriteBatch.links`)."""
    appends: list[RunAppend] = field(default_factory=list)
    """What each run must still be when written (:attr:`WriteBatch.appends`)."""
    ends: dict[str, Head] = field(default_factory=dict)
    """Every run the write appends to, with where its chain then ends (kept once written)."""


class RunChains:
    """Places new memories in their runs for one handle's write path, and keeps the heads
    of the runs that handle appended to."""

    def __init__(
        self, backend: GraphBackend, check_run: Callable[[Run, Sequence[Memory]], None]
    ) -> None:
        self.backend = backend
        self._check_run = check_run
        # run id -> the run's head as this handle's last append left it, oldest first
        self._heads: dict[str, Head] = {}
        self._heads_lock = threading.Lock()

    def keep(self, ends: dict[str, Head]) -> None:
        """Keep the heads a committed write left (:attr:`Chained.ends`), newest last."""
        with self._heads_lock:
            heads = self._heads
            # the write's runs were taken out when it began (see _taken), so each goes
            # in at the end; one another thread put back meanwhile is only replaced
            heads.update(ends)
            over = len(heads) - HEADS_KEPT
            if over > 0:
                for run_id in list(itertools.islice(heads, over)):
                    del heads[run_id]

    def forget(self, run_ids: Sequence[str]) -> None:
        with self._heads_lock:
            for run_id in run_ids:
                self._heads.pop(run_id, None)

    def _taken(self, run_ids: Sequence[str]) -> list[Head | None]:
        """The heads kept of ``run_ids`` (None for a run without one), taken out: the
        write puts back where it leaves them once committed (:meth:`keep`, a run's head
        newest last without a second look for it); a write that fails leaves them to be
        read again."""
        with self._heads_lock:
            return list(map(self._heads.pop, run_ids, itertools.repeat(None)))

    def _read(self, run_ids: list[str]) -> tuple[dict[str, Run], set[str]]:
        """The stored runs among ``run_ids`` and which of their last memories exist: one
        call to a :class:`RunHeads` backend (a server: one round trip), else one read for
        the runs and one count of their last memories."""
        if isinstance(self.backend, RunHeads):
            runs, alive = self.backend.run_heads(run_ids)
            return {r.id: r for r in runs}, alive
        stored = {r.id: r for r in self.backend.get(Run, run_ids) if isinstance(r, Run)}
        lasts = list({r.last_event_id for r in stored.values() if r.last_event_id})
        if not lasts:
            return stored, set()
        # usually every last memory is still there: one count, no memory read back
        if self.backend.count(Filter.for_memories(ids=lasts, status=None)) == len(lasts):
            return stored, set(lasts)
        return stored, {m.id for m in self.backend.get(Memory, lasts)}

    def chain(self, memories: Sequence[Memory], *, events: bool) -> Chained:
        """The memories with their place in their runs (see :meth:`create`), the runs'
        new states, the NEXT edges and what the runs must still be when written.

        A run this handle appended to last is not read again: the write expects it as this
        handle left it (its chain's end, and the agent and namespace its joining rule
        reads), and sets only where its chain now ends, so whatever else another writer
        changed meanwhile (a run ended) stays as it is; when it changed what the write
        expects, the write is refused (Conflict) and the write path reads it again."""
        groups: dict[str, list[int]] = {}
        for i, m in enumerate(memories):
            run_id = m.run_id
            if run_id and m.seq is None:
                idxs = groups.get(run_id)
                if idxs is None:
                    groups[run_id] = [i]
                else:
                    idxs.append(i)
        done = Chained(list(memories), run_ids=list(groups))
        if not groups:
            return done
        out = done.memories
        known = self._taken(done.run_ids)
        unknown = [r for r, head in zip(groups, known, strict=True) if head is None]
        stored, alive = self._read(unknown) if unknown else ({}, set())
        appends, links, ends, heads = done.appends, done.links, done.ends, done.heads
        state: State | None
        for (run_id, idxs), head in zip(groups.items(), known, strict=True):
            if head is not None:
                # as this handle left it (its last memory expected as it is)
                run, state = head
                count, prev, owner = state[0], state[1], state[2]
            elif (read := stored.get(run_id)) is not None:  # as read
                run = read
                count, prev, owner = run.event_count, run.last_event_id, run.agent_id
                state = (count, prev, owner, run.namespace)
            else:
                first = memories[idxs[0]]
                run = Run(
                    id=run_id,
                    agent_id=first.agent_id,
                    namespace=first.namespace,
                    started_at=first.created_at,
                )
                state = None
                count, prev, owner = run.event_count, run.last_event_id, run.agent_id
            # the joining rule: asked only when another agent joins (the run's own agent
            # always may, see may_join_run)
            for i in idxs:
                if memories[i].agent_id != owner:
                    self._check_run(run, [memories[j] for j in idxs])
                    break
            if head is None and state is not None and prev is not None and prev not in alive:
                prev = self._tail(run_id)
            appends.append((run_id, state, prev))
            for i in idxs:
                m = out[i]
                if events:
                    # a count this loop made: nothing of the memory to validate again
                    m = out[i] = replaced(m, seq=count)
                    count += 1
                ident = m.id
                if prev is not None:
                    links.append((prev, ident))
                prev = ident
            if state is None:
                # the count and a validated memory's id: no field to validate again
                run = replaced(run, event_count=count, last_event_id=prev)
                done.new_runs.append(run)
                ends[run_id] = (run, (count, prev, owner, run.namespace))
            else:
                heads[run_id] = (count, prev)
                ends[run_id] = (run, (count, prev, owner, state[3]))
        return done

    def _tail(self, run_id: str) -> str | None:
        """Where a run's chain ends when its last memory was forgotten: the newest of its
        memories that no NEXT edge leaves. Not simply its newest memory: one written
        earlier in time (a writer whose batch committed later, a given ``created_at``)
        may follow it, and a second NEXT edge out of it would fork the chain. Read newest
        first a page at a time: the end is nearly always among the newest few."""
        flt = Filter.for_memories(run_id=run_id, status=None)
        newest: str | None = None
        offset, page = 0, 16
        while True:
            members = self.backend.match(
                Memory, flt, limit=page, offset=offset, order_by="created_at", descending=True
            )
            if not members:
                return newest  # every one is followed: only a cycle could do that
            newest = newest or members[0].id
            refs = [m.ref for m in members]
            sub = self.backend.expand(refs, [EdgeType.NEXT], direction="out", limit=2 * page)
            followed = {e.src.id for e in sub.edges if e.type is EdgeType.NEXT}
            tail = next((m.id for m in members if m.id not in followed), None)
            if tail is not None:
                return tail
            offset += page
            page *= 4
