"""Lifecycle: the hooks (turn, run, idle, write), classification, providers and the scheduler
wiring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Any

from graphmem.backends.base import Expect
from graphmem.consolidation import (
    iter_memories,
    store_facts,
    summarize_into_memory,
)
from graphmem.lifecycle.core import _pinned, _Plan
from graphmem.lifecycle.maintenance import _Maintenance
from graphmem.lifecycle.passes import _Passes
from graphmem.lifecycle.reports import MaintenanceReport, Scratchpad, TurnReport, log
from graphmem.lifecycle.scheduler import MaintenanceScheduler
from graphmem.models import (
    Agent,
    Filter,
    Memory,
    Status,
    Tier,
    check_text,
)
from graphmem.scoping import group_by_scope


class Lifecycle(_Passes, _Maintenance):
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

    # -- write-time rules -------------------------------------------------------------

    def _classify(self, data: dict[str, Any]) -> dict[str, Any]:
        """Fill ``importance`` (the scorer) and ``tier`` (the classification rules) of a
        memory about to be written, where the caller did not set them. Private: the write
        path calls it once per item of a batch the boundary has already checked."""
        event_type = data.get("event_type")
        if isinstance(event_type, Enum):
            event_type = event_type.value
        if data.get("importance") is None:
            data["importance"] = self._score(
                data.get("content"), event_type, data.get("metadata"), data.get("agent_id"), {}
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

    def _classify_columns(self, cols: dict[str, list[Any]], n: int) -> None:
        """:meth:`_classify` of each memory of a batch, given as its columns (field -> its
        value in each item; a field given by none is missing), filled in place: the rules
        asked once per event type, tier or agent rather than once per item. The columns
        hold the plain values :func:`graphmem.models.plain.plain_memories` takes (a float
        importance, a datetime ``created_at``)."""
        given = cols.get("event_type")
        events: list[Any] = (
            [e.value if isinstance(e, Enum) else e for e in given] if given else [None] * n
        )
        if "importance" not in cols:
            kinds: dict[str, str | None] = {}
            empty: list[Any] = [None] * n
            cols["importance"] = [
                self._score(content, event, meta, agent, kinds)
                for content, event, meta, agent in zip(
                    cols["content"],
                    events,
                    cols.get("metadata", empty),
                    cols.get("agent_id", empty),
                    strict=True,
                )
            ]
        if "tier" not in cols:
            cols["tier"] = list(self.config.rules.tiers_for(events, cols["importance"]))
        expiry = self.config.default_expiry
        if expiry and "expires_at" not in cols:
            ttls = {tier: expiry.get(Tier(tier)) for tier in set(cols["tier"])}
            if any(ttl is not None for ttl in ttls.values()):
                # a gap (a tier without expiry beside one with) leaves the batch to the
                # items one by one
                cols["expires_at"] = [
                    None if ttls[tier] is None else start + ttls[tier]
                    for tier, start in zip(cols["tier"], cols["created_at"], strict=True)
                ]

    def _score(
        self, content: Any, event_type: Any, meta: Any, agent_id: Any, kinds: dict[str, Any]
    ) -> float:
        """The scorer's importance of one memory; ``kinds`` remembers the agents' types
        read (one batch's)."""
        scorer = self.config.scorer
        agent = str(agent_id or "default")
        kind = None
        if scorer.agent_boosts and scorer.agent_match == "kind":
            # the agent's type is read only when it can matter
            if agent not in kinds:
                # an id that cannot be stored (a lone surrogate) names no agent, and the
                # item's validation refuses it after this: not sent (the Neo4j driver
                # cannot encode it)
                try:
                    check_text(agent, "agent_id")
                except ValueError:
                    found = []
                else:
                    found = self.backend.get(Agent, [agent])
                kinds[agent] = getattr(found[0], "kind", None) if found else None
            kind = kinds[agent]
        return scorer.score(
            content=str(content or ""),
            event_type=event_type,
            agent_kind=kind,
            payload=meta if isinstance(meta, Mapping) else None,
            agent_id=agent,
        )

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
        durable facts of ``turn`` as long-term memories of ``agent_id`` DERIVED_FROM
        ``source_ids`` (AccessDenied, nothing written, for a source it may not read)."""
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
            # the summaries first: memories archived as "replaced by the run summary" must
            # not be archived when the summary fails (a source forgotten during the LLM
            # call is NotFound, with nothing written; a retry summarises what is left)
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
            if promoted or archived:
                self.writes.set_status(
                    archived,
                    Status.ARCHIVED,
                    reason="run_end",
                    nodes=promoted,
                    expect=[Expect(m.ref, props={"status": Status.ACTIVE}) for m in promoted],
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
