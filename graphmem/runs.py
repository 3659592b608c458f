"""Runs as sessions: get-or-create, delete, limits, cleanup, statistics, conversation text.

A run (:class:`~graphmem.models.Run`) is one agent session; its events are episodic
memories appended with :meth:`Runs.add_event` (ordered by ``seq`` and ``NEXT`` edges).
``mem.runs`` owns every run verb:

- :meth:`Runs.start`, :meth:`Runs.get`, :meth:`Runs.end`, :meth:`Runs.list`,
  :meth:`Runs.get_or_create` and :meth:`Runs.delete` (the run, its memories, the memories
  derived from them, and its orchestration-log entries);
- :meth:`Runs.add_event` / :meth:`Runs.add_events` (appends, ordered, one appender per
  handle and optimistic retries across handles) and :meth:`Runs.events`;
- limits (:class:`RunLimits`, by default the seed's 1,000 sessions and 500 events per
  session; ``None`` for unlimited; ``settings.runs``): when there are more than
  ``max_runs`` live runs the oldest 10% (``archive_fraction``) are archived; when a run has
  more than ``max_events_per_run`` active events its oldest 10% are archived. Archived
  means status ``archived`` — kept in the graph, out of recall and out of the conversation
  context;
- :meth:`Runs.cleanup` of runs whose last activity is older than N hours;
- :meth:`Runs.stats` and :meth:`Runs.conversation_context` ("User: … / Assistant: …");
- :meth:`Runs.scratchpad`, the fleeting tier of a run (in process only).

Everything goes through the GraphBackend seam, so it behaves alike on every backend.
"""

from __future__ import annotations

import builtins
import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, Unpack

from pydantic import BaseModel, ConfigDict

from graphmem.backends.base import Expect, GraphBackend
from graphmem.config import RunLimits
from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.eventlog import EventLog, canonical_json
from graphmem.lifecycle import Lifecycle, Scratchpad
from graphmem.models import (
    CONTENT_JSON_KEY,
    Category,
    EdgeType,
    EventType,
    Filter,
    GraphNode,
    Memory,
    NodeLabel,
    NodeRef,
    Range,
    Run,
    RunStatus,
    Status,
    Tier,
    utcnow,
    validated,
)
from graphmem.protocol import RunFilters
from graphmem.scoping import Namespaces, Scope
from graphmem.writes import Writes, check_new

__all__ = ["CleanupReport", "DeleteRunReport", "RunLimits", "RunStats", "Runs"]

log = logging.getLogger("graphmem.runs")

#: how often a run delete lists the run again when an append or a derivation changed it
DELETE_ATTEMPTS = 8

_N = TypeVar("_N", bound=GraphNode)

_LIVE = (RunStatus.RUNNING.value, RunStatus.COMPLETED.value, RunStatus.FAILED.value)
DEFAULT_SPEAKERS: dict[str, str] = {
    EventType.USER_MESSAGE.value: "User",
    EventType.AGENT_RESPONSE.value: "Assistant",
}


class RunStats(BaseModel):
    """Counts over runs and their events (events: memories with a ``seq`` in a run)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    runs: int
    runs_by_status: dict[str, int]
    events: int
    active_events: int
    average_events_per_run: float


class DeleteRunReport(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    run_id: str
    memories: int
    derived: int
    log_entries: int


class CleanupReport(BaseModel):
    """What :meth:`Runs.cleanup` removed (or archived, or would, on a dry run)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    runs: tuple[str, ...]
    memories: int
    log_entries: int
    archived: bool
    dry_run: bool


def _only(kind: type[_N], nodes: Iterable[GraphNode]) -> list[_N]:
    """The nodes of one kind (reads of one label return only that kind)."""
    return [n for n in nodes if isinstance(n, kind)]


def _events_filter(run_id: str, status: str | None = None) -> Filter:
    # events are the memories of a run that have a position in it
    equals: dict[str, Any] = {"run_id": run_id}
    if status is not None:
        equals["status"] = status
    flt: Filter = validated(Filter, {"equals": equals, "ranges": (Range(field="seq", gte=0),)})
    return flt


class RunBasics:
    """The run verbs every store builds alike: ``start`` (the run record is built and
    checked here, and :meth:`_keep` stores it), ``get_or_create`` (from ``get`` and
    ``start``) and ``add_event`` (one event through ``add_events``)."""

    _clock: Callable[[], datetime]

    def start(
        self,
        agent_id: str = "default",
        *,
        run_id: str | None = None,
        user_id: str | None = None,
        app_name: str | None = None,
        namespace: str = "default",
        started_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Run:
        """Start a run (an agent session). Conflict if ``run_id`` already exists."""
        data: dict[str, Any] = {
            "agent_id": agent_id,
            "user_id": user_id,
            "app_name": app_name,
            "namespace": namespace,
            "started_at": started_at or self._clock(),
            "metadata": metadata,
        }
        if run_id is not None:
            data["id"] = run_id
        run: Run = validated(Run, {k: v for k, v in data.items() if v is not None})
        self._keep(run)
        return run

    def _keep(self, run: Run) -> None:
        """Store a new run (the null store keeps nothing)."""
        raise NotImplementedError

    def get(self, run_id: str) -> Run:
        """The run ``run_id``; NotFound if there is none (each store's own)."""
        raise NotImplementedError

    def add_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> builtins.list[Memory]:
        """Append events to a run (each store's own)."""
        raise NotImplementedError

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
        try:
            return self.get(run_id), False
        except NotFound:
            pass
        try:
            run = self.start(
                agent_id,
                run_id=run_id,
                user_id=user_id,
                app_name=app_name,
                namespace=namespace,
                metadata=metadata,
            )
        except Conflict:  # created concurrently: that one wins
            return self.get(run_id), False
        return run, True

    def add_event(
        self,
        run_id: str,
        event_type: str,
        content: Any,
        *,
        agent_id: str | None = None,
        importance: float | None = None,
        tier: Tier | str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> Memory:
        """Append an episodic event to a run (started on the fly if it does not exist).

        Events of a run are ordered: each has ``seq`` (0, 1, 2 …) and the previous event
        links to it with ``(earlier)-[:NEXT]->(later)``. ``importance``/``tier`` not given
        come from the lifecycle's scorer and classification rules. ``content`` is text or
        any JSON value (stored as its canonical JSON text, searchable; ``Memory.value``
        gives it back).
        """
        return self.add_events(
            run_id,
            [
                {
                    "event_type": event_type,
                    "content": content,
                    "agent_id": agent_id,
                    "importance": importance,
                    "tier": tier,
                    "tags": tags,
                    "metadata": metadata,
                    "created_at": created_at,
                }
            ],
        )[0]


class Runs(RunBasics):
    """Every run verb (``mem.runs``): sessions, their ordered events, limits, cleanup,
    statistics, conversation text and the fleeting scratchpad."""

    def __init__(
        self,
        backend: GraphBackend,
        writes: Writes,
        *,
        eventlog: EventLog,
        lifecycle: Lifecycle,
        namespaces: Namespaces,
        limits: RunLimits | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._backend = backend
        self._writes = writes
        self._eventlog = eventlog
        self._lifecycle = lifecycle
        self._namespaces = namespaces
        self._clock = clock
        self.limits = limits or RunLimits()
        # one appender per handle (other handles and processes are caught by the write
        # path's preconditions and retried)
        self._lock = threading.Lock()

    # -- sessions ---------------------------------------------------------------------

    def _keep(self, run: Run) -> None:
        try:
            self._writes.put([run], expect=[Expect(run.ref, exists=False)])
        except Conflict as e:
            raise Conflict(f"run {run.id!r} already exists") from e
        self.enforce()

    def get(self, run_id: str) -> Run:
        """The run ``run_id``; NotFound if there is none."""
        found = self._backend.get(Run, [run_id])
        if not found or not isinstance(found[0], Run):
            raise NotFound(f"no run {run_id!r}")
        return found[0]

    def end(self, run_id: str, *, status: RunStatus | str = RunStatus.COMPLETED) -> Run:
        """Mark a run ended (completed by default)."""
        try:
            status = RunStatus(status)
        except ValueError as e:
            raise InvalidInput(
                f"unknown run status {status!r}; one of {[s.value for s in RunStatus]}"
            ) from e
        for _attempt in range(8):
            old = self.get(run_id)
            run = old.evolve(status=status, ended_at=self._clock())
            try:
                self._writes.put(
                    [run],
                    expect=[
                        Expect(
                            old.ref, props={"status": old.status, "event_count": old.event_count}
                        )
                    ],
                )
                return run
            except Conflict:
                continue  # an event was appended meanwhile: end the run as it is now
        raise Conflict(f"run {run_id!r} keeps changing; try again")

    def list(
        self, *, limit: int | None = 100, offset: int = 0, **filters: Unpack[RunFilters]
    ) -> builtins.list[Run]:
        """Runs, newest first, whose ``agent_id``, ``user_id``, ``status`` and ``namespace``
        equal the :class:`~graphmem.protocol.RunFilters` given (a list of namespaces: any)."""
        equals = {k: v for k, v in filters.items() if v is not None}
        any_of: dict[str, tuple[str, ...]] = {}
        spaces = equals.get("namespace")
        if isinstance(spaces, Sequence) and not isinstance(spaces, str):
            any_of["namespace"] = tuple(spaces)
            del equals["namespace"]
        flt = validated(Filter, {"label": NodeLabel.RUN, "equals": equals, "any_of": any_of})
        found = self._backend.match(
            Run, flt, limit=limit, offset=offset, order_by="started_at", descending=True
        )
        return [r for r in found if isinstance(r, Run)]

    # -- events -----------------------------------------------------------------------

    def add_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> builtins.list[Memory]:
        """Append several events to a run in one atomic write (see :meth:`add_event`).

        An item with ``role`` and no ``event_type`` is a chat message (``{"role": "user",
        "content": "..."}``), stored as :func:`graphmem.messages.event_from_message` says."""
        from graphmem.messages import as_event

        events = [as_event(ev) for ev in events]
        now = self._clock()
        with self._lock:
            for attempt in range(32):
                try:
                    memories = self._append(run_id, events, now)
                    break
                except Conflict:
                    # another handle or process appended to this run since it was read
                    if attempt == 31:
                        raise
        self.enforce(run_id)
        return memories

    def _append(
        self, run_id: str, events: Sequence[Mapping[str, Any]], now: datetime
    ) -> builtins.list[Memory]:
        found = self._backend.get(Run, [run_id])
        run: Run = (
            found[0]
            if found and isinstance(found[0], Run)
            else validated(
                Run,
                {
                    "id": run_id,
                    "agent_id": (events[0].get("agent_id") if events else None) or "default",
                    "namespace": (events[0].get("namespace") if events else None) or "default",
                    "started_at": now,
                },
            )
        )
        memories: builtins.list[Memory] = []
        for i, ev in enumerate(events):
            if not isinstance(ev, Mapping):
                raise InvalidInput(f"event {i}: expected a mapping")
            data = {k: v for k, v in ev.items() if v is not None}
            if "content" in ev and not isinstance(ev["content"], str):
                try:
                    data["content"] = canonical_json(ev["content"])
                except InvalidInput as e:
                    raise InvalidInput(f"event {i}: content: {e}") from None
                meta = data.get("metadata")
                data["metadata"] = {
                    **(meta if isinstance(meta, Mapping) else {}),
                    CONTENT_JSON_KEY: True,
                }
            data.setdefault("agent_id", run.agent_id)
            data.setdefault("namespace", run.namespace)
            data.setdefault("created_at", now)
            data.setdefault("category", Category.EPISODIC)
            data["run_id"] = run.id
            data.pop("seq", None)  # the write path gives each its place in the run
            try:
                memories.append(validated(Memory, self._lifecycle._classify(data)))
                check_new(memories[-1], now)
            except InvalidInput as e:
                raise InvalidInput(f"event {i}: {e}") from e
        # the write path places them in the run (starting the run when it is new)
        return self._writes.create(memories, chain="events")

    def events(
        self,
        run_id: str,
        *,
        event_types: Sequence[str] | None = None,
        limit: int | None = None,
        status: str | Sequence[str] | None = None,
        scope: Scope | str | None = None,
    ) -> builtins.list[Memory]:
        """A run's events in order (optionally only some types; with ``scope``, only
        those it may read)."""
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise InvalidInput(f"limit must be an int or None, got {type(limit).__name__}")
        flt = Filter.for_memories(run_id=run_id, event_type=event_types, status=status)
        if scope is not None:
            flt = self._namespaces.filter(scope, flt)
        events = [
            m for m in self._backend.match(Memory, flt, order_by="seq") if isinstance(m, Memory)
        ]
        return events if limit is None else events[-limit:] if limit > 0 else []

    def scratchpad(self, run_id: str | None = None) -> Scratchpad:
        """The fleeting tier of a run (or of the process): keyed notes with recall and
        forget, in process only, cleared by ``mem.lifecycle.on_turn_end``."""
        return self._lifecycle.scratchpad(run_id)

    def delete(self, run_id: str, *, cascade: bool = True) -> DeleteRunReport:
        """Delete a run for good: its memories (every status), with ``cascade`` also the
        memories derived from them (summaries, merges, newer versions — they carry the
        run's content), and its log entries (shared payloads are reference counted).

        The deleting transaction expects the run and its memories as they were listed: an
        append to the run (an event or a plain memory) or a new derivation from one of its
        memories committed meanwhile makes the delete list them again, so nothing
        acknowledged is left behind pointing at a deleted run or memory."""
        for attempt in range(DELETE_ATTEMPTS):
            # the run first: an append after this read changes what the delete expects
            run = self.get(run_id)
            own = [
                m.id
                for m in self._backend.match(
                    Memory, Filter.for_memories(run_id=run_id, status=None)
                )
            ]
            derived: builtins.list[str] = []
            # each doomed memory's incoming version edges as listed (cascade: all doomed)
            sources: dict[str, set[str]] = {}
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
                sources = {i: set() for i in (*own, *derived)}
                for e in sub.edges:
                    if e.dst.id in sources:
                        sources[e.dst.id].add(e.src.id)
            # what only the deleted memories superseded comes back, as after a forget (else
            # it stays superseded with nothing after it: out of recall, beyond restore)
            restored, still = self._writes.restorable(own + derived)
            unchanged = [
                Expect(
                    NodeRef(NodeLabel.MEMORY, i),
                    incoming=(EdgeType.DERIVED_FROM, EdgeType.SUPERSEDES),
                    sources=frozenset(srcs),
                )
                for i, srcs in sources.items()
            ]
            ends = {"event_count": run.event_count, "last_event_id": run.last_event_id}
            try:
                self._writes.delete_nodes(
                    [NodeRef(NodeLabel.MEMORY, i) for i in own + derived] + [run.ref],
                    expect=[Expect(run.ref, props=ends), *still, *unchanged],
                    nodes=restored,
                )
                break
            except Conflict:
                if attempt == DELETE_ATTEMPTS - 1:
                    raise
                log.info("run delete: the run changed while it was listed; listing again")
        entries = self._eventlog.delete_run(run_id)
        log.info(
            "deleted a run: %d memories, %d derived, %d log entries",
            len(own),
            len(derived),
            entries,
        )
        return DeleteRunReport(
            run_id=run_id, memories=len(own), derived=len(derived), log_entries=entries
        )

    def archive(self, run_ids: Sequence[str]) -> builtins.list[Run]:
        """Archive runs and their active memories (kept, but out of recall/context)."""
        now = self._clock()
        out: builtins.list[Run] = []
        with self._lock:
            for run in _only(Run, self._backend.get(Run, list(run_ids))):
                active = _only(
                    Memory, self._backend.match(Memory, Filter.for_memories(run_id=run.id))
                )
                archived = run.evolve(status=RunStatus.ARCHIVED, ended_at=run.ended_at or now)
                self._writes.set_status(
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

    def enforce(self, run_id: str | None = None) -> builtins.list[str]:
        """Apply the limits (called after every new run and every append); returns the ids
        of what was archived (runs and events)."""
        done: builtins.list[str] = []
        lim = self.limits
        if lim.max_runs is not None:
            live = validated(Filter, {"label": NodeLabel.RUN, "any_of": {"status": _LIVE}})
            n = self._backend.count(live)
            if n > lim.max_runs:
                k = lim.evict(n, lim.max_runs)
                oldest = self._backend.match(Run, live, order_by="started_at", limit=k)
                done.extend(r.id for r in self.archive([r.id for r in oldest]))
        if lim.max_events_per_run is not None and run_id is not None:
            flt = _events_filter(run_id, Status.ACTIVE.value)
            n = self._backend.count(flt)
            if n > lim.max_events_per_run:
                k = lim.evict(n, lim.max_events_per_run)
                old = _only(Memory, self._backend.match(Memory, flt, order_by="seq", limit=k))
                self._writes.set_status(old, Status.ARCHIVED, reason="run event limit")
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
        try:
            cutoff = (now or self._clock()) - timedelta(hours=older_than_hours)
        except OverflowError:
            raise InvalidInput("older_than_hours reaches back before the year 1") from None
        # validated: a naive ``now`` is InvalidInput, not the model's own error
        started: Range = validated(Range, {"field": "started_at", "lt": cutoff})
        flt = validated(Filter, {"label": NodeLabel.RUN, "ranges": (started,)})
        if archive:
            flt = flt.model_copy(update={"any_of": {"status": _LIVE}})
        candidates = _only(Run, self._backend.match(Run, flt, order_by="started_at"))
        last_ids = [r.last_event_id for r in candidates if r.last_event_id]
        last_at = {m.id: m.created_at for m in _only(Memory, self._backend.get(Memory, last_ids))}
        stale: builtins.list[Run] = []
        for r in candidates:
            times = [r.started_at, r.ended_at, last_at.get(r.last_event_id or "")]
            if max(t for t in times if t is not None) < cutoff:
                stale.append(r)
        ids = tuple(r.id for r in stale)
        memories = sum(self._backend.count(Filter.for_memories(run_id=i, status=None)) for i in ids)
        entries = sum(self._eventlog.count(run_id=i) for i in ids)
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
                    Run, validated(Filter, {"label": NodeLabel.RUN, "equals": equals})
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
        self.get(run_id)
        labels = dict(speakers or DEFAULT_SPEAKERS)
        if max_events == 0 or not labels:
            return ""
        flt = _events_filter(run_id, Status.ACTIVE.value).model_copy(
            update={"any_of": {"event_type": tuple(labels)}}
        )
        newest = _only(
            Memory,
            self._backend.match(Memory, flt, order_by="seq", descending=True, limit=max_events),
        )
        lines = []
        for m in reversed(newest):
            text = " ".join(m.content.split())
            lines.append(f"{labels[m.event_type or '']}: {text}")
        return "\n".join(lines)
