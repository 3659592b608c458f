"""Consolidation: plan merges per scope, apply them as new versions with provenance, unmerge."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import datetime
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from graphmem.backends.base import Expect, GraphBackend
from graphmem.config import ConsolidationConfig
from graphmem.consolidation.similarity import (
    CONSOLIDATE_PASS,
    _fraction,
    _reaches,
    embedding_pairs,
    find_similar_pairs,
    group_pairs,
    log,
    token_set,
)
from graphmem.errors import Conflict, InvalidInput, LLMError, NotFound
from graphmem.llm import (
    LLM,
    Claim,
    claim_of,
    is_dense,
    merge_sentences,
)
from graphmem.models import (
    MAX_CONTENT_CHARS,
    Category,
    Edge,
    EdgeType,
    Filter,
    Memory,
    NodeRef,
    Status,
    Tier,
    new_id,
    utcnow,
    validated,
)
from graphmem.reconcile import contradicts
from graphmem.scoping import common_scope, in_scope, scope_of
from graphmem.writes import Replacement, Writes

# ---------------------------------------------------------------------------------------
# configuration and reports


class SimilarPair(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    a: str
    b: str
    similarity: float
    kind: Literal["duplicate", "similar", "semantic"]


class MergeGroup(BaseModel):
    """One planned (dry run) or applied merge: exactly what it writes."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    scope: dict[str, str | None]
    source_ids: tuple[str, ...]
    pairs: tuple[SimilarPair, ...]
    kind: Literal["duplicate", "similar"]
    content: str | None  # None on a dry run when an LLM would write it
    content_source: Literal["deterministic", "llm", "fallback"]
    category: str
    tier: str
    importance: float
    access_count: int
    tags: tuple[str, ...]
    valid_from: datetime
    merged_id: str | None = None  # set once applied
    skipped: str | None = None  # why the group is not (or would not be) written


class ConsolidationReport(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    dry_run: bool
    scanned: int
    pairs: int
    groups: tuple[MergeGroup, ...]
    llm_failures: int = 0  # merges written by the deterministic pass after a failed call

    @property
    def superseded_ids(self) -> list[str]:
        """Memories that become (or would become) superseded."""
        return [i for g in self.groups if g.skipped is None for i in g.source_ids]

    @property
    def merged_ids(self) -> list[str]:
        return [g.merged_id for g in self.groups if g.merged_id]


class UnmergeReport(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    merged_id: str
    restored_ids: tuple[str, ...]
    dry_run: bool = False


# ---------------------------------------------------------------------------------------
# consolidation


def iter_memories(backend: GraphBackend, flt: Filter, page: int = 50_000) -> Iterator[Memory]:
    """Every memory matching ``flt``, fetched in pages of ``page`` (ordered by id)."""
    offset = 0
    while True:
        batch = backend.match(Memory, flt, limit=page, offset=offset, order_by="id")
        for n in batch:
            assert isinstance(n, Memory)
            yield n
        if len(batch) < page:
            return
        offset += page


def _edge(etype: EdgeType, src: Memory | NodeRef, dst: Memory | NodeRef, **props: Any) -> Edge:
    edge: Edge = validated(Edge, {"type": etype, "src": src, "dst": dst, "props": props})
    return edge


def _merged_fields(sources: Sequence[Memory]) -> dict[str, Any]:
    chrono = sorted(sources, key=lambda m: (m.valid_from or m.created_at, m.created_at, m.id))
    cats = Counter(m.category.value for m in chrono)
    order = [c.value for c in Category]
    category = min(cats, key=lambda c: (-cats[c], order.index(c)))
    tags: dict[str, None] = {}
    for m in chrono:
        tags.update(dict.fromkeys(m.tags))
    accessed = [m.last_accessed for m in chrono if m.last_accessed is not None]
    expiries = [m.expires_at for m in chrono]
    run_ids = {m.run_id for m in chrono}
    events = {m.event_type for m in chrono}
    return {
        "category": category,
        "tier": Tier.LONG_TERM
        if any(m.tier is Tier.LONG_TERM for m in chrono)
        else Tier.SHORT_TERM,
        "importance": max(m.importance for m in chrono),
        "confidence": max(m.confidence for m in chrono),
        "access_count": sum(m.access_count for m in chrono),
        "last_accessed": max(accessed) if accessed else None,
        "tags": tuple(tags),
        "valid_from": min(m.valid_from or m.created_at for m in chrono),
        "expires_at": None if any(e is None for e in expiries) else max(expiries),  # type: ignore[type-var]
        "run_id": run_ids.pop() if len(run_ids) == 1 else None,
        "event_type": events.pop() if len(events) == 1 else None,
        # the one scope rule: what is made from memories is of their (single) scope; a
        # shared scope names no author, so the merge is credited to the earliest source's
        "agent_id": chrono[0].agent_id,
        **common_scope(chrono).fields(),
    }


def consolidate(
    writes: Writes,
    *,
    agent_id: str | Sequence[str] | None = None,
    namespace: str | Sequence[str] | None = None,
    config: ConsolidationConfig | None = None,
    llm: LLM | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    exclude_ids: Collection[str] = (),
    progress: Callable[[str, int, int], None] | None = None,
) -> ConsolidationReport:
    """Find near-duplicate active memories and merge each transitive group into one memory.

    The merged memory is DERIVED_FROM and SUPERSEDES every source (edge props ``pass``/
    ``reason`` and ``at``); sources become ``superseded`` with ``valid_to = now``. Merged
    importance is the max, access_count the sum, tags the union and valid_from the earliest.
    Content: the ``llm``'s merge synthesis for ``similar`` groups when an LLM is given and no
    source is dense, else the deterministic merge that keeps every distinct sentence.

    ``dry_run=True`` writes nothing and makes no LLM call; the report lists every group with
    the exact field values the merge would write (``content`` is None only where an LLM
    would write it). Groups whose sources changed between planning and writing are skipped
    and say so.
    """
    cfg = config or ConsolidationConfig()
    now = now or utcnow()
    backend = writes.backend
    flt = Filter.for_memories(agent_id=agent_id, namespace=namespace, status="active")
    excluded = set(exclude_ids)
    memories = [
        m
        for m in iter_memories(backend, flt)
        if m.category.value not in cfg.exclude_categories and m.id not in excluded
    ]
    if progress:
        progress("scanned", len(memories), len(memories))
    scopes: dict[tuple[Any, ...], list[Memory]] = defaultdict(list)
    for m in memories:
        # never across scopes (agent, namespace, visibility, user): cfg.scope only narrows
        scopes[(*tuple(getattr(m, f) for f in cfg.scope), scope_of(m))].append(m)
    plans: list[MergeGroup] = []
    npairs = 0
    for key, members in sorted(scopes.items(), key=lambda kv: str(kv[0])):
        groups, count = _plan_scope(members, cfg)
        npairs += count
        whose = key[-1]
        scope = {
            f: (v.value if hasattr(v, "value") else v)
            for f, v in zip(cfg.scope, key[:-1], strict=True)
        }
        scope.update(
            visibility=whose.visibility.value, user_id=whose.user_id, audience=whose.audience
        )
        for idxs, pairs in groups:
            sources = [members[i] for i in idxs]
            fields = _merged_fields(sources)
            kind: Literal["duplicate", "similar"] = (
                "duplicate" if all(p.kind == "duplicate" for p in pairs) else "similar"
            )
            use_llm = (
                llm is not None
                and kind == "similar"
                and not any(is_dense(m.content) for m in sources)
            )
            content = None if use_llm else merge_sentences(sources)
            plans.append(
                MergeGroup(
                    scope=scope,
                    source_ids=tuple(m.id for m in sources),
                    pairs=tuple(pairs),
                    kind=kind,
                    content=content,
                    content_source="llm" if use_llm else "deterministic",
                    category=fields["category"],
                    tier=fields["tier"].value,
                    importance=fields["importance"],
                    access_count=fields["access_count"],
                    tags=fields["tags"],
                    valid_from=fields["valid_from"],
                    skipped=_too_long(content),
                )
            )
    log.info(
        "consolidate: %d memories, %d pairs, %d groups, dry_run=%s",
        len(memories),
        npairs,
        len(plans),
        dry_run,
    )
    if dry_run:
        return ConsolidationReport(
            dry_run=True, scanned=len(memories), pairs=npairs, groups=tuple(plans)
        )
    applied: list[MergeGroup] = []
    for start in range(0, len(plans), cfg.batch_groups):
        batch = plans[start : start + cfg.batch_groups]
        applied.extend(_apply_merges(writes, batch, llm, now))
        if progress:
            progress("merged", min(start + cfg.batch_groups, len(plans)), len(plans))
    failures = sum(g.content_source == "fallback" for g in applied)
    return ConsolidationReport(
        dry_run=False,
        scanned=len(memories),
        pairs=npairs,
        groups=tuple(applied),
        llm_failures=failures,
    )


def _too_long(content: str | None) -> str | None:
    """Why a merge is not written when its content is more than a memory may hold (the
    lossless merge keeps every distinct sentence of its sources), else None. The sources
    stay as they are: failing the whole pass would stop every maintenance run for good."""
    if content is not None and len(content) > MAX_CONTENT_CHARS:
        log.warning(
            "consolidate: skipped a merge of %d characters (at most %d)",
            len(content),
            MAX_CONTENT_CHARS,
        )
        return f"the merged content would exceed {MAX_CONTENT_CHARS} characters"
    return None


def _plan_scope(
    members: list[Memory], cfg: ConsolidationConfig
) -> tuple[list[tuple[list[int], list[SimilarPair]]], int]:
    sets = [token_set(m.content) for m in members]
    raw = find_similar_pairs(sets, cfg.merge_threshold)
    if raw:
        # "Alice lives in Oslo" / "Alice lives in Bergen" share most tokens but contradict
        # each other: that is a version (reconcile/improve), never a merge
        claims: dict[int, Claim | None] = {}

        def claim(i: int) -> Claim | None:
            if i not in claims:
                claims[i] = claim_of(members[i].content)
            return claims[i]

        raw = [(i, j, s) for i, j, s in raw if not contradicts(claim(i), claim(j))]
    dup = _fraction(cfg.duplicate_threshold)

    def is_dup(i: int, j: int) -> bool:
        a, b = sets[i], sets[j]
        inter = len(a & b)
        return _reaches(inter, len(a) + len(b) - inter, dup)

    typed: list[tuple[int, int, float, str]] = [
        (i, j, s, "duplicate" if is_dup(i, j) else "similar") for i, j, s in raw
    ]
    if cfg.embedding_threshold is not None:
        with_vec = [i for i, m in enumerate(members) if m.embedding is not None]
        dims = {len(members[i].embedding or ()) for i in with_vec}
        if len(with_vec) > 1 and len(dims) == 1:
            mat = np.asarray([members[i].embedding for i in with_vec], dtype=np.float32)
            known = {(i, j) for i, j, _ in raw}
            for a, b, s in embedding_pairs(mat, cfg.embedding_threshold):
                i, j = with_vec[a], with_vec[b]
                if (i, j) not in known:
                    typed.append((i, j, s, "semantic"))
    by_root: dict[int, list[SimilarPair]] = defaultdict(list)
    groups = group_pairs(len(members), [(i, j, s) for i, j, s, _ in typed])
    owner = {i: g[0] for g in groups for i in g}
    for i, j, s, kind in typed:
        by_root[owner[i]].append(
            SimilarPair(
                a=members[i].id,
                b=members[j].id,
                similarity=round(s, 6),
                kind=kind,
            )
        )
    out = []
    for g in groups:
        if len(g) > cfg.max_group_size:
            # a huge transitive chain is almost never one fact; leave it for a human
            log.warning(
                "consolidate: skipped a group of %d memories (max_group_size=%d)",
                len(g),
                cfg.max_group_size,
            )
            continue
        out.append((g, by_root[g[0]]))
    return out, len(typed)


def _apply_merges(
    writes: Writes,
    plans: Sequence[MergeGroup],
    llm: LLM | None,
    now: datetime,
) -> list[MergeGroup]:
    ids = [i for p in plans for i in p.source_ids]
    current = {n.id: n for n in writes.backend.get(Memory, ids) if isinstance(n, Memory)}
    todo: list[tuple[MergeGroup, Replacement]] = []
    out: dict[int, MergeGroup] = {}
    for k, plan in enumerate(plans):
        if plan.skipped:
            out[k] = plan
            continue
        sources = [current.get(i) for i in plan.source_ids]
        if any(s is None or s.status is not Status.ACTIVE for s in sources):
            out[k] = plan.model_copy(update={"skipped": "a source changed since planning"})
            continue
        srcs = [s for s in sources if s is not None]
        fields = _merged_fields(srcs)
        content = plan.content
        source = plan.content_source
        if content is None:
            assert llm is not None
            try:
                content = llm.summarize(srcs, purpose="merge").content
            except LLMError as e:
                # one failed call (overload, truncation ...) must not stop the pass
                log.warning(
                    "consolidate: LLM merge failed (%s); deterministic merge", type(e).__name__
                )
                content, source = merge_sentences(srcs), "fallback"
                if skipped := _too_long(content):
                    out[k] = plan.model_copy(update={"skipped": skipped})
                    continue
        reason = (
            f"consolidated {plan.kind} (token jaccard >= "
            f"{min(p.similarity for p in plan.pairs):.2f})"
        )
        memory = validated(
            Memory,
            {
                **fields,
                "id": new_id(),
                "content": content,
                "created_at": now,
                "updated_at": now,
                "metadata": {
                    "pass": CONSOLIDATE_PASS,
                    "merge_kind": plan.kind,
                    "merged_count": len(srcs),
                },
            },
        )
        memory = in_scope(memory, common_scope(srcs))
        out[k] = plan.model_copy(
            update={"merged_id": memory.id, "content": content, "content_source": source}
        )
        todo.append((out[k], Replacement(tuple(srcs), memory, reason, CONSOLIDATE_PASS)))
    if todo:
        try:
            writes.replace([r for _g, r in todo], create=[r.new for _g, r in todo])
        except Conflict:
            # a source changed after it was read: merge group by group, skipping the losers
            for k, plan in list(out.items()):
                rep = next((r for g, r in todo if g is plan), None)
                if rep is None:
                    continue
                try:
                    writes.replace([rep], create=[rep.new])
                except Conflict:
                    out[k] = plan.model_copy(
                        update={"merged_id": None, "skipped": "a source changed since planning"}
                    )
    return [out[k] for k in sorted(out)]


def unmerge(
    writes: Writes, merged_id: str, *, dry_run: bool = False, now: datetime | None = None
) -> UnmergeReport:
    """Undo a consolidation merge: restore its sources (status active, valid_to cleared)
    and delete the merged node — the explicit delete of the node being undone.

    Raises NotFound for an unknown id, InvalidInput when the node is not a merge, and
    Conflict when the merged node is no longer current (undo the newer change first).
    """
    now = now or utcnow()
    backend = writes.backend
    found = backend.get(Memory, [merged_id])
    if not found:
        raise NotFound(f"no memory {merged_id!r}")
    merged = found[0]
    assert isinstance(merged, Memory)
    if merged.metadata.get("pass") != CONSOLIDATE_PASS:
        raise InvalidInput(f"memory {merged_id} is not the result of a consolidation merge")
    if merged.status is not Status.ACTIVE:
        raise Conflict(
            f"merged memory {merged_id} is {merged.status.value}; undo what replaced it first"
        )
    sub = backend.expand([merged.ref], [EdgeType.SUPERSEDES], direction="out", depth=1)
    source_ids = {e.dst.id for e in sub.edges if e.src.id == merged_id}
    sources = [n for n in sub.nodes if isinstance(n, Memory) and n.id in source_ids]
    restore = [
        s.evolve(status=Status.ACTIVE, valid_to=None, updated_at=now)
        for s in sorted(sources, key=lambda m: m.id)
        if s.status is Status.SUPERSEDED
    ]
    report = UnmergeReport(
        merged_id=merged_id, restored_ids=tuple(m.id for m in restore), dry_run=dry_run
    )
    if dry_run:
        return report
    # one transaction, valid only if nothing replaced, or was derived from, the merge since
    incoming = backend.expand(
        [merged.ref], [EdgeType.SUPERSEDES, EdgeType.DERIVED_FROM], direction="in", depth=1
    )
    writes.delete_nodes(
        [merged.ref],
        nodes=restore,
        expect=[
            Expect(
                merged.ref,
                props={"status": Status.ACTIVE},
                incoming=(EdgeType.SUPERSEDES, EdgeType.DERIVED_FROM),
                sources=frozenset(e.src.id for e in incoming.edges if e.dst.id == merged_id),
            ),
            *(Expect(m.ref, props={"status": Status.SUPERSEDED}) for m in restore),
        ],
    )
    log.info("unmerge: restored %d memories", len(restore))
    return report
