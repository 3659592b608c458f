"""Consolidation: exact near-duplicate detection, merges with provenance, and the graph side
of the LLM passes (summaries, improvements, extracted facts).

Near-duplicates are pairs of active memories whose *token Jaccard similarity* reaches a
threshold (tokens: lowercased words, punctuation ignored, as a set). They are found
exactly, without comparing all pairs: the classic prefix-filtering all-pairs join. Tokens
are ordered rarest first; a set of size ``n`` can only reach similarity ``t`` with another
set if the two share a token within their first ``n - ceil(t*n) + 1`` tokens, so only the
prefixes go into an inverted index, and sets of incompatible sizes are skipped (a size
filter). Every candidate is then verified with the exact Jaccard value in integer
arithmetic, so the result is *exactly* the brute-force set of pairs
(:func:`brute_force_pairs` is the reference the tests compare against).

Pairs are found within a scope (agent and namespace by default) and grouped transitively
(union-find). A merge writes one new memory that is DERIVED_FROM and SUPERSEDES each source;
the sources stay in the graph with status ``superseded`` and ``valid_to`` set. Nothing here
deletes data, except :func:`unmerge`, which removes the merged node it is explicitly asked
to undo after restoring its sources.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from graphmem.backends.base import Expect, GraphBackend
from graphmem.config import ConsolidationConfig
from graphmem.errors import Conflict, InvalidInput, LLMError, NotFound
from graphmem.llm import (
    LLM,
    Claim,
    Fact,
    Improvement,
    OfflineLLM,
    Reflection,
    Summary,
    claim_of,
    is_dense,
    merge_sentences,
    tokens,
)
from graphmem.models import (
    Category,
    Edge,
    EdgeType,
    Filter,
    Memory,
    NodeRef,
    Status,
    Tier,
    content_hash,
    new_id,
    utcnow,
    validated,
)
from graphmem.reconcile import contradicts
from graphmem.scoping import common_scope, group_by_scope, in_scope, scope_of
from graphmem.writes import Replacement, Writes

__all__ = [
    "ConsolidationReport",
    "Embed",
    "FactsReport",
    "ImproveReport",
    "MergeGroup",
    "SimilarPair",
    "UnmergeReport",
    "brute_force_pairs",
    "consolidate",
    "find_similar_pairs",
    "group_pairs",
    "improve_memories",
    "iter_memories",
    "jaccard",
    "reflect_on",
    "store_facts",
    "summarize_into_memory",
    "token_set",
    "unmerge",
]

log = logging.getLogger("graphmem.consolidation")

CONSOLIDATE_PASS = "consolidate"
Embed = Callable[[list[str]], Any]
"""Texts -> a (n, dim) array of vectors (e.g. ``GraphMemory.embedder.embed``)."""


# ---------------------------------------------------------------------------------------
# exact token-Jaccard pairs


def token_set(text: str) -> frozenset[str]:
    """The set of lowercased word tokens of ``text`` (punctuation-insensitive)."""
    return frozenset(tokens(text))


def _fraction(threshold: float) -> Fraction:
    # Fraction(str(0.6)) == 3/5 exactly, so 0.6 * 5 is 3, not 3.0000000000000004
    t = Fraction(str(threshold))
    if not 0 < t <= 1:
        raise InvalidInput(f"threshold must be in (0, 1], got {threshold}")
    return t


def jaccard(a: frozenset[str] | set[Any], b: frozenset[str] | set[Any]) -> float:
    """|a & b| / |a | b| (0.0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _reaches(inter: int, union: int, t: Fraction) -> bool:
    return inter * t.denominator >= t.numerator * union


def brute_force_pairs(texts: Sequence[str], threshold: float) -> list[tuple[int, int, float]]:
    """Every pair ``(i, j, similarity)`` with ``i < j`` and Jaccard >= threshold, by comparing
    all pairs. O(n²): the reference for tests and benchmarks, not for production use."""
    t = _fraction(threshold)
    sets = [token_set(x) for x in texts]
    out = []
    for i in range(len(sets)):
        a = sets[i]
        if not a:
            continue
        for j in range(i + 1, len(sets)):
            b = sets[j]
            if not b:
                continue
            inter = len(a & b)
            union = len(a) + len(b) - inter
            if _reaches(inter, union, t):
                out.append((i, j, inter / union))
    return out


_BITMAP_WORDS = 4  # 256-bit token bitmaps


def _popcount_rows(words: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(words).sum(axis=1, dtype=np.int64)  # type: ignore[no-any-return]
    bytes_ = words.view(np.uint8).reshape(len(words), -1)
    return _POP8[bytes_].sum(axis=1, dtype=np.int64)  # type: ignore[no-any-return]


_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def find_similar_pairs(
    texts: Sequence[str] | Sequence[frozenset[str]], threshold: float = 0.6
) -> list[tuple[int, int, float]]:
    """Every pair ``(i, j, similarity)``, ``i < j``, whose token Jaccard similarity is at
    least ``threshold`` — exactly the pairs :func:`brute_force_pairs` finds, sorted.

    Prefix filtering with an inverted index over the rarest-first token order and a size
    filter produce candidates; a bitmap filter (256-bit token bitmaps: the bits that differ
    bound the symmetric difference from below, so the overlap from above) discards most of
    them in numpy; the rest are verified exactly. Texts without a word token never pair.
    ``texts`` may also be token sets.
    """
    t = _fraction(threshold)
    num, den = t.numerator, t.denominator
    sets = [x if isinstance(x, frozenset) else token_set(x) for x in texts]
    df: Counter[str] = Counter()
    for ts in sets:
        df.update(ts)
    # rank tokens rarest first (ties by the token itself, for determinism)
    ranked = sorted(df.items(), key=lambda kv: (kv[1], kv[0]))
    rank = {tok: r for r, (tok, _) in enumerate(ranked)}
    records = [sorted(rank[tok] for tok in ts) for ts in sets]
    sizes_l = [len(r) for r in records]
    sizes = np.asarray(sizes_l, dtype=np.int64)
    bits = _BITMAP_WORDS * 64
    bitmaps = np.zeros((len(records), _BITMAP_WORDS), dtype=np.uint64)
    for i, rec in enumerate(records):
        row = [0] * _BITMAP_WORDS
        for r in rec:
            b = (r * 0x9E3779B1 >> 7) % bits
            row[b >> 6] |= 1 << (b & 63)
        bitmaps[i] = row
    order = sorted((i for i in range(len(records)) if records[i]), key=lambda i: sizes_l[i])
    index: dict[int, list[int]] = defaultdict(list)  # token rank -> record ids, by size
    start: dict[int, int] = {}  # per posting list: first entry still large enough
    rsets: dict[int, frozenset[int]] = {}
    out: list[tuple[int, int, float]] = []
    for x in order:
        rec = records[x]
        n = len(rec)
        min_size = (num * n + den - 1) // den  # ceil(t*n): smaller partners cannot reach t
        seen: set[int] = set()
        for tok in rec[: n - min_size + 1]:
            plist = index.get(tok)
            if plist is None:
                continue
            lo = start.get(tok, 0)
            # posting lists are in increasing size and later records are no smaller, so
            # entries too small now stay too small: skip them for good
            while lo < len(plist) and sizes_l[plist[lo]] < min_size:
                lo += 1
            if lo:
                start[tok] = lo
            seen.update(plist[lo:] if lo else plist)
        if seen:
            cand = np.fromiter(seen, dtype=np.int64, count=len(seen))
            if len(cand) > 8:
                msize = sizes[cand]
                differ = _popcount_rows(bitmaps[cand] ^ bitmaps[x])
                bound = (n + msize - differ) // 2  # overlap <= (|x|+|y|-differing bits)/2
                cand = cand[bound * (num + den) >= num * (n + msize)]
            if len(cand):
                sx = frozenset(rec)
                for y in cand.tolist():
                    sy = rsets.get(y)
                    if sy is None:
                        sy = rsets[y] = frozenset(records[y])
                    inter = len(sx & sy)
                    union = n + sizes_l[y] - inter
                    if inter * den >= num * union:
                        out.append((min(x, y), max(x, y), inter / union))
        # index a shorter prefix: a partner z processed later (|z| >= n) needs an overlap
        # of at least ceil(2t/(1+t)*n) with this record, so only that prefix can meet it
        for tok in rec[: n - (2 * num * n + (num + den) - 1) // (num + den) + 1]:
            index[tok].append(x)
    out.sort()
    return out


def group_pairs(n: int, pairs: Iterable[tuple[int, int, float]]) -> list[list[int]]:
    """Connected components (of size >= 2) of the pair graph over ``range(n)``, each sorted,
    ordered by their smallest member."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b, _ in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    comps: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        comps[find(i)].append(i)
    return sorted((c for c in comps.values() if len(c) > 1), key=lambda c: c[0])


def embedding_pairs(
    vectors: np.ndarray, threshold: float, *, block: int = 2048
) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, cosine)`` with cosine >= threshold (exact, blocked matrix products)."""
    raw = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    v = raw / np.where(norms == 0, 1, norms)
    out: list[tuple[int, int, float]] = []
    for lo in range(0, len(v), block):
        sims = v[lo : lo + block] @ v.T
        ii, jj = np.nonzero(sims >= threshold)
        for i, j in zip(ii.tolist(), jj.tolist(), strict=True):
            gi = lo + i
            if gi < j:
                out.append((gi, j, float(sims[i, j])))
    return out


# ---------------------------------------------------------------------------------------
# configuration and reports


class SimilarPair(BaseModel):
    model_config = ConfigDict(frozen=True)

    a: str
    b: str
    similarity: float
    kind: Literal["duplicate", "similar", "semantic"]


class MergeGroup(BaseModel):
    """One planned (dry run) or applied merge: exactly what it writes."""

    model_config = ConfigDict(frozen=True)

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
    skipped: str | None = None  # why an applied group was not written


class ConsolidationReport(BaseModel):
    model_config = ConfigDict(frozen=True)

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
    model_config = ConfigDict(frozen=True)

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
            plans.append(
                MergeGroup(
                    scope=scope,
                    source_ids=tuple(m.id for m in sources),
                    pairs=tuple(pairs),
                    kind=kind,
                    content=None if use_llm else merge_sentences(sources),
                    content_source="llm" if use_llm else "deterministic",
                    category=fields["category"],
                    tier=fields["tier"].value,
                    importance=fields["importance"],
                    access_count=fields["access_count"],
                    tags=fields["tags"],
                    valid_from=fields["valid_from"],
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

    model_config = ConfigDict(frozen=True)

    dry_run: bool
    improvement: Improvement
    created: tuple[Memory, ...] = ()  # the rewritten versions (ids assigned on dry runs too)
    superseded_ids: tuple[str, ...] = ()
    batches: int = 0  # LLM calls made (one per batch within the token budget)
    llm_failures: int = 0  # batches improved by the offline pass after a failed call


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
    news = writes.replace(groups, create=news)
    log.info("improve: %d rewrites, %d superseded", len(news), len(retired))
    return report.model_copy(update={"created": tuple(news)})


class FactsReport(BaseModel):
    model_config = ConfigDict(frozen=True)

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
    memory of the same agent and namespace (same content hash) is not stored again."""
    now = now or utcnow()
    backend = writes.backend
    whose = None
    if source_ids:
        found = {n.id: n for n in backend.get(Memory, list(source_ids))}
        missing = [i for i in source_ids if i not in found]
        if missing:
            raise NotFound(f"no memory {missing[0]!r}")
        # facts of a turn are of the turn's scope (one scope: InvalidInput otherwise)
        whose = common_scope(list(found.values()))
        first = next(iter(found.values()))
        agent_id, namespace = whose.agent_id or first.agent_id, whose.namespace
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
