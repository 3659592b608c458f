"""NullMemory itself: the core verbs, and the null sub-objects it hands out."""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Unpack, overload

import networkx as nx

from graphmem.errors import InvalidInput, NotFound
from graphmem.llm import LLM
from graphmem.models import (
    Memory,
    RecallResult,
    utcnow,
    validated,
)
from graphmem.null.lifecycle import NullKnowledge, NullLifecycle
from graphmem.null.log import NullLog, NullTransfer, NullVectors, NullWrites
from graphmem.null.org import NullNamespaces, NullOrg
from graphmem.null.runs import NullAgents, NullRuns
from graphmem.protocol import (
    ContextOptions,
    ForgetReport,
    MemoryAPI,
    MemoryFields,
)
from graphmem.reconcile import ReconcileResult
from graphmem.scoping import Scope


class NullMemory(MemoryAPI):
    """A memory that stores nothing, with GraphMemory's face (see module docs)."""

    runs: NullRuns
    agents: NullAgents
    org: NullOrg
    namespaces: NullNamespaces
    lifecycle: NullLifecycle
    knowledge: NullKnowledge
    log: NullLog
    vectors: NullVectors
    transfer: NullTransfer
    writes: NullWrites

    def __init__(self, *, clock: Callable[[], datetime] = utcnow) -> None:
        self._clock = clock
        self.runs = NullRuns(clock)
        self.agents = NullAgents(clock)
        self.org = NullOrg(clock)
        self.namespaces = NullNamespaces(clock)
        self.lifecycle = NullLifecycle(clock)
        self.knowledge = NullKnowledge(clock)
        self.log = NullLog(clock)
        self.vectors = NullVectors(clock)
        self.transfer = NullTransfer()
        self.writes = NullWrites(clock)
        self.llm: LLM | None = None

    @classmethod
    def open(cls, url: str | os.PathLike[str] | None = None, **_options: Any) -> NullMemory:
        """A NullMemory, whatever the URL and options (so it drops in for
        ``GraphMemory.open``)."""
        return cls()

    def close(self) -> None:
        return None

    def __enter__(self) -> NullMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @property
    def last_reconcile(self) -> ReconcileResult | None:
        return self.writes.last_reconcile

    @property
    def graph(self) -> nx.MultiDiGraph:
        empty: nx.MultiDiGraph = nx.freeze(nx.MultiDiGraph())
        return empty

    # -- writes: validated, returned, not stored ----------------------------------------

    def remember(
        self, content: str, *, reconcile: str | None = None, **fields: Unpack[MemoryFields]
    ) -> Memory:
        return self.writes.reconcile(content, mode=reconcile, **fields).memory

    def add_messages(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        run_id: str | None = None,
        namespace: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[Memory]:
        """Validates the messages as :meth:`GraphMemory.add_messages` would; stores nothing."""
        from graphmem.messages import add_messages

        return add_messages(
            self,
            messages,
            agent_id=agent_id,
            user_id=user_id,
            run_id=run_id,
            namespace=namespace,
            metadata=metadata,
        )

    def remember_many(self, items: Iterable[Memory | Mapping[str, Any]]) -> builtins.list[Memory]:
        out: builtins.list[Memory] = []
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

    def update(
        self,
        memory_id: str,
        content: str | None = None,
        *,
        reason: str = "update",
        **changes: Any,
    ) -> Memory:
        raise NotFound(f"no memory {memory_id!r} (NullMemory stores nothing)")

    def forget(
        self, memory_id: str, *, cascade: bool = True, dry_run: bool = False
    ) -> ForgetReport:
        return ForgetReport(deleted=(), restored=(), dry_run=dry_run)

    # -- reads: nothing there -----------------------------------------------------------

    def _fetch(
        self, ids: Sequence[str], scope: Scope | str | None, current: bool
    ) -> builtins.list[Memory]:
        return []

    def history(self, memory_id: str, *, scope: Scope | str | None = None) -> builtins.list[Memory]:
        raise NotFound(f"no memory {memory_id!r} (NullMemory stores nothing)")

    def count(self, **_filters: Any) -> int:
        return 0

    def recall(self, query: str, **_filters: Any) -> builtins.list[RecallResult]:
        return []

    def relevance(self, memory: Memory, *, now: datetime | None = None) -> float:
        if not isinstance(memory, Memory):
            raise InvalidInput(f"relevance takes a Memory, not {type(memory).__name__}")
        return 0.0

    @overload
    def context(
        self,
        query: str = "",
        *,
        format: Literal["text"] = "text",
        **options: Unpack[ContextOptions],
    ) -> str: ...

    @overload
    def context(
        self, query: str = "", *, format: Literal["messages"], **options: Unpack[ContextOptions]
    ) -> builtins.list[dict[str, str]]: ...

    def context(
        self, query: str = "", *, format: str = "text", **_options: Any
    ) -> str | builtins.list[dict[str, str]]:
        if format not in ("text", "messages"):
            raise InvalidInput(f"format must be 'text' or 'messages', not {format!r}")
        if format == "text":
            return ""
        return [{"role": "user", "content": query}] if query.strip() else []

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
    def list(self, **_filters: Any) -> builtins.list[Memory]:
        return []
