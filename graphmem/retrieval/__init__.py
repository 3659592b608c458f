"""Hybrid recall: candidates -> fusion -> relevance signals -> floor -> MMR -> context window.

The pipeline runs above the :class:`~graphmem.backends.base.GraphBackend` seam and uses only
its protocol methods (``search_text``, ``search_vector``, ``expand``, ``match``, ``touch``),
so every backend returns the same ranking for the same data.

1. **Candidates**: lexical BM25 hits (``search_text``) and cosine nearest neighbours
   (``search_vector``), both filtered by the backend *before* the top-k cut; then graph
   expansion around the best seeds — NEXT neighbours inside the same run, DERIVED_FROM
   sources and summaries, memories sharing a tag — re-checked against the same filter.
2. **Fusion**: reciprocal-rank fusion (default) or a weighted linear blend of normalised
   channel scores; expanded memories score from the rank of the seed that brought them.
3. **Floor**: a seed must show evidence of relevance — cosine similarity to the query or
   coverage of the query's terms — so an unrelated query returns nothing.
4. **Signals**: recency, access frequency, importance and age decay (0.3 / 0.2 / 0.4 / 0.1 by
   default) scale the fused relevance; they reorder, they never make an irrelevant memory
   relevant.
5. **MMR** (optional) trades relevance for diversity; then access stats are touched in one
   batched call.

Every :class:`~graphmem.models.RecallResult` carries its score breakdown. Settings are
frozen pydantic configs with named presets (:meth:`RecallConfig.preset`).

The context window (:meth:`Retriever.context_window`) packs the best memories greedily into
a token budget, fencing each as untrusted data.
"""

from graphmem.models import RecallResult
from graphmem.models.scoring import trust_score
from graphmem.retrieval.retriever import Retriever
from graphmem.retrieval.window import (
    DENSE_MAX_CHARS,
    ContextWindow,
    compress_dense,
    estimate_tokens,
    neutralise,
)

__all__ = [
    "DENSE_MAX_CHARS",
    "ContextWindow",
    "RecallResult",
    "Retriever",
    "compress_dense",
    "estimate_tokens",
    "neutralise",
    "trust_score",
]
