"""The deterministic offline implementation (no network, no model): lossless merges,
rule-based claims and contradictions, pattern-based fact extraction."""

from __future__ import annotations

import math
import re
from collections import Counter

from pydantic import BaseModel, ConfigDict

from graphmem.llm.protocol import (
    BaseLLM,
    Contradiction,
    Fact,
    Improvement,
    Reflection,
    Rewrite,
    SummaryPurpose,
    _sentence_key,
    is_dense,
    merge_sentences,
    tokens,
)
from graphmem.models import Memory
from graphmem.text import SUMMARY_STOPWORDS as _STOP
from graphmem.text import split_sentences

_FILLER_RE = re.compile(
    r"\b(?:basically|actually|really|just|literally|kind of|sort of|you know|i think that|"
    r"i think|i guess|um+|uh+|er+m*)\b[,]?\s*",
    re.IGNORECASE,
)


_NEGATORS = frozenset("not no never don t doesn isn aren wasn weren didn won cannot can".split())


# exclusive relations: a subject has one value at a time
_RELATION_RE = re.compile(
    r"^(?P<subj>.{1,60}?)\s+(?P<rel>lives in|lived in|works at|works for|works as|"
    r"is called|is named|moved to|(?:favou?rite \w+|birthday|email|phone number|"
    r"address|name|role|title|timezone|manager) is)\s+(?P<obj>.+?)[.!]?$",
    re.IGNORECASE,
)


# words between a subject and its relation that do not change who the subject is
_SUBJECT_FILLER = frozenset("now currently still actually recently since then also".split())


_RELATION_ALIASES = {
    "lived in": "lives in",
    "moved to": "lives in",
    "is named": "is called",
    "name is": "is called",
}


class Claim(BaseModel):
    """A single-valued statement: ``subject`` has ``value`` for ``attribute`` (all
    normalised: lowercased tokens). Two claims with the same subject and attribute and
    different values contradict each other."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    subject: str
    attribute: str
    value: str


def claim_of(text: str) -> Claim | None:
    """The exclusive relation a one-sentence memory states, by rules (no model).

    >>> claim_of("Alice lives in Oslo.")
    Claim(subject='alice', attribute='lives in', value='oslo')
    >>> claim_of("Alice now moved to Bergen").value
    'bergen'
    >>> claim_of("Alice likes tea") is None
    True
    """
    text = text.strip()
    if not text or is_dense(text) or len(split_sentences(text)) != 1:
        return None
    match = _RELATION_RE.match(text)
    if match is None:
        return None
    subj = [t for t in tokens(match.group("subj")) if t not in _SUBJECT_FILLER]
    rel = " ".join(tokens(match.group("rel")))
    value = " ".join(tokens(match.group("obj")))
    if not subj or not value:
        return None
    return Claim(subject=" ".join(subj), attribute=_RELATION_ALIASES.get(rel, rel), value=value)


_FACT_RE = re.compile(
    r"\b(?:my name is|call me|i am (?:a|an|the)\b|i'm (?:a|an|the)\b|i live|i work|i prefer|"
    r"i(?:'ve| have)? moved to|i relocated to|i joined|"
    r"i like|i love|i hate|i dislike|i don't like|i do not like|i always|i never|i usually|"
    r"i'm allergic|i am allergic|i have (?:a|an|two|three|\d)|i own|i use|i speak|i was born|"
    r"my (?:\w+ ){0,2}(?:is|are)\b|remember that|note that|from now on|please always|"
    r"please never|always use|never use|we decided|we use|we agreed|our (?:\w+ ){0,2}(?:is|are)\b|"
    r"the deadline is|the password policy)",
    re.IGNORECASE,
)


_TRANSIENT_RE = re.compile(
    r"\b(?:today|tonight|right now|at the moment|this morning|going to|gonna|about to|"
    r"i'm (?:fine|good|ok|okay|tired|hungry|busy|back|here|sorry)|"
    r"i am (?:fine|good|ok|okay|tired|hungry|busy|back|here|sorry)|thanks|thank you)\b",
    re.IGNORECASE,
)


_PROCEDURAL_RE = re.compile(
    r"\b(?:always|never|from now on|please|should|must|make sure)\b", re.IGNORECASE
)


_VERB_3RD = {
    "am": "is",
    "have": "has",
    "do": "does",
    "prefer": "prefers",
    "like": "likes",
    "love": "loves",
    "hate": "hates",
    "dislike": "dislikes",
    "live": "lives",
    "work": "works",
    "use": "uses",
    "own": "owns",
    "speak": "speaks",
    "need": "needs",
    "want": "wants",
    "usually": "usually",
    "always": "always",
    "never": "never",
    "was": "was",
}


def _third_person(sentence: str, speaker: str) -> str:
    s = re.sub(r"^(?:please\s+)?(?:remember|note) that\s+", "", sentence, flags=re.IGNORECASE)
    s = re.sub(r"\b[Mm]y name is\b", f"{speaker}'s name is", s)
    s = re.sub(r"\b[Cc]all me\b", f"{speaker} wants to be called", s)
    s = re.sub(r"\bI'm\b", f"{speaker} is", s)
    s = re.sub(r"\bI don't\b", f"{speaker} doesn't", s)
    s = re.sub(r"\bI do not\b", f"{speaker} does not", s)

    def verb(m: re.Match[str]) -> str:
        v = m.group(1)
        return f"{speaker} {_VERB_3RD.get(v.lower(), v)}"

    s = re.sub(r"\bI (\w+)", verb, s)
    s = re.sub(r"\b[Mm]y\b", f"{speaker}'s", s)
    s = re.sub(r"\bme\b", speaker, s)
    s = s.strip()
    if s and s[0].islower():
        s = s[0].upper() + s[1:]
    if s and s[-1] not in ".!":
        s += "."
    return s


class OfflineLLM(BaseLLM):
    """Deterministic, extractive passes with no model and no network.

    - summarize: the most central sentences (word-frequency scoring) within ``max_words``,
      in chronological order; ``purpose="merge"`` keeps every distinct sentence;
    - improve: removes filler words and stray whitespace; detects negation flips and
      conflicting values of exclusive relations ("lives in", "works at", "X's email is" ...)
      and keeps the newer memory;
    - extract_facts: first-person durable statements (identity, preferences, standing
      instructions, decisions), rewritten in the third person;
    - reflect: the best-matching sentences of the best-matching memories, each cited.
    """

    name = "offline"

    def _summarize(self, memories: list[Memory], purpose: SummaryPurpose, max_words: int) -> str:
        self._record("summarize")
        if purpose == "merge":
            return merge_sentences(memories)
        sentences: list[tuple[int, str, float]] = []
        seen: set[tuple[str, ...]] = set()
        for m in memories:
            for s in split_sentences(m.content):
                key = _sentence_key(s)
                if key and key not in seen:
                    seen.add(key)
                    sentences.append((len(sentences), s, m.importance))
        freq = Counter(t for _, s, _ in sentences for t in set(tokens(s)) if t not in _STOP)
        scored = []
        for idx, s, importance in sentences:
            content_toks = [t for t in tokens(s) if t not in _STOP]
            centrality = sum(freq[t] for t in content_toks) / math.sqrt(len(content_toks) + 1)
            scored.append((-(centrality + 2.0 * importance), idx, s, centrality))
        # off-topic sentences (far less central than the best) never fill the budget
        floor = 0.25 * max(c for *_, c in scored)
        chosen: list[tuple[int, str]] = []
        words = 0
        for _, idx, s, c in sorted(scored):
            if chosen and c < floor:
                continue
            n = len(s.split())
            if chosen and words + n > max_words:
                continue
            chosen.append((idx, s))
            words += n
        chosen.sort()
        return " ".join(s if s[-1] in ".!?" else s + "." for _, s in chosen)

    def _improve(self, memories: list[Memory], dense_ids: set[str]) -> Improvement:
        self._record("improve")
        rewrites = []
        for m in memories:
            if m.id in dense_ids:
                continue
            text = _FILLER_RE.sub("", m.content)
            text = re.sub(r"[ \t]+", " ", text)
            text = re.sub(r"\s+([,.!?;:])", r"\1", text)
            text = re.sub(r"([!?.])\1+", r"\1", text).strip()
            if text and text[0].islower():
                text = text[0].upper() + text[1:]
            if text and text != m.content.strip():
                rewrites.append(
                    Rewrite(id=m.id, content=text, reason="removed filler words and noise")
                )
        return Improvement(rewrites=tuple(rewrites), contradictions=self._contradictions(memories))

    @staticmethod
    def _contradictions(memories: list[Memory]) -> tuple[Contradiction, ...]:
        # memories are chronological: a later one wins
        found: dict[str, tuple[str, str]] = {}  # loser id -> (winner id, reason)
        relations: dict[tuple[str, str], list[tuple[Memory, str]]] = {}
        for m in memories:
            if is_dense(m.content) or len(split_sentences(m.content)) != 1:
                continue
            c = claim_of(m.content)
            if c is not None:
                relations.setdefault((c.subject, c.attribute), []).append((m, c.value))
        for (subj, rel), values in relations.items():
            latest, value = values[-1]
            for m, v in values[:-1]:
                if v != value:
                    found[m.id] = (
                        latest.id,
                        f"contradiction: newer memory says {subj!r} {rel} {value!r}, not {v!r}",
                    )
        toks = [(m, tokens(m.content)) for m in memories if not is_dense(m.content)]
        for i, (a, ta) in enumerate(toks):
            core_a = {t for t in ta if t not in _NEGATORS}
            neg_a = sum(t in _NEGATORS for t in ta) % 2
            for b, tb in toks[i + 1 :]:
                core_b = {t for t in tb if t not in _NEGATORS}
                neg_b = sum(t in _NEGATORS for t in tb) % 2
                if neg_a == neg_b or not core_a or not core_b:
                    continue
                if len(core_a & core_b) / len(core_a | core_b) >= 0.8 and a.id not in found:
                    found[a.id] = (b.id, "contradiction: newer memory negates this statement")
        by_winner: dict[tuple[str, str], list[str]] = {}
        for loser, (winner, reason) in found.items():
            by_winner.setdefault((winner, reason), []).append(loser)
        # a winner that is itself superseded hands its losers to its own winner
        out = []
        for (winner, reason), losers in by_winner.items():
            while winner in found:
                winner = found[winner][0]
            losers = [x for x in losers if x != winner]
            if losers:
                out.append(
                    Contradiction(keep_id=winner, superseded_ids=tuple(losers), reason=reason)
                )
        return tuple(out)

    def _extract(self, turn: str, speaker: str) -> list[Fact]:
        self._record("extract_facts")
        facts = []
        for s in split_sentences(turn):
            if s.endswith("?") or len(tokens(s)) < 3:
                continue
            if not _FACT_RE.search(s) or _TRANSIENT_RE.search(s):
                continue
            content = _third_person(s, speaker)
            procedural = bool(_PROCEDURAL_RE.search(s))
            important = bool(re.search(r"\b(?:remember|note|allergic|never|always)\b", s, re.I))
            facts.append(
                Fact(
                    content=content,
                    category="procedural" if procedural else "semantic",
                    importance=0.8 if important else 0.6,
                )
            )
        return facts

    def _reflect(self, question: str, memories: list[Memory]) -> Reflection:
        self._record("reflect")
        q = {t for t in tokens(question) if t not in _STOP}
        scored = []
        for m in memories:
            mt = set(tokens(m.content))
            overlap = len(q & mt)
            if overlap:
                scored.append((-(overlap / math.sqrt(len(mt) + 1)), m.created_at, m.id, m))
        if not scored:
            return Reflection(answer="No stored memory answers this question.")
        scored.sort(key=lambda x: (x[0], -x[1].timestamp(), x[2]))
        parts, cited = [], []
        for *_, m in scored[:3]:
            best = max(
                split_sentences(m.content) or [m.content],
                key=lambda s: len(q & set(tokens(s))),
            )
            parts.append(f"{best.rstrip()} [{m.id}]")
            cited.append(m.id)
        return Reflection(answer=" ".join(parts), cited_ids=tuple(cited))
