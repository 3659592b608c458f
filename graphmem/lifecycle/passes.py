"""The passes over memories: consolidate, unmerge, summarize, improve, extract facts, reflect,
provenance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from graphmem.config import ConsolidationConfig, LifecycleConfig
from graphmem.consolidation import (
    ConsolidationReport,
    FactsReport,
    ImproveReport,
    UnmergeReport,
    consolidate,
    improve_memories,
    iter_memories,
    reflect_on,
    store_facts,
    summarize_into_memory,
    unmerge,
)
from graphmem.errors import InvalidInput, NotFound
from graphmem.lifecycle.core import _Core
from graphmem.llm import LLM, Reflection
from graphmem.models import (
    Category,
    EdgeType,
    Filter,
    Memory,
    NodeLabel,
    NodeRef,
    Subgraph,
)
from graphmem.scoping import Scope


class _Passes(_Core):
    """The passes that derive memories: consolidate, unmerge, summarize, improve, extract
    facts, reflect, and provenance."""

    # -- passes over memories ---------------------------------------------------------

    def configure(self, config: LifecycleConfig) -> None:
        """Replace the thresholds (scratchpads and per-run write counts reset)."""
        if not isinstance(config, LifecycleConfig):
            raise InvalidInput(f"expected a LifecycleConfig, not {type(config).__name__}")
        with self._lock:
            self.config = config
            self._pads.clear()
            self._writes.clear()

    def _llm_for(self, llm: LLM | None) -> LLM:
        return llm if llm is not None else self._pass_llm

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
        """Merge near-duplicate memories (token Jaccard) into new memories that are
        DERIVED_FROM and SUPERSEDE their sources; ``dry_run=True`` only reports the plan.
        Merged content comes from ``llm`` (or the configured LLM) for similar groups, else
        from a deterministic merge. See :func:`graphmem.consolidation.consolidate`."""
        return consolidate(
            self.writes,
            agent_id=agent_id,
            namespace=namespace,
            config=config or self.config.consolidation,
            llm=llm if llm is not None else self.llm,
            dry_run=dry_run,
            now=self._clock(),
            progress=progress,
        )

    def unmerge(self, merged_id: str, *, dry_run: bool = False) -> UnmergeReport:
        """Undo a consolidation merge: restore its sources and delete the merged node."""
        return unmerge(self.writes, merged_id, dry_run=dry_run, now=self._clock())

    def summarize(
        self,
        memory_ids: Sequence[str] | None = None,
        *,
        run_id: str | None = None,
        llm: LLM | None = None,
        dry_run: bool = False,
    ) -> Memory:
        """Write a ``summary`` memory DERIVED_FROM the given memories, or from the active
        memories of ``run_id``; returns it (unwritten on a dry run)."""
        if (memory_ids is None) == (run_id is None):
            raise InvalidInput("give either memory_ids or run_id")
        if memory_ids is not None:
            if isinstance(memory_ids, str):
                raise InvalidInput("memory_ids must be a list of ids, not one string")
            distinct = list(dict.fromkeys(memory_ids))  # an id given twice is one source
            sources = self._memories(distinct)
            if len(sources) != len(distinct):
                raise NotFound("some memories to summarise do not exist")
        else:
            sources = [
                m
                for m in iter_memories(
                    self.backend, Filter.for_memories(run_id=run_id, status="active")
                )
                if m.category is not Category.SUMMARY
            ]
            if not sources:
                raise NotFound(f"run {run_id!r} has no active memories to summarise")
        return summarize_into_memory(
            self.writes,
            self._llm_for(llm),
            sources,
            purpose="run" if run_id is not None else "memories",
            run_id=run_id,
            dry_run=dry_run,
            now=self._clock(),
        )

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
        """Rewrite memories for precision and resolve contradictions; every change is a
        new version with DERIVED_FROM / SUPERSEDES provenance. Without ``memory_ids`` the
        ``limit`` newest active memories of the scope are improved together."""
        if memory_ids is not None:
            if isinstance(memory_ids, str):
                raise InvalidInput("memory_ids must be a list of ids, not one string")
            memories = self._memories(memory_ids)
        else:
            flt = Filter.for_memories(agent_id=agent_id, namespace=namespace, status="active")
            memories = [
                m
                for m in self.backend.match(
                    Memory, flt, limit=limit, order_by="created_at", descending=True
                )
                if isinstance(m, Memory)
            ]
        return improve_memories(
            self.writes, self._llm_for(llm), memories, dry_run=dry_run, now=self._clock()
        )

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
        """Store the durable facts of a conversation turn as long-term memories
        DERIVED_FROM ``source_ids`` (nothing when the turn has none). The facts are
        ``agent_id``'s, in their sources' scope; AccessDenied (nothing written) for a
        source that agent may not read."""
        return store_facts(
            self.writes,
            self._llm_for(llm),
            turn,
            agent_id=agent_id,
            namespace=namespace,
            run_id=run_id,
            speaker=speaker,
            source_ids=source_ids,
            dry_run=dry_run,
            now=self._clock(),
        )

    def reflect(
        self, question: str, *, k: int = 10, llm: LLM | None = None, **recall_filters: Any
    ) -> Reflection:
        """Answer ``question`` from the memories recalled for it (the filters of
        ``mem.recall``), citing their ids."""
        if self._recall is None:
            raise InvalidInput("reflect needs the store's recall (use mem.lifecycle)")
        hits = self._recall(question, k=k, **recall_filters)
        return reflect_on(self._llm_for(llm), question, [h.memory for h in hits])

    def provenance(
        self, memory_id: str, *, depth: int = 10, scope: Scope | str | None = None
    ) -> Subgraph:
        """The DERIVED_FROM / SUPERSEDES tree below a memory (what the passes made it
        from); with ``scope``, without the memories it may not read (and their edges).
        NotFound when the memory does not exist or ``scope`` may not read it."""
        [root] = self._get([memory_id])
        allowed = self._audiences(scope)
        if allowed is not None and root.audience not in allowed:
            raise NotFound(f"no memory {memory_id!r}")
        sub = self.backend.expand(
            [NodeRef(NodeLabel.MEMORY, memory_id)],
            [EdgeType.DERIVED_FROM, EdgeType.SUPERSEDES],
            direction="out",
            depth=depth,
        )
        if allowed is None:
            return sub
        keep = {n.ref.key for n in sub.nodes if isinstance(n, Memory) and n.audience in allowed}
        return Subgraph(
            nodes=tuple(n for n in sub.nodes if n.ref.key in keep),
            edges=tuple(e for e in sub.edges if e.src.key in keep and e.dst.key in keep),
        )
