"""Retriever: candidates -> fusion -> floor -> signals (graph, entities, time, feedback) ->
MMR, and the context window it fills.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from graphmem.backends.base import GraphBackend, RecallNeighbours, RecallSearch
from graphmem.config import RecallConfig
from graphmem.context import neighbour_context, within
from graphmem.embeddings import Embedder, QueryEmbedder
from graphmem.errors import ConfigError, InvalidInput
from graphmem.knowledge.channel import entity_channel, shared_entity_neighbours
from graphmem.models import (
    Category,
    EdgeType,
    Filter,
    Hit,
    Memory,
    NodeLabel,
    NodeRef,
    RecallResult,
    TextQuery,
    VectorQuery,
    check_text,
    utcnow,
)
from graphmem.retrieval.candidates import _add_ranked, _Cand, _fusion_top, _own, _scored
from graphmem.retrieval.evidence import (
    _bigram_similarity,
    _content_terms,
    _coverage,
    _terms,
    log,
)
from graphmem.retrieval.questions import is_list_question
from graphmem.retrieval.temporal_channel import temporal_channel
from graphmem.retrieval.topic import common_names, subject, without
from graphmem.retrieval.window import (
    ContextWindow,
    _fence_texts,
    _fmt_memory,
    _footer,
    _header,
    _new_boundary,
    estimate_tokens,
    neutralise,
)
from graphmem.text import SEARCH_STOPWORDS as _SEARCH_STOP
from graphmem.text import WORD_RE as _TOKEN_RE

# ---------------------------------------------------------------------------------------
# the pipeline


class Retriever:
    """The hybrid recall pipeline over any backend. ``embedder`` None means lexical only."""

    def __init__(
        self,
        backend: GraphBackend,
        embedder: Embedder | None = None,
        *,
        config: RecallConfig | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.backend = backend
        # the backend's one-round-trip fast paths, asked for once
        self._search_both = backend if isinstance(backend, RecallSearch) else None
        self._neighbours = backend if isinstance(backend, RecallNeighbours) else None
        self.embedder = embedder
        self.config = config or RecallConfig()
        self._clock = clock

    def resolve_config(self, config: RecallConfig | str | None) -> RecallConfig:
        """``config`` as a RecallConfig: itself, the preset it names, or this retriever's."""
        return self._resolve(config)

    def _resolve(self, config: RecallConfig | str | None) -> RecallConfig:
        if config is None:
            return self.config
        if isinstance(config, str):
            return RecallConfig.preset(config)
        if not isinstance(config, RecallConfig):
            raise ConfigError(f"config must be a RecallConfig or preset name, got {config!r}")
        return config

    # -- recall ------------------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        filter: Filter | None = None,
        config: RecallConfig | str | None = None,
        touch: bool = True,
        now: datetime | None = None,
        min_relevance: float | None = None,
        asking_agent: str | None = None,
    ) -> list[RecallResult]:
        """The ``k`` memories most relevant to ``query`` among those matching ``filter``
        (default: active memories), best first, each with its score breakdown.

        ``min_relevance`` (default ``config.min_relevance``) drops results scoring below
        it; ``asking_agent``'s own memories gain ``config.personal_boost``."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string")
        if len(query) > 10_000:
            raise InvalidInput("query is longer than 10000 characters")
        try:
            check_text(query, "query")
        except ValueError as e:
            raise InvalidInput(str(e)) from None
        if not isinstance(k, int) or not 1 <= k <= 1000:
            raise InvalidInput("k must be an int in 1..1000")
        cfg = self._resolve(config)
        if min_relevance is not None:
            if (
                isinstance(min_relevance, bool)
                or not isinstance(min_relevance, int | float)
                or not math.isfinite(min_relevance)
                or min_relevance < 0
            ):
                raise InvalidInput("min_relevance must be a non-negative number")
        else:
            min_relevance = cfg.min_relevance
        flt = filter if filter is not None else Filter.for_memories()
        if flt.label is not NodeLabel.MEMORY:
            raise InvalidInput("recall runs over Memory nodes")
        now = now or self._clock()
        fetch = max(cfg.candidates, 2 * k)

        qvec = self._query_vector(query, cfg)
        qlist = tuple(qvec.tolist()) if qvec is not None else None
        cands: dict[str, _Cand] = {}
        lexical: list[Hit] = []
        vector: list[Hit] = []
        text_q = (
            TextQuery.trusted(query, flt, fetch) if cfg.lexical_weight > 0 or qvec is None else None
        )
        vector_q = (
            VectorQuery.trusted(qlist, flt, fetch)
            if qlist is not None and cfg.vector_weight > 0
            else None
        )
        # a server backend keeps the embeddings: it reports each memory's cosine to the
        # query instead (MMR compares the memories' own vectors, so it reads them)
        sims: dict[str, float] | None = (
            {} if self._search_both is not None and not cfg.mmr else None
        )
        unlinked: set[str] = set()  # hits with no edge the graph expansion could follow
        if self._search_both is not None:
            # a server backend sends both searches as one round trip
            lexical, vector = self._search_both.search_both(
                text_q, vector_q, query_vector=qlist, similarities=sims, unlinked=unlinked
            )
        else:
            lexical = self.backend.search_text(text_q) if text_q is not None else []
            vector = self.backend.search_vector(vector_q) if vector_q is not None else []
        self._fuse(cands, lexical, vector, cfg)
        if cfg.entity_weight > 0:
            self._fuse_entities(cands, query, flt, qvec, fetch, lexical, vector, cfg)
        if cfg.prf_weight > 0 and cands:
            self._feedback(cands, query, flt, fetch, lexical, vector, cfg)
        if (cfg.topic_weight > 0 or cfg.subject_weight > 0) and qvec is not None:
            top = _fusion_top(cfg, lexical, vector)
            self._topic(cands, query, flt, fetch, vector, top, cfg, qlist, sims, unlinked)
        if cfg.temporal_weight > 0 or cfg.when_weight > 0:
            temporal_channel(
                self.backend,
                self._search_both,
                cands,
                query,
                flt,
                qvec,
                fetch,
                _fusion_top(cfg, lexical, vector),
                cfg,
                qlist,
                sims,
                unlinked,
            )
        if cfg.context_weight > 0 and qvec is not None and cands:
            self._context(cands, flt, qvec, fetch, lexical, vector, cfg, sims)
        qterms = _terms(query)
        self._score_evidence(cands.values(), qvec, qterms, sims)
        # floor: only seeds with evidence of relevance survive (and may bring neighbours)
        for key in [key for key, c in cands.items() if not self._passes(c, cfg, qvec)]:
            del cands[key]
        if cfg.graph_weight > 0 and cfg.expand_seeds > 0 and cands:
            self._expand(cands, flt, cfg, qvec, qterms, sims, unlinked)
        if cfg.substance > 0:
            self._substance(cands.values(), cfg)
        self._run_context(cands.values(), cfg)
        # MMR re-orders a pool of the best; without it only the first k are kept, so only
        # they become results
        keep = max(4 * k, 20) if cfg.mmr else k
        results = self._rank(cands.values(), cfg, now, asking_agent, min_relevance, keep)
        if cfg.mmr and len(results) > 1:
            results = self._mmr(results, cands, k, cfg.mmr_lambda)
        results = results[:k]
        if touch and results:
            self.backend.touch([r.memory.id for r in results], now)
        log.debug(
            "recall: %d lexical, %d vector, %d candidates, %d results",
            len(lexical),
            len(vector),
            len(cands),
            len(results),
        )
        return results

    def _query_vector(self, query: str, cfg: RecallConfig) -> np.ndarray | None:
        if self.embedder is None or (cfg.vector_weight <= 0 and cfg.min_similarity <= -1):
            return None
        if isinstance(self.embedder, QueryEmbedder):  # e.g. int8 weights for queries
            vec = np.asarray(self.embedder.embed_query(query), dtype=np.float32)
        else:
            vec = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else None

    @staticmethod
    def _fuse(
        cands: dict[str, _Cand], lexical: list[Hit], vector: list[Hit], cfg: RecallConfig
    ) -> None:
        top_lex = max((h.score for h in lexical), default=0.0)
        # fused relevance is normalised so that first place in every channel that ran
        # scores 1 (a lexical-only recall is not capped by the missing vector channel)
        top = _fusion_top(cfg, lexical, vector)
        for channel, hits, weight in (
            ("lexical", lexical, cfg.lexical_weight),
            ("vector", vector, cfg.vector_weight),
        ):
            for rank, hit in enumerate(hits, start=1):
                c = cands.get(hit.node.id)
                if c is None:
                    c = cands[hit.node.id] = _Cand(hit.node)
                c.seed = True
                c.breakdown[f"{channel}_rank"] = float(rank)
                c.breakdown[channel] = hit.score
                if cfg.fusion == "rrf":
                    c.fused += weight / (cfg.rrf_k + rank) / top
                else:
                    norm = (
                        hit.score / top_lex
                        if channel == "lexical" and top_lex > 0
                        else (max(hit.score, 0.0))
                    )
                    c.fused += weight * norm / top
                c.breakdown["fused"] = c.fused

    @staticmethod
    def _score_evidence(
        cands: Any,
        qvec: np.ndarray | None,
        qterms: set[str],
        known: dict[str, float] | None = None,
    ) -> None:
        """Each candidate's cosine to the query (``known``: those the backend computed) and
        its coverage of the query's terms."""
        cands = list(cands)
        if qvec is not None and known:
            for c in cands:
                s = known.get(c.memory.id)
                if s is not None:
                    c.cosine = s
                    c.breakdown["similarity"] = s
        if qvec is not None:
            with_vec = [
                c
                for c in cands
                if c.memory.embedding is not None and (not known or c.memory.id not in known)
            ]
            if with_vec:
                mat = np.asarray([c.memory.embedding for c in with_vec], dtype=np.float32)
                if mat.shape[1] == qvec.shape[0]:
                    norms = np.maximum(np.linalg.norm(mat, axis=1), 1e-12)
                    sims = (mat @ qvec) / norms
                    for c, s in zip(with_vec, sims, strict=True):
                        c.cosine = float(s)
                        c.breakdown["similarity"] = float(s)
        for c in cands:
            c.breakdown["coverage"] = _coverage(qterms, c.memory.content)

    @staticmethod
    def _passes(c: _Cand, cfg: RecallConfig, qvec: np.ndarray | None) -> bool:
        coverage = c.breakdown.get("coverage", 0.0)
        if coverage >= cfg.min_coverage or "temporal_rank" in c.breakdown:
            return True  # (a memory of the day or month the question names is evidence)
        if qvec is not None and c.cosine is not None:
            near = min(c.breakdown.get("context", -1.0), c.breakdown.get("context_near", -1.0))
            return max(c.cosine, near, c.breakdown.get("topic", -1.0)) >= cfg.min_similarity
        # no vector evidence: a BM25 match on a content word is all the evidence there is
        return "lexical" in c.breakdown and coverage > 0

    def _expand(
        self,
        cands: dict[str, _Cand],
        flt: Filter,
        cfg: RecallConfig,
        qvec: np.ndarray | None,
        qterms: set[str],
        sims: dict[str, float] | None = None,
        unlinked: Collection[str] = (),
    ) -> None:
        seeds = sorted(cands.values(), key=lambda c: -c.fused)[: cfg.expand_seeds]
        seed_rank = {c.memory.id: i for i, c in enumerate(seeds, start=1)}
        by_id = {c.memory.id: c.memory for c in seeds}
        found: dict[str, tuple[Memory, int, str]] = {}  # id -> (memory, seed rank, via)
        seed_score = {c.memory.id: c.fused for c in seeds}

        def offer(mem: Memory, seed_id: str, via: str) -> None:
            rank = seed_rank[seed_id]
            prev = found.get(mem.id)
            if prev is None or rank < prev[1]:
                found[mem.id] = (mem, rank, via)

        refs = [NodeRef(NodeLabel.MEMORY, c.memory.id) for c in seeds]
        types = [
            t
            for t, on in (
                (EdgeType.NEXT, cfg.expand_next),
                (EdgeType.DERIVED_FROM, cfg.expand_derived),
            )
            if on
        ]
        via_entity: dict[str, str] = {}  # memory id -> the shared entity that brought it
        if self._neighbours is not None:
            # a server backend expands every seed with an edge to follow in one round trip
            # (links, tags and entities; none, no trip), scoped by the filter and bounded
            # per seed inside the query
            tag_limit = cfg.expand_tag_limit if cfg.expand_tags else 0
            hub_limit = cfg.entity_hub_limit if cfg.expand_entities else 0
            for seed_id, via, nb in self._neighbours.neighbours(
                [c.memory.id for c in seeds if c.memory.id not in unlinked],
                flt,
                link_types=types,
                tag_limit=tag_limit,
                entity_hub_limit=hub_limit,
                query_vector=tuple(qvec.tolist()) if qvec is not None else None,
                similarities=sims,
            ):
                if via == EdgeType.NEXT.value and nb.run_id != by_id[seed_id].run_id:
                    continue
                if nb.id in seed_rank:
                    continue
                if via.startswith("entity:"):
                    via_entity.setdefault(nb.id, via.split(":", 1)[1])
                    via = "entity"
                offer(nb, seed_id, via)
            types = []
        elif types:
            sub = self.backend.expand(
                refs, types, direction="both", depth=1, limit=len(refs) * 8 + 16
            )
            nodes = {n.id: n for n in sub.nodes if isinstance(n, Memory)}
            for e in sub.edges:
                for a, b in ((e.src.id, e.dst.id), (e.dst.id, e.src.id)):
                    if a in seed_rank and b in nodes and b not in seed_rank:
                        nb = nodes[b]
                        if e.type is EdgeType.NEXT and nb.run_id != by_id[a].run_id:
                            continue
                        offer(nb, a, e.type.value)
        if cfg.expand_tags and self._neighbours is None:
            tagged = [c for c in seeds if c.memory.tags]
            if tagged:
                sub = self.backend.expand(
                    [NodeRef(NodeLabel.MEMORY, c.memory.id) for c in tagged],
                    [EdgeType.TAGGED],
                    direction="both",
                    depth=2,
                    limit=len(tagged) + cfg.expand_tag_limit,
                )
                for n in sub.nodes:
                    if not isinstance(n, Memory) or n.id in seed_rank:
                        continue
                    shared = [c for c in tagged if set(c.memory.tags) & set(n.tags)]
                    if shared:
                        offer(n, min(shared, key=lambda c: seed_rank[c.memory.id]).memory.id, "tag")
        if cfg.expand_entities and seeds and self._neighbours is None:
            for hop in shared_entity_neighbours(
                self.backend, [c.memory for c in seeds], hub_limit=cfg.entity_hub_limit
            ):
                via_entity[hop.memory.id] = hop.entity
                offer(hop.memory, hop.seed_id, "entity")
        fresh = [i for i in found if i not in cands]
        # expansion crosses scopes: keep only what the caller's filter admits
        if self._neighbours is not None:
            scoped = set(fresh)  # the backend applied the filter inside its query
        else:
            scoped = within(self.backend, flt, fresh) if fresh else set()
        new_cands = []
        for i, (mem, rank, via) in found.items():
            c = cands.get(i)
            if c is None:
                if i not in scoped:
                    continue
                c = cands[i] = _Cand(mem)
                new_cands.append(c)
            c.breakdown["graph_via_" + via.lower()] = 1.0
            if via == "entity":
                c.breakdown["entity:" + via_entity[i]] = 1.0
            self._add_graph(c, rank, seed_score[seeds[rank - 1].memory.id], cfg)
        if new_cands:
            self._score_evidence(new_cands, qvec, qterms, sims)

    def _fuse_entities(
        self,
        cands: dict[str, _Cand],
        query: str,
        flt: Filter,
        qvec: np.ndarray | None,
        fetch: int,
        lexical: list[Hit],
        vector: list[Hit],
        cfg: RecallConfig,
    ) -> None:
        """The entity channel (graphmem.knowledge.channel): memories mentioning the
        entities the query names, fused by rank like the other channels."""
        hits = entity_channel(self.backend, query, flt, qvec, k=fetch)
        scoped = within(self.backend, flt, [h.memory.id for h in hits]) if hits else set()
        top = _fusion_top(cfg, lexical, vector)
        rank = 0
        for h in hits:
            if h.memory.id not in scoped:
                continue
            rank += 1
            c = cands.get(h.memory.id)
            if c is None:
                c = cands[h.memory.id] = _Cand(h.memory)
            c.seed = True
            c.breakdown["entity_rank"] = float(rank)
            for name in h.entities:
                c.breakdown["entity:" + name] = 1.0
            if cfg.fusion == "rrf":
                c.fused += cfg.entity_weight / (cfg.rrf_k + rank) / top
            else:
                c.fused += cfg.entity_weight * h.score / max(hits[0].score, 1e-12) / top
            c.breakdown["fused"] = c.fused

    def _feedback(
        self,
        cands: dict[str, _Cand],
        query: str,
        flt: Filter,
        fetch: int,
        lexical: list[Hit],
        vector: list[Hit],
        cfg: RecallConfig,
    ) -> None:
        """Pseudo-relevance feedback: expand the lexical query with the words the best
        candidates share, search again, fuse by rank."""
        best = sorted(cands.values(), key=lambda c: -c.fused)[: cfg.prf_docs]
        asked = {w.lower() for w in _TOKEN_RE.findall(query)}
        counts: dict[str, int] = {}
        for c in best:
            for w in {w.lower() for w in _TOKEN_RE.findall(c.memory.content)}:
                if w not in _SEARCH_STOP and w not in asked and len(w) > 2 and w.isalpha():
                    counts[w] = counts.get(w, 0) + 1
        extra = [w for w, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])) if n > 1]
        if not extra:
            return
        text = query + " " + " ".join(extra[: cfg.prf_terms])
        hits = self.backend.search_text(TextQuery(text=text, filter=flt, k=fetch))
        mems = [h.node for h in hits if isinstance(h.node, Memory)]
        _add_ranked(cands, mems, "prf", cfg.prf_weight / _fusion_top(cfg, lexical, vector), cfg)

    def _topic(
        self,
        cands: dict[str, _Cand],
        query: str,
        flt: Filter,
        fetch: int,
        vector: list[Hit],
        top: float,
        cfg: RecallConfig,
        qlist: Sequence[float] | None = None,
        sims: dict[str, float] | None = None,
        unlinked: set[str] | None = None,
    ) -> None:
        """The topic channel (graphmem.retrieval.topic): the query without the names it
        gives that are common among its vector hits, searched by vector, fused by rank.
        Each memory keeps its cosine to the topic query: evidence for the floor. With
        ``sims`` (see :meth:`recall`) the hits come lean, ``sims`` receives their cosines
        to the whole query (``qlist``) and ``unlinked`` those with no edge to expand.

        The subject channel shares its search: for a list question, the hits that one of
        those names opens, fused by rank. Its weight is scaled by how near the best of them
        comes to the best hit of all, so that when the person named did not do what is
        asked about (the best matches are someone else's) their memories do not bury it."""
        lists = cfg.subject_weight > 0 and is_list_question(query)
        if cfg.topic_weight <= 0 and not lists:
            return
        near = [h.node.content for h in vector if isinstance(h.node, Memory)]
        common = common_names(query, near, cfg.topic_share)
        topic = without(query, common)
        tvec = self._query_vector(topic, cfg) if topic is not None else None
        if tvec is None:
            return
        topic_q = VectorQuery.trusted(tuple(tvec.tolist()), flt, fetch)
        if self._search_both is not None:
            # a server backend: recall's vector search, one statement sized by the scope's
            # count, where search_vector first counts the filter's matches in one of its own
            hits = self._search_both.search_both(
                None, topic_q, query_vector=qlist, similarities=sims, unlinked=unlinked
            )[1]
        else:
            hits = self.backend.search_vector(topic_q)
        found = [(h.node, h.score) for h in hits if isinstance(h.node, Memory)]
        if cfg.topic_weight > 0:
            _add_ranked(cands, [m for m, _ in found], "topic", cfg.topic_weight / top, cfg)
        own = [(m, score) for m, score in found if subject(m.content) in common] if lists else []
        if own:
            share = max(own[0][1], 0.0) / max(found[0][1], 1e-12)
            weight = cfg.subject_weight * share / top
            _add_ranked(cands, [m for m, _ in own], "subject", weight, cfg)
        for m, score in found if cfg.topic_weight > 0 else own:
            cands[m.id].breakdown["topic"] = score

    def _context(
        self,
        cands: dict[str, _Cand],
        flt: Filter,
        qvec: np.ndarray,
        fetch: int,
        lexical: list[Hit],
        vector: list[Hit],
        cfg: RecallConfig,
        sims: dict[str, float] | None,
    ) -> None:
        """The neighbour-context channel (graphmem.context), fused by rank."""
        pool = sorted(cands.values(), key=lambda c: -c.fused)[: cfg.context_pool]
        scored = neighbour_context(
            self.backend, [c.memory for c in pool], flt, qvec, cfg.context_share, sims
        )[:fetch]
        top = _fusion_top(cfg, lexical, vector)
        rank = 0
        for m, score, near in scored:
            c = cands.get(m.id)
            if c is None:  # (neighbour_context keeps to the filter)
                c = cands[m.id] = _Cand(m)
            rank += 1
            c.seed = True
            c.breakdown["context_rank"] = float(rank)
            c.breakdown["context"] = score
            c.breakdown["context_near"] = near
            c.fused += cfg.context_weight / (cfg.rrf_k + rank) / top
            c.breakdown["fused"] = c.fused

    @staticmethod
    def _add_graph(c: _Cand, seed_rank: int, seed_fused: float, cfg: RecallConfig) -> None:
        """A neighbour of a strong seed is at least ``graph_weight`` x as relevant."""
        lifted = cfg.graph_weight * seed_fused
        if lifted > c.breakdown.get("graph", 0.0):
            c.breakdown["graph"] = lifted
            c.breakdown["graph_seed_rank"] = float(seed_rank)
            c.fused = max(c.fused, lifted)

    @staticmethod
    def _substance(cands: Any, cfg: RecallConfig) -> None:
        """Scale each episodic memory's relevance by its substance share: n / (n +
        ``substance``), n its distinct content terms, or its coverage of the query's terms
        if that is more. A turn of talk can be a bare reply that only names the person
        asked about ("thanks, Melanie!") and says nothing about them; a short turn that
        states all the query asks about loses nothing. Facts, procedures and summaries
        are statements by construction and keep their relevance. Shares are relative to
        the largest among the episodic candidates, so the best turn keeps its score and
        the scale (and ``min_relevance``) stays that of the fusion."""
        turns = [c for c in cands if c.memory.category is Category.EPISODIC]
        shares = []
        for c in turns:
            n = len(_content_terms(c.memory.content))
            shares.append(max(n / (n + cfg.substance), c.breakdown.get("coverage", 0.0)))
        top = max(shares, default=0.0) or 1.0
        for c, share in zip(turns, shares, strict=True):
            c.breakdown["substance"] = share / top
            c.fused *= share / top

    @staticmethod
    def _run_context(cands: Any, cfg: RecallConfig) -> None:
        """Add ``run_weight`` x the best relevance in each memory's run, renormalised."""
        if cfg.run_weight <= 0:
            return
        cands = list(cands)
        best: dict[str, float] = {}
        for c in cands:
            run = c.memory.run_id
            if run is not None and c.fused > best.get(run, 0.0):
                best[run] = c.fused
        for c in cands:
            run_best = best.get(c.memory.run_id, 0.0) if c.memory.run_id else c.fused
            c.breakdown["run"] = run_best
            c.fused = (c.fused + cfg.run_weight * run_best) / (1.0 + cfg.run_weight)

    def _rank(
        self,
        cands: Any,
        cfg: RecallConfig,
        now: datetime,
        asking_agent: str | None = None,
        min_relevance: float | None = None,
        keep: int | None = None,
    ) -> list[RecallResult]:
        """The candidates as results, best first: those scoring at least
        ``min_relevance``, the first ``keep`` of them (all when None)."""
        # the asker's own memories rise by a share of the best score, so the boost means
        # the same whatever the scale of the strategy's scores (every candidate is scored)
        boosted = asking_agent is not None and cfg.personal_boost > 0
        scored = _scored(cands, cfg.strategy, now, None if boosted else keep)
        boost = 0.0
        if boosted and scored:
            boost = cfg.personal_boost * max(s[0] for s in scored)
            scored = [
                (score + boost if c.memory.agent_id == asking_agent else score, i, c, sig)
                for score, i, c, sig in scored
            ]
        scored.sort(key=lambda s: (-s[0], s[1]))  # ties by memory id
        if min_relevance is not None:
            scored = [s for s in scored if s[0] >= min_relevance]
        out: list[RecallResult] = []
        # a result (its breakdown merged from the candidate's and the signals) is built
        # only for the candidates kept: most of them are cut here
        for score, _i, c, sig in scored[:keep]:
            breakdown = {**c.breakdown, **sig, "relevance": c.fused}
            if boost and c.memory.agent_id == asking_agent:
                breakdown["personal"] = boost
            breakdown["score"] = score
            out.append(RecallResult.trusted(_own(c.memory), score, breakdown))
        return out

    @staticmethod
    def _mmr(
        results: list[RecallResult], cands: dict[str, _Cand], k: int, lam: float
    ) -> list[RecallResult]:
        pool = results[: max(4 * k, 20)]
        vecs = [cands[r.memory.id].memory.embedding for r in pool]
        if any(v is None for v in vecs) or len({len(v) for v in vecs if v is not None}) > 1:
            # no (comparable) vectors: similarity of the texts' word bigrams
            sim = _bigram_similarity([r.memory.content for r in pool])
        else:
            mat = np.asarray(vecs, dtype=np.float32)
            mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
            sim = mat @ mat.T
        top = pool[0].score or 1.0
        rel = np.array([r.score / top for r in pool])
        chosen: list[int] = [0]
        left = list(range(1, len(pool)))
        while left and len(chosen) < k:
            penalty = sim[np.ix_(left, chosen)].max(axis=1)
            mmr = lam * rel[left] - (1 - lam) * penalty
            best = left[int(np.argmax(mmr))]
            chosen.append(best)
            left.remove(best)
        picked = []
        for rank, i in enumerate(chosen, start=1):
            r = pool[i]
            picked.append(r.model_copy(update={"breakdown": {**r.breakdown, "mmr_rank": rank}}))
        return picked

    # -- context window ----------------------------------------------------------------

    def context_window(
        self,
        query: str,
        *,
        max_tokens: int = 2000,
        k: int = 50,
        filter: Filter | None = None,
        policies: Sequence[str] = (),
        estimate: Callable[[str], int] = estimate_tokens,
        config: RecallConfig | str | None = None,
        touch: bool = True,
        results: Sequence[RecallResult] | None = None,
    ) -> ContextWindow:
        """Recall up to ``k`` memories and pack the best greedily into ``max_tokens``.

        The block opens with a directive that memories are untrusted data; org
        ``policies`` (trusted, in the given order) lead it; each memory is fenced and
        neutralised so its content cannot close the fence. A memory that does not fit is
        skipped and smaller, lower-ranked ones may still fill the remaining budget. Only the
        packed memories are touched. ``results`` (ranked by the caller, e.g. a query-less
        window) are packed instead of recalling ``query``.
        """
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidInput("max_tokens must be a positive int")
        if results is None:
            results = self.recall(query, k=k, filter=filter, config=config, touch=False)
        compress = self._resolve(config).compress_dense
        boundary = _new_boundary([t for r in results for t in _fence_texts(r)] + list(policies))
        header, footer = _header(boundary), _footer(boundary)
        parts = [header]
        used = estimate(header) + estimate(footer) + 2
        kept_policies: list[str] = []
        if policies:
            head = f"<policies-{boundary}>\nOrganisation policies that apply:"
            tail = f"</policies-{boundary}>"
            cost = estimate(head) + estimate(tail) + 2
            lines = []
            for p in policies:
                line = f"- {neutralise(p.strip())}"
                c = estimate(line) + 1
                if used + cost + c > max_tokens:
                    break
                lines.append(line)
                kept_policies.append(p)
                cost += c
            if lines:
                parts += [head, *lines, tail]
                used += cost
        packed: list[RecallResult] = []
        dropped = 0
        for r in results:
            block = _fmt_memory(r, boundary, compress)
            c = estimate(block) + 1
            if used + c > max_tokens:
                dropped += 1
                continue
            parts.append(block)
            packed.append(r)
            used += c
        parts.append(footer)
        if used > max_tokens:  # not even the header fits: return nothing rather than overflow
            return ContextWindow(
                text="",
                memories=(),
                tokens=0,
                max_tokens=max_tokens,
                dropped=len(results),
                boundary=boundary,
            )
        if touch and packed:
            self.backend.touch([r.memory.id for r in packed], self._clock())
        return ContextWindow(
            text="\n".join(parts),
            memories=tuple(packed),
            policies=tuple(kept_policies),
            tokens=used,
            max_tokens=max_tokens,
            dropped=dropped,
            boundary=boundary,
        )
