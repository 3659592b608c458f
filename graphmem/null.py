"""NullMemory: the GraphMemory interface for stateless agents — every call is accepted and
nothing is stored.

Writes validate their input (bad input still raises InvalidInput, as with a real store) and
return the value that would have been stored; reads return nothing (empty lists, empty
text, zero counts); looking up one specific memory is a NotFound, because there is none.
Any other public GraphMemory method is accepted too and returns None.

>>> from graphmem.null import NullMemory
>>> mem = NullMemory()
>>> m = mem.remember("Alice prefers tea", agent_id="assistant")
>>> mem.recall("tea"), mem.count(), mem.conversation_context("r1")
([], 0, '')
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from graphmem.errors import InvalidInput, NotFound
from graphmem.eventlog import LogRecord, canonical_json
from graphmem.models import (
    Category,
    LogEntry,
    Memory,
    RecallResult,
    Run,
    RunStatus,
    Tier,
    Visibility,
    utcnow,
    validated,
)
from graphmem.runs import CleanupReport, DeleteRunReport, RunStats

__all__ = ["NullMemory"]

log = logging.getLogger("graphmem.null")


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


class _NullPart:
    """Stands in for ``mem.org``, ``mem.runs`` …: every method accepts and does nothing."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("_"):
            raise AttributeError(name)
        return _nothing

    def __repr__(self) -> str:
        return f"<null {self._name}>"


class NullMemory:
    """A memory that stores nothing, with GraphMemory's interface (see module docs)."""

    def __init__(self, *, clock: Callable[[], datetime] = utcnow) -> None:
        self._clock = clock
        self.org = _NullPart("org")
        self.namespaces = _NullPart("namespaces")
        self.runs = _NullPart("runs")
        self.eventlog = _NullPart("eventlog")
        self.llm: Any = None
        self.settings: Any = None

    @classmethod
    def open(cls, *_args: Any, **_kwargs: Any) -> NullMemory:
        return cls()

    def __getattr__(self, name: str) -> Callable[..., None]:
        # any other public GraphMemory method: accepted, does nothing
        if name.startswith("_"):
            raise AttributeError(name)
        return _nothing

    def close(self) -> None:
        return None

    def __enter__(self) -> NullMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @property
    def backend(self) -> None:
        return None

    @property
    def embedder(self) -> None:
        return None

    def now(self) -> datetime:
        return self._clock()

    # -- writes: validated, returned, not stored ----------------------------------------

    def remember(
        self,
        content: str,
        *,
        agent_id: str = "default",
        run_id: str | None = None,
        namespace: str = "default",
        category: Category | str = Category.SEMANTIC,
        tier: Tier | str = Tier.LONG_TERM,
        importance: float = 0.5,
        confidence: float = 1.0,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        event_type: str | None = None,
        created_at: datetime | None = None,
        valid_from: datetime | None = None,
        expires_at: datetime | None = None,
        visibility: Visibility | str = Visibility.PRIVATE,
    ) -> Memory:
        data = {
            "content": content,
            "agent_id": agent_id,
            "run_id": run_id,
            "namespace": namespace,
            "category": category,
            "tier": tier,
            "importance": importance,
            "confidence": confidence,
            "tags": tags,
            "metadata": metadata,
            "event_type": event_type,
            "created_at": created_at or self._clock(),
            "valid_from": valid_from,
            "expires_at": expires_at,
            "visibility": visibility,
        }
        return self.remember_many([data])[0]

    def remember_many(self, items: Iterable[Memory | Mapping[str, Any]]) -> list[Memory]:
        out: list[Memory] = []
        for i, item in enumerate(items):
            if isinstance(item, Memory):
                out.append(item)
                continue
            if not isinstance(item, Mapping):
                raise InvalidInput(f"item {i}: expected a Memory or a mapping")
            data = {k: v for k, v in item.items() if v is not None}
            data.setdefault("created_at", self._clock())
            out.append(validated(Memory, data))
        return out

    def add_event(self, run_id: str, event_type: str, content: str, **kw: Any) -> Memory:
        return self.add_events(run_id, [{"event_type": event_type, "content": content, **kw}])[0]

    def add_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> list[Memory]:
        now = self._clock()
        out: list[Memory] = []
        for i, ev in enumerate(events):
            data = {k: v for k, v in ev.items() if v is not None}
            data.setdefault("created_at", now)
            data.setdefault("category", Category.EPISODIC)
            data.setdefault("tier", Tier.SHORT_TERM)
            data.update(run_id=run_id, seq=i)
            out.append(validated(Memory, data))
        return out

    def start_run(self, agent_id: str = "default", *, run_id: str | None = None, **kw: Any) -> Run:
        data: dict[str, Any] = {
            "agent_id": agent_id,
            "started_at": self._clock(),
            **{k: v for k, v in kw.items() if v is not None},
        }
        if run_id is not None:
            data["id"] = run_id
        run: Run = validated(Run, data)
        return run

    def get_or_create_run(
        self, run_id: str, *, agent_id: str = "default", **kw: Any
    ) -> tuple[Run, bool]:
        return self.start_run(agent_id, run_id=run_id, **kw), True

    def end_run(self, run_id: str, *, status: RunStatus | str = RunStatus.COMPLETED) -> Run:
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

    def log(
        self,
        agent_id: str,
        event_type: str,
        payload: Any = None,
        *,
        run_id: str | None = None,
        step: int | None = None,
        parent: str | None = None,
    ) -> LogEntry:
        text = None if payload is None else canonical_json(payload)
        entry: LogEntry = validated(
            LogEntry,
            {
                "agent_id": agent_id,
                "event_type": event_type,
                "run_id": run_id,
                "step": step,
                "parent_id": parent,
                "at": self._clock(),
                "payload": text,
                "payload_size": 0 if text is None else len(text.encode("utf-8")),
            },
        )
        return entry

    def forget(self, memory_id: str, **_kw: Any) -> Any:
        from graphmem.memory import ForgetReport

        return ForgetReport(deleted=(), restored=(), dry_run=bool(_kw.get("dry_run", False)))

    def delete_run(self, run_id: str, **_kw: Any) -> DeleteRunReport:
        return DeleteRunReport(run_id=run_id, memories=0, derived=0, log_entries=0)

    def cleanup_runs(
        self, older_than_hours: float, *, archive: bool = False, dry_run: bool = False
    ) -> CleanupReport:
        return CleanupReport(runs=(), memories=0, log_entries=0, archived=archive, dry_run=dry_run)

    # -- reads: nothing there -----------------------------------------------------------

    def get(self, memory_id: str) -> Memory:
        raise NotFound(f"no memory {memory_id!r} (NullMemory stores nothing)")

    def update(self, memory_id: str, *_args: Any, **_kw: Any) -> Memory:
        raise NotFound(f"no memory {memory_id!r} (NullMemory stores nothing)")

    def history(self, memory_id: str) -> list[Memory]:
        raise NotFound(f"no memory {memory_id!r} (NullMemory stores nothing)")

    def current(self, memory_id: str) -> Memory:
        raise NotFound(f"no memory {memory_id!r} (NullMemory stores nothing)")

    def get_run(self, run_id: str) -> Run:
        raise NotFound(f"no run {run_id!r} (NullMemory stores nothing)")

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        return []

    def recall(self, query: str, **_kw: Any) -> list[RecallResult]:
        return []

    def context(self, query: str, **_kw: Any) -> str:
        return ""

    def count(self, **_kw: Any) -> int:
        return 0

    def events(self, run_id: str, **_kw: Any) -> list[Memory]:
        return []

    def list_runs(self, **_kw: Any) -> list[Run]:
        return []

    def list_agents(self, **_kw: Any) -> list[Any]:
        return []

    def conversation_context(self, run_id: str, max_events: int = 20) -> str:
        return ""

    def tail(self, n: int = 20, **_kw: Any) -> list[LogRecord]:
        return []

    def run_stats(self, **_kw: Any) -> RunStats:
        return RunStats(
            runs=0,
            runs_by_status={s.value: 0 for s in RunStatus},
            events=0,
            active_events=0,
            average_events_per_run=0.0,
        )

    def stats(self) -> dict[str, Any]:
        return {
            "backend": "null",
            "location": None,
            "file_bytes": None,
            "nodes": {},
            "edges": {},
            "memories_by_status": {},
            "memories_by_tier": {},
            "embedding_dim": None,
        }

    def __repr__(self) -> str:
        return "NullMemory()"

    # last in the class: mypy resolves ``list[...]`` after it to this method
    def list(self, **_kw: Any) -> list[Memory]:
        return []
