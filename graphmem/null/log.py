"""The null event log, vectors, transfer and write path."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from graphmem.errors import InvalidInput, NotFound
from graphmem.eventlog import LogRecord, canonical_json
from graphmem.models import (
    LogEntry,
    Memory,
    Status,
    Tier,
    validated,
)
from graphmem.null.base import NullPart
from graphmem.protocol import (
    ImportReport,
    LogAPI,
    TransferAPI,
    VectorsAPI,
    WritesAPI,
)
from graphmem.reconcile import ReconcileResult
from graphmem.reindex import Progress, ReindexReport


class NullLog(NullPart, LogAPI):
    """``mem.log`` of a NullMemory: every verb accepted, nothing stored."""

    def log(
        self,
        agent_id: str,
        event_type: str,
        payload: Any = None,
        *,
        run_id: str | None = None,
        step: int | None = None,
        parent: str | None = None,
        at: datetime | None = None,
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
                "at": at or self._clock(),
                "payload": text,
                "payload_size": 0 if text is None else len(text.encode("utf-8")),
            },
        )
        return entry

    def tail(
        self,
        n: int = 20,
        *,
        run_id: str | None = None,
        agent_id: str | None = None,
        event_type: str | None = None,
    ) -> builtins.list[LogRecord]:
        return []

    def count(self, *, run_id: str | None = None, agent_id: str | None = None) -> int:
        return 0

    # keys, hashes and sets: accepted and forgotten, like everything else
    def set(self, key: str, value: Any) -> bool:
        return True

    def get(self, key: str, default: Any = None) -> Any:
        return default

    def delete(self, *keys: str) -> int:
        return 0

    def hset(self, key: str, field: str, value: Any) -> int:
        return 1

    def hget(self, key: str, field: str, default: Any = None) -> Any:
        return default

    def hkeys(self, key: str) -> builtins.list[str]:
        return []

    def hdel(self, key: str, *fields: str) -> int:
        return 0

    def sadd(self, key: str, *members: Any) -> int:
        return len(set(members))

    def srem(self, key: str, *members: Any) -> int:
        return 0

    def smembers(self, key: str) -> builtins.set[Any]:
        return set()

    def __repr__(self) -> str:
        return "<null log>"


class NullVectors(NullPart, VectorsAPI):
    """``mem.vectors`` of a NullMemory: every verb accepted, nothing stored."""

    def wait(self, timeout: float | None = None) -> None:
        return None

    def reindex(
        self,
        *,
        embedder: Any | None = None,
        all: bool = False,
        batch_size: int = 256,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> ReindexReport:
        return ReindexReport(dry_run=dry_run, model=None, dim=None, store_dim=None)

    def __repr__(self) -> str:
        return "<null vectors>"


class NullTransfer(TransferAPI):
    """``mem.transfer`` of a NullMemory: an export of nothing, an import that keeps nothing."""

    def export(self, dest: str | Path | IO[str]) -> ImportReport:
        return ImportReport(nodes=0, edges=0)

    def import_(self, src: str | Path | IO[str], *, batch_size: int = 2000) -> ImportReport:
        return ImportReport(nodes=0, edges=0)


class NullWrites(NullPart, WritesAPI):
    """``mem.writes`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._local = threading.local()

    def reconcile(self, content: str, *, mode: str | None = None, **fields: Any) -> ReconcileResult:
        if mode is not None and mode not in ("auto", "off", "llm"):
            raise InvalidInput(f"reconcile must be 'auto', 'off' or 'llm', not {mode!r}")
        data = {k: v for k, v in {"content": content, **fields}.items() if v is not None}
        data.setdefault("created_at", self._clock())
        if "user_id" in data:
            data["metadata"] = {**(data.get("metadata") or {}), "user_id": data.pop("user_id")}
        data.setdefault("tier", Tier.LONG_TERM)
        data.setdefault("importance", 0.5)
        result = ReconcileResult(action="created", memory=validated(Memory, data))
        self._local.last = result
        return result

    def supersede(
        self,
        olds: Sequence[Memory | str],
        new: Memory | str,
        *,
        reason: str,
        pass_name: str | None = None,
        create_new: bool = True,
    ) -> Memory:
        raise NotFound("NullMemory stores nothing: no memory to supersede")

    def link(
        self, derived_id: str, source_ids: Sequence[str], *, pass_name: str = "manual"
    ) -> None:
        raise NotFound(f"no memory {derived_id!r} (NullMemory stores nothing)")

    def set_status(
        self,
        memories: Sequence[Memory | str],
        status: Status | str,
        *,
        reason: str | None = None,
        pin: bool | None = None,
        extra: Mapping[str, Any] | None = None,
        nodes: Sequence[Any] = (),
        expect: Sequence[Any] = (),
    ) -> builtins.list[Memory]:
        if memories:
            raise NotFound("NullMemory stores nothing: no memory to change")
        return []

    @property
    def last_reconcile(self) -> ReconcileResult | None:
        """What this thread's last :meth:`reconcile` (or ``remember``) would have done."""
        result: ReconcileResult | None = getattr(self._local, "last", None)
        return result

    def __repr__(self) -> str:
        return "<null writes>"
