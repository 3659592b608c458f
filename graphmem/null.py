"""NullMemory: the face of a memory for stateless agents — every call is accepted and
nothing is stored.

Writes validate their input (bad input still raises InvalidInput, as with a real store) and
return the value that would have been stored; reads return nothing (empty lists, empty
text, zero counts); looking up one specific thing (a memory, a run, an agent, an org fact)
is a NotFound, because there is none. NullMemory implements
:class:`~graphmem.protocol.MemoryAPI` explicitly, sub-objects included: a name GraphMemory
does not have is an AttributeError here too.

>>> from graphmem.null import NullMemory
>>> mem = NullMemory()
>>> m = mem.remember("Alice prefers tea", agent_id="assistant")
>>> mem.recall("tea"), mem.count(), mem.runs.conversation_context("r1")
([], 0, '')
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal, overload

import networkx as nx

from graphmem.config import ConsolidationConfig, LifecycleConfig
from graphmem.consolidation import (
    ConsolidationReport,
    FactsReport,
    ImproveReport,
    UnmergeReport,
)
from graphmem.errors import InvalidInput, NotFound
from graphmem.eventlog import LogRecord, canonical_json
from graphmem.knowledge.api import About
from graphmem.lifecycle import MaintenanceReport, Scratchpad, TurnReport
from graphmem.llm import LLM, Improvement, Reflection
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
    new_id,
    utcnow,
    validated,
)
from graphmem.protocol import (
    AgentsAPI,
    ForgetReport,
    ImportReport,
    KnowledgeAPI,
    LifecycleAPI,
    LogAPI,
    MemoryAPI,
    NamespacesAPI,
    OrgAPI,
    RunsAPI,
    VectorsAPI,
    WritesAPI,
)
from graphmem.reconcile import ReconcileResult
from graphmem.reindex import Progress, ReindexReport
from graphmem.runs import CleanupReport, DeleteRunReport, RunStats
from graphmem.scoping import Scope

__all__ = ["NullMemory"]


class NullRuns(RunsAPI):
    """``mem.runs`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._pads: dict[str | None, Scratchpad] = {}

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
        return run

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
        self,
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        status: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
    ) -> builtins.list[Run]:
        return []

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
        run = self.start(
            agent_id,
            run_id=run_id,
            user_id=user_id,
            app_name=app_name,
            namespace=namespace,
            metadata=metadata,
        )
        return run, True

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
    ) -> Memory:
        event = {
            "event_type": event_type,
            "content": content,
            "agent_id": agent_id,
            "importance": importance,
            "tier": tier,
            "tags": tags,
            "metadata": metadata,
            "created_at": created_at,
        }
        return self.add_events(run_id, [event])[0]

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


class NullAgents(AgentsAPI):
    """``mem.agents`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

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


class NullOrg(OrgAPI):
    """``mem.org`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

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
    ) -> OrgFact:
        data: dict[str, Any] = {"fact_id": fact_id or new_id(), "content": content}
        data["author"] = author
        data.update(category=category, tags=tags, core=core, created_at=self._clock())
        fact: OrgFact = validated(OrgFact, {k: v for k, v in data.items() if v is not None})
        return fact

    def retract(self, fact_id: str, *, author: str, reason: str | None = None) -> OrgFact:
        raise NotFound(f"no org fact {fact_id!r} (NullMemory stores nothing)")

    def get(self, fact_id: str) -> OrgFact:
        raise NotFound(f"no org fact {fact_id!r} (NullMemory stores nothing)")

    def versions(self, fact_id: str) -> builtins.list[OrgFact]:
        raise NotFound(f"no org fact {fact_id!r} (NullMemory stores nothing)")

    def query(
        self,
        text: str | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        tags: Sequence[str] | None = None,
        include_retracted: bool = False,
        limit: int = 10,
    ) -> builtins.list[OrgFact]:
        return []

    def list(
        self,
        *,
        categories: Sequence[str] | None = None,
        include_retracted: bool = False,
        limit: int | None = 100,
        offset: int = 0,
    ) -> builtins.list[OrgFact]:
        return []

    def core_policies(self) -> builtins.list[str]:
        return []

    def __repr__(self) -> str:
        return "<null org>"


class NullNamespaces(NamespacesAPI):
    """``mem.namespaces`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

    def create(self, name: str, *, owner: str, members: Iterable[str] = ()) -> Namespace:
        ns: Namespace = validated(
            Namespace, {"id": name, "owner": owner, "members": [owner, *members]}
        )
        return ns

    def get(self, name: str) -> Namespace:
        raise NotFound(f"no namespace {name!r} (NullMemory stores nothing)")

    def list(self, *, member: str | None = None) -> builtins.list[Namespace]:
        return []

    def add_members(self, name: str, agents: Sequence[str], *, by: str | None = None) -> Namespace:
        raise NotFound(f"no namespace {name!r} (NullMemory stores nothing)")

    def remove_members(
        self, name: str, agents: Sequence[str], *, by: str | None = None
    ) -> Namespace:
        raise NotFound(f"no namespace {name!r} (NullMemory stores nothing)")

    def __repr__(self) -> str:
        return "<null namespaces>"


class NullLifecycle(LifecycleAPI):
    """``mem.lifecycle`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

    def maintain(
        self,
        *,
        dry_run: bool = False,
        hard_delete: bool = False,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        steps: Sequence[str] = (),
        consolidate_llm: LLM | None = None,
    ) -> MaintenanceReport:
        return self._nothing(dry_run)

    def consolidate(
        self,
        *,
        dry_run: bool = False,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        config: ConsolidationConfig | None = None,
        llm: LLM | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> ConsolidationReport:
        return ConsolidationReport(dry_run=dry_run, scanned=0, pairs=0, groups=())

    def unmerge(self, merged_id: str, *, dry_run: bool = False) -> UnmergeReport:
        raise NotFound(f"no memory {merged_id!r} (NullMemory stores nothing)")

    def summarize(
        self,
        memory_ids: Sequence[str] | None = None,
        *,
        run_id: str | None = None,
        llm: LLM | None = None,
        dry_run: bool = False,
    ) -> Memory:
        raise NotFound("nothing to summarise (NullMemory stores nothing)")

    def improve(
        self,
        memory_ids: Sequence[str] | None = None,
        *,
        llm: LLM | None = None,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        limit: int = 200,
        dry_run: bool = False,
    ) -> ImproveReport:
        return ImproveReport(dry_run=dry_run, improvement=Improvement())

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
    ) -> FactsReport:
        return FactsReport(dry_run=dry_run, facts=())

    def reflect(
        self, question: str, *, k: int = 10, llm: LLM | None = None, **recall_filters: Any
    ) -> Reflection:
        return Reflection(answer="")

    def archive(
        self,
        memory_ids: Sequence[str],
        *,
        reason: str = "manual",
        dry_run: bool = False,
        hard_delete: bool = False,
    ) -> MaintenanceReport:
        return self._none_of(memory_ids, dry_run)

    def restore(
        self, memory_ids: Sequence[str], *, pin: bool = False, dry_run: bool = False
    ) -> MaintenanceReport:
        return self._none_of(memory_ids, dry_run)

    def provenance(
        self, memory_id: str, *, depth: int = 10, scope: Scope | str | None = None
    ) -> Subgraph:
        raise NotFound(f"no memory {memory_id!r} (NullMemory stores nothing)")

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
    ) -> TurnReport:
        return TurnReport(cleared=0)

    def on_run_end(self, run_id: str, *, dry_run: bool = False) -> MaintenanceReport:
        return self._nothing(dry_run)

    def on_idle(self, *, dry_run: bool = False, **options: Any) -> MaintenanceReport:
        return self._nothing(dry_run)

    def configure(self, config: LifecycleConfig) -> None:
        return None

    def _nothing(self, dry_run: bool) -> MaintenanceReport:
        return MaintenanceReport(dry_run=dry_run, at=self._clock(), actions=())

    def _none_of(self, memory_ids: Sequence[str], dry_run: bool) -> MaintenanceReport:
        if memory_ids:
            raise NotFound(f"no memory {memory_ids[0]!r} (NullMemory stores nothing)")
        return self._nothing(dry_run)

    def __repr__(self) -> str:
        return "<null lifecycle>"


class NullKnowledge(KnowledgeAPI):
    """``mem.knowledge`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

    def entities(
        self, *, type: EntityType | str | None = None, limit: int = 100, **filters: Any
    ) -> builtins.list[Entity]:
        return []

    def about(self, name: str, *, limit: int = 200, **filters: Any) -> About:
        raise NotFound(f"no entity {name!r} (NullMemory stores nothing)")

    def __repr__(self) -> str:
        return "<null knowledge>"


class NullLog(LogAPI):
    """``mem.log`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

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


class NullVectors(VectorsAPI):
    """``mem.vectors`` of a NullMemory: every verb accepted, nothing stored."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock

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


class NullWrites(WritesAPI):
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
        self.writes = NullWrites(clock)
        self.llm: LLM | None = None

    @classmethod
    def open(cls, url: str | None = None, **_options: Any) -> NullMemory:
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
        self,
        content: str,
        *,
        agent_id: str = "default",
        run_id: str | None = None,
        namespace: str = "default",
        category: Category | str = Category.SEMANTIC,
        tier: Tier | str | None = None,
        importance: float | None = None,
        confidence: float = 1.0,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        event_type: str | None = None,
        created_at: datetime | None = None,
        valid_from: datetime | None = None,
        expires_at: datetime | None = None,
        visibility: Visibility | str = Visibility.PRIVATE,
        user_id: str | None = None,
        reconcile: str | None = None,
    ) -> Memory:
        return self.writes.reconcile(
            content,
            mode=reconcile,
            agent_id=agent_id,
            run_id=run_id,
            namespace=namespace,
            category=category,
            tier=tier,
            importance=importance,
            confidence=confidence,
            tags=tags,
            metadata=metadata,
            event_type=event_type,
            created_at=created_at,
            valid_from=valid_from,
            expires_at=expires_at,
            visibility=visibility,
            user_id=user_id,
        ).memory

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
            self,  # type: ignore[arg-type]
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

    def import_(self, src: str | Path | IO[str], *, batch_size: int = 2000) -> ImportReport:
        return ImportReport(nodes=0, edges=0)

    # -- reads: nothing there -----------------------------------------------------------

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
        if isinstance(memory_id, str):
            raise NotFound(f"no memory {memory_id!r} (NullMemory stores nothing)")
        return []

    def history(self, memory_id: str, *, scope: Scope | str | None = None) -> builtins.list[Memory]:
        raise NotFound(f"no memory {memory_id!r} (NullMemory stores nothing)")

    def count(self, *, scope: Scope | str | None = None, **filters: Any) -> int:
        return 0

    def recall(self, query: str, **_filters: Any) -> builtins.list[RecallResult]:
        return []

    def relevance(self, memory: Memory, *, now: datetime | None = None) -> float:
        if not isinstance(memory, Memory):
            raise InvalidInput(f"relevance takes a Memory, not {type(memory).__name__}")
        return 0.0

    @overload
    def context(
        self, query: str = "", *, format: Literal["text"] = "text", **_options: Any
    ) -> str: ...

    @overload
    def context(
        self, query: str = "", *, format: Literal["messages"], **_options: Any
    ) -> builtins.list[dict[str, str]]: ...

    def context(
        self, query: str = "", *, format: str = "text", **_options: Any
    ) -> str | builtins.list[dict[str, str]]:
        if format not in ("text", "messages"):
            raise InvalidInput(f"format must be 'text' or 'messages', not {format!r}")
        if format == "text":
            return ""
        return [{"role": "user", "content": query}] if query.strip() else []

    def export(self, dest: str | Path | IO[str]) -> ImportReport:
        return ImportReport(nodes=0, edges=0)

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
