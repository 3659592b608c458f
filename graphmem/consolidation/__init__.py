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

from graphmem.consolidation.merge import (
    ConsolidationReport,
    MergeGroup,
    SimilarPair,
    UnmergeReport,
    consolidate,
    iter_memories,
    unmerge,
)
from graphmem.consolidation.passes import (
    TOKEN_BUDGET,
    FactsReport,
    ImproveReport,
    estimate_tokens,
    improve_memories,
    reflect_on,
    store_facts,
    summarize_into_memory,
    token_batches,
)
from graphmem.consolidation.similarity import (
    CONSOLIDATE_PASS,
    Embed,
    brute_force_pairs,
    embedding_pairs,
    find_similar_pairs,
    group_pairs,
    jaccard,
    token_set,
)

__all__ = [
    "CONSOLIDATE_PASS",
    "TOKEN_BUDGET",
    "ConsolidationReport",
    "Embed",
    "FactsReport",
    "ImproveReport",
    "MergeGroup",
    "SimilarPair",
    "UnmergeReport",
    "brute_force_pairs",
    "consolidate",
    "embedding_pairs",
    "estimate_tokens",
    "find_similar_pairs",
    "group_pairs",
    "improve_memories",
    "iter_memories",
    "jaccard",
    "reflect_on",
    "store_facts",
    "summarize_into_memory",
    "token_batches",
    "token_set",
    "unmerge",
]
