"""Rule-based entity and relation extraction: no model, no network, no LLM.

Why rules: the usual offline NLP pipelines either ship their English model outside the
package registries (spaCy's ``en_core_web_*`` wheels are published on GitHub releases;
only unofficial re-uploads sit on PyPI) or download weights from a model hub at run time
(GLiNER, flair, stanza), and a small CNN pipeline costs several milliseconds per sentence,
which is the whole write-path budget. These rules cost tens of microseconds per memory.

What they find (``extract``), case-sensitive English text:

- a chat-transcript speaker (``"Melanie: ..."`` at the start) -> person, role ``speaker``;
- capitalised spans (``Harry Potter``, ``Lord of the Rings``, ``Fort Wayne``); the first
  word of a sentence counts when the store already knows it (``known``), when it starts a
  multi-word span, or when a verb follows it (``Melanie went``, ``Caroline is``);
  greetings, pronouns, days and months never count;
- acronyms (``LGBTQ``, ``NYC``) and quoted titles (``"Charlotte's Web"``);
- activities from verb patterns (``went camping``, ``love painting``, ``took up running``)
  and groups/events/classes (``pottery class``, ``support group``, ``charity race``);
- types from cues: honorifics and vocatives, kinship (``my sister Anna``), prepositions of
  place (``moved from Sweden``), organisation / event / place suffixes (``... University``,
  ``... Festival``, ``... Park``); else the type the store already has, else ``other``;
- relations, first person resolved to the speaker (nothing else is resolved: no
  pronouns): kinship (``my sister Anna`` -> (speaker, sister, Anna)), ``moved from/to``,
  ``live(s) in``, ``work(s) at/for``, ``is from``.

What they miss: lower-case names and entities in all-lower-case text, common-noun things
outside the patterns (``my necklace``, ``the dinosaur exhibit`` is found, ``dinosaurs`` is
not), coreference (``she``, ``they``, ``the place``), sentence-initial names the store does
not know yet and no verb follows (``Melanie, Jon and I``), a capitalised common noun
before ``is``/``was`` taken for a name (``Coffee is great``), nested or overlapping names,
and non-English text. Types are guesses from
cues; a capitalised word after ``in``/``to`` is taken for a place (``in Harry Potter``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from graphmem.models import EntityType

__all__ = ["Extraction", "Mention", "Relation", "extract", "normalise"]

#: longer capitalised runs are headings or shouting, not names
MAX_NAME_CHARS = 80


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity named in a text: as written, normalised, a type guess and a role."""

    name: str
    norm: str
    type: EntityType
    role: str = "mention"  # "speaker" for the author of a transcript line


@dataclass(frozen=True, slots=True)
class Relation:
    """(subject)-[predicate]->(object), by normalised names."""

    subject: str
    predicate: str
    object: str


@dataclass(frozen=True, slots=True)
class Extraction:
    mentions: tuple[Mention, ...] = ()
    relations: tuple[Relation, ...] = ()


# ---------------------------------------------------------------------------------------
# normalisation

_POSSESSIVE_RE = re.compile(r"['’]s\b|['’]$")
_NON_WORD_RE = re.compile(r"[^\w+#&]+")
_LEADING_ARTICLE = ("the ", "a ", "an ")


def normalise(name: str) -> str:
    """The key entities are matched on: NFKC, case folded, possessive and punctuation
    dropped, a leading article dropped, whitespace collapsed.

    >>> normalise("The Lord of the Rings'")
    'lord of the rings'
    >>> normalise("Caroline's")
    'caroline'
    """
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _POSSESSIVE_RE.sub("", text)
    text = " ".join(_NON_WORD_RE.sub(" ", text).split())
    for article in _LEADING_ARTICLE:
        if text.startswith(article) and len(text) > len(article):
            text = text[len(article) :]
            break
    return text


# ---------------------------------------------------------------------------------------
# word lists (kept short: they cut the frequent false positives, not every one)

_NOT_NAMES = frozenset(
    """i i'm i've i'll i'd im ive it it's its you you're your yours we we're our they they're
    their he she his her him me my mine us them this that these those there here what whats
    who whom whose which when where why how yes yeah yep yup no nope not ok okay oh ooh wow
    hey hi hello thanks thank thx congrats congratulations sure well so and but or also
    just really totally absolutely awesome great good nice cool sounds sound glad sorry lol
    omg haha aww ah um hmm dear love hugs cheers bye btw fyi anyway anyways plus still even
    always never maybe perhaps definitely exactly right true agreed same let let's lets
    please can could would should will did do does had has have was were is are am be been
    if then than as at by for from in into of on to with about after before since until all
    any each every some many much more most other another such only own both either neither
    one two three first last next new old monday tuesday wednesday thursday friday saturday
    sunday mon tue tues wed thu thur thurs fri sat sun january february march april may june
    july august september october november december jan feb mar apr jun jul aug sep sept oct
    nov dec today tomorrow yesterday tonight morning evening night weekend week month year
    god mom dad mum go going while once now later soon sometimes lately recently honestly
    luckily hopefully actually unfortunately besides guess check look hope happy afternoon
    can't don't didn't it'll that'll that's there's what's here's how's gotta gonna wanna
    nah sweet nope whoa yay aw ugh hmm hah ha heh yo""".split()
)
# common English words that open sentences, notes, tickets and list items: capitalised
# there only because they come first (imperatives, nouns, adjectives, adverbs). Written
# for this module; a sentence-initial word in this list is never taken for a name.
_COMMON_STARTERS = frozenset(
    """the a an add added adding remove removed rotate rotated migrate migrated audit
    audited speed fix fixed ship shipped make made document documented cache cached reduce
    reduced deploy deployed update updated upgrade create created delete deleted run ran
    build built test tested check checked review reviewed write wrote read merge merged
    move moved set use used try tried keep kept send sent call ask find found follow plan
    planned note noted notes done todo ticket tickets task tasks step steps item items
    issue issues bug bugs goal goals idea ideas reminder summary status result results
    working work worked meeting meetings lunch dinner breakfast coffee tea food music art
    life nature family friends friend kids children school home travel trip weather
    everything nothing something anything everyone someone nobody somebody people
    understood agreed confirmed booked booking change changed changes moving planning
    sounds sounding looks looking seems feels felt thought think knew know glad proud
    excited happy sad tired busy sorry lucky funny crazy amazing awesome beautiful
    lovely wonderful fantastic incredible interesting exciting cute sweet wow nice cool
    great good bad best better worse worst last next first second third new old big
    small little long short hard easy true false yes no maybe probably definitely
    certainly seriously totally really actually basically apparently hopefully honestly
    luckily sadly unfortunately fortunately recently lately usually often sometimes
    always never also still just only even again already finally currently anyway
    besides meanwhile instead otherwise though although because since unless while
    whenever wherever however whatever whichever speaking talking thinking reading
    writing painting drawing cooking baking running hiking swimming dancing singing
    playing watching learning teaching traveling travelling camping gardening fishing
    yoga pottery photography volunteering exercise sports games movies books music
    today tonight tomorrow yesterday morning evening afternoon weekend weekdays
    thanks thank congrats congratulations welcome cheers hey hi hello bye goodbye please
    sure okay ok alright well oh ah wow hmm um yeah yep nope nah lol haha
    support supporting help helping helped love loved loving like liked hate hated
    enjoy enjoyed enjoying hope hoped hoping wish wished wishing remember remembered
    imagine guess wait stop start started starting finish finished open opened close
    closed join joined visit visited visiting go went going come came coming get got
    getting give gave giving take took taking look see saw watch watched listen heard
    tell told say said show showed share shared bring brought buy bought pay paid
    sell sold learn learned learnt teach taught spend spent meet met leave left stay
    stayed live lived feel believe mean meant need needed want wanted let lets
    sharing seeing having being doing making taking getting going trying""".split()
)
_CONNECTORS = frozenset({"of", "the", "de", "del", "la", "le", "van", "von", "da", "di", "&"})
_ACRONYM_STOP = frozenset(
    {
        "OK",
        "LOL",
        "OMG",
        "BTW",
        "AM",
        "PM",
        "FYI",
        "IMO",
        "TBH",
        "TV",
        "ID",
        "OMW",
        "BRB",
        "ASAP",
        "DIY",
        "AKA",
        "ETA",
        "RIP",
        "PS",
        "USB",
        "PC",
        "I",
        "A",
    }
)
_SPEAKER_STOP = frozenset(
    {
        "note",
        "notes",
        "update",
        "summary",
        "todo",
        "error",
        "warning",
        "question",
        "answer",
        "q",
        "a",
        "re",
        "fyi",
        "ps",
        "tip",
        "step",
        "example",
        "http",
        "https",
        "edit",
        "info",
        "subject",
        "date",
        "time",
        "status",
        "result",
        "reason",
        "fact",
        "task",
        "goal",
    }
)
_GENERIC_GERUNDS = frozenset(
    """something anything nothing everything being having doing going getting making taking
    seeing looking thinking feeling saying trying working talking amazing during bring thing
    morning evening spring king ring sing wing sting string nothing coming giving putting
    letting keeping starting finding spending holding using helping wanting needing knowing
    living hoping planning waiting sitting standing telling asking showing calling leaving
    moving turning becoming bringing happening interesting exciting inspiring sing
    outstanding growing hitting improving performing networking marketing remember
    opening displaying drinking eating sleeping feeling""".split()
)
_ACTIVITY_VERB = (
    r"(?:go|goes|going|went|gone|love|loves|loved|loving|enjoy|enjoys|enjoyed|like|likes|"
    r"liked|into|took\s+up|take\s+up|taking\s+up|started|start|starting|tried|try|trying|"
    r"did|do|does|doing|practice|practise|practicing|practising|learning|learn|learned|"
    r"teach|teaches|taught|teaching|passion\s+for|hobby\s+is|hobbies\s+are)"
)
_ACTIVITY_RE = re.compile(rf"\b{_ACTIVITY_VERB}\s+((?:[a-z]+\s+)?[a-z]{{3,}}ing)\b", re.IGNORECASE)
_GROUP_NOUNS: dict[str, EntityType] = {
    "class": EntityType.EVENT,
    "classes": EntityType.EVENT,
    "lesson": EntityType.EVENT,
    "lessons": EntityType.EVENT,
    "course": EntityType.EVENT,
    "workshop": EntityType.EVENT,
    "trip": EntityType.EVENT,
    "festival": EntityType.EVENT,
    "concert": EntityType.EVENT,
    "tournament": EntityType.EVENT,
    "race": EntityType.EVENT,
    "marathon": EntityType.EVENT,
    "exhibit": EntityType.EVENT,
    "exhibition": EntityType.EVENT,
    "parade": EntityType.EVENT,
    "conference": EntityType.EVENT,
    "wedding": EntityType.EVENT,
    "party": EntityType.EVENT,
    "club": EntityType.ORGANISATION,
    "group": EntityType.ORGANISATION,
    "team": EntityType.ORGANISATION,
    "league": EntityType.ORGANISATION,
    "studio": EntityType.PLACE,
    "shelter": EntityType.PLACE,
    "center": EntityType.PLACE,
    "centre": EntityType.PLACE,
}
_GROUP_RE = re.compile(
    r"\b([a-z]{3,}(?:\s+[a-z]{3,})?)\s+(" + "|".join(_GROUP_NOUNS) + r")\b", re.IGNORECASE
)
# words that, in front of a group noun, do not say which one it is
_VERBS = frozenset(
    """make makes made get gets got have has had open opens opened start starts started run
    runs build builds join joins joined find finds found visit visits visited see saw take
    took set teach taught lead led host hosted plan planned try tried love loved like liked
    enjoy enjoyed attend attended went go goes doing did do does is was are were be been""".split()
)
_VAGUE = frozenset(
    """the this that these those our your their his her its my great good new big small
    little first last next whole same other another every each some any many few best
    favorite favourite fave awesome amazing nice fun local whole entire huge large recent
    weekly daily special real old own what which whose such very really super cool online
    and but with for from into about after before during than then when where while
    same fantastic wonderful lovely beautiful incredible supportive helpful safe""".split()
)
_KIN = frozenset(
    """mom mother mum dad father sister brother husband wife partner boyfriend girlfriend
    fiance fiancee son daughter kid kids child children grandma grandmother grandpa
    grandfather nan granny aunt uncle cousin niece nephew friend bestie boss colleague
    coworker mentor neighbor neighbour roommate teacher coach dog cat puppy kitten pet
    baby""".split()
)
_PET = frozenset({"dog", "cat", "puppy", "kitten", "pet"})
_ORG_SUFFIX = frozenset(
    """university college school academy inc corp corporation company co ltd llc
    foundation association club society institute hospital clinic church bank studios
    agency charity network league federation council committee""".split()
)
_EVENT_SUFFIX = frozenset(
    """festival conference wedding parade marathon party concert tournament championship
    championships cup fair expo olympics games summit day night week month""".split()
)
_PLACE_SUFFIX = frozenset(
    """street st road rd avenue ave park lake river mountain mountains falls beach canyon
    city county island islands bay valley coast hills forest desert state country town
    village square station airport museum zoo""".split()
)
# after a sentence-initial capitalised word, verbs that say it is someone ("Melanie went")
_PERSON_VERBS = frozenset(
    """went goes said says told asked loves loved likes liked lives lived works worked wants
    wanted thinks thought feels felt met called texted sent gave got moved plays played
    bought joined visited started loves adopted married wrote writes reads read runs ran
    cooks cooked paints painted mentioned shared says suggested recommended""".split()
)
# ... and verbs after which it is something or someone ("Caroline is", "Paris was")
_OTHER_VERBS = frozenset("is was has had will would can could and 's".split())
_THING_RE = re.compile(
    r"\b(?:[Mm]y|[Oo]ur|[Hh]is|[Hh]er|[Tt]heir|[Aa]n?|[Tt]he)\s+((?:[a-z]+\s+){0,2}[a-z]{3,})\b"
)
# nouns too general to say what a memory is about
_GENERIC_NOUNS = frozenset(
    """time times day days week weeks weekend weekends month months year years moment lot
    lots bit way ways thing things stuff kind sort part end start rest idea ideas chance
    point fact reason feeling feelings sense place places people person world life
    experience experiences question answer problem issue story stories job work home family
    friend friends kid kids child children bunch couple piece pic pics picture pictures
    photo photos photograph photography image look sign matter case while number word words
    news talk chat reminder difference impact part reminder journey process step steps
    opportunity opportunities support love passion joy fun dream dreams goal goals plan plans
    future past others everyone everything anything something nothing none""".split()
)
_HONORIFIC_RE = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|Prof|Aunt|Uncle|Grandma|Grandpa)\.?\s+$")
# "to" alone is no place cue ("migrate to Postgres", "talk to Jon"): a verb of going is
_PLACE_CUE_RE = re.compile(
    r"\b(?:in|at|from|near|visit|visited|visiting|around|across|toward|towards|"
    r"(?:go|goes|going|gone|went|move|moves|moved|moving|fly|flew|flying|travel|travels|"
    r"traveled|travelled|traveling|travelling|trip|trips|drive|drove|driving|road\s+trip|"
    r"headed|heading|return|returned|back|came|come|coming|get|got|vacation|holiday)"
    r"\s+(?:back\s+)?to)\s+$",
    re.IGNORECASE,
)
_PERSON_CUE_RE = re.compile(
    r"\b(?:with|met|meet|meeting|told|tell|asked|ask|called|named|thanks|thank\s+you|"
    r"hey|hi|hello|dear|bye|i'm|i’m|i\s+am|name\s+is|name's|name’s)\s*,?\s+$",
    re.IGNORECASE,
)
# "Alice's sister", "Carla, my sister": a name next to a kinship word is a person
_KIN_WORDS = (
    r"(?:mom|mother|mum|dad|father|sister|brother|husband|wife|partner|boyfriend|"
    r"girlfriend|fiance|fiancee|son|daughter|kids?|child|children|grandma|grandmother|"
    r"grandpa|grandfather|aunt|uncle|cousin|niece|nephew|friend|bestie|boss|colleague|"
    r"coworker|mentor|neighbou?r|roommate|teacher|coach)"
)
_POSSESSOR_RE = re.compile(
    r"\b([A-Z][a-z'’-]+)['’]s\s+(?:(?:little|big|older|younger|best|new|old|late)\s+)?"
    + _KIN_WORDS
    + r"\b"
)
_APPOSITION_RE = re.compile(
    r"\b([A-Z][a-z'’-]+),\s+(?:my|our|his|her|their|[A-Z][a-z'’-]+['’]s)\s+"
    r"(?:(?:little|big|older|younger|best|new|old|late)\s+)?" + _KIN_WORDS + r"\b"
)
# a sentence-initial name followed by its possessive and a noun: "Melanie's teacher"
_INITIAL_POSSESSIVE_RE = re.compile(r"^['’]s\s+[a-z]")

_SPEAKER_RE = re.compile(r"^\s*([A-Z][\w'’.-]*(?:\s[A-Z][\w'’.-]*){0,2}):\s")
_SENTENCE_RE = re.compile(r"[^.!?\n]+[.!?]*")
_WORD_RE = re.compile(r"[A-Za-z][\w'’&.-]*")
_ACRONYM_RE = re.compile(r"\b[A-Z]{2,6}\+?(?![\w'])")
_QUOTED_RE = re.compile(r"[\"“]([A-Z][^\"“”]{1,80}?)[\"”]")
_KIN_NAME_RE = re.compile(
    r"\b[Mm]y\s+(?:(?:little|big|older|younger|best|new|old|late)\s+)?([a-z]+)\s*,?\s+"
    r"([A-Z][a-z'’-]+(?:\s[A-Z][a-z'’-]+)?)"
)
_MOVED_RE = re.compile(
    r"\b(?:I|we)\s+(?:\w+\s+)?(moved|move|relocated)\s+(from|to)\s+"
    r"(?:my\s+(home\s+country)|([A-Z][\w'’-]+(?:\s[A-Z][\w'’-]+)*))"
)
_LIVES_RE = re.compile(
    r"\b(?:I|we)\s+(?:\w+\s+)?(live|lives|lived|living|grew\s+up)\s+in\s+"
    r"([A-Z][\w'’-]+(?:\s[A-Z][\w'’-]+)*)"
)
_WORKS_RE = re.compile(
    r"\b(?:I|we)\s+(?:\w+\s+)?(work|works|worked|working|volunteer|volunteered|volunteering)"
    r"\s+(?:at|for)\s+(?:the\s+)?([A-Z][\w'’&-]+(?:\s[A-Z][\w'’&-]+)*)"
)
_FROM_RE = re.compile(
    r"\b(?:I'm|I\s+am|I\s+was|we're|we\s+are)\s+(?:originally\s+)?from\s+"
    r"([A-Z][\w'’-]+(?:\s[A-Z][\w'’-]+)*)"
)


def _speaker_name(label: str) -> bool:
    """Whether a ``Label:`` prefix names a speaker: not a note heading ("Noted:",
    "Done:", "Ticket:") nor a common word."""
    first = label.split()[0].lower()
    return (
        normalise(label) not in _SPEAKER_STOP
        and first not in _COMMON_STARTERS
        and first not in _NOT_NAMES
    )


def _clean(span: str) -> str:
    return _POSSESSIVE_RE.sub("", span.strip(" '’.-&"))


def _starter(word: str) -> bool:
    """A capitalised word that is a common word when it opens a sentence."""
    low = _POSSESSIVE_RE.sub("", word.lower())
    return low in _COMMON_STARTERS or low in _NOT_NAMES or low in _GENERIC_NOUNS


def _is_cap(word: str) -> bool:
    return (word[:1].isupper() and not word.isupper()) or (
        len(word) == 1 and word != "I" and word.isupper()
    )


def _span_type(words: list[str], before: str, known: EntityType | None) -> EntityType:
    last = words[-1].lower().rstrip(".")
    if last in _ORG_SUFFIX:
        return EntityType.ORGANISATION
    if last in _EVENT_SUFFIX and len(words) > 1:
        return EntityType.EVENT
    if last in _PLACE_SUFFIX and len(words) > 1:
        return EntityType.PLACE
    if known is not None and known is not EntityType.OTHER:
        return known
    if _HONORIFIC_RE.search(before) or _PERSON_CUE_RE.search(before):
        return EntityType.PERSON
    if _PLACE_CUE_RE.search(before):
        return EntityType.PLACE
    return known or EntityType.OTHER


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-3] + "y" if word.endswith("ies") else word[:-1]
    return word


def extract(
    text: str, known: Mapping[str, EntityType] | None = None, *, things: bool = False
) -> Extraction:
    """Entities and relations named in ``text`` (see the module docstring for the rules).

    ``known`` maps normalised names the store already has to their types: it lets a
    sentence-initial name through and supplies its type. ``things`` also takes the
    common noun after a determiner or possessive (``my violin``, ``the beach``) as an
    object, skipping general nouns (``time``, ``people``, ``photo``).

    >>> [m.norm for m in extract("Melanie: I went camping with Caroline in Oregon!").mentions]
    ['melanie', 'caroline', 'oregon', 'camping']
    """
    known = known or {}
    found: dict[str, Mention] = {}
    relations: list[Relation] = []

    def add(name: str, etype: EntityType, role: str = "mention") -> str | None:
        name = _clean(name)
        norm = normalise(name)
        if len(norm) < 2 or norm in _NOT_NAMES or len(name) > MAX_NAME_CHARS:
            return None
        prev = found.get(norm)
        if prev is None or (prev.type is EntityType.OTHER and etype is not EntityType.OTHER):
            found[norm] = Mention(name, norm, etype, role if prev is None else prev.role)
        return norm

    speaker: str | None = None
    body = text
    m = _SPEAKER_RE.match(text)
    if m and _speaker_name(m.group(1)):
        speaker = add(m.group(1), EntityType.PERSON, "speaker")
        body = text[m.end() :]

    # capitalised spans, sentence by sentence
    for sm in _SENTENCE_RE.finditer(body):
        sentence = sm.group()
        words = list(_WORD_RE.finditer(sentence))
        i = 0
        while i < len(words):
            w = words[i].group().rstrip(".")
            if not _is_cap(w) or (w.lower() in _NOT_NAMES and w.lower() not in known):
                i += 1
                continue
            j = i + 1
            while j < len(words):
                nxt = words[j].group().rstrip(".")
                gap = sentence[words[j - 1].end() : words[j].start()]
                if gap.strip() not in ("", "-"):
                    break
                if _is_cap(nxt) and nxt.lower() not in _NOT_NAMES:
                    j += 1
                    continue
                c = j  # "Lord of the Rings": connectors only between capitalised words
                while c < len(words) and words[c].group().lower() in _CONNECTORS:
                    c += 1
                if c > j and c < len(words) and _is_cap(words[c].group()):
                    j = c + 1
                else:
                    break
            span = [wm.group().rstrip(".") for wm in words[i:j]]
            lead = sentence[: words[i].start()].rstrip()
            # a sentence, clause, list item, note body or quoted title starts here
            start = not lead or lead[-1] in "\"“'‘(-–—:;"
            first = span[0].lower()
            while start and span and first not in known and _starter(span[0]):
                # a common word capitalised only because it comes first ("Migrate",
                # "Noted", "The"): the name, if any, is what follows it; after a dash
                # ("Plan - Rotate ...") the next word starts again
                i += 1
                span = span[1:]
                gap = sentence[words[i - 1].end() : words[i].start()] if i < j else ""
                start = gap.strip() == "-"
                first = span[0].lower() if span else ""
            if not span:
                i = j
                continue
            name = " ".join(span)
            norm = normalise(name)
            if start and j - i == 1 and norm not in known:
                # a capitalised first word is a name when the store says so, or when a verb
                # follows it that names do ("Melanie went ...", "Melanie signed up ..."),
                # or its possessive and a noun ("Melanie's pottery teacher")
                word_m = words[i]
                rest = sentence[word_m.end() :]
                raw = word_m.group()
                nxt_word = rest.split(None, 1)
                verb = nxt_word[0].lower().strip(",;:") if nxt_word else ""
                possessive = raw.endswith(("'s", "’s")) and bool(re.match(r"\s+[a-z]", rest))
                word = _clean(raw)
                if (
                    (
                        possessive
                        or verb in _PERSON_VERBS
                        or verb in _OTHER_VERBS
                        or (verb.endswith("ed") and verb.isalpha() and len(verb) > 4)
                    )
                    and len(word) > 2
                    and "'" not in word
                    and "’" not in word
                    and not word.lower().endswith(("ing", "ly"))
                    and word.lower() not in _GENERIC_NOUNS
                ):
                    person = possessive or verb not in _OTHER_VERBS
                    add(word, EntityType.PERSON if person else EntityType.OTHER)
                i = j
                continue
            before = sentence[max(0, words[i].start() - 24) : words[i].start()]
            add(name, _span_type(span, before, known.get(norm)))
            i = j

    for am in _ACRONYM_RE.finditer(body):
        word = am.group()
        if word.rstrip("+") not in _ACRONYM_STOP:
            add(word, known.get(normalise(word), EntityType.OTHER))
    for qm in _QUOTED_RE.finditer(body):
        add(qm.group(1), EntityType.OBJECT)
    for act in _ACTIVITY_RE.finditer(body):
        phrase = act.group(1).lower().split()
        if phrase[-1] not in _GENERIC_GERUNDS:
            add(phrase[-1], EntityType.OBJECT)
    for gm in _GROUP_RE.finditer(body):
        # the modifier: the words right before the group noun that say which one it is
        words_: list[str] = []
        for w in reversed(gm.group(1).lower().split()):
            if (
                w in _VAGUE
                or w in _VERBS
                or w in _GENERIC_GERUNDS
                or _singular(w) in _GROUP_NOUNS
                or w.endswith(("ed", "ly"))
            ):
                break
            words_.insert(0, w)
        if words_:
            add(" ".join([*words_, gm.group(2).lower()]), _GROUP_NOUNS[gm.group(2).lower()])

    if things:
        for tm in _THING_RE.finditer(body):
            ws = [w for w in tm.group(1).split() if w not in _VAGUE]
            if not ws or ws[0] in _NOT_NAMES or ws[0].endswith(("ly", "ed", "ing")):
                continue
            head = ws[0]
            if len(ws) > 1 and ws[1] in _GROUP_NOUNS:
                add(f"{head} {ws[1]}", _GROUP_NOUNS[ws[1]])
                continue
            noun = _singular(head)
            if noun not in _GENERIC_NOUNS and head not in _GENERIC_NOUNS and len(noun) > 2:
                add(noun, EntityType.PLACE if noun in _PLACE_SUFFIX else EntityType.OBJECT)

    for km in _KIN_NAME_RE.finditer(body):
        kin = km.group(1).lower()
        if kin in _KIN and normalise(km.group(2)) not in _NOT_NAMES:
            etype = EntityType.OTHER if kin in _PET else EntityType.PERSON
            obj = add(km.group(2), etype)
            if obj is not None and speaker is not None:
                relations.append(Relation(speaker, kin, obj))
    for pm in (*_POSSESSOR_RE.finditer(body), *_APPOSITION_RE.finditer(body)):
        if not _starter(pm.group(1)):
            add(pm.group(1), EntityType.PERSON)
    if speaker is not None:
        for mv in _MOVED_RE.finditer(body):
            obj = add(mv.group(3) or mv.group(4), EntityType.PLACE)
            if obj is not None:
                relations.append(Relation(speaker, f"moved_{mv.group(2)}", obj))
        for lv in _LIVES_RE.finditer(body):
            obj = add(lv.group(2), EntityType.PLACE)
            if obj is not None:
                pred = "grew_up_in" if lv.group(1).startswith("grew") else "lives_in"
                relations.append(Relation(speaker, pred, obj))
        for wk in _WORKS_RE.finditer(body):
            obj = add(wk.group(2), EntityType.ORGANISATION)
            if obj is not None:
                pred = "volunteers_at" if wk.group(1).startswith("volunteer") else "works_at"
                relations.append(Relation(speaker, pred, obj))
        for fm in _FROM_RE.finditer(body):
            obj = add(fm.group(1), EntityType.PLACE)
            if obj is not None:
                relations.append(Relation(speaker, "from", obj))
    return Extraction(tuple(found.values()), tuple(dict.fromkeys(relations)))
