"""Lexical evidence for the floor: the query's content terms, their coverage, bigram
similarity, token estimates.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
from collections.abc import Sequence

import numpy as np

from graphmem.text import RANKING_STOPWORDS as _STOP
from graphmem.text import WORD_RE as _TOKEN_RE
from graphmem.text import light_stem as _stem

log = logging.getLogger("graphmem.retrieval")

_DAY = 86_400.0
# an absolute date in a memory's text ("on 5 May", "in 2021", "May 20"): it says when
_DATE_TEXT_RE = re.compile(
    r"\b(?:(?:19|20)\d{2}|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+\d"
    r"|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:January|February|March|April|May|June|July"
    r"|August|September|October|November|December))\b"
)


# ---------------------------------------------------------------------------------------
# lexical evidence (for the floor): coverage of the query's content terms


#: a token as it appears -> (its term, whether its lowercase form is a stop word); the
#: vocabulary repeats, so most tokens of a candidate's text are found here rather than
#: lowercased and stemmed again (recall scores ~70 candidates' texts)
_TOKEN_TERMS: dict[str, tuple[str, bool]] = {}
_TOKEN_TERMS_MAX = 200_000


def _token_term(token: str) -> tuple[str, bool]:
    low = token.lower()
    found = (_stem(low), low in _STOP)
    if len(_TOKEN_TERMS) >= _TOKEN_TERMS_MAX:
        _TOKEN_TERMS.clear()
    _TOKEN_TERMS[token] = found
    return found


def _terms(text: str) -> set[str]:
    memo = _TOKEN_TERMS
    found = [memo.get(t) or _token_term(t) for t in _TOKEN_RE.findall(text)]
    return {term for term, stop in found if not stop} or {term for term, _ in found}


@functools.lru_cache(maxsize=65_536)
def _content_terms(content: str) -> frozenset[str]:
    return frozenset(_terms(content))


def _coverage(query_terms: set[str], content: str) -> float:
    if not query_terms:
        return 0.0
    return len(query_terms & _content_terms(content)) / len(query_terms)


def _bigrams(text: str) -> frozenset[tuple[str, str]]:
    words = [w.lower() for w in _TOKEN_RE.findall(text)]
    if len(words) == 1:
        return frozenset({(words[0], "")})
    return frozenset(itertools.pairwise(words))


def _bigram_similarity(texts: Sequence[str]) -> np.ndarray:
    """Pairwise Jaccard similarity of the texts' word-bigram sets (MMR without vectors)."""
    grams = [_bigrams(t) for t in texts]
    n = len(grams)
    sim = np.eye(n, dtype=np.float64)
    for i in range(n):
        for j in range(i + 1, n):
            union = len(grams[i] | grams[j])
            sim[i, j] = sim[j, i] = len(grams[i] & grams[j]) / union if union else 0.0
    return sim
