"""Query analysis: which questions ask for a list gathered over time.

"What activities does Melanie partake in?", "Which cities has Jon visited?", "What do Jon
and Gina both have in common?" ask for every item of a kind, told over many conversations;
"What did Melanie paint in July?" asks for one. The evidence of a list is what the person
said about each item, in words the question does not use ("I'm off to go swimming"), so
recall's subject channel (``RecallConfig.subject_weight``) runs for these questions only:
a question about one thing may name a person who did not do it (the answer is someone
else's), and a channel of the person's own memories would bury it.

The test is on the wording only, in general English:

- the question says ``both`` or ``in common``;
- it is in the present perfect ("has Jon visited", "have they made"): a tally to date;
- the thing asked for is plural: "What activities …", "Which cities …", "What are …".

>>> is_list_question("What activities does Melanie partake in?")
True
>>> is_list_question("Where has Melanie camped?")
True
>>> is_list_question("What did Melanie paint in July 2023?")
False
"""

from __future__ import annotations

import re

__all__ = ["is_list_question"]

_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'’+-]*")
_WH = frozenset("what which where who whom".split())
_AUX = frozenset("do does did is was can could will would should may might must".split())
_PLURAL_AUX = frozenset({"are", "were", "have"})
_PERFECT = frozenset({"has", "have"})
# irregular past participles (the regular ones end in -ed, -en, -wn, -ne, -t)
_PARTICIPLES = frozenset(
    "made had read met said heard paid held led laid left kept felt found got won sold told "
    "taught bought brought thought sung run begun become come".split()
)
# words ending in s that are not plural nouns
_NOT_PLURAL = frozenset("this his its is was has does yes us as thus always perhaps".split())


def _plural(word: str) -> bool:
    w = word.lower()
    return (
        len(w) > 3
        and w.endswith("s")
        and not w.endswith(("ss", "us", "is", "'s", "’s"))
        and w not in _NOT_PLURAL
    )


def is_list_question(query: str) -> bool:
    """Whether ``query`` asks for every item of a kind (see the module's rules)."""
    words = _WORD_RE.findall(query)
    low = [w.lower() for w in words]
    if "both" in low or " in common" in " " + " ".join(low):
        return True
    for i, w in enumerate(low):
        # "has"/"have" followed (within three words) by a participle, not "has to"
        if w in _PERFECT and i + 1 < len(low) and low[i + 1] != "to":
            tail = low[i + 1 : i + 4]
            if any(t in _PARTICIPLES or t.endswith(("ed", "en", "ne", "wn")) for t in tail):
                return True
    if not low or low[0] not in _WH:
        return False
    # the words between the question word and its verb name what is asked for
    for w in low[1:5]:
        if w in _PLURAL_AUX:
            return True
        if w in _AUX or w in _PERFECT:
            return False
        if _plural(w):
            return True
    return False
