"""Names in a query, for recall's name channel. Rules, no model.

A question that names someone ("What activities does Melanie partake in?") asks what was
said by or about them. The lexical channel matches the name wherever it occurs and
prefers the shortest such memories (a bare "thanks, Melanie!"); the vector channel ranks
every memory by meaning, the other people's included. The name channel ranks by meaning
only the memories that contain a name the query gives, so what the named person said
about the subject rises even when it shares no word with the question.

>>> query_names("What activities does Melanie partake in since May?")
['Melanie']
>>> query_names("Did Jon and Gina both visit New York?")
['Jon', 'Gina', 'New', 'York']
"""

from __future__ import annotations

import re

from graphmem.text import RANKING_STOPWORDS, SEARCH_STOPWORDS

__all__ = ["query_names"]

_WORD_RE = re.compile(r"[^\W\d_]+", re.UNICODE)
_SENTENCE_END = frozenset(".!?:;\n")
# capitalised for the calendar's sake, not because they name someone
_CALENDAR = frozenset(
    (
        "january february march april may june july august september october november "
        "december monday tuesday wednesday thursday friday saturday sunday"
    ).split()
)


def query_names(query: str, limit: int = 4) -> list[str]:
    """The capitalised words of ``query`` that are not the first word of a sentence, not
    stop words and not months or weekdays: the names it gives, in order, at most
    ``limit``."""
    out: list[str] = []
    for m in _WORD_RE.finditer(query):
        word = m.group()
        before = query[: m.start()].rstrip(" \t\"'(")
        if not before or before[-1] in _SENTENCE_END:
            continue  # a sentence's first word is capitalised anyway
        low = word.lower()
        if (
            not word[0].isupper()
            or len(word) < 2
            or low in SEARCH_STOPWORDS
            or low in RANKING_STOPWORDS
            or low in _CALENDAR
            or word in out
        ):
            continue
        out.append(word)
        if len(out) == limit:
            break
    return out
