"""Text handling in one place: the tokenizer, the stop lists, a light stemmer and the
sentence splitter used by search, ranking, consolidation, reconciliation, the offline LLM
passes and the hash embedder.

There are three stop lists because they answer three questions:

- :data:`SEARCH_STOPWORDS` — which query words to leave out of a BM25 / Lucene match (a
  long list: function words carry no evidence about which memory is meant);
- :data:`RANKING_STOPWORDS` — which words do not count towards a query's coverage in the
  relevance floor (shorter: "one", "most" … can matter there);
- :data:`SUMMARY_STOPWORDS` — which words the offline summariser ignores when it scores
  sentences.

>>> words("Alice's tea, at 8am!")
['alice', 's', 'tea', 'at', '8am']
>>> split_sentences("She moved. Then she left!")
['She moved.', 'Then she left!']
"""

from __future__ import annotations

import re

__all__ = [
    "RANKING_STOPWORDS",
    "SEARCH_STOPWORDS",
    "SUMMARY_STOPWORDS",
    "WORD_RE",
    "light_stem",
    "query_terms",
    "split_sentences",
    "words",
]

#: a word: a run of Unicode letters, digits or underscores
WORD_RE = re.compile(r"\w+", re.UNICODE)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")

SEARCH_STOPWORDS = frozenset(
    """a an the and or but if of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once
    here there when where why how all any both each few more most other some such no nor not
    only own same so than too very s t can will just don should now is are was were be been
    being have has had having do does did doing i me my myself we our ours ourselves you your
    yours yourself yourselves he him his himself she her hers herself it its itself they them
    their theirs themselves what which who whom this that these those am would could""".split()
)

RANKING_STOPWORDS = frozenset(
    """a an the and or but if of at by for with about to from in on off over under is are was
    were be been being have has had do does did i me my we our you your he him his she her it
    its they them their what which who whom this that these those am can will would could
    should how when where why not no so than too very just also there here all any each some
    did does doing into out up down s t""".split()
)

SUMMARY_STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being "
    "it its this that these those i me my we our you your he she they them his her their "
    "do does did what which who whom when where why how not no so than then there here "
    "about into over under again any all can will would should could has have had".split()
)


def words(text: str) -> list[str]:
    """Lowercased word tokens; punctuation separates words and is dropped."""
    return WORD_RE.findall(text.lower())


#: at most this many distinct terms of a query reach a full-text match
MAX_QUERY_TERMS = 64


def query_terms(text: str) -> list[str]:
    """The terms of a full-text query, for both backends: distinct lowercase words in
    order, search stop words dropped (unless the query is nothing but stop words), at
    most :data:`MAX_QUERY_TERMS`."""
    tokens = list(dict.fromkeys(t.lower() for t in WORD_RE.findall(text)))
    return ([t for t in tokens if t not in SEARCH_STOPWORDS] or tokens)[:MAX_QUERY_TERMS]


def light_stem(word: str) -> str:
    """A light suffix stripper (ing, ed, es, s, ly) for matching word forms in ranking."""
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def split_sentences(text: str) -> list[str]:
    """Sentences of prose (split after . ! ? before a capital/digit, and at line breaks)."""
    return [s.strip() for s in _SENTENCE_SPLIT_RE.split(text) if s and s.strip()]
