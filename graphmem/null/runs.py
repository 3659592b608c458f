"""The null runs and agents: run records are validated and returned, nothing is kept."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Unpack

from graphmem.boundary import guard
from graphmem.errors import InvalidInput, NotFound
from graphmem.lifecycle import Scratchpad
from graphmem.models import (
    Agent,
    Category,
    Memory,
    Run,
    RunStatus,
    Tier,
    validated,
)
from graphmem.null.base import NullPart
from graphmem.protocol import AgentsAPI, RunFilters, RunsAPI
from graphmem.runs import CleanupReport, DeleteRunReport, RunBasics, RunStats
from graphmem.scoping import Scope


class NullRuns(NullPart, RunBasics, RunsAPI):
    """``mem.runs`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        super().__init__(clock)
        self._pads: dict[str | None, Scratchpad] = {}

    def _keep(self, run: Run) -> None:
        pass

    def get(self, run_id: str) -> Run:
        raise NotFound(f"no run {run_id!r} (NullMemory stores nothing)")

    def end(self, run_id: str, *, status: RunStatus | str = RunStatus.COMPLETED) -> Run:
        run: Run = validated(
            Run,
            {
                "id": run_id,
                "status": status,
                "started_at": self._clock(),
                "ended_at": self._clock(),
            },
        )
        return run

    def list(
        self, *, limit: int | None = 100, offset: int = 0, **filters: Unpack[RunFilters]
    ) -> builtins.list[Run]:
        return []

    def add_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> builtins.list[Memory]:
        now = self._clock()
        out: builtins.list[Memory] = []
        for i, ev in enumerate(events):
            if not isinstance(ev, Mapping):
                raise InvalidInput(f"event {i}: expected a mapping")
            data = {k: v for k, v in ev.items() if v is not None}
            data.setdefault("created_at", now)
            data.setdefault("category", Category.EPISODIC)
            data.setdefault("tier", Tier.SHORT_TERM)
            data.update(run_id=run_id, seq=i)
            out.append(validated(Memory, data))
        return out

    def events(
        self,
        run_id: str,
        *,
        event_types: Sequence[str] | None = None,
        limit: int | None = None,
        status: str | Sequence[str] | None = None,
        scope: Scope | str | None = None,
    ) -> builtins.list[Memory]:
        return []

    def delete(self, run_id: str, *, cascade: bool = True) -> DeleteRunReport:
        return DeleteRunReport(run_id=run_id, memories=0, derived=0, log_entries=0)

    def cleanup(
        self,
        older_than_hours: float,
        *,
        archive: bool = False,
        dry_run: bool = False,
        now: datetime | None = None,
    ) -> CleanupReport:
        return CleanupReport(runs=(), memories=0, log_entries=0, archived=archive, dry_run=dry_run)

    def stats(self, *, agent_id: str | None = None, user_id: str | None = None) -> RunStats:
        return RunStats(
            runs=0,
            runs_by_status={s.value: 0 for s in RunStatus},
            events=0,
            active_events=0,
            average_events_per_run=0.0,
        )

    def conversation_context(
        self,
        run_id: str,
        max_events: int = 20,
        *,
        speakers: Mapping[str, str] | None = None,
    ) -> str:
        return ""

    def scratchpad(self, run_id: str | None = None) -> Scratchpad:
        return self._pads.setdefault(run_id, Scratchpad())

    def __repr__(self) -> str:
        return "<null runs>"


class NullAgents(NullPart, AgentsAPI):
    """``mem.agents`` of a NullMemory: every verb accepted, nothing stored."""

    def register(
        self,
        agent_id: str,
        *,
        name: str | None = None,
        seniority: str | None = None,
        autonomy: int | None = None,
        kind: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Agent:
        data: dict[str, Any] = {"id": agent_id, "name": name, "seniority": seniority}
        data["autonomy"] = autonomy
        data.update(kind=kind, metadata=metadata)
        agent: Agent = validated(Agent, {k: v for k, v in data.items() if v is not None})
        return agent

    def get(self, agent_id: str) -> Agent:
        raise NotFound(f"no agent {agent_id!r} (NullMemory stores nothing)")

    def list(self, *, limit: int | None = None, offset: int = 0) -> builtins.list[Agent]:
        return []

    def __repr__(self) -> str:
        return "<null agents>"


# runs.list takes its filters as keywords (RunFilters): without the check a misspelt filter
# would pass unseen on the null face, where it is refused on the store's
guard(NullRuns, ["list"], prefix="mem.runs")
