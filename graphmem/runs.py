"""Runs as sessions: get-or-create, delete, limits, cleanup, statistics, conversation text.

A run (:class:`~graphmem.models.Run`) is one agent session; its events are episodic
memories appended with :meth:`GraphMemory.add_event` (ordered by ``seq`` and ``NEXT``
edges). This module adds what a session store needs around that:

- :meth:`Runs.get_or_create` and :meth:`Runs.delete` (the run, its memories, the memories
  derived from them, and its orchestration-log entries);
- limits (:class:`RunLimits`, by default the seed's 1,000 sessions and 500 events per
  session; ``None`` for unlimited; ``settings.runs``): when there are more than
  ``max_runs`` live runs the oldest 10% (``archive_fraction``) are archived; when a run has
  more than ``max_events_per_run`` active events its oldest 10% are archived. Archived
  means status ``archived`` — kept in the graph, out of recall and out of the conversation
  context;
- :meth:`Runs.cleanup` of runs whose last activity is older than N hours;
- :meth:`Runs.stats` and :meth:`Runs.conversation_context` ("User: … / Assistant: …").

Everything goes through the GraphBackend seam, so it behaves alike on every backend.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from graphmem.backends.base import Expect
from graphmem.errors import Conflict, InvalidInput
from graphmem.models import (
    EdgeType,
    EventType,
    Filter,
    Memory,
    NodeLabel,
    NodeRef,
    Range,
    Run,
    RunStatus,
    Status,
    validated,
)

if TYPE_CHECKING:
    from graphmem.memory import GraphMemory

__all__ = ["CleanupReport", "DeleteRunReport", "RunLimits", "RunStats", "Runs"]

log = logging.getLogger("graphmem.runs")

_LIVE = (RunStatus.RUNNING.value, RunStatus.COMPLETED.value, RunStatus.FAILED.value)
DEFAULT_SPEAKERS: dict[str, str] = {
    EventType.USER_MESSAGE.value: "User",
    EventType.AGENT_RESPONSE.value: "Assistant",
}


class RunLimits(BaseModel):
    """Session limits (the seed's defaults); ``None`` means unlimited. Over a limit, the
    oldest ``archive_fraction`` (at least the excess) is archived."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_runs: int | None = Field(default=1000, ge=1)
    max_events_per_run: int | None = Field(default=500, ge=1)
    archive_fraction: float = Field(default=0.1, gt=0.0, le=1.0)
    #: ``fraction``: over a limit, archive the oldest ``archive_fraction`` at once;
    #: ``oldest``: archive just the excess, oldest first (one per append at the limit)
    eviction: Literal["fraction", "oldest"] = "fraction"

    def evict(self, n: int, limit: int) -> int:
        """How many of ``n`` (over ``limit``) go."""
        if self.eviction == "oldest":
            return n - limit
        return max(n - limit, math.ceil(n * self.archive_fraction))


class RunStats(BaseModel):
    """Counts over runs and their events (events: memories with a ``seq`` in a run)."""

    model_config = ConfigDict(frozen=True)

    runs: int
    runs_by_status: dict[str, int]
    events: int
    active_events: int
    average_events_per_run: float


class DeleteRunReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    memories: int
    derived: int
    log_entries: int


class CleanupReport(BaseModel):
    """What :meth:`Runs.cleanup` removed (or archived, or would, on a dry run)."""

    model_config = ConfigDict(frozen=True)

    runs: tuple[str, ...]
    memories: int
    log_entries: int
    archived: bool
    dry_run: bool


def _events_filter(run_id: str, status: str | None = None) -> Filter:
    # events are the memories of a run that have a position in it
    equals: dict[str, Any] = {"run_id": run_id}
    if status is not None:
        equals["status"] = status
    flt: Filter = validated(Filter, {"equals": equals, "ranges": (Range(field="seq", gte=0),)})
    return flt


class Runs:
    """Session management over a :class:`GraphMemory` (``mem.runs``)."""

    def __init__(self, mem: GraphMemory, *, limits: RunLimits | None = None) -> None:
        self._mem = mem
        configured = getattr(mem.settings, "runs", None)
        self.limits = limits or (configured if isinstance(configured, RunLimits) else RunLimits())

    @property
    def _backend(self) -> Any:
        return self._mem.backend

    # -- sessions ---------------------------------------------------------------------

    def get_or_create(
        self,
        run_id: str,
        *,
        agent_id: str = "default",
        user_id: str | None = None,
        app_name: str | None = None,
        namespace: str = "default",
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[Run, bool]:
        """The run ``run_id`` and False, or a new run (started now) and True."""
        found = self._backend.get(NodeLabel.RUN, [run_id])
        if found:
            return found[0], False
        try:
            run = self._mem.start_run(
                agent_id,
                run_id=run_id,
                user_id=user_id,
                app_name=app_name,
                namespace=namespace,
                metadata=metadata,
            )
        except Conflict:  # created concurrently: that one wins
            return self._mem.get_run(run_id), False
        return run, True

    def delete(self, run_id: str, *, cascade: bool = True) -> DeleteRunReport:
        """Delete a run for good: its memories (every status), with ``cascade`` also the
        memories derived from them (summaries, merges, newer versions — they carry the
        run's content), and its log entries (shared payloads are reference counted)."""
        self._mem.get_run(run_id)
        own = [m.id for m in self._backend.match(Filter.for_memories(run_id=run_id, status=None))]
        derived: list[str] = []
        if cascade and own:
            sub = self._backend.expand(
                [NodeRef(NodeLabel.MEMORY, i) for i in own],
                [EdgeType.DERIVED_FROM, EdgeType.SUPERSEDES],
                direction="in",
                depth=10_000,
                limit=10_000_000,
            )
            mine = set(own)
            derived = [n.id for n in sub.nodes if isinstance(n, Memory) and n.id not in mine]
        entries = self._mem.eventlog.delete_run(run_id)
        run = self._mem.get_run(run_id)
        # an event appended after the memories were listed would be orphaned: refuse
        self._mem.writes.delete_nodes(
            [NodeRef(NodeLabel.MEMORY, i) for i in own + derived] + [run.ref],
            expect=[Expect(run.ref, props={"event_count": run.event_count})],
        )
        log.info(
            "deleted a run: %d memories, %d derived, %d log entries",
            len(own),
            len(derived),
            entries,
        )
        return DeleteRunReport(
            run_id=run_id, memories=len(own), derived=len(derived), log_entries=entries
        )

    def archive(self, run_ids: Sequence[str]) -> list[Run]:
        """Archive runs and their active memories (kept, but out of recall/context)."""
        now = self._mem.now()
        out: list[Run] = []
        with self._mem._run_lock:
            for run in self._backend.get(NodeLabel.RUN, list(run_ids)):
                active = self._backend.match(Filter.for_memories(run_id=run.id))
                archived = run.evolve(status=RunStatus.ARCHIVED, ended_at=run.ended_at or now)
                self._mem.writes.set_status(
                    active,
                    Status.ARCHIVED,
                    reason="run archived",
                    nodes=[archived],
                    expect=[Expect(run.ref, props={"event_count": run.event_count})],
                )
                out.append(archived)
        if out:
            log.info("archived %d runs", len(out))
        return out

    # -- limits -----------------------------------------------------------------------

    def enforce(self, run_id: str | None = None) -> list[str]:
        """Apply the limits (called after every new run and every append); returns the ids
        of what was archived (runs and events)."""
        done: list[str] = []
        lim = self.limits
        if lim.max_runs is not None:
            live = validated(Filter, {"label": NodeLabel.RUN, "any_of": {"status": _LIVE}})
            n = self._backend.count(live)
            if n > lim.max_runs:
                k = lim.evict(n, lim.max_runs)
                oldest = self._backend.match(live, order_by="started_at", limit=k)
                done.extend(r.id for r in self.archive([r.id for r in oldest]))
        if lim.max_events_per_run is not None and run_id is not None:
            flt = _events_filter(run_id, Status.ACTIVE.value)
            n = self._backend.count(flt)
            if n > lim.max_events_per_run:
                k = lim.evict(n, lim.max_events_per_run)
                old = self._backend.match(flt, order_by="seq", limit=k)
                self._mem.writes.set_status(old, Status.ARCHIVED, reason="run event limit")
                done.extend(m.id for m in old)
                log.info("archived %d events over the per-run limit", len(old))
        return done

    def cleanup(
        self,
        older_than_hours: float,
        *,
        archive: bool = False,
        dry_run: bool = False,
        now: datetime | None = None,
    ) -> CleanupReport:
        """Delete (or, with ``archive``, archive) runs whose last activity — the newest of
        start, end and last event — is more than ``older_than_hours`` ago."""
        if (
            not isinstance(older_than_hours, int | float)
            or older_than_hours < 0
            or (isinstance(older_than_hours, float) and not math.isfinite(older_than_hours))
        ):
            raise InvalidInput("older_than_hours must be a non-negative number")
        cutoff = (now or self._mem.now()) - timedelta(hours=older_than_hours)
        flt = validated(
            Filter, {"label": NodeLabel.RUN, "ranges": (Range(field="started_at", lt=cutoff),)}
        )
        if archive:
            flt = flt.model_copy(update={"any_of": {"status": _LIVE}})
        candidates: list[Run] = self._backend.match(flt, order_by="started_at")
        last_ids = [r.last_event_id for r in candidates if r.last_event_id]
        last_at = {m.id: m.created_at for m in self._backend.get(NodeLabel.MEMORY, last_ids)}
        stale: list[Run] = []
        for r in candidates:
            times = [r.started_at, r.ended_at, last_at.get(r.last_event_id or "")]
            if max(t for t in times if t is not None) < cutoff:
                stale.append(r)
        ids = tuple(r.id for r in stale)
        memories = sum(self._backend.count(Filter.for_memories(run_id=i, status=None)) for i in ids)
        entries = sum(self._mem.eventlog.count(run_id=i) for i in ids)
        if not dry_run:
            if archive:
                self.archive(ids)
            else:
                for i in ids:
                    self.delete(i)
        log.info("run cleanup: %d stale runs (archive=%s, dry_run=%s)", len(ids), archive, dry_run)
        return CleanupReport(
            runs=ids, memories=memories, log_entries=entries, archived=archive, dry_run=dry_run
        )

    # -- reading ----------------------------------------------------------------------

    def stats(self, *, agent_id: str | None = None, user_id: str | None = None) -> RunStats:
        """How many runs (per status) and events, and the average number of events per run."""
        equals = {k: v for k, v in (("agent_id", agent_id), ("user_id", user_id)) if v}
        by_status: dict[str, int] = {}
        for st in RunStatus:
            flt = validated(
                Filter, {"label": NodeLabel.RUN, "equals": {**equals, "status": st.value}}
            )
            by_status[st.value] = self._backend.count(flt)
        runs = sum(by_status.values())
        if equals:
            ids = [
                r.id
                for r in self._backend.match(
                    validated(Filter, {"label": NodeLabel.RUN, "equals": equals})
                )
            ]
            ev_all = validated(
                Filter, {"any_of": {"run_id": tuple(ids)}, "ranges": (Range(field="seq", gte=0),)}
            )
        else:
            ev_all = validated(Filter, {"ranges": (Range(field="seq", gte=0),)})
        events = self._backend.count(ev_all)
        active = self._backend.count(ev_all.model_copy(update={"equals": {"status": "active"}}))
        return RunStats(
            runs=runs,
            runs_by_status=by_status,
            events=events,
            active_events=active,
            average_events_per_run=round(events / runs, 3) if runs else 0.0,
        )

    def conversation_context(
        self,
        run_id: str,
        max_events: int = 20,
        *,
        speakers: Mapping[str, str] | None = None,
    ) -> str:
        """The run's latest ``max_events`` conversational events as ``Speaker: text`` lines.

        ``speakers`` maps event types to labels (default: user_message -> "User",
        agent_response -> "Assistant"); events of other types are left out, and so are
        archived ones. An unknown run is NotFound.
        """
        if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 0:
            raise InvalidInput("max_events must be a non-negative integer")
        self._mem.get_run(run_id)
        labels = dict(speakers or DEFAULT_SPEAKERS)
        if max_events == 0 or not labels:
            return ""
        flt = _events_filter(run_id, Status.ACTIVE.value).model_copy(
            update={"any_of": {"event_type": tuple(labels)}}
        )
        newest: list[Memory] = self._backend.match(
            flt, order_by="seq", descending=True, limit=max_events
        )
        lines = []
        for m in reversed(newest):
            text = " ".join(m.content.split())
            lines.append(f"{labels[m.event_type or '']}: {text}")
        return "\n".join(lines)
