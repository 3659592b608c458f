"""The full-text (Lucene) side of search: the Lucene query made from free text and from a
filter's scope, and the bounded lexical statement clauses recall and text search share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from graphmem.backends.neo4j.filters import compile_where, narrows_beyond_status
from graphmem.backends.neo4j.queries import FULLTEXT_FIELDS, FULLTEXT_INDEX
from graphmem.models import Filter
from graphmem.text import query_terms

LEXICAL_OVERFETCH = 3
"""The first full-text tier asks the index for ``k x`` this many matches (at least
:data:`LEXICAL_MIN_FETCH`) when the filter is only the status or what the Lucene query
names. The tiers keep the answer exact whatever the first fetch (a tier that cannot prove
its cut runs the next); the first fetch only sets the cost. Measured at 100,000 memories
(160 recalls over four scopes, recorded statements replayed alternately, load 7): 100
matches for k = 30 instead of 300 proved the cut in every query, as 300 did, with the same
rows, and took 0.6-1.0 ms off the recall statement's wall time (the server filters and
sorts a third of the rows)."""
LEXICAL_SCOPED_OVERFETCH = 40
"""The first tier's factor under a filter narrower than what the full-text query names (ids,
time ranges, a scope value that names no clause): the filter passes a fraction of the
matches, so more are fetched before the cut. A scope the query names (an agent, a
namespace, tags) is fetched like an unscoped search: the index returns only its matches."""
LEXICAL_TIER_GROWTH = 16
"""Each further tier asks for this many times more; after the last bounded tier comes the
unbounded search (the old statement), so the answer never depends on the tiers."""
LEXICAL_TIERS = 2
LEXICAL_MIN_FETCH = 100
"""No first tier asks for fewer (a small k would otherwise stop inside a run of ties)."""


def lexical_fetches(flt: Filter, k: int) -> list[int]:
    """How many full-text matches each bounded tier asks the index for: the scoped
    over-fetch only when the filter narrows beyond what the Lucene query names."""
    narrower = narrows_beyond_status(flt) and not _index_scope(flt)[1]
    first = k * (LEXICAL_SCOPED_OVERFETCH if narrower else LEXICAL_OVERFETCH)
    return [max(first, LEXICAL_MIN_FETCH) * LEXICAL_TIER_GROWTH**i for i in range(LEXICAL_TIERS)]


def compile_lexical(flt: Filter, k: int) -> tuple[str, dict[str, Any]]:
    """The full-text search as statement clauses that end with rows ``n, score`` (the best
    ``$text_k`` memories passing ``flt``, by score then id), bounded on the server.

    Tier ``i`` asks the index for its ``$text_fetch<i>`` best matches (Lucene collects only
    those), filters them and keeps the best ``$text_k``. Its answer is the exact one when the
    index had fewer matches than asked, or when the ``k``-th kept score is above the lowest
    fetched score: every match not fetched scores at most that lowest score, so none could
    enter the top k or tie with it. Otherwise the next tier runs (a subquery that reads no
    row when an earlier tier was exact); the last tier is the unbounded search. The rows are
    those of the unbounded statement, in one round trip."""
    clauses, params = compile_where(flt)
    passing = " AND ".join(["n:Memory", *clauses])
    call = f"CALL db.index.fulltext.queryNodes('{FULLTEXT_INDEX}', $query"
    fetches = lexical_fetches(flt, k)
    parts: list[str] = []
    for i in range(len(fetches) + 1):
        done = [f"x{j}" for j in range(i)]
        body = (
            [f"WITH {', '.join(done)}", f"WITH {', '.join(done)} WHERE NOT ({' OR '.join(done)})"]
            if done
            else []
        )
        if i < len(fetches):
            params[f"text_fetch{i}"] = fetches[i]
            body += [
                f"{call}, {{limit: $text_fetch{i}}}) YIELD node AS n, score",
                "WITH count(*) AS fetched, min(score) AS floor,",
                f"  collect(CASE WHEN {passing} THEN {{n: n, s: score}} END) AS passed",
                "UNWIND CASE WHEN size(passed) = 0 THEN [null] ELSE passed END AS h",
                "WITH fetched, floor, h ORDER BY h.s DESC, h.n.id LIMIT $text_k",
                "WITH fetched, floor, collect(h) AS top",
                f"RETURN top AS t{i}, fetched < $text_fetch{i}",
                f"  OR (size(top) = $text_k AND top[-1].s > floor) AS x{i}",
            ]
        else:
            body += [
                f"{call}) YIELD node AS n, score",
                f"WITH n, score WHERE {passing}",
                "WITH n, score ORDER BY score DESC, n.id LIMIT $text_k",
                f"RETURN collect({{n: n, s: score}}) AS t{i}",
            ]
        parts.append("CALL {\n  " + "\n  ".join(body) + "\n}")
    pick = " ".join(f"WHEN x{j} THEN t{j}" for j in range(len(fetches)))
    text = "\n".join(
        [*parts, f"UNWIND CASE {pick} ELSE t{len(fetches)} END AS h", "WITH h.n AS n, h.s AS score"]
    )
    return text, {**params, "text_k": k}


SCOPE_CLAUSE_MAX_VALUES = 64
"""A scope field with more allowed values than this adds no clause to the Lucene query (the
filter after the index still applies): Lucene caps a query's clauses at 1,024."""


ANALYZER_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)
"""The stop words of the full-text index's analyzer (Lucene's English analyzer): a scope
value holding one may analyze to fewer tokens, or none."""

_SCOPE_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-.:/+#@]*")


def _scope_value(value: object) -> str | None:
    """``value`` as a quoted Lucene phrase when the analyzer surely keeps a token of it (an
    identifier of ASCII letters, digits and ``_-.:/+#@`` holding no stop word), else None.
    A value the analyzer empties would drop its alternative from an OR clause, and so a
    memory of the scope from the index's answer: such values name no clause."""
    if not isinstance(value, str) or _SCOPE_VALUE.fullmatch(value) is None:
        return None
    if any(w in ANALYZER_STOP_WORDS for w in re.findall(r"[a-z0-9]+", value.lower())):
        return None
    return f'"{value}"'


def _index_scope(flt: Filter) -> tuple[list[str], bool]:
    """The zero-boost Lucene clauses naming ``flt``'s scope (see :func:`fulltext_query`),
    and whether they name all of it but the status (then nearly every match the index
    returns passes the filter, and the first tier needs no scoped over-fetch)."""
    clauses: list[str] = []
    named = {"status"}
    for field in FULLTEXT_FIELDS[1:]:
        if field == "tags":
            groups: list[Sequence[Any]] = [[t] for t in flt.tags_all]
        elif flt.equals.get(field) is not None:
            groups = [[flt.equals[field]]]
        elif field in flt.any_of:
            groups = [flt.any_of[field]]
        else:
            continue
        done = True
        for allowed in groups:
            phrases = [_scope_value(v) for v in allowed]
            if 0 < len(phrases) <= SCOPE_CLAUSE_MAX_VALUES and None not in phrases:
                clauses.append(f"{field}:({' OR '.join(str(p) for p in phrases)})^0")
            else:
                done = False
        if done:
            named.add(field)
    whole = (
        flt.ids is None
        and not flt.ranges
        and set(flt.equals) <= named
        and set(flt.any_of) <= named
        and (not flt.tags_all or "tags" in named)
    )
    return clauses, whole


def fulltext_query(terms: str, flt: Filter) -> str:
    """The Lucene query of a lexical search: ``terms`` (from :func:`lucene_query`) on the
    content field, AND, for each scope field of the filter held by the full-text index
    (:data:`FULLTEXT_FIELDS`), a required clause with boost 0, so that the index returns
    only the scope's matches, scored by their content alone (the same scores as an
    unscoped search). The clauses only narrow what the index returns (the filter itself is
    applied after it), and only with values the analyzer surely keeps (see
    :func:`_scope_value`): a field with any other value, or with more than
    :data:`SCOPE_CLAUSE_MAX_VALUES` allowed values, names no clause."""
    return " AND ".join([f"content:({terms})", *_index_scope(flt)[0]])


def lucene_query(text: str) -> str | None:
    """A Lucene query for free text: its word tokens, lowercased, each quoted, OR-ed;
    stop words dropped unless nothing else is left (as the embedded backend does). Quoting
    with every quote and backslash escaped means no user text is read as Lucene syntax.
    None when the text has no word at all."""
    terms = query_terms(text)
    if not terms:
        return None
    return " OR ".join('"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in terms)
