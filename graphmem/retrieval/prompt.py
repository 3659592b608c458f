"""What recall and context add around the ranked memories of the store: the fleeting tier
(scratchpad notes as recall results), the no-query window (what matters most now) and the
chat-messages shape of a context block.

These read the scratchpads, the store and a run's events; they never write.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from graphmem.errors import InvalidInput
from graphmem.models import CONTENT_JSON_KEY, Filter, Memory, RecallResult, Tier

if TYPE_CHECKING:
    from graphmem.backends.base import GraphBackend
    from graphmem.config import DecayConfig, RecallConfig
    from graphmem.lifecycle import Lifecycle
    from graphmem.runs import Runs
    from graphmem.scoping import Scope

#: the events of a run that are a conversation, and their chat roles
CHAT_ROLES = {"user_message": "user", "agent_response": "assistant"}


def split_tiers(
    tiers: str | Sequence[str], tier: str | Sequence[str] | None
) -> tuple[bool, list[str]]:
    """Whether ``tiers`` asks for the fleeting tier, and the stored tiers it names.
    InvalidInput for an unknown tier, none, or ``tier`` given beside it."""
    names = [tiers] if isinstance(tiers, str) else list(tiers)
    unknown = sorted({str(t) for t in names} - {"fleeting", *(t.value for t in Tier)})
    if unknown or not names:
        raise InvalidInput(f"tiers are fleeting, short_term, long_term; got {unknown or 'none'}")
    if tier is not None:
        raise InvalidInput("give tier or tiers, not both")
    return "fleeting" in names, [str(t) for t in names if t != "fleeting"]


def fleeting_results(
    lifecycle: Lifecycle,
    query: str,
    k: int,
    run_id: str | Sequence[str] | None,
    config: RecallConfig,
    now: datetime,
) -> list[RecallResult]:
    """Scratchpad notes of ``run_id`` (the process's for None) matching ``query``, as
    recall results (never persisted), with their key in ``metadata.key``."""
    from graphmem.eventlog import canonical_json

    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query must be a non-empty string")
    runs = [run_id] if run_id is None or isinstance(run_id, str) else list(run_id)
    out = []
    for run in runs:
        pad = lifecycle.scratchpad(run)
        for key, note in pad.recall(query, k, match=config.fleeting_match):
            text = note if isinstance(note, str) else canonical_json(note)
            meta: dict[str, Any] = {"tier": "fleeting", "key": key}
            if not isinstance(note, str):
                meta[CONTENT_JSON_KEY] = True
            m = Memory(
                id=f"fleeting-{run or ''}-{key}",
                content=text,
                run_id=run,
                tier=Tier.SHORT_TERM,
                metadata=meta,
                created_at=now,
            )
            out.append(RecallResult(memory=m, score=1.0, breakdown={"fleeting": 1.0}))
    return out[:k]


def relevant_now(
    backend: GraphBackend, flt: Filter, k: int, now: datetime, decay: DecayConfig
) -> list[RecallResult]:
    """The ``k`` most relevant memories of ``flt`` among its newest (importance and use,
    decayed since the last access), for a context with no query."""
    from graphmem.lifecycle import relevance

    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
        raise InvalidInput("k must be an int in 1..1000")
    pool = [
        m
        for m in backend.match(
            Memory, flt, limit=max(10 * k, 500), order_by="created_at", descending=True
        )
        if isinstance(m, Memory)
    ]
    scored = sorted(
        ((relevance(m, now, decay), m) for m in pool), key=lambda sm: (-sm[0], sm[1].id)
    )[:k]
    return [
        RecallResult(memory=m, score=s, breakdown={"relevance": s, "score": s}) for s, m in scored
    ]


def chat_messages(
    block: str,
    query: str,
    *,
    system: str | None,
    run_id: str | None,
    max_events: int,
    runs: Runs,
    scope: Scope | str | None = None,
) -> list[dict[str, str]]:
    """A context block as chat messages: one ``system`` message (``system``, then the
    block), the last ``max_events`` conversation events of ``run_id`` that ``scope`` may
    read as ``user`` / ``assistant``, and ``query`` as the last ``user`` message."""
    head = "\n\n".join(p for p in (system, block) if p)
    messages = [{"role": "system", "content": head}] if head else []
    if run_id is not None and max_events > 0:
        events = runs.events(run_id, event_types=list(CHAT_ROLES), status="active", scope=scope)
        messages += [
            {"role": CHAT_ROLES[e.event_type or ""], "content": e.content}
            for e in events[-max_events:]
        ]
    if query.strip() and (len(messages) < 2 or messages[-1] != {"role": "user", "content": query}):
        messages.append({"role": "user", "content": query})
    return messages
