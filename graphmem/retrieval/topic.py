"""The topic channel of recall: the query without the names that say little.

"What activities does Melanie partake in?" asked of a conversation between Melanie and
Caroline: "Melanie" is in half the turns (she speaks them, or is addressed in them), so it
carries next to nothing about which turns answer, yet it dominates the query's vector: the
nearest turns are those that name her, not those about activities ("I'm off to go swimming
with the kids"). The topic query leaves out the names the question gives that occur in at
least a given share of the memories its vector search found; a rarer name (a book, a
place) is what is asked about and stays. :class:`~graphmem.retrieval.Retriever` embeds it
and searches by vector as one more channel (``RecallConfig.topic_weight``, off by
default: benchmarks/RESULTS.md).

The same search serves the subject channel (``RecallConfig.subject_weight``): when the
question asks for a list about such a person, the hits that person opens (:func:`subject`:
"Melanie: I'm off to go swimming", "Melanie's teacher is Jonas") are that person's own
memories ranked by what is asked about them.

>>> near = ["Melanie: I paint.", "Caroline: Hi Melanie!", "Melanie: Swimming today."]
>>> topic_query("What activities does Melanie partake in?", near, 0.25)
'What activities does partake in?'
>>> near = ["Melanie: I loved Charlotte's Web."] + ["Melanie: hi"] * 9
>>> topic_query("Did Melanie like Charlotte's Web?", near, 0.25)  # Charlotte: 1 in 10
"Did like Charlotte's Web?"
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence

from graphmem.text import SEARCH_STOPWORDS, WORD_RE

__all__ = ["common_names", "names", "subject", "topic_query", "without"]

# a capitalised word that does not open the query or a sentence, with its possessive
_NAME_RE = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+)(?:['’]s\b|['’](?=\s))?")
# the capitalised word a memory opens with, possessive or not
_SUBJECT_RE = re.compile(r"^\W*([A-Z][a-z]+)(?:['’]s)?\b")
_CALENDAR = frozenset([*calendar.month_name[1:], *calendar.month_abbr[1:], *calendar.day_name])


def names(query: str) -> set[str]:
    """The capitalised words inside ``query`` (not its first word, not months or days):
    the people, places and titles it names.

    >>> sorted(names("Did Melanie read Charlotte's Web in May?"))
    ['Charlotte', 'Melanie', 'Web']
    """
    return {m.group(1) for m in _NAME_RE.finditer(query)} - _CALENDAR


def common_names(query: str, near: Sequence[str], share: float) -> set[str]:
    """The names ``query`` gives that occur (as words) in at least ``share`` of the texts
    ``near`` it: the people of a conversation, not what is asked about them."""
    named = names(query)
    if not named or not near:
        return set()
    need = share * len(near)
    common = set()
    for n in named:
        search = re.compile(rf"\b{n}\b").search  # once per name, not once per text
        if sum(1 for t in near if search(t)) >= need:
            common.add(n)
    return common


def without(query: str, common: set[str]) -> str | None:
    """``query`` without the names in ``common``; None if there are none, or if nothing
    but stop words would be left."""
    if not common:
        return None
    out = _NAME_RE.sub(lambda m: "" if m.group(1) in common else m.group(0), query)
    out = re.sub(r"\s+", " ", out).replace(" ?", "?").strip()
    asks = any(w.lower() not in SEARCH_STOPWORDS for w in WORD_RE.findall(out))
    return out if asks else None


def topic_query(query: str, near: Sequence[str], share: float) -> str | None:
    """``query`` without its :func:`common_names`; None if no name is that common, or if
    nothing but stop words would be left."""
    return without(query, common_names(query, near, share))


def subject(text: str) -> str | None:
    """The capitalised word ``text`` opens with: the speaker of a turn ("Melanie: I paint"),
    the subject of a fact ("Melanie's teacher is Jonas"); None if it opens otherwise.

    >>> subject("Melanie: I'm off to go swimming with the kids.")
    'Melanie'
    >>> subject("the weather turned grey") is None
    True
    """
    m = _SUBJECT_RE.match(text)
    return m.group(1) if m else None
