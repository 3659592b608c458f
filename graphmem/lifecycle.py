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

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from graphmem.backends.base import Expect
from graphmem.config import ConsolidationConfig, DecayConfig, LifecycleConfig
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
from graphmem.eventlog import EventLog
from graphmem.llm import LLM, OfflineLLM, Reflection, tokens
from graphmem.models import (
    Agent,
    Category,
    EdgeType,
    Filter,
    Memory,
    NodeLabel,
    NodeRef,
    Range,
    RecallResult,
    Status,
    Subgraph,
    Tier,
    utcnow,
    validated,
)
from graphmem.providers import Hooks
from graphmem.scoping import Namespaces, Scope, group_by_scope
from graphmem.scoring import Scoring
from graphmem.writes import Writes

__all__ = [
    "Action",
    "Lifecycle",
    "MaintenanceReport",
    "MaintenanceScheduler",
    "Scratchpad",
    "TurnReport",
    "relevance",
]

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

    model_config = ConfigDict(frozen=True)

    step: str
    action: ActionKind
    memory_id: str | None  # None for a node a dry run would create
    reason: str


class MaintenanceReport(BaseModel):
    """Every action of a maintenance call, in order; ``dry_run`` says if they were taken."""

    model_config = ConfigDict(frozen=True)

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
    model_config = ConfigDict(frozen=True)

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


class Lifecycle:
    """Tiers, hooks, maintenance and the passes over memories (``mem.lifecycle``):
    maintain, consolidate, unmerge, summarize, improve, extract_facts, reflect, archive,
    restore, provenance, the hooks on_turn_end / on_run_end / on_idle, and configure.

    ``llm`` (optional) writes run summaries and extracts facts; without one the offline,
    extractive passes are used. Every change goes through ``writes`` (the store's write
    path, which also embeds what it creates). ``clock`` gives "now" (tests pass a fixed
    clock). ``recall`` (the store's recall, for :meth:`reflect`) and ``namespaces`` (the
    read check of :meth:`provenance` with a scope) come from the GraphMemory owning it.

    >>> from graphmem.backends import open_backend
    >>> from graphmem.writes import Writes
    >>> lc = Lifecycle(Writes(open_backend("memory://")))
    >>> lc.maintain(dry_run=True).actions
    ()
    """

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

    # -- write-time rules -------------------------------------------------------------

    def classify(self, data: dict[str, Any]) -> dict[str, Any]:
        """Fill ``importance`` (the scorer) and ``tier`` (the classification rules) of a
        memory about to be written, where the caller did not set them."""
        event_type = data.get("event_type")
        if isinstance(event_type, Enum):
            event_type = event_type.value
        if data.get("importance") is None:
            meta = data.get("metadata")
            scorer = self.config.scorer
            kind = None
            if scorer.agent_boosts and scorer.agent_match == "kind":
                # the agent's type is read only when it can matter
                found = self.backend.get(Agent, [str(data.get("agent_id") or "default")])
                kind = getattr(found[0], "kind", None) if found else None
            data["importance"] = scorer.score(
                content=str(data.get("content") or ""),
                event_type=event_type,
                agent_kind=kind,
                payload=meta if isinstance(meta, Mapping) else None,
                agent_id=str(data.get("agent_id") or "default"),
            )
        if data.get("tier") is None:
            importance = data["importance"]
            data["tier"] = self.config.rules.tier_for(
                event_type=event_type,
                importance=importance if isinstance(importance, int | float) else 0.5,
            )
        if self.config.default_expiry and data.get("expires_at") is None:
            try:
                ttl = self.config.default_expiry.get(Tier(data["tier"]))
            except ValueError:
                ttl = None  # an invalid tier: validation of the write reports it
            start = data.get("created_at")
            if ttl is not None:
                data["expires_at"] = (start if isinstance(start, datetime) else self._clock()) + ttl
        return data

    # -- fleeting tier ----------------------------------------------------------------

    def scratchpad(self, run_id: str | None = None) -> Scratchpad:
        """The fleeting scratchpad of a run (or of the process, for ``None``)."""
        with self._lock:
            pad = self._pads.get(run_id)
            if pad is None:
                pad = self._pads[run_id] = Scratchpad()
            return pad

    # -- hooks ------------------------------------------------------------------------

    def add_provider(self, provider: object) -> object:
        """Attach a memory provider (:mod:`graphmem.providers`); its hooks are called from
        now on. Returns it."""
        return self.hooks.add(provider)

    def remove_provider(self, provider: object) -> bool:
        return self.hooks.remove(provider)

    def prefetch(self, query: str, **context: Any) -> list[str]:
        """Before a turn: each attached provider's ``prefetch`` (the non-empty blocks)."""
        return self.hooks.prefetch(query, **context)

    def on_pre_compact(self, messages: Sequence[Mapping[str, Any]], **context: Any) -> None:
        """Before the agent loop compacts ``messages`` away: each provider's
        ``on_pre_compact`` (graphmem's stores them as events and their facts)."""
        self.hooks.on_pre_compact(messages, **context)

    def on_write(self, memories: Sequence[Memory]) -> MaintenanceReport | None:
        """Count short-term writes per run; every ``refresh_every`` writes to a run, refresh
        that run's short-term tier (:meth:`refresh_run`). Makes no LLM call. Attached
        providers' ``on_memory_write`` hear of the memories first."""
        self.hooks.on_memory_write(memories)
        due: list[str] = []
        with self._lock:
            for m in memories:
                if m.tier is Tier.SHORT_TERM and m.run_id is not None:
                    self._writes[m.run_id] += 1
                    if self._writes[m.run_id] >= self.config.refresh_every:
                        self._writes[m.run_id] = 0
                        due.append(m.run_id)
        if not due:
            return None
        reports = [self.refresh_run(r) for r in dict.fromkeys(due)]
        return MaintenanceReport(
            dry_run=False, at=reports[0].at, actions=tuple(a for r in reports for a in r.actions)
        )

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
        """End of a turn: clear the run's scratchpad; with ``extract_facts=True`` store the
        durable facts of ``turn`` as long-term memories DERIVED_FROM ``source_ids``."""
        facts = None
        if extract_facts and turn:
            facts = store_facts(
                self.writes,
                self._pass_llm,
                turn,
                agent_id=agent_id,
                namespace=namespace,
                run_id=run_id,
                speaker=speaker,
                source_ids=source_ids,
                dry_run=dry_run,
                now=self._clock(),
            )
        cleared = len(self.scratchpad(run_id)) if dry_run else self.scratchpad(run_id).clear()
        return TurnReport(cleared=cleared, facts=facts)

    def on_run_end(self, run_id: str, *, dry_run: bool = False) -> MaintenanceReport:
        """End of a run: promote short-term memories with importance >= promote_importance
        or access_count >= promote_access_count to long-term, and write a ``summary``
        memory DERIVED_FROM all of the run's short-term memories. A dry run makes no LLM
        call and writes nothing."""
        now = self._clock()
        cfg = self.config
        flt = Filter.for_memories(run_id=run_id, tier=Tier.SHORT_TERM.value, status="active")
        members = [m for m in iter_memories(self.backend, flt) if m.category.value != "summary"]
        plan = _Plan()
        promoted: list[Memory] = []
        archived: list[Memory] = []
        newest = sorted(members, key=lambda m: (m.created_at, m.seq or 0, m.id), reverse=True)
        superseded_by_summary = (
            {m.id for m in newest[cfg.run_end_keep_recent :]}
            if cfg.run_end_keep_recent is not None
            and cfg.summarize_on_run_end
            and len(members) >= cfg.min_summary_sources
            else set()
        )
        for m in members:
            if m.id in superseded_by_summary and not _pinned(m):
                plan.add(
                    "run_end",
                    "archive",
                    m.id,
                    f"replaced by the run summary (kept the newest {cfg.run_end_keep_recent})",
                )
                archived.append(m)
                continue
            if m.importance >= cfg.promote_importance or m.access_count >= cfg.promote_access_count:
                plan.add(
                    "promote",
                    "promote",
                    m.id,
                    f"importance {m.importance:.2f}, accessed {m.access_count}x",
                )
                promoted.append(m.evolve(tier=Tier.LONG_TERM, updated_at=now))
            elif cfg.archive_unpromoted_on_run_end and not _pinned(m):
                plan.add("run_end", "archive", m.id, "short-term memory not promoted at run end")
                archived.append(m)
        summarize = cfg.summarize_on_run_end and len(members) >= cfg.min_summary_sources
        if summarize and dry_run:
            plan.add(
                "summarize",
                "create",
                None,
                f"summary of {len(members)} short-term memories of the run",
            )
        if not dry_run:
            if promoted or archived:
                self.writes.set_status(
                    archived,
                    Status.ARCHIVED,
                    reason="run_end",
                    nodes=promoted,
                    expect=[Expect(m.ref, props={"status": Status.ACTIVE}) for m in promoted],
                )
            if summarize:
                # one summary per scope: a run's summary never carries one agent's (or
                # user's) memories into another's
                for part in group_by_scope(members).values():
                    if len(part) < cfg.min_summary_sources and len(part) < len(members):
                        continue
                    summary = summarize_into_memory(
                        self.writes,
                        self._pass_llm,
                        part,
                        purpose="run",
                        pass_name="run_summary",
                        run_id=run_id,
                        now=now,
                        token_budget=cfg.llm_token_budget,
                        importance=cfg.summary_importance,
                    )
                    plan.add(
                        "summarize",
                        "create",
                        summary.id,
                        f"summary of {len(part)} short-term memories of the run",
                    )
            with self._lock:
                self._pads.pop(run_id, None)
                self._writes.pop(run_id, None)
        log.info(
            "run end: %d promoted, %d summarised", len(promoted), len(members) if summarize else 0
        )
        return MaintenanceReport(dry_run=dry_run, at=now, actions=tuple(plan.actions))

    def on_idle(self, *, dry_run: bool = False, **options: Any) -> MaintenanceReport:
        """The full maintenance cycle (:meth:`maintain`)."""
        return self.maintain(dry_run=dry_run, **options)

    # -- maintenance steps ------------------------------------------------------------

    def refresh_run(self, run_id: str, *, dry_run: bool = False) -> MaintenanceReport:
        """Archive a run's short-term memories below ``refresh_min_relevance``, then the
        least relevant beyond ``short_term_max``. Relevance is measured at the run's latest
        write or access."""
        now = self._clock()
        cfg = self.config
        flt = Filter.for_memories(run_id=run_id, tier=Tier.SHORT_TERM.value, status="active")
        members = [m for m in iter_memories(self.backend, flt) if not _pinned(m)]
        plan = _Plan()
        # relevance inside a run decays from the run's latest activity, not the wall clock,
        # so a run ingested after the fact (historical timestamps) is not wiped out
        ref = max((m.last_accessed or m.created_at for m in members), default=now)
        scored = sorted(
            ((relevance(m, ref, cfg.gc_scoring), m) for m in members),
            key=lambda rm: (rm[0], rm[1].created_at, rm[1].id),
        )
        keep = []
        for rel, m in scored:
            if rel < cfg.refresh_min_relevance:
                plan.add(
                    "refresh",
                    "archive",
                    m.id,
                    f"relevance {rel:.3f} below {cfg.refresh_min_relevance}",
                )
            else:
                keep.append((rel, m))
        over = len(keep) > cfg.short_term_max
        for rel, m in keep[: len(keep) - cfg.keep_under(cfg.short_term_max) if over else 0]:
            plan.add(
                "refresh",
                "archive",
                m.id,
                f"short-term tier over {cfg.short_term_max} (relevance {rel:.3f})",
            )
        return self._finish(plan, now, dry_run, hard_delete=False)

    def expire(self, *, dry_run: bool = False, hard_delete: bool = False) -> MaintenanceReport:
        """Archive (or delete) active memories whose ``expires_at`` has passed."""
        return self.maintain(dry_run=dry_run, hard_delete=hard_delete, steps=("expire",))

    def enforce_retention(
        self, *, dry_run: bool = False, hard_delete: bool = False
    ) -> MaintenanceReport:
        """Archive (or delete) memories older than their retention period, then the least
        relevant memories of agents over their maximum."""
        return self.maintain(dry_run=dry_run, hard_delete=hard_delete, steps=("retention", "limit"))

    def decay(self, *, dry_run: bool = False, hard_delete: bool = False) -> MaintenanceReport:
        """Prune by relevance (decayed below ``prune_below``) and by staleness (not
        accessed for ``stale_after`` and importance <= ``stale_max_importance``)."""
        return self.maintain(dry_run=dry_run, hard_delete=hard_delete, steps=("decay", "stale"))

    STEPS = ("expire", "retention", "logs", "decay", "stale", "limit", "improve", "consolidate")

    def maintain(
        self,
        *,
        dry_run: bool = False,
        hard_delete: bool = False,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        steps: Sequence[str] = STEPS,
        consolidate_llm: LLM | None = None,
    ) -> MaintenanceReport:
        """Run maintenance steps in order over active memories (optionally scoped):

        ``expire`` (expires_at passed), ``retention`` (older than the retention period),
        ``logs`` (orchestration-log entries older than the log retention: deleted, in an
        unscoped call),
        ``decay`` (relevance below ``prune_below``), ``stale`` (not accessed for
        ``stale_after``, low importance), ``limit`` (least relevant beyond the per-agent
        maximum), ``improve`` (contradictions among the ``improve_limit`` memories written
        since the last pass resolved — and their wording rewritten with
        ``improve_rewrites`` — by the configured LLM in batches within
        ``llm_token_budget``; the offline pass on a dry run and for a batch whose call
        fails), ``consolidate`` (merge near-duplicates, with provenance, merged by the
        configured LLM; a failed call falls back to the deterministic merge).

        A memory is acted on by the first step that claims it. Pinned memories are never
        archived; memories with importance >= ``protect_importance`` are never pruned by
        ``decay``/``stale``/``limit``. With ``dry_run=True`` the report lists exactly the
        actions a real call would take at the same time on the same data.
        """
        unknown = [s for s in steps if s not in self.STEPS]
        if unknown:
            raise InvalidInput(f"unknown maintenance step(s) {unknown}; known: {self.STEPS}")
        now = self._clock()
        cfg = self.config
        flt = Filter.for_memories(agent_id=agent_id, namespace=namespace, status="active")
        memories = [m for m in iter_memories(self.backend, flt) if not _pinned(m)]
        plan = _Plan()
        rel: dict[str, float] = {}

        def relevance_of(m: Memory) -> float:
            if m.id not in rel:
                rel[m.id] = relevance(m, now, cfg.gc_scoring)
            return rel[m.id]

        def open_(m: Memory) -> bool:
            return m.id not in plan.claimed

        for step in steps:
            if step == "expire":
                for m in memories:
                    if m.expires_at is not None and m.expires_at <= now and open_(m):
                        plan.add(
                            "expire", "archive", m.id, f"expired at {m.expires_at.isoformat()}"
                        )
            elif step == "retention":
                for m in memories:
                    period = cfg.retention.period_for(m.agent_id, m.category.value)
                    if period is not None and m.created_at + period <= now and open_(m):
                        plan.add(
                            "retention",
                            "archive",
                            m.id,
                            f"older than the {m.category.value} retention of {period}",
                        )
            elif step == "decay" and cfg.prune_below is not None:
                for m in memories:
                    if m.importance >= cfg.protect_importance or not open_(m):
                        continue
                    r = relevance_of(m)
                    if r < cfg.prune_below:
                        plan.add(
                            "decay", "archive", m.id, f"relevance {r:.4f} below {cfg.prune_below}"
                        )
            elif step == "stale" and cfg.stale_after is not None:
                for m in memories:
                    last = m.last_accessed or m.created_at
                    if (
                        last + cfg.stale_after <= now
                        and open_(m)
                        and m.importance <= cfg.stale_max_importance
                        and m.importance < cfg.protect_importance
                    ):
                        plan.add(
                            "stale",
                            "archive",
                            m.id,
                            f"not accessed since {last.date().isoformat()}",
                        )
            elif step == "limit":
                by_agent: dict[str, list[Memory]] = defaultdict(list)
                for m in memories:
                    if open_(m):
                        by_agent[m.agent_id].append(m)
                for aid, ms in sorted(by_agent.items()):
                    cap = cfg.retention.max_for(aid)
                    # count this agent's pinned memories against the cap too
                    if cap is None:
                        continue
                    pinned = self.backend.count(
                        validated(
                            Filter,
                            {
                                "equals": {
                                    "agent_id": aid,
                                    "status": "active",
                                    "metadata.pinned": True,
                                }
                            },
                        )
                    )
                    excess = len(ms) + pinned - cap
                    if excess <= 0:
                        continue
                    excess = len(ms) + pinned - cfg.keep_under(cap)
                    victims = sorted(
                        (m for m in ms if m.importance < cfg.protect_importance),
                        key=lambda m: (relevance_of(m), m.created_at, m.id),
                    )[:excess]
                    for m in victims:
                        plan.add(
                            "limit",
                            "archive",
                            m.id,
                            f"agent {aid} over its maximum of {cap} memories",
                        )
        report = self._finish(plan, now, dry_run, hard_delete)
        period = cfg.retention.log_period
        if "logs" in steps and period is not None and agent_id is None and namespace is None:
            elog = EventLog(self.backend, self.writes, clock=self._clock)
            old_entries = elog.expired(older_than=period, now=now)
            if old_entries and not dry_run:
                for start in range(0, len(old_entries), 2000):
                    elog.delete_entries(old_entries[start : start + 2000])
            report = report.model_copy(update={"log_entries": tuple(old_entries)})
        improvement = None
        if "improve" in steps and cfg.improve_limit:
            # only what was written since the last improve pass of this handle: an idle
            # cycle must not send the same memories to the LLM every time
            since = self._improved_until if agent_id is None and namespace is None else None
            recent_flt = (
                flt
                if since is None
                else flt.model_copy(
                    update={"ranges": (*flt.ranges, Range(field="created_at", gt=since))}
                )
            )
            recent = [
                m
                for m in self.backend.match(
                    Memory,
                    recent_flt,
                    limit=cfg.improve_limit + len(plan.claimed),
                    order_by="created_at",
                    descending=True,
                )
                if isinstance(m, Memory) and m.id not in plan.claimed and not _pinned(m)
            ][: cfg.improve_limit]
            improvement = improve_memories(
                self.writes,
                self._offline if dry_run else self._pass_llm,
                recent,
                dry_run=dry_run,
                now=now,
                token_budget=cfg.llm_token_budget,
                rewrites=cfg.improve_rewrites,
            )
            actions = list(report.actions)
            for new in improvement.created:
                actions.append(
                    Action(
                        step="improve",
                        action="create",
                        memory_id=new.id,
                        reason="rewritten for precision",
                    )
                )
            actions.extend(
                Action(
                    step="improve",
                    action="archive",
                    memory_id=i,
                    reason="superseded: improved or contradicted",
                )
                for i in improvement.superseded_ids
            )
            plan.claimed.update(improvement.superseded_ids)
            if not dry_run and agent_id is None and namespace is None:
                self._improved_until = now
            report = report.model_copy(
                update={"actions": tuple(actions), "improvement": improvement}
            )
        consolidation = None
        if "consolidate" in steps:
            consolidation = consolidate(
                self.writes,
                agent_id=agent_id,
                namespace=namespace,
                config=cfg.consolidation,
                llm=consolidate_llm if consolidate_llm is not None else self.llm,
                dry_run=dry_run,
                now=now,
                exclude_ids=set(plan.claimed),
            )
        if consolidation is not None:
            actions = list(report.actions)
            for g in consolidation.groups:
                if g.skipped is not None:
                    continue
                reason = f"merged into one {g.kind} memory"
                actions.extend(
                    Action(
                        step="consolidate",
                        action="archive",
                        memory_id=i,
                        reason=f"superseded: {reason}",
                    )
                    for i in g.source_ids
                )
                actions.append(
                    Action(
                        step="consolidate", action="create", memory_id=g.merged_id, reason=reason
                    )
                )
            report = report.model_copy(
                update={"actions": tuple(actions), "consolidation": consolidation}
            )
        log.info("maintenance (dry_run=%s): %s", dry_run, report.counts())
        return report

    # -- archive / restore ------------------------------------------------------------

    def archive(
        self,
        memory_ids: Sequence[str],
        *,
        reason: str = "manual",
        dry_run: bool = False,
        hard_delete: bool = False,
    ) -> MaintenanceReport:
        """Take memories out of recall: status archived (restorable), or deleted with
        ``hard_delete=True``. Unknown ids raise NotFound and change nothing."""
        now = self._clock()
        found = self._get(memory_ids)
        plan = _Plan()
        for m in found:
            if hard_delete or m.status is not Status.ARCHIVED:
                plan.add("archive", "archive", m.id, reason)
        return self._finish(plan, now, dry_run, hard_delete, reason_step=reason)

    def restore(
        self, memory_ids: Sequence[str], *, pin: bool = False, dry_run: bool = False
    ) -> MaintenanceReport:
        """Bring archived memories back into recall (status active). An expired
        ``expires_at`` is cleared; ``pin=True`` also exempts them from automatic archival.
        Superseded memories are restored by ``unmerge``/history, not here."""
        now = self._clock()
        found = self._get(memory_ids)
        plan = _Plan()
        todo: list[Memory] = []
        for m in found:
            if m.status is not Status.ARCHIVED:
                continue
            todo.append(m)
            plan.add("restore", "restore", m.id, "restored" + (" and pinned" if pin else ""))
        if todo and not dry_run:
            self.writes.set_status(todo, Status.ACTIVE, pin=True if pin else None)
        return MaintenanceReport(dry_run=dry_run, at=now, actions=tuple(plan.actions))

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
            sources = self._memories(memory_ids)
            if len(sources) != len(set(memory_ids)):
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
        DERIVED_FROM ``source_ids`` (nothing when the turn has none)."""
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

    # -- scheduler --------------------------------------------------------------------

    def scheduler(self, interval: float, **maintain_options: Any) -> MaintenanceScheduler:
        """A (not yet started) scheduler running :meth:`on_idle` every ``interval`` s."""
        return MaintenanceScheduler(lambda: self.on_idle(**maintain_options), interval)

    def scheduled(self, settings: Any, **options: Any) -> MaintenanceScheduler | None:
        """The scheduler that ``settings.maintenance`` (a
        :class:`graphmem.config.MaintenanceSettings`) asks for, not yet started; None when
        it is switched off. Each run logs what it did — or, in dry-run mode, what it would
        do. ``options`` go to :class:`MaintenanceScheduler` (e.g. ``run_immediately``)."""
        ms = getattr(settings, "maintenance", None)
        if ms is None or not ms.enabled:
            return None
        dry_run, hard_delete = bool(ms.dry_run), bool(ms.hard_delete)

        def job() -> MaintenanceReport:
            report = self.on_idle(dry_run=dry_run, hard_delete=hard_delete)
            log.info(
                "scheduled maintenance%s: %s",
                " (dry run, nothing changed)" if dry_run else "",
                report.counts() or "nothing to do",
            )
            return report

        return MaintenanceScheduler(job, ms.seconds, **options)


class MaintenanceScheduler:
    """Runs a job on a background thread every ``interval`` seconds until stopped.

    Errors of a run are logged and counted; the next run still happens. ``stop()`` wakes
    the thread, waits for a run in progress to finish and joins it.

    >>> s = MaintenanceScheduler(lambda: None, interval=3600).start()
    >>> s.stop()
    True
    """

    def __init__(
        self,
        job: Callable[[], object],
        interval: float,
        *,
        run_immediately: bool = False,
        name: str = "graphmem-maintenance",
    ) -> None:
        if interval <= 0:
            raise InvalidInput("interval must be positive")
        self._job = job
        self.interval = interval
        self.run_immediately = run_immediately
        self._name = name
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.errors = 0
        self.last_result: object = None
        self.last_error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> MaintenanceScheduler:
        """Start the background thread (InvalidInput if it is already running)."""
        if self.running:
            raise InvalidInput("scheduler already running")
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        first = self.run_immediately
        while first or not self._stop.wait(self.interval):
            first = False
            if self._stop.is_set():
                break
            try:
                result = self._job()
                with self._cond:
                    self.last_result = result
            except Exception as e:  # keep the scheduler alive; the error is recorded
                log.exception("scheduled maintenance failed: %s", type(e).__name__)
                with self._cond:
                    self.errors += 1
                    self.last_error = e
            with self._cond:
                self.runs += 1
                self._cond.notify_all()

    def wait_for_runs(self, n: int, timeout: float | None = None) -> bool:
        """Block until at least ``n`` runs have finished (False on timeout)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.runs >= n, timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop and join the thread; True when it has ended (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def __enter__(self) -> MaintenanceScheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
