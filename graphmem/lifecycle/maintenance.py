"""The maintenance steps: refresh a run's short-term tier, expire, retention, decay, archive,
restore.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from graphmem.consolidation import (
    consolidate,
    improve_memories,
    iter_memories,
)
from graphmem.errors import InvalidInput
from graphmem.eventlog import EventLog
from graphmem.lifecycle.core import _Core, _pinned, _Plan
from graphmem.lifecycle.reports import Action, MaintenanceReport, log, relevance
from graphmem.llm import LLM
from graphmem.models import (
    Filter,
    Memory,
    Range,
    Status,
    Tier,
    validated,
)


class _Maintenance(_Core):
    """The maintenance steps: refresh a run's short-term tier, expire, retain, decay, archive
    and restore."""

    STEPS = ("expire", "retention", "logs", "decay", "stale", "limit", "improve", "consolidate")

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
        ``hard_delete=True`` (each with the older versions it heads; the report lists
        them). Unknown ids raise NotFound and change nothing."""
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
