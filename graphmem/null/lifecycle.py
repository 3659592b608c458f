"""The null lifecycle and knowledge: every pass reports that it had nothing to do."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from graphmem.config import ConsolidationConfig, LifecycleConfig
from graphmem.consolidation import (
    ConsolidationReport,
    FactsReport,
    ImproveReport,
    UnmergeReport,
)
from graphmem.errors import NotFound
from graphmem.knowledge.api import About
from graphmem.lifecycle import MaintenanceReport, TurnReport
from graphmem.llm import LLM, Improvement, Reflection
from graphmem.models import (
    Entity,
    EntityType,
    Memory,
    Subgraph,
)
from graphmem.null.base import NullPart
from graphmem.protocol import (
    KnowledgeAPI,
    LifecycleAPI,
)
from graphmem.scoping import Scope


class NullLifecycle(NullPart, LifecycleAPI):
    """``mem.lifecycle`` of a NullMemory: every verb accepted, nothing stored."""

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


class NullKnowledge(NullPart, KnowledgeAPI):
    """``mem.knowledge`` of a NullMemory: every verb accepted, nothing stored."""

    def entities(
        self, *, type: EntityType | str | None = None, limit: int = 100, **filters: Any
    ) -> builtins.list[Entity]:
        return []

    def about(self, name: str, *, limit: int = 200, **filters: Any) -> About:
        raise NotFound(f"no entity {name!r} (NullMemory stores nothing)")

    def __repr__(self) -> str:
        return "<null knowledge>"
