"""The face of the house as types: :class:`MemoryAPI` (the core verbs and the sub-objects)
and one Protocol per sub-object. :class:`~graphmem.memory.GraphMemory` and
:class:`~graphmem.null.NullMemory` implement them explicitly (mypy checks every
signature); :class:`~graphmem.aio.AsyncGraphMemory` mirrors them as coroutines (a sync
Protocol cannot describe coroutine methods; ``tests/unit/test_face.py`` checks that the
async facade has every name). Each sub-object's Protocol names the class that implements it;
a null part of NullMemory implements it too. The reports of the core verbs live here too.

It is called ``MemoryAPI``, not ``Memory``: :class:`graphmem.Memory` is the memory node.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import (
    IO,
    TYPE_CHECKING,
    Any,
    Literal,
    Protocol,
    TypedDict,
    Unpack,
    overload,
    runtime_checkable,
)

from pydantic import BaseModel, ConfigDict

from graphmem.errors import InvalidInput, NotFound
from graphmem.models import (
    Agent,
    Category,
    Entity,
    EntityType,
    LogEntry,
    Memory,
    Namespace,
    OrgFact,
    RecallResult,
    Run,
    RunStatus,
    Status,
    Subgraph,
    Tier,
    Visibility,
)
from graphmem.scoping import Scope

if TYPE_CHECKING:
    import networkx as nx

    from graphmem.config import ConsolidationConfig, LifecycleConfig, RecallConfig
    from graphmem.consolidation import (
        ConsolidationReport,
        FactsReport,
        ImproveReport,
        UnmergeReport,
    )
    from graphmem.eventlog import LogRecord
    from graphmem.knowledge.api import About
    from graphmem.lifecycle import (
        MaintenanceReport,
        Scratchpad,
        TurnReport,
    )
    from graphmem.llm import LLM, Reflection
    from graphmem.reconcile import ReconcileResult
    from graphmem.reindex import Progress, ReindexReport
    from graphmem.runs import CleanupReport, DeleteRunReport, RunStats

__all__ = [
    "AgentsAPI",
    "ContextFormat",
    "ContextOptions",
    "ForgetReport",
    "ImportReport",
    "KnowledgeAPI",
    "LifecycleAPI",
    "LogAPI",
    "MemoryAPI",
    "MemoryFields",
    "MemoryFilters",
    "NamespacesAPI",
    "OrgAPI",
    "ReadFilters",
    "RunsAPI",
    "TransferAPI",
    "VectorsAPI",
    "WritesAPI",
]

#: ``mem.context(format=...)``: one text block, or role-tagged chat messages
ContextFormat = Literal["text", "messages"]


class MemoryFields(TypedDict, total=False):
    """What a caller may say about a new memory (``remember``; the defaults are
    :meth:`GraphMemory.remember`'s)."""

    agent_id: str
    run_id: str | None
    namespace: str
    category: Category | str
    tier: Tier | str | None
    importance: float | None
    confidence: float
    tags: Sequence[str]
    metadata: Mapping[str, Any] | None
    event_type: str | None
    created_at: datetime | None
    valid_from: datetime | None
    expires_at: datetime | None
    visibility: Visibility | str
    user_id: str | None


class ReadFilters(TypedDict, total=False):
    """The memory filters of every read, the run aside: :class:`MemoryFilters` without
    ``run_id``, which in ``context`` names the conversation instead."""

    agent_id: str | Sequence[str] | None
    namespace: str | Sequence[str] | None
    category: str | Sequence[str] | None
    tier: str | Sequence[str] | None
    event_type: str | Sequence[str] | None
    status: str | Sequence[str] | None
    tags: Sequence[str] | None
    since: datetime | None
    until: datetime | None
    as_of: datetime | None
    metadata: Mapping[str, Any] | None
    scope: Scope | str | None
    user_id: str | None


class MemoryFilters(ReadFilters, total=False):
    """The filters of ``list``, ``count``, ``recall`` (and ``context``): which memories a
    read looks at. A sequence means "any of"; ``status`` is ``"active"`` unless given
    (``None``: every status); ``tags`` must all be present; ``since``/``until`` bound
    ``created_at``; ``as_of`` keeps what was valid then (superseded versions included);
    ``metadata`` matches ``metadata.<key>`` exactly; ``user_id`` is ``metadata.user_id``;
    ``scope`` (a :class:`~graphmem.scoping.Scope` or an agent id) keeps what it may read."""

    run_id: str | Sequence[str] | None


class RunFilters(TypedDict, total=False):
    """Which runs ``runs.list`` reads: those whose field equals each value given (a
    ``namespace`` list: those in any of them)."""

    agent_id: str | None
    user_id: str | None
    status: str | None
    namespace: str | Sequence[str] | None


class ContextOptions(ReadFilters, total=False):
    """The options of ``context`` besides the query and the format: the window, the
    messages format's ``run_id``/``system``/``max_events``, and the memory filters
    (:class:`MemoryFilters` but the run, which names the conversation here)."""

    max_tokens: int
    k: int
    policies: Sequence[str] | None
    config: RecallConfig | str | None
    touch: bool
    run_id: str | None
    system: str | None
    max_events: int


class ForgetReport(BaseModel):
    """What ``forget`` deleted (or would delete, on a dry run) and what it restored."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    deleted: tuple[str, ...]
    restored: tuple[str, ...]
    dry_run: bool = False


class ImportReport(BaseModel):
    """How many nodes and edges an export wrote or an import loaded."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    nodes: int
    edges: int


@runtime_checkable
class RunsAPI(Protocol):
    """Sessions and their ordered events (``mem.runs``: :class:`Runs`)."""

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
    ) -> Run: ...

    def get(self, run_id: str) -> Run: ...

    def end(self, run_id: str, *, status: RunStatus | str = RunStatus.COMPLETED) -> Run: ...

    def list(
        self, *, limit: int | None = 100, offset: int = 0, **filters: Unpack[RunFilters]
    ) -> builtins.list[Run]: ...

    def get_or_create(
        self,
        run_id: str,
        *,
        agent_id: str = "default",
        user_id: str | None = None,
        app_name: str | None = None,
        namespace: str = "default",
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[Run, bool]: ...

    def add_event(
        self,
        run_id: str,
        event_type: str,
        content: str,
        *,
        agent_id: str | None = None,
        importance: float | None = None,
        tier: Tier | str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> Memory: ...

    def add_events(
        self, run_id: str, events: Sequence[Mapping[str, Any]]
    ) -> builtins.list[Memory]: ...

    def events(
        self,
        run_id: str,
        *,
        event_types: Sequence[str] | None = None,
        limit: int | None = None,
        status: str | Sequence[str] | None = None,
        scope: Scope | str | None = None,
    ) -> builtins.list[Memory]: ...

    def delete(self, run_id: str, *, cascade: bool = True) -> DeleteRunReport: ...

    def cleanup(
        self,
        older_than_hours: float,
        *,
        archive: bool = False,
        dry_run: bool = False,
        now: datetime | None = None,
    ) -> CleanupReport: ...

    def stats(self, *, agent_id: str | None = None, user_id: str | None = None) -> RunStats: ...

    def conversation_context(
        self,
        run_id: str,
        max_events: int = 20,
        *,
        speakers: Mapping[str, str] | None = None,
    ) -> str: ...

    def scratchpad(self, run_id: str | None = None) -> Scratchpad: ...


@runtime_checkable
class AgentsAPI(Protocol):
    """The agents that author memories (``mem.agents``: :class:`Agents`)."""

    def register(
        self,
        agent_id: str,
        *,
        name: str | None = None,
        seniority: str | None = None,
        autonomy: int | None = None,
        kind: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Agent: ...

    def get(self, agent_id: str) -> Agent: ...

    def list(self, *, limit: int | None = None, offset: int = 0) -> builtins.list[Agent]: ...


@runtime_checkable
class OrgAPI(Protocol):
    """Organisation memory: versioned facts and policies (``mem.org``: :class:`OrgMemory`)."""

    def publish(
        self,
        content: str,
        *,
        author: str,
        category: str | None = None,
        fact_id: str | None = None,
        tags: Sequence[str] | None = None,
        core: bool | None = None,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> OrgFact: ...

    def retract(self, fact_id: str, *, author: str, reason: str | None = None) -> OrgFact: ...

    def get(self, fact_id: str) -> OrgFact: ...

    def versions(self, fact_id: str) -> builtins.list[OrgFact]: ...

    def query(
        self,
        text: str | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        tags: Sequence[str] | None = None,
        include_retracted: bool = False,
        limit: int = 10,
    ) -> builtins.list[OrgFact]: ...

    def list(
        self,
        *,
        categories: Sequence[str] | None = None,
        include_retracted: bool = False,
        limit: int | None = 100,
        offset: int = 0,
    ) -> builtins.list[OrgFact]: ...

    def core_policies(self) -> builtins.list[str]: ...


@runtime_checkable
class NamespacesAPI(Protocol):
    """Shared namespaces and their members (``mem.namespaces``: :class:`Namespaces`)."""

    def create(self, name: str, *, owner: str, members: Iterable[str] = ()) -> Namespace: ...

    def get(self, name: str) -> Namespace: ...

    def list(self, *, member: str | None = None) -> builtins.list[Namespace]: ...

    def add_members(
        self, name: str, agents: Sequence[str], *, by: str | None = None
    ) -> Namespace: ...

    def remove_members(
        self, name: str, agents: Sequence[str], *, by: str | None = None
    ) -> Namespace: ...


@runtime_checkable
class LifecycleAPI(Protocol):
    """Maintenance, the passes over memories and the hooks
    (``mem.lifecycle``: :class:`Lifecycle`)."""

    def maintain(
        self,
        *,
        dry_run: bool = False,
        hard_delete: bool = False,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        steps: Sequence[str] = ...,
        consolidate_llm: LLM | None = None,
    ) -> MaintenanceReport: ...

    def consolidate(
        self,
        *,
        dry_run: bool = False,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        config: ConsolidationConfig | None = None,
        llm: LLM | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> ConsolidationReport: ...

    def unmerge(self, merged_id: str, *, dry_run: bool = False) -> UnmergeReport: ...

    def summarize(
        self,
        memory_ids: Sequence[str] | None = None,
        *,
        run_id: str | None = None,
        llm: LLM | None = None,
        dry_run: bool = False,
    ) -> Memory: ...

    def improve(
        self,
        memory_ids: Sequence[str] | None = None,
        *,
        llm: LLM | None = None,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        limit: int = 200,
        dry_run: bool = False,
    ) -> ImproveReport: ...

    def extract_facts(
        self,
        turn: str,
        *,
        agent_id: str = "default",
        namespace: str = "default",
        run_id: str | None = None,
        speaker: str = "user",
        source_ids: Sequence[str] = (),
        llm: LLM | None = None,
        dry_run: bool = False,
    ) -> FactsReport: ...

    def reflect(
        self, question: str, *, k: int = 10, llm: LLM | None = None, **recall_filters: Any
    ) -> Reflection: ...

    def archive(
        self,
        memory_ids: Sequence[str],
        *,
        reason: str = "manual",
        dry_run: bool = False,
        hard_delete: bool = False,
    ) -> MaintenanceReport: ...

    def restore(
        self, memory_ids: Sequence[str], *, pin: bool = False, dry_run: bool = False
    ) -> MaintenanceReport: ...

    def provenance(
        self, memory_id: str, *, depth: int = 10, scope: Scope | str | None = None
    ) -> Subgraph: ...

    def on_turn_end(
        self,
        run_id: str | None = None,
        *,
        turn: str | None = None,
        speaker: str = "user",
        agent_id: str = "default",
        namespace: str = "default",
        source_ids: Sequence[str] = (),
        extract_facts: bool = False,
        dry_run: bool = False,
    ) -> TurnReport: ...

    def on_run_end(self, run_id: str, *, dry_run: bool = False) -> MaintenanceReport: ...

    def on_idle(self, *, dry_run: bool = False, **options: Any) -> MaintenanceReport: ...

    def configure(self, config: LifecycleConfig) -> None: ...


@runtime_checkable
class KnowledgeAPI(Protocol):
    """The knowledge layer: entities and what is known about one
    (``mem.knowledge``: :class:`Knowledge`)."""

    def entities(
        self, *, type: EntityType | str | None = None, limit: int = 100, **filters: Any
    ) -> builtins.list[Entity]: ...

    def about(self, name: str, *, limit: int = 200, **filters: Any) -> About: ...


@runtime_checkable
class LogAPI(Protocol):
    """The orchestration log (``mem.log``: :class:`EventLog`)."""

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
    ) -> LogEntry: ...

    def tail(
        self,
        n: int = 20,
        *,
        run_id: str | None = None,
        agent_id: str | None = None,
        event_type: str | None = None,
    ) -> builtins.list[LogRecord]: ...

    def count(self, *, run_id: str | None = None, agent_id: str | None = None) -> int: ...

    def set(self, key: str, value: Any) -> bool: ...

    def get(self, key: str, default: Any = None) -> Any: ...

    def delete(self, *keys: str) -> int: ...

    def hset(self, key: str, field: str, value: Any) -> int: ...

    def hget(self, key: str, field: str, default: Any = None) -> Any: ...

    def hkeys(self, key: str) -> builtins.list[str]: ...

    def hdel(self, key: str, *fields: str) -> int: ...

    def sadd(self, key: str, *members: Any) -> int: ...

    def srem(self, key: str, *members: Any) -> int: ...

    def smembers(self, key: str) -> builtins.set[Any]: ...


@runtime_checkable
class VectorsAPI(Protocol):
    """The store's vectors (``mem.vectors``: :class:`Vectors`)."""

    def wait(self, timeout: float | None = None) -> None: ...

    def reindex(
        self,
        *,
        embedder: Any | None = None,
        all: bool = False,
        batch_size: int = 256,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> ReindexReport: ...


@runtime_checkable
class TransferAPI(Protocol):
    """Export and import of a whole store
    (``mem.transfer``: :class:`~graphmem.transfer.Transfer`)."""

    def export(self, dest: str | Path | IO[str]) -> ImportReport: ...

    def import_(self, src: str | Path | IO[str], *, batch_size: int = 2000) -> ImportReport: ...


@runtime_checkable
class WritesAPI(Protocol):
    """The low-level write verbs (``mem.writes``: :class:`MemoryWrites`)."""

    def reconcile(
        self, content: str, *, mode: str | None = None, **fields: Any
    ) -> ReconcileResult: ...

    def supersede(
        self,
        olds: Sequence[Memory | str],
        new: Memory | str,
        *,
        reason: str,
        pass_name: str | None = None,
        create_new: bool = True,
    ) -> Memory: ...

    def link(
        self, derived_id: str, source_ids: Sequence[str], *, pass_name: str = "manual"
    ) -> None: ...

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
    ) -> builtins.list[Memory]: ...


@runtime_checkable
class MemoryAPI(Protocol):
    """The face of a memory: what :class:`~graphmem.memory.GraphMemory` and
    :class:`~graphmem.null.NullMemory` implement (and, as coroutines,
    :class:`~graphmem.aio.AsyncGraphMemory`). Type an agent's memory parameter with it to
    accept either. The sub-objects own every verb that is not a core one."""

    runs: RunsAPI

    agents: AgentsAPI

    org: OrgAPI

    namespaces: NamespacesAPI

    lifecycle: LifecycleAPI

    knowledge: KnowledgeAPI

    log: LogAPI

    vectors: VectorsAPI

    transfer: TransferAPI

    writes: WritesAPI

    @property
    def last_reconcile(self) -> ReconcileResult | None: ...

    @property
    def graph(self) -> nx.MultiDiGraph: ...

    def close(self) -> None: ...

    def remember(
        self, content: str, *, reconcile: str | None = None, **fields: Unpack[MemoryFields]
    ) -> Memory: ...

    def remember_many(
        self, items: Iterable[Memory | Mapping[str, Any]]
    ) -> builtins.list[Memory]: ...

    def add_messages(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        run_id: str | None = None,
        namespace: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[Memory]: ...

    @overload
    def get(
        self, memory_id: str, *, scope: Scope | str | None = None, current: bool = False
    ) -> Memory: ...

    @overload
    def get(
        self,
        memory_id: builtins.list[str] | tuple[str, ...],
        *,
        scope: Scope | str | None = None,
        current: bool = False,
    ) -> builtins.list[Memory]: ...

    def get(
        self,
        memory_id: str | Sequence[str],
        *,
        scope: Scope | str | None = None,
        current: bool = False,
    ) -> Memory | builtins.list[Memory]:
        """The memory with this id (any status); NotFound if there is none, or if
        ``scope`` (an agent id or :class:`Scope`) may not read it.

        Given a list of ids: the memories that exist among them (and that ``scope`` may
        read), in order — no NotFound. ``current=True``: the newest active version in
        each memory's history instead (NotFound when a chain has none)."""
        if isinstance(memory_id, str):
            found = self._fetch([memory_id], scope, current)
            if not found:
                raise NotFound(f"no memory {memory_id!r}")
            return found[0]
        if not isinstance(memory_id, Sequence):
            raise InvalidInput("memory_id must be an id or a list of ids")
        return self._fetch(memory_id, scope, current)

    def _fetch(
        self, ids: Sequence[str], scope: Scope | str | None, current: bool
    ) -> builtins.list[Memory]:
        """The memories among ``ids`` that ``scope`` may read, in order (each replaced by
        its newest active version when ``current``): what :meth:`get` is made of."""
        ...

    def update(
        self,
        memory_id: str,
        content: str | None = None,
        *,
        reason: str = "update",
        **changes: Any,
    ) -> Memory: ...

    def forget(
        self, memory_id: str, *, cascade: bool = True, dry_run: bool = False
    ) -> ForgetReport: ...

    def history(
        self, memory_id: str, *, scope: Scope | str | None = None
    ) -> builtins.list[Memory]: ...

    def list(
        self,
        *,
        limit: int | None = 100,
        offset: int = 0,
        order_by: str = "created_at",
        descending: bool = True,
        **filters: Unpack[MemoryFilters],
    ) -> builtins.list[Memory]: ...

    def count(self, **filters: Unpack[MemoryFilters]) -> int: ...

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        touch: bool = True,
        config: RecallConfig | str | None = None,
        min_relevance: float | None = None,
        tiers: str | Sequence[str] | None = None,
        **filters: Unpack[MemoryFilters],
    ) -> builtins.list[RecallResult]: ...

    def relevance(self, memory: Memory, *, now: datetime | None = None) -> float: ...

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

    def stats(self) -> dict[str, Any]: ...
