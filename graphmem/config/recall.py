"""Sections for reading: recall ranking (with presets) and reconcile-on-write."""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from graphmem.errors import ConfigError
from graphmem.models.scoring import Composition, Curve, Frequency, RankWeights, Scoring

# ---------------------------------------------------------------------------------------
# recall


class RecallConfig(BaseModel):
    """How recall finds, fuses and ranks candidates. Frozen; derive variants with
    ``config.model_copy(update={...})`` or start from a preset."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    fusion: Literal["rrf", "linear"] = "rrf"
    rrf_k: int = Field(default=10, ge=1)
    lexical_weight: float = Field(default=1.0, ge=0.0)
    vector_weight: float = Field(default=0.5, ge=0.0)
    #: a memory next to a strong seed (graph expansion) scores at least
    #: ``graph_weight`` x the seed's relevance
    graph_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    #: episodic context: each memory gains ``run_weight`` x the best relevance found in
    #: its run (a conversation session is topical), then relevance is renormalised
    run_weight: float = Field(default=1.0, ge=0.0)
    #: candidates fetched per channel: max(candidates, 2 * k). 30 gives the same LoCoMo
    #: recall@10 for k=10 calls as 50 (73.6 both) at a lower cost per query
    candidates: int = Field(default=30, ge=1, le=10_000)
    # graph expansion
    expand_seeds: int = Field(default=5, ge=0)
    expand_next: bool = True
    expand_derived: bool = True
    expand_tags: bool = True
    expand_tag_limit: int = Field(default=8, ge=1)  # shared-tag neighbours per seed
    # knowledge layer (graphmem.knowledge): memories mentioning an entity the query names
    # join as a channel with this weight; seeds bring memories that share a rare entity
    # (one mentioned by at most entity_hub_limit memories)
    entity_weight: float = Field(default=0.0, ge=0.0)
    #: off by default: on LoCoMo the entity hops moved recall by less than a point
    #: (benchmarks/RESULTS.md), and they cost a graph read per recall
    expand_entities: bool = False
    entity_hub_limit: int = Field(default=25, ge=1)
    # floor: a seed needs cosine >= min_similarity or term coverage >= min_coverage
    min_similarity: float = Field(default=0.25, ge=-1.0, le=1.0)
    min_coverage: float = Field(default=0.5, ge=0.0, le=1.0)
    # relevance signals: final = fused * ((1 - signal_weight) + signal_weight * signals).
    # Kept modest: recall itself feeds recency and frequency (touch), so a heavy weight lets
    # a memory recalled once outrank more relevant ones on unrelated queries afterwards.
    weights: RankWeights = Field(default_factory=RankWeights)
    signal_weight: float = Field(default=0.15, ge=0.0, le=1.0)
    recency_half_life_days: float = Field(default=7.0, gt=0.0)
    decay_half_life_days: float = Field(default=90.0, gt=0.0)
    frequency_saturation: int = Field(default=10, ge=1)
    #: the scoring strategy (graphmem.models.scoring); None: graphmem's own, built from the
    #: weights, signal_weight, half-lives and frequency_saturation above
    scoring: Scoring | None = None
    #: the asking agent's own memories (``recall(..., asking_agent=...)``) gain
    #: ``personal_boost`` x the best score before the final order
    personal_boost: float = Field(default=0.0, ge=0.0, le=1.0)
    #: results scoring below this are dropped (``recall(..., min_relevance=...)`` per call)
    min_relevance: float | None = Field(default=None, ge=0.0)
    #: dense content (code, JSON, ids) in a context window is cut to its most telling lines
    compress_dense: bool = False
    #: how recall matches fleeting notes (``tiers`` with ``fleeting``): ``words`` shared
    #: with the query, or the query as a ``substring`` of key or value
    fleeting_match: Literal["words", "substring"] = "words"
    # temporal channel (graphmem.temporal): a question naming a day, month or year lifts
    # the memories whose time (the day written, or a relative date in the text resolved
    # against it) falls in it, and brings such memories in as a channel ranked by
    # similarity; a "when" question lifts memories that say when something happened
    #: 1.0 chosen on LoCoMo dev conversations conv-26/30/41 (recall@10 +2.2) and
    #: confirmed on conv-42/43 (benchmarks/RESULTS.md)
    temporal_weight: float = Field(default=1.0, ge=0.0)
    when_weight: float = Field(default=0.0, ge=0.0)
    #: memories looked at per temporal query, at most: those written within the span
    #: (widened by the reach of relative dates) most like the question, read until the
    #: channel has its pool (graphmem.retrieval.temporal_channel)
    temporal_limit: int = Field(default=500, ge=1)
    #: pseudo-relevance feedback on the lexical channel: the ``prf_terms`` words most
    #: shared by the best ``prf_docs`` candidates are added to the query and the expanded
    #: lexical search joins as a channel of weight ``prf_weight`` (0: off)
    prf_weight: float = Field(default=0.0, ge=0.0)
    prf_docs: int = Field(default=5, ge=1)
    prf_terms: int = Field(default=5, ge=1)
    #: read your writes: seconds a recall through GraphMemory waits for the vectors of the
    #: memories the same handle wrote and not yet embedded (background vectors), so that a
    #: recall right after ``remember`` ranks them as one a minute later would; 0: never wait
    #: (those memories are then found by the lexical and graph channels only)
    vector_wait: float = Field(default=60.0, ge=0.0)
    #: neighbour-context channel (graphmem.context): the ``context_pool`` best candidates
    #: and their NEXT neighbours in the same run, ranked by cos(q, m) + context_share x what
    #: their neighbours' cosines add to their own, fused by rank with this weight; 0: off.
    #: Off by default: on LoCoMo dev (weight 0.25) it lifts R@50 (+0.7 / +0.3 on the two
    #: splits) but lowers R@10 (-0.6 / -0.5) and costs a graph read per recall
    #: (benchmarks/RESULTS.md)
    context_weight: float = Field(default=0.0, ge=0.0)
    #: substance: each episodic memory's relevance is scaled by n / (n + substance), n its
    #: distinct content terms, or by its coverage of the query's terms if that is more, so
    #: that a bare reply naming the person asked about ("thanks, Melanie!") does not
    #: outrank what that person said; other categories (stated facts) are left alone.
    #: 8: chosen on LoCoMo dev conv-26/30/41, confirmed on conv-42/43
    #: (benchmarks/RESULTS.md); 0: off
    substance: float = Field(default=8.0, ge=0.0)
    context_share: float = Field(default=0.3, ge=0.0)
    context_pool: int = Field(default=20, ge=1)
    # diversity: with embeddings, cosine between memories; without, bigram Jaccard of text
    mmr: bool = False
    mmr_lambda: float = Field(default=0.7, ge=0.0, le=1.0)
    #: topic channel (graphmem.retrieval.topic): the query without the names it gives that
    #: occur in at least ``topic_share`` of its vector channel's hits (the people of a
    #: conversation, whose names dominate a small model's vector), embedded and searched
    #: by vector, fused by rank with this weight; 0: off. Off by default: on LoCoMo dev
    #: (weight 1.0, chosen on conv-26/30/41) it lifts R@10 +3.2, R@50 +2.4 and multi-hop
    #: +3.9 there, but on conv-42/43 R@10 -0.3, multi-hop +0.4, temporal and adversarial
    #: -2.0 (benchmarks/RESULTS.md); it costs one more query embedding and vector search
    topic_weight: float = Field(default=0.0, ge=0.0)
    topic_share: float = Field(default=0.25, ge=0.0, le=1.0)
    #: subject channel (graphmem.retrieval.topic, graphmem.retrieval.questions): for a
    #: question that asks for a list ("What activities does Melanie partake in?") about a
    #: name common among its vector hits, the topic search's hits that the person opens
    #: (their own turns: "Melanie: I'm off to go swimming"), fused by rank with this weight
    #: x the best of them's cosine / the best hit's; 0: off. Its cost, for list questions
    #: only, is the topic search (one query embedding, one vector search; shared with the
    #: topic channel when both are on). 1.0 (chosen on LoCoMo conv-26/30/41): multi-hop
    #: R@10 +3.6 there and +2.8 on conv-42/43 (45.0), the only setting measured that
    #: holds there; it costs adversarial -2.4 on conv-42/43 (about 3 questions) and, for
    #: list questions only, ~12 ms a recall (benchmarks/RESULTS.md)
    subject_weight: float = Field(default=1.0, ge=0.0)

    @property
    def strategy(self) -> Scoring:
        """The scoring strategy in force: ``scoring``, or graphmem's default shapes with
        this config's parameters."""
        if self.scoring is not None:
            return self.scoring
        return _default_scoring(
            self.weights,
            self.signal_weight,
            self.recency_half_life_days,
            self.decay_half_life_days,
            self.frequency_saturation,
        )

    @classmethod
    def preset(cls, name: str) -> RecallConfig:
        """A named preset: ``balanced`` (default), ``lexical``, ``semantic``, ``linear``,
        ``diverse``, ``precise``, ``recent``."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ConfigError(
                f"unknown recall preset {name!r}; choose from {sorted(PRESETS)}"
            ) from None


@functools.lru_cache(maxsize=64)
def _default_scoring(
    weights: RankWeights,
    signal_weight: float,
    recency_days: float,
    decay_days: float,
    saturation: int,
) -> Scoring:
    return Scoring(
        recency=Curve(shape="half_life", days=recency_days, since="access"),
        frequency=Frequency(shape="log", saturation=saturation),
        decay=Curve(shape="half_life", days=decay_days, since="created"),
        weights=weights,
        composition=Composition(kind="multiplier", signal_weight=signal_weight),
    )


PRESETS: dict[str, RecallConfig] = {
    "balanced": RecallConfig(),
    "lexical": RecallConfig(vector_weight=0.0),
    "semantic": RecallConfig(lexical_weight=0.0),
    "linear": RecallConfig(fusion="linear"),
    "diverse": RecallConfig(mmr=True, mmr_lambda=0.6),
    "precise": RecallConfig(
        min_similarity=0.4, min_coverage=0.75, graph_weight=0.25, run_weight=0.25
    ),
    "recent": RecallConfig(
        signal_weight=0.6,
        weights=RankWeights(recency=0.6, frequency=0.1, importance=0.2, decay=0.1),
    ),
}


# ---------------------------------------------------------------------------------------
# reconcile on write

ReconcileMode = Literal["auto", "off", "llm"]
NearDuplicatePolicy = Literal["link", "supersede", "keep"]


class ReconcileConfig(BaseModel):
    """How a write is reconciled with the memories already in its scope."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    mode: ReconcileMode = "auto"
    near_duplicates: NearDuplicatePolicy = "keep"
    near_threshold: float = Field(default=0.7, gt=0.0, le=1.0)
    candidates: int = Field(default=20, ge=1, le=1000)
