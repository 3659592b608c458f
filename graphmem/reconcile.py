"""Reconcile on write: a new memory is compared with what its scope already holds.

In the same scope (agent, namespace, visibility and user — a memory never reconciles
with one its author could not see), before the write:

- an **exact duplicate** (same content hash) is not stored again: the existing memory is
  touched (its access count, hence its trust, goes up) and returned, keeping what the
  request said by one rule (:func:`merge_duplicate`): tags are the union, metadata is
  merged with the request's keys winning, importance and confidence are the larger, an
  ``expires_at`` given by the request replaces the stored one (even an earlier one), and
  ``valid_from`` is the earlier of the two; the existing memory is changed in place (same
  id) when any of these changes;
- a **contradiction** — both state the same single-valued attribute of the same subject
  (``Alice lives in Oslo`` / ``Alice lives in Bergen``, see :func:`graphmem.llm.claim_of`)
  with different values — makes the new memory a version that SUPERSEDES the old one with
  the reason; with ``mode="llm"`` the configured LLM is also asked when the rules find none;
- a **near-duplicate** (token Jaccard >= ``near_threshold``) is, per ``near_duplicates``,
  ``keep``-t as is (the default: consolidation merges near-duplicates with provenance in
  maintenance), ``link``-ed (the new memory records ``metadata.near_duplicate_of`` and the
  similarity) or ``supersede``-d (the new wording replaces the old as a new version).

Cost: the exact check is one indexed lookup; a lexical search of the scope runs only for
a write that states a single-valued claim, under ``link``/``supersede``, or in ``llm``
mode — a search per write costs about one lexical query (see benchmarks), which is why
near-duplicates are left to consolidation by default.

Episodic memories (events, conversation turns) are never reconciled: an utterance repeated
or contradicted later still happened. Only facts (semantic, procedural, summaries) are
compared, and only with facts.

Nothing is overwritten: the old memory stays in ``history()`` as ``superseded``, and
``forget(new_id, cascade=False)`` undoes the reconciliation (``forget`` restores what only
the forgotten memory superseded). :class:`ReconcileResult` says which of these happened.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from graphmem.backends.base import GuardedWrite
from graphmem.config import ReconcileConfig
from graphmem.errors import Conflict, LLMError
from graphmem.knowledge.extract import normalise
from graphmem.llm import LLM, Claim, claim_of, tokens
from graphmem.models import Category, Filter, Memory, TextQuery, validated
from graphmem.scoping import scope_of
from graphmem.writes import Writes

__all__ = ["ReconcileAction", "ReconcileConfig", "ReconcileResult", "contradicts", "reconcile"]

log = logging.getLogger("graphmem.reconcile")

ReconcileAction = Literal["created", "duplicate", "superseded", "linked"]


class ReconcileResult(BaseModel):
    """What a reconciled write did.

    ``action``: ``created`` (a new memory, nothing related found), ``duplicate`` (nothing
    written; ``memory`` is the existing one, touched), ``superseded`` (``memory`` is new and
    SUPERSEDES ``related_ids``: a contradiction, or a near-duplicate under the
    ``supersede`` policy), ``linked`` (``memory`` is new and names the near-duplicate in
    ``metadata.near_duplicate_of``)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    action: ReconcileAction
    memory: Memory
    related_ids: tuple[str, ...] = ()
    reason: str | None = None

    @property
    def duplicate(self) -> bool:
        """True when nothing was written because the memory already existed."""
        return self.action == "duplicate"


def contradicts(a: Claim | None, b: Claim | None) -> bool:
    """Whether two claims give different values to the same attribute of the same subject
    (subjects compared as the knowledge layer matches entity names: ``The user`` is
    ``user``, ``Alice's`` is ``alice``)."""
    return (
        a is not None
        and b is not None
        and a.attribute == b.attribute
        and a.value != b.value
        and normalise(a.subject) == normalise(b.subject)
    )


def _same_scope(a: Memory, b: Memory) -> bool:
    return (
        a.category is not Category.EPISODIC
        and b.category is not Category.EPISODIC
        and scope_of(a) == scope_of(b)
    )


def _jaccard(a: str, b: str) -> float:
    ta, tb = set(tokens(a)), set(tokens(b))
    union = len(ta | tb)
    return len(ta & tb) / union if union else 0.0


#: the fields of a request that an exact duplicate keeps (see :func:`merge_duplicate`)
DUPLICATE_FIELDS = ("tags", "metadata", "importance", "confidence", "expires_at", "valid_from")


def merge_duplicate(existing: Memory, request: Memory, given: frozenset[str]) -> Memory:
    """``existing`` with what an exact-duplicate ``request`` said (the one rule): tags the
    union, metadata merged (the request's keys win), importance and confidence the larger,
    ``expires_at`` the request's when it gave one, ``valid_from`` the earlier when it gave
    one. ``given``: the fields the caller set (defaults are not "said")."""
    changes: dict[str, object] = {}
    if "tags" in given:
        tags = tuple(dict.fromkeys((*existing.tags, *request.tags)))
        if tags != existing.tags:
            changes["tags"] = tags
    if "metadata" in given:
        meta = {**existing.metadata, **request.metadata}
        if meta != existing.metadata:
            changes["metadata"] = meta
    for f in ("importance", "confidence"):
        if f in given and getattr(request, f) > getattr(existing, f):
            changes[f] = getattr(request, f)
    if "expires_at" in given and request.expires_at != existing.expires_at:
        changes["expires_at"] = request.expires_at
    if "valid_from" in given and request.valid_from is not None:
        start = existing.valid_from or existing.created_at
        if request.valid_from < start:
            changes["valid_from"] = request.valid_from
    return existing.evolve(**changes) if changes else existing


def reconcile(
    writes: Writes,
    memory: Memory,
    *,
    config: ReconcileConfig | None = None,
    llm: LLM | None = None,
    now: datetime | None = None,
    given: frozenset[str] = frozenset(DUPLICATE_FIELDS),
) -> ReconcileResult:
    """Write ``memory`` reconciled with its scope (see the module docstring). ``given``:
    the fields the caller set, which an exact duplicate keeps."""
    cfg = config or ReconcileConfig()
    if cfg.mode == "off" or memory.category is Category.EPISODIC:
        return ReconcileResult(action="created", memory=writes.create([memory])[0])
    for attempt in range(3):
        try:
            return _reconcile(
                writes, memory, cfg, llm, now or writes.now(), given, optimistic=attempt == 0
            )
        except Conflict:
            # an old version changed between the read and the write: look again
            if attempt == 2:
                raise
            log.info("reconcile: the store changed meanwhile; reconciling again")
    raise AssertionError("unreachable")  # pragma: no cover


def _reconcile(
    writes: Writes,
    memory: Memory,
    cfg: ReconcileConfig,
    llm: LLM | None,
    now: datetime,
    given: frozenset[str] = frozenset(),
    *,
    optimistic: bool = False,
) -> ReconcileResult:
    backend = writes.backend
    scope = {"agent_id": memory.agent_id, "namespace": memory.namespace, "status": "active"}
    same_text = validated(Filter, {"equals": {**scope, "content_hash": memory.content_hash}})
    claim = claim_of(memory.content)
    wide = cfg.near_duplicates != "keep" or (cfg.mode == "llm" and llm is not None)
    if optimistic and claim is None and not wide and isinstance(backend, GuardedWrite):
        # nothing to compare but an exact duplicate: a server backend writes the memory
        # unless one exists, checked in the write's own statement (one round trip); when
        # one does, nothing is written and the next attempt reads as below
        return ReconcileResult(
            action="created", memory=writes.create([memory], unless=same_text)[0]
        )
    exact = [
        m
        for m in backend.match(Memory, same_text, limit=20)
        if isinstance(m, Memory) and _same_scope(m, memory)
    ]
    if exact:
        found = exact[0]
        merged = merge_duplicate(found, memory, given)
        kept = [f for f in DUPLICATE_FIELDS if getattr(merged, f) != getattr(found, f)]
        if kept:
            # expects the status it read (Conflict: reconciled again by the caller's loop)
            writes.change([merged.evolve(updated_at=now)])
        backend.touch([found.id], now)
        fresh = backend.get(Memory, [found.id])
        current = fresh[0] if fresh else merged
        log.debug("reconcile: exact duplicate of %s", found.id)
        return ReconcileResult(
            action="duplicate",
            memory=current,
            related_ids=(found.id,),
            reason="exact duplicate in the same scope"
            + (f"; kept the request's {', '.join(kept)}" if kept else ""),
        )
    if claim is None and not wide:
        return ReconcileResult(action="created", memory=writes.create([memory])[0])
    if wide:
        query = memory.content[:10_000]
    else:  # a claim alone only needs memories naming its subject and attribute
        assert claim is not None
        query = f"{claim.subject} {claim.attribute}"
    hits = backend.search_text(
        TextQuery(text=query, filter=validated(Filter, {"equals": scope}), k=cfg.candidates)
    )
    candidates = [h.node for h in hits if h.node.id != memory.id and _same_scope(h.node, memory)]
    if claim is not None:
        olds: list[Memory] = []
        values: list[str] = []
        since = memory.valid_from or memory.created_at
        for c in candidates:
            other = claim_of(c.content)
            # a statement dated before the one it disagrees with is history, not news
            if (
                other is not None
                and (c.valid_from or c.created_at) <= since
                and contradicts(claim, other)
            ):
                olds.append(c)
                values.append(other.value)
        if olds:
            reason = (
                f"contradiction: {claim.subject!r} {claim.attribute} {claim.value!r}, "
                f"not {', '.join(repr(v) for v in dict.fromkeys(values))}"
            )
            return _supersede(writes, olds, memory, reason)
    if cfg.mode == "llm" and llm is not None and candidates:
        losers = _llm_contradictions(llm, candidates, memory)
        if losers:
            return _supersede(writes, losers[0], memory, losers[1])
    best: tuple[float, Memory] | None = None
    for c in candidates:
        s = _jaccard(c.content, memory.content)
        if s >= cfg.near_threshold and (best is None or s > best[0]):
            best = (s, c)
    if best is not None and cfg.near_duplicates != "keep":
        sim, near = best
        if cfg.near_duplicates == "supersede":
            return _supersede(
                writes, [near], memory, f"near-duplicate restated (token jaccard {sim:.2f})"
            )
        linked = memory.evolve(
            metadata={
                **memory.metadata,
                "near_duplicate_of": near.id,
                "near_duplicate_similarity": round(sim, 4),
            }
        )
        [written] = writes.create([linked])
        return ReconcileResult(
            action="linked",
            memory=written,
            related_ids=(near.id,),
            reason=f"near-duplicate (token jaccard {sim:.2f})",
        )
    return ReconcileResult(action="created", memory=writes.create([memory])[0])


def _supersede(
    writes: Writes, olds: Sequence[Memory], memory: Memory, reason: str
) -> ReconcileResult:
    written = writes.supersede(olds, memory, reason=reason, pass_name=None)
    log.debug("reconcile: %s supersedes %d memories", written.id, len(olds))
    return ReconcileResult(
        action="superseded", memory=written, related_ids=tuple(m.id for m in olds), reason=reason
    )


def _llm_contradictions(
    llm: LLM, candidates: Sequence[Memory], memory: Memory
) -> tuple[list[Memory], str] | None:
    """The candidates the LLM says ``memory`` contradicts (it keeps the new one), or None;
    a failed call is logged and treated as "none" (the write goes on)."""
    ordered = sorted(candidates, key=lambda m: (m.valid_from or m.created_at, m.id))
    try:
        imp = llm.improve([*ordered, memory])
    except LLMError as e:
        log.warning("reconcile: LLM contradiction check failed (%s); rules only", type(e).__name__)
        return None
    by_id = {m.id: m for m in ordered}
    for c in imp.contradictions:
        losers = [by_id[i] for i in c.superseded_ids if i in by_id]
        if c.keep_id == memory.id and losers:
            return losers, c.reason
    return None
