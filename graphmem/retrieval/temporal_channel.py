"""Recall's temporal channel (see :class:`~graphmem.config.RecallConfig` and
:mod:`graphmem.temporal`): for a question naming a day, a month or a week, the memories
written in that span (or up to a month after it: relative dates reach back) that speak of
it, most like the question first, fused by rank like the other channels; for a question
naming only a year, or asking "when", a boost of the candidates that speak of it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, time, timedelta

import numpy as np

from graphmem.backends.base import GraphBackend, RecallSearch
from graphmem.config import RecallConfig
from graphmem.models import Filter, Memory, Range, VectorQuery, validated
from graphmem.retrieval.candidates import _add_ranked, _Cand
from graphmem.retrieval.evidence import _DATE_TEXT_RE
from graphmem.temporal import Span, is_when_question, memory_spans, query_span


def temporal_channel(
    backend: GraphBackend,
    search_both: RecallSearch | None,
    cands: dict[str, _Cand],
    query: str,
    flt: Filter,
    qvec: np.ndarray | None,
    fetch: int,
    top: float,
    cfg: RecallConfig,
    qlist: Sequence[float] | None = None,
    sims: dict[str, float] | None = None,
    unlinked: set[str] | None = None,
) -> None:
    """Fuse the channel into ``cands`` (``top``: the fusion's scale, ``_fusion_top``;
    ``search_both``: the backend's recall search when it has one; ``qlist``, ``sims``,
    ``unlinked``: as for the retriever's topic channel)."""
    span = query_span(query) if cfg.temporal_weight > 0 else None
    when = cfg.when_weight > 0 and is_when_question(query)
    if span is None and not when:
        return
    if span is not None and not span.any_year and qvec is not None:
        window = Range(
            field="created_at",
            gte=datetime.combine(span.start, time.min, UTC) - timedelta(days=7),
            lte=datetime.combine(span.end, time.max, UTC) + timedelta(days=31),
        )
        data = flt.model_dump()
        data["ranges"] = (*flt.ranges, window)
        qs = tuple(qvec.tolist()) if qlist is None else tuple(qlist)
        pool = span_pool(
            backend,
            search_both,
            validated(Filter, data),
            qs,
            span,
            fetch,
            cfg.temporal_limit,
            sims,
            unlinked,
        )
        if pool:
            _add_ranked(cands, pool, "temporal", cfg.temporal_weight / top, cfg)
    for c in cands.values():
        spans = memory_spans(c.memory.content, c.memory.created_at)
        if span is not None and span.any_year and any(s.overlaps(span) for s in spans):
            c.breakdown["temporal"] = 1.0
            c.fused *= 1.0 + cfg.temporal_weight
        if when and (len(spans) > 1 or _DATE_TEXT_RE.search(c.memory.content)):
            c.breakdown["when"] = 1.0
            c.fused *= 1.0 + cfg.when_weight


def span_pool(
    backend: GraphBackend,
    search_both: RecallSearch | None,
    window: Filter,
    qlist: tuple[float, ...],
    span: Span,
    fetch: int,
    limit: int,
    sims: dict[str, float] | None,
    unlinked: set[str] | None,
) -> list[Memory]:
    """The channel's ranking: the ``fetch`` memories of ``window`` (recall's filter and
    the question's dates) that speak of ``span``, most like the question first. The
    window's nearest neighbours are read a growing prefix at a time, at most ``limit`` of
    them: a busy span at 100k memories holds tens of thousands, and the channel wants the
    few most like the question, not the first by id (what a match with a limit gives,
    ~0.5-1.4 s at 100k), nor every one of them read and built."""
    limit = min(limit, 10_000)  # a vector query's most
    k = min(limit, max(2 * fetch, 32))
    speaks: dict[str, bool] = {}  # a memory's id -> whether it speaks of the span
    while True:
        q = VectorQuery.trusted(qlist, window, k)
        if search_both is not None:
            hits = search_both.search_both(
                None, q, query_vector=qlist, similarities=sims, unlinked=unlinked
            )[1]
        else:
            hits = backend.search_vector(q)
        pool = []
        for h in hits:
            m = h.node
            if not isinstance(m, Memory):
                continue
            ok = speaks.get(m.id)
            if ok is None:
                spans = memory_spans(m.content, m.created_at)
                ok = speaks[m.id] = any(s.overlaps(span) for s in spans)
            if ok:
                pool.append(m)
                if len(pool) == fetch:  # the rest are less like the question
                    return pool
        if len(hits) < k or k >= limit:
            return pool
        k = min(limit, k * 4)
