"""What the lifecycle reports and keeps in process: actions, maintenance and turn reports, the
per-turn scratchpad, and relevance.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from graphmem.config import DecayConfig
from graphmem.consolidation import (
    ConsolidationReport,
    FactsReport,
    ImproveReport,
)
from graphmem.errors import InvalidInput
from graphmem.llm import tokens
from graphmem.models import (
    Memory,
)
from graphmem.models.scoring import Scoring

log = logging.getLogger("graphmem.lifecycle")


# ---------------------------------------------------------------------------------------
# importance and classification


# ---------------------------------------------------------------------------------------
# decay and retention


def relevance(memory: Memory, now: datetime, config: DecayConfig | Scoring | None = None) -> float:
    """Relevance of a memory at ``now`` under a strategy: a :class:`Scoring`, or the
    lifecycle's decay formula (:class:`DecayConfig`, the default)."""
    strategy = config if isinstance(config, Scoring) else (config or DecayConfig()).scoring()
    return float(strategy.relevance(memory, now))


# ---------------------------------------------------------------------------------------
# reports


ActionKind = Literal["archive", "delete", "promote", "create", "restore"]


class Action(BaseModel):
    """One change made (or, on a dry run, to be made) by a maintenance step."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    step: str
    action: ActionKind
    memory_id: str | None  # None for a node a dry run would create
    reason: str


class MaintenanceReport(BaseModel):
    """Every action of a maintenance call, in order; ``dry_run`` says if they were taken."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    dry_run: bool
    at: datetime
    actions: tuple[Action, ...] = ()
    consolidation: ConsolidationReport | None = None
    improvement: ImproveReport | None = None
    #: orchestration-log entries past the log retention, deleted (or, dry, to be deleted)
    log_entries: tuple[str, ...] = ()

    @property
    def llm_failures(self) -> int:
        """LLM calls that failed and were replaced by the offline pass."""
        return sum(r.llm_failures for r in (self.consolidation, self.improvement) if r is not None)

    def ids(self, action: ActionKind | None = None, step: str | None = None) -> list[str]:
        """Memory ids of the actions of one kind and/or step."""
        return [
            a.memory_id
            for a in self.actions
            if a.memory_id is not None
            and (action is None or a.action == action)
            and (step is None or a.step == step)
        ]

    def counts(self) -> dict[str, int]:
        """Number of actions per ``step:action``."""
        out: dict[str, int] = defaultdict(int)
        for a in self.actions:
            out[f"{a.step}:{a.action}"] += 1
        return dict(out)


class TurnReport(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    cleared: int
    facts: FactsReport | None = None


# ---------------------------------------------------------------------------------------
# fleeting tier


class Scratchpad:
    """The fleeting tier: working notes of the current turn, in process only, never
    persisted, cleared at the end of the turn (:meth:`Lifecycle.on_turn_end`).

    Notes have keys (``put``/``get``/``forget``; ``add`` makes one up), and ``recall``
    finds them by the words of a query, like recall over the store.

    >>> pad = Scratchpad()
    >>> pad.put("plan", "book the flight to Oslo, then the hotel")
    'plan'
    >>> pad.recall("hotel")
    [('plan', 'book the flight to Oslo, then the hotel')]
    >>> pad.forget("plan"), len(pad)
    (True, 0)
    """

    def __init__(self) -> None:
        self._notes: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._next = 0

    def put(self, key: str, note: Any) -> str:
        """Store ``note`` under ``key`` (replacing what was there); returns the key."""
        if not isinstance(key, str) or not key:
            raise InvalidInput("a scratchpad key must be a non-empty string")
        with self._lock:
            self._notes.pop(key, None)  # a replaced note moves to the end (newest)
            self._notes[key] = note
        return key

    def add(self, note: Any) -> str:
        """Store ``note`` under a new key (``note-0``, ``note-1`` ...); returns the key."""
        with self._lock:
            while f"note-{self._next}" in self._notes:
                self._next += 1
            key = f"note-{self._next}"
            self._next += 1
            self._notes[key] = note
        return key

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            return self._notes.get(key, default)

    def forget(self, key: str) -> bool:
        """Drop the note ``key``; False when there was none."""
        with self._lock:
            return self._notes.pop(key, _MISSING) is not _MISSING

    def recall(
        self, query: str, k: int = 5, *, match: Literal["words", "substring"] = "words"
    ) -> list[tuple[str, Any]]:
        """The ``k`` notes sharing most words with ``query`` (key and note), newest first
        among equals; notes sharing none are left out. ``match="substring"``: the notes
        whose key or value contains ``query`` (case-insensitive), newest first."""
        with self._lock:
            items = list(self._notes.items())
        if match == "substring":
            needle = query.lower()
            found = [(key, note) for key, note in items if needle in f"{key}\n{note}".lower()]
            return found[::-1][:k]
        words = set(tokens(query))
        scored = []
        for pos, (key, note) in enumerate(items):
            overlap = len(words & set(tokens(f"{key} {note}")))
            if overlap:
                scored.append((-overlap, -pos, key, note))
        scored.sort(key=lambda t: (t[0], t[1]))
        return [(key, note) for _, _, key, note in scored[:k]]

    def items(self) -> list[tuple[str, Any]]:
        """Every (key, note), oldest first."""
        with self._lock:
            return list(self._notes.items())

    @property
    def notes(self) -> list[Any]:
        with self._lock:
            return list(self._notes.values())

    def clear(self) -> int:
        """Drop every note; returns how many there were."""
        with self._lock:
            n = len(self._notes)
            self._notes.clear()
            return n

    def __len__(self) -> int:
        with self._lock:
            return len(self._notes)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._notes


_MISSING = object()
