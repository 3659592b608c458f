"""The LLM passes that derive new memories: summarize, improve, extract facts, reflect."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from graphmem.consolidation.merge import _merged_fields
from graphmem.consolidation.similarity import log
from graphmem.errors import Conflict, InvalidInput, LLMError, NotFound
from graphmem.llm import (
    LLM,
    Fact,
    Improvement,
    OfflineLLM,
    Reflection,
    Summary,
)
from graphmem.models import (
    Category,
    Filter,
    Memory,
    Status,
    Tier,
    content_hash,
    new_id,
    utcnow,
    validated,
)
from graphmem.scoping import common_scope, group_by_scope, in_scope, scope_of
from graphmem.writes import Replacement, Writes

# ---------------------------------------------------------------------------------------
# LLM passes written to the graph


def summarize_into_memory(
    writes: Writes,
    llm: LLM,
    sources: Sequence[Memory],
    *,
    purpose: Literal["run", "memories"] = "memories",
    pass_name: str = "summarize",
    run_id: str | None = None,
    tier: Tier = Tier.LONG_TERM,
    dry_run: bool = False,
    now: datetime | None = None,
    token_budget: int | None = None,
    importance: float | None = None,
) -> Memory:
    """Write one ``summary`` memory DERIVED_FROM every source (sources are unchanged).
    Its importance is ``importance``, else the highest of the sources.

    Sources over ``token_budget`` (default :data:`TOKEN_BUDGET`) are summarised in
    chronological batches within it, then the batch summaries are summarised. A call that
    fails falls back to the extractive offline summary for its batch (the memory's
    ``metadata.llm_fallback`` names the error). On a dry run the summary is computed and
    returned but not written.
    """
    if not sources:
        raise InvalidInput("nothing to summarise")
    common_scope(sources)  # one scope, checked before any LLM call
    now = now or utcnow()
    failures: list[str] = []
    ordered = sorted(sources, key=lambda m: (m.valid_from or m.created_at, m.created_at, m.id))
    batches = token_batches(ordered, token_budget or TOKEN_BUDGET)
    if len(batches) == 1:
        summary = _summarize_or_fallback(llm, ordered, purpose, failures)
    else:
        parts = []
        for batch in batches:
            part = _summarize_or_fallback(llm, batch, purpose, failures)
            parts.append(
                batch[-1].evolve(
                    id=new_id(), content=part.content, content_hash="", embedding=None, metadata={}
                )
            )
        final = _summarize_or_fallback(llm, parts, purpose, failures)
        summary = final.model_copy(update={"source_ids": tuple(m.id for m in ordered)})
    failed = failures[0] if failures else None
    fields = _merged_fields(sources)
    memory: Memory = validated(
        Memory,
        {
            "content": summary.content,
            "agent_id": fields["agent_id"],
            "category": Category.SUMMARY,
            "tier": tier,
            "importance": fields["importance"] if importance is None else importance,
            "tags": fields["tags"],
            "run_id": run_id if run_id is not None else fields["run_id"],
            "valid_from": fields["valid_from"],
            "created_at": now,
            "metadata": {
                "pass": pass_name,
                "source_count": len(summary.source_ids),
                "preserved_count": len(summary.preserved_ids),
                **({"llm_fallback": failed} if failed else {}),
            },
        },
    )
    memory = in_scope(memory, common_scope(sources))
    if dry_run:
        return memory
    [memory] = writes.derive([memory], {memory.id: [s.id for s in sources]}, pass_name=pass_name)
    return memory


def _summarize_or_fallback(
    llm: LLM,
    memories: Sequence[Memory],
    purpose: Literal["run", "memories", "merge"],
    failures: list[str],
) -> Summary:
    try:
        return llm.summarize(memories, purpose=purpose)
    except LLMError as e:
        log.warning(
            "summarize: LLM call failed (%s); extractive summary of %d memories",
            type(e).__name__,
            len(memories),
        )
        failures.append(type(e).__name__)
        return OfflineLLM().summarize(memories, purpose=purpose)


class ImproveReport(BaseModel):
    """What ``improve`` changed (or would change): new versions and contradictions."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    dry_run: bool
    improvement: Improvement
    created: tuple[Memory, ...] = ()  # the rewritten versions (ids assigned on dry runs too)
    superseded_ids: tuple[str, ...] = ()
    batches: int = 0  # LLM calls made (one per batch within the token budget)
    llm_failures: int = 0  # batches improved by the offline pass after a failed call
    skipped: int = 0  # replacements not written: their memories changed during the pass


#: default input budget of one LLM call of a pass, in (estimated) tokens
TOKEN_BUDGET = 6000


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about 4 characters per token, at least 1)."""
    return max(1, len(text) // 4)


def token_batches(
    memories: Sequence[Memory], budget: int = TOKEN_BUDGET, per_item: int = 20
) -> list[list[Memory]]:
    """``memories`` in order, cut into batches whose estimated size (content plus
    ``per_item`` tokens of fencing each) stays within ``budget``; a memory larger than the
    budget is a batch of its own."""
    out: list[list[Memory]] = []
    size = 0
    for m in memories:
        cost = estimate_tokens(m.content) + per_item
        if out and size + cost <= budget:
            out[-1].append(m)
            size += cost
        else:
            out.append([m])
            size = cost
    return out


def improve_memories(
    writes: Writes,
    llm: LLM,
    memories: Sequence[Memory],
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    token_budget: int = TOKEN_BUDGET,
    rewrites: bool = True,
) -> ImproveReport:
    """Run the improve pass and write its result with provenance, in one atomic upsert.

    The memories go to the LLM in chronological batches within ``token_budget``; a batch
    whose call fails (overload, a ``max_tokens`` stop, no provider) is improved by the
    offline pass instead, and counted in ``llm_failures``. ``rewrites=False`` only resolves
    contradictions (scheduled maintenance: a rewrite is a new version of the memory).

    Each rewrite is a new memory (same scope, importance, tags ...) that DERIVED_FROM and
    SUPERSEDES the old one (reason from the pass). Each contradiction makes the kept
    memory's current version SUPERSEDE the losers with the stated reason. Every replaced
    memory becomes ``superseded`` with ``valid_to``.
    """
    now = now or utcnow()
    active = sorted(
        (m for m in memories if m.status is Status.ACTIVE),
        key=lambda m: (m.valid_from or m.created_at, m.created_at, m.id),
    )
    found_rewrites: list[Any] = []
    contradictions: list[Any] = []
    failures = 0
    # one scope per call: the LLM never sees, so never combines, two scopes' memories
    batches = [
        b for group in group_by_scope(active).values() for b in token_batches(group, token_budget)
    ]
    for batch in batches:
        try:
            part = llm.improve(batch)
        except LLMError as e:
            log.warning(
                "improve: LLM call failed (%s); offline pass for %d memories",
                type(e).__name__,
                len(batch),
            )
            failures += 1
            part = OfflineLLM().improve(batch)
        found_rewrites.extend(part.rewrites)
        contradictions.extend(part.contradictions)
    by_id = {m.id: m for m in active}
    contradictions = [
        c
        for c in contradictions
        if c.keep_id in by_id
        and all(i in by_id for i in c.superseded_ids)
        and len({scope_of(by_id[i]) for i in (c.keep_id, *c.superseded_ids)}) == 1
    ]
    imp = Improvement(
        rewrites=tuple(found_rewrites) if rewrites else (), contradictions=tuple(contradictions)
    )
    created: dict[str, Memory] = {}
    groups: list[Replacement] = []
    retired: dict[str, None] = {}
    for r in imp.rewrites:
        old = by_id[r.id]
        new = old.evolve(
            id=new_id(),
            content=r.content,
            content_hash="",
            embedding=None,
            created_at=now,
            updated_at=now,
            valid_from=max(now, old.valid_from or now),
            valid_to=None,
            metadata={**old.metadata, "pass": "improve"},
        )
        created[old.id] = new
        retired[old.id] = None
        groups.append(Replacement((old,), new, r.reason, "improve"))
    for c in imp.contradictions:
        winner: Memory = created.get(c.keep_id, by_id[c.keep_id])
        losers = tuple(by_id[i] for i in c.superseded_ids)
        retired.update(dict.fromkeys(c.superseded_ids))
        groups.append(Replacement(losers, winner, c.reason))
    news = list(created.values())
    report = ImproveReport(
        dry_run=dry_run,
        improvement=imp,
        created=tuple(news),
        superseded_ids=tuple(retired),
        batches=len(batches),
        llm_failures=failures,
    )
    if dry_run or not groups:
        return report
    try:
        news = writes.replace(groups, create=news)
    except Conflict:
        # a memory changed while the LLM answered (its agent updated or forgot it): write
        # the replacements one by one, skipping those whose memories changed
        news, superseded, skipped = _replace_each(writes, groups)
        report = report.model_copy(update={"superseded_ids": tuple(superseded), "skipped": skipped})
    log.info("improve: %d rewrites, %d superseded", len(news), len(report.superseded_ids))
    return report.model_copy(update={"created": tuple(news)})


def _replace_each(
    writes: Writes, groups: Sequence[Replacement]
) -> tuple[list[Memory], list[str], int]:
    """``groups`` written one transaction each: a rewrite (it creates its new version)
    before the contradictions it wins, a contradiction won by a rewrite that was skipped
    skipped too. Returns the created memories, the superseded ids and the skipped count."""
    rewrites = {g.new.id for g in groups if g.pass_name == "improve"}
    made: list[Memory] = []
    superseded: dict[str, None] = {}
    skipped = 0
    for g in groups:
        creates = g.pass_name == "improve"
        if not creates and g.new.id in rewrites and all(m.id != g.new.id for m in made):
            skipped += 1  # its winner was not written
            continue
        try:
            made.extend(writes.replace([g], create=[g.new] if creates else []))
        except Conflict:
            skipped += 1
            continue
        superseded.update(dict.fromkeys(m.id for m in g.olds))
    log.warning("improve: %d replacements skipped, their memories changed", skipped)
    return made, list(superseded), skipped


class FactsReport(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    dry_run: bool
    facts: tuple[Fact, ...]
    created: tuple[Memory, ...] = ()
    skipped_existing: int = 0


def store_facts(
    writes: Writes,
    llm: LLM,
    turn: str,
    *,
    agent_id: str = "default",
    namespace: str = "default",
    run_id: str | None = None,
    speaker: str = "user",
    source_ids: Sequence[str] = (),
    dry_run: bool = False,
    now: datetime | None = None,
) -> FactsReport:
    """Extract durable facts from a conversation turn and store each as a long-term memory
    DERIVED_FROM the turn's memories (``source_ids``). A fact already stored as an active
    memory of the same agent and namespace (same content hash) is not stored again.

    The facts are ``agent_id``'s (the calling agent), in the scope of their sources: a
    source that agent may not read is refused (AccessDenied) before the LLM is asked, and
    nothing is written."""
    now = now or utcnow()
    backend = writes.backend
    whose = None
    if source_ids:
        found = {n.id: n for n in backend.get(Memory, list(source_ids))}
        missing = [i for i in source_ids if i not in found]
        if missing:
            raise NotFound(f"no memory {missing[0]!r}")
        # facts of a turn are the caller's, of the turn's scope (one scope: InvalidInput
        # otherwise), and only from a turn the caller may read
        writes.check_sources(agent_id, list(found.values()))
        whose = common_scope(list(found.values()))
        namespace = whose.namespace
    try:
        facts = llm.extract_facts(turn, speaker=speaker)
    except LLMError as e:
        log.warning("extract_facts: LLM call failed (%s); offline rules", type(e).__name__)
        facts = OfflineLLM().extract_facts(turn, speaker=speaker)
    created: list[Memory] = []
    skipped = 0
    for f in facts:
        fact = validated(
            Memory,
            {
                "content": f.content,
                "category": f.category,
                "tier": Tier.LONG_TERM,
                "importance": f.importance,
                "tags": f.tags,
                "agent_id": agent_id,
                "namespace": namespace,
                "run_id": run_id,
                "created_at": now,
                "metadata": {"pass": "extract_facts", "speaker": speaker},
            },
        )
        if whose is not None:
            fact = in_scope(fact, whose)
        h = content_hash(f.content)
        same = backend.match(
            Memory,
            validated(
                Filter,
                {
                    "equals": {
                        "agent_id": agent_id,
                        "namespace": namespace,
                        "status": "active",
                        "content_hash": h,
                    }
                },
            ),
            limit=50,
        )
        if any(isinstance(m, Memory) and scope_of(m) == scope_of(fact) for m in same):
            skipped += 1
            continue
        created.append(fact)
    report = FactsReport(
        dry_run=dry_run, facts=tuple(facts), created=tuple(created), skipped_existing=skipped
    )
    if dry_run or not created:
        return report
    created = writes.derive(
        created, {m.id: list(source_ids) for m in created}, pass_name="extract_facts"
    )
    return report.model_copy(update={"created": tuple(created)})


def reflect_on(llm: LLM, question: str, memories: Sequence[Memory]) -> Reflection:
    """Answer ``question`` from ``memories`` (typically a recall's results), citing ids.
    Reads only; writes nothing. A failed LLM call falls back to the offline answer."""
    try:
        return llm.reflect(question, memories)
    except LLMError as e:
        log.warning("reflect: LLM call failed (%s); offline answer", type(e).__name__)
        return OfflineLLM().reflect(question, memories)
