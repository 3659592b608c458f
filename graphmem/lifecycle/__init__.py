"""Memory lifecycle: tiers, turn/run hooks, importance, decay, expiry, retention, pruning,
archival and a background maintenance scheduler.

Tiers
    *fleeting* — a per-turn :class:`Scratchpad` in process, never persisted, cleared by
    :meth:`Lifecycle.on_turn_end`; *short-term* — memories of one run (``tier=short_term``),
    at most ``short_term_max`` per run and refreshed every ``refresh_every`` writes (entries
    below ``refresh_min_relevance`` are archived); *long-term* — everything promoted or
    stored as such.

Hooks
    ``on_turn_end`` clears the scratchpad (and optionally stores durable facts from the
    turn); ``on_run_end`` writes a ``summary`` memory DERIVED_FROM the run's short-term
    memories and promotes those with importance >= 0.5 or access_count >= 3 to long-term;
    ``on_idle`` runs the full maintenance cycle (:meth:`Lifecycle.maintain`).

Removal is archival
    Every step that takes a memory out of recall sets ``status=archived`` (with
    ``metadata.archived_reason``/``archived_at``); :meth:`Lifecycle.restore` brings it back.
    Only ``hard_delete=True`` deletes, and only when asked. Every maintenance call takes
    ``dry_run=True`` and then reports exactly the actions it would take, and takes them
    otherwise. A memory with ``metadata.pinned = True`` is never archived automatically.

No hook makes an LLM call unless an LLM was configured; the write path (``on_write``)
never does.
"""

from graphmem.lifecycle.hooks import Lifecycle
from graphmem.lifecycle.reports import (
    Action,
    ActionKind,
    MaintenanceReport,
    Scratchpad,
    TurnReport,
    relevance,
)
from graphmem.lifecycle.scheduler import MaintenanceScheduler

__all__ = [
    "Action",
    "ActionKind",
    "Lifecycle",
    "MaintenanceReport",
    "MaintenanceScheduler",
    "Scratchpad",
    "TurnReport",
    "relevance",
]
