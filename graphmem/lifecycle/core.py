"""The state the lifecycle's parts share, and the plan a maintenance call builds."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime

from graphmem.config import LifecycleConfig
from graphmem.errors import InvalidInput, NotFound
from graphmem.lifecycle.reports import Action, ActionKind, MaintenanceReport, Scratchpad
from graphmem.llm import LLM, OfflineLLM
from graphmem.models import (
    EdgeType,
    Memory,
    NodeLabel,
    NodeRef,
    RecallResult,
    Status,
    utcnow,
)
from graphmem.providers import Hooks
from graphmem.scoping import Namespaces, Scope
from graphmem.writes import Writes

# ---------------------------------------------------------------------------------------
# the lifecycle


class _Plan:
    """Actions being planned by one maintenance call; memories already claimed by an
    earlier step are not acted on again."""

    def __init__(self) -> None:
        self.actions: list[Action] = []
        self.claimed: set[str] = set()

    def add(self, step: str, action: ActionKind, memory_id: str | None, reason: str) -> None:
        if memory_id is not None:
            self.claimed.add(memory_id)
        self.actions.append(Action(step=step, action=action, memory_id=memory_id, reason=reason))


def _pinned(m: Memory) -> bool:
    return bool(m.metadata.get("pinned"))


class _Core:
    """State shared by the lifecycle's parts: the write path, config, LLM, clock, and the
    read helpers."""

    def __init__(
        self,
        writes: Writes,
        *,
        config: LifecycleConfig | None = None,
        llm: LLM | None = None,
        clock: Callable[[], datetime] = utcnow,
        recall: Callable[..., list[RecallResult]] | None = None,
        namespaces: Namespaces | None = None,
    ) -> None:
        self.writes = writes
        self.backend = writes.backend
        self.config = config or LifecycleConfig()
        self.llm = llm
        self._recall = recall
        self._namespaces = namespaces
        self._clock = clock
        self._pads: dict[str | None, Scratchpad] = {}
        self._writes: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._offline = OfflineLLM()
        self._improved_until: datetime | None = None  # the last unscoped improve pass
        #: attached memory providers (graphmem.providers) and their hooks
        self.hooks = Hooks()

    @property
    def _pass_llm(self) -> LLM:
        return self.llm if self.llm is not None else self._offline

    def _audiences(self, scope: Scope | str | None) -> set[str] | None:
        if scope is None:
            return None
        if self._namespaces is None:
            raise InvalidInput("a scoped read needs the store's namespaces")
        return set(self._namespaces.audiences(scope))

    def _memories(self, memory_ids: Sequence[str]) -> list[Memory]:
        return [n for n in self.backend.get(Memory, list(memory_ids)) if isinstance(n, Memory)]

    # -- helpers ----------------------------------------------------------------------

    def _get(self, memory_ids: Sequence[str]) -> list[Memory]:
        if isinstance(memory_ids, str):
            memory_ids = [memory_ids]
        ids = list(dict.fromkeys(memory_ids))
        found = [n for n in self.backend.get(Memory, ids) if isinstance(n, Memory)]
        if len(found) != len(ids):
            have = {m.id for m in found}
            raise NotFound(f"no memory {next(i for i in ids if i not in have)!r}")
        return found

    def _with_older_versions(self, actions: list[Action]) -> list[Action]:
        """``actions`` and a ``delete`` of every older version a deleted memory heads (what
        it SUPERSEDES, transitively). Deleting only the head stranded its older versions:
        superseded memories with no current version, which no update or restore reaches.
        An older version is not made current again either (an expired or retired fact
        would come back). What was derived from a deleted version stays: a hard delete is
        maintenance, not a forget (which takes that too)."""
        deleted = [a for a in actions if a.action == "delete" and a.memory_id]
        if not deleted:
            return actions
        sub = self.backend.expand(
            [NodeRef(NodeLabel.MEMORY, a.memory_id) for a in deleted if a.memory_id],
            [EdgeType.SUPERSEDES],
            direction="out",
            depth=10_000,
            limit=1_000_000,
        )
        older: dict[str, list[str]] = defaultdict(list)
        for e in sub.edges:
            if e.type is EdgeType.SUPERSEDES:
                older[e.src.id].append(e.dst.id)
        planned = {a.memory_id for a in deleted}
        out = list(actions)
        for a in deleted:
            todo = list(older.get(a.memory_id or "", ()))
            while todo:
                i = todo.pop()
                if i in planned:
                    continue
                planned.add(i)
                out.append(
                    Action(
                        step=a.step,
                        action="delete",
                        memory_id=i,
                        reason=f"an older version of {a.memory_id}",
                    )
                )
                todo.extend(older.get(i, ()))
        return out

    def _finish(
        self,
        plan: _Plan,
        now: datetime,
        dry_run: bool,
        hard_delete: bool,
        reason_step: str | None = None,
    ) -> MaintenanceReport:
        actions = [
            a.model_copy(update={"action": "delete"})
            if hard_delete and a.action == "archive"
            else a
            for a in plan.actions
        ]
        if hard_delete:
            actions = self._with_older_versions(actions)
        if not dry_run:
            ids = [
                a.memory_id for a in actions if a.memory_id and a.action in ("archive", "delete")
            ]
            if hard_delete and ids:
                self.writes.delete_nodes([NodeRef(NodeLabel.MEMORY, i) for i in ids])
            elif ids:
                step_of = {a.memory_id: a.step for a in actions}
                current = [n for n in self.backend.get(Memory, ids) if isinstance(n, Memory)]
                by_reason: dict[str, list[Memory]] = defaultdict(list)
                for m in current:
                    by_reason[reason_step or step_of[m.id]].append(m)
                for reason, group in by_reason.items():
                    for start in range(0, len(group), 2000):
                        self.writes.set_status(
                            group[start : start + 2000], Status.ARCHIVED, reason=reason
                        )
        return MaintenanceReport(dry_run=dry_run, at=now, actions=tuple(actions))
