"""Search: full-text, vector and recall's one-round-trip statements (search and graph
expansion), each with the filter applied before its cut."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from graphmem.backends.neo4j.expansion import (
    COSINE_PROBE,
    LEAN_PROPS,
    MEMORY_PROPS,
    compile_neighbours,
    similarity,
)
from graphmem.backends.neo4j.filters import (
    compile_where,
    has_conditions,
    narrows_beyond_status,
    param_value,
    require_memory,
    where_clause,
)
from graphmem.backends.neo4j.fulltext import compile_lexical, fulltext_query, lucene_query
from graphmem.backends.neo4j.queries import (
    Q_AWAIT_FULLTEXT,
    Q_SEARCH_VECTOR,
    VECTOR_INDEX,
)
from graphmem.backends.neo4j.schema import Neo4jSchema
from graphmem.backends.neo4j.values import vanished
from graphmem.errors import DimensionMismatch, InvalidInput, QueryFailed
from graphmem.models import EdgeType, Filter, Hit, Memory, TextQuery, VectorQuery

VECTOR_MIN_FETCH = 100
"""The fewest neighbours a vector search asks the index for (k = 30 per channel asks for
100; the backend's ``vector_overfetch``, 2 by default, decides above 50). Measured at 100k
hard synthetic vectors (40 queries, k = 30, re-scored exactly, load 2-4): 60 neighbours
found 0.95 of the exact top 30 from the quantized index (0.975 unquantized, one query 0 of
30 in both), 100 found all of them from either, at 8.2 ms p50 quantized against 11.7
unquantized. The filter still applies after the index, so a selective one widens the
search (:meth:`Neo4jSearch.search_vector`)."""
VECTOR_SCOPE_EXACT = 1_000
"""A scoped recall first reads up to this many memories of its scope (through the index of
its most selective field): a scope with fewer is held whole, and searched exactly in the
same statement below :data:`VECTOR_EXACT_MIN` or when that costs less than the index
(:func:`_exact_is_cheaper`: up to about 1,700 memories at 100,000, 550 at 10,000); a
larger one goes through the vector index. An exact cosine costs about 13 us per memory on
the server (the 384 floats are read from the store, load 8), so 1,000 costs about what an
index search for 1,500 neighbours does, and bounds the read of a scope the rest of the
filter narrows."""
SCOPE_INDEXED = ("run_id", "agent_id", "namespace", "audience", "category")
"""Memory fields with a range index, most selective first: the scope's first read seeks
the first one the filter pins (an index hint), never the status index every memory is in."""


def compile_text_search(flt: Filter, query: str, k: int) -> tuple[str, dict[str, Any]]:
    """Full-text search (``query``: the terms of :func:`lucene_query`) with the filter
    applied to every hit before the top-``k`` cut, bounded on the server (see
    :func:`compile_lexical`) and narrowed to the filter's scope inside the index (see
    :func:`fulltext_query`)."""
    require_memory(flt, "text search")
    text, params = compile_lexical(flt, k)
    return text + f"\nRETURN {MEMORY_PROPS} AS props, score", {
        **params,
        "query": fulltext_query(query, flt),
    }


def compile_vector_index_search(
    flt: Filter, vector: Sequence[float], fetch: int, k: int
) -> tuple[str, dict[str, Any]]:
    """``fetch`` nearest from the vector index, filtered, re-scored exactly, best ``k``."""
    require_memory(flt, "vector search")
    clauses, params = compile_where(flt)
    text = (
        f"CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $fetch, $vector) "
        f"YIELD node AS n{where_clause(clauses)}\n"
        "WITH n, vector.similarity.cosine(n.embedding, $vector) AS score\n"
        "ORDER BY score DESC, n.id\nLIMIT $k\n"
        f"RETURN {MEMORY_PROPS} AS props, score, {COSINE_PROBE}"
    )
    return text, {**params, "fetch": fetch, "vector": list(vector), "k": k}


def compile_vector_exact_search(
    flt: Filter, vector: Sequence[float], k: int
) -> tuple[str, dict[str, Any]]:
    """Exact search over the memories matching ``flt`` (for selective filters)."""
    require_memory(flt, "vector search")
    clauses, params = compile_where(flt)
    text = (
        f"MATCH (n:Memory){where_clause(['n.embedding IS NOT NULL', *clauses])}\n"
        "WITH n, vector.similarity.cosine(n.embedding, $vector) AS score\n"
        "ORDER BY score DESC, n.id\nLIMIT $k\n"
        f"RETURN {MEMORY_PROPS} AS props, score, {COSINE_PROBE}"
    )
    return text, {**params, "vector": list(vector), "k": k}


def _compile_vector_plan(flt: Filter) -> tuple[str, dict[str, Any]]:
    """How many memories match ``flt`` and how many there are (to choose a search plan)."""
    clauses, params = compile_where(flt)
    text = (
        f"RETURN COUNT {{ MATCH (n:Memory){where_clause(clauses)} }} AS matched,\n"
        "       COUNT { (:Memory) } AS total"
    )
    return text, params


def compile_recall_search(
    flt: Filter,
    *,
    lucene: str | None,
    text_k: int,
    vector: Sequence[float] | None,
    vector_fetch: int,
    vector_k: int,
    similarity_to: Sequence[float] | None = None,
    exact: bool = False,
) -> tuple[str, dict[str, Any]]:
    """Recall's two searches in one statement, a ``UNION ALL`` of two independent branches
    (one finding nothing does not empty the other), each with the filter applied before its
    cut: full-text (``channel = 'lexical'``, Lucene score, best ``text_k``) and vector
    (``channel = 'vector'``: the index's nearest ``vector_fetch``, filtered, re-scored
    exactly with ``vector.similarity.cosine`` so that an approximate or quantized index does
    not decide the order, best ``vector_k``; ``fetched`` = how many the index returned).
    Rows: ``channel, props, score, fetched, probe, sim, linked`` (``linked``: see
    :data:`LINKED`).

    ``similarity_to`` (the query vector; it may differ from ``vector``, e.g. the topic
    channel searches by the question without its names and ranks by the whole question's
    cosine): the memories come without their embedding and ``sim`` is each one's cosine to
    it as the server reports it (null otherwise). ``exact``: the vector branch computes the
    cosine of every memory that passes the filter instead of asking the index (a bulk load
    has deferred it)."""
    require_memory(flt, "recall search")
    if lucene is None and vector is None:
        raise QueryFailed("internal error: a recall search needs text or a vector")
    clauses, params = compile_where(flt)
    lean = similarity_to is not None
    props = LEAN_PROPS if lean else MEMORY_PROPS
    # the cosine the rows report: to $vector when that is the vector searched (a vector
    # row's score is then its sim), else to $similar
    sim_param = "vector"
    if lean:
        target = list(similarity_to or ())
        if vector is not None and target != list(vector):
            sim_param = "similar"
        params[sim_param] = target
    branches: list[str] = []
    if lucene is not None:
        lexical, lexical_params = compile_lexical(flt, text_k)
        branches.append(
            f"{lexical}\n"
            f"RETURN 'lexical' AS channel, {props} AS props, score, null AS fetched,\n"
            + (
                f"       {COSINE_PROBE}, {similarity(sim_param)} AS sim, {LINKED} AS linked"
                if lean
                else f"       null AS probe, null AS sim, {LINKED} AS linked"
            )
        )
        params.update(lexical_params, query=fulltext_query(lucene, flt))
    if vector is not None and exact:
        passing = " AND ".join(["n.embedding IS NOT NULL", *clauses])
        branches.append(
            "CALL {\n"
            f"  MATCH (n:Memory) WHERE {passing}\n"
            "  WITH n ORDER BY vector.similarity.cosine(n.embedding, $vector) DESC, n.id\n"
            "  LIMIT $vector_k\n"
            "  RETURN collect(n) AS pool\n"
            "}\n"
            "WITH pool, 0 AS fetched\n" + _ranked_vector_rows("pool", props, lean, sim_param)
        )
        params.update(vector=list(vector), vector_k=vector_k)
    elif vector is not None and narrows_beyond_status(flt):
        branches.append(_scoped_vector_branch(flt, clauses, props, lean, sim_param))
        params.update(
            _scope_count(flt)[1],
            fetch=vector_fetch,
            vector=list(vector),
            vector_k=vector_k,
            vector_mu=scope_expected_hits(vector_k),
            vector_scope=VECTOR_SCOPE_EXACT,
            vector_exact=VECTOR_NEIGHBOUR_COST * scope_expected_hits(vector_k),
            vector_exact_min=VECTOR_EXACT_MIN,
        )
        if flt.tags_all:
            params["scope_tag"] = str(flt.tags_all[0])
        if "$scope_sample" in branches[-1]:
            params["scope_sample"] = SCOPE_SAMPLE
    elif vector is not None:
        passing = " AND ".join(clauses) if clauses else "true"
        branches.append(
            f"CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $fetch, $vector) YIELD node\n"
            "WITH collect(node) AS near\n"
            f"WITH size(near) AS fetched, [n IN near WHERE {passing}] AS passed\n"
            + _ranked_vector_rows("passed", props, lean, sim_param)
        )
        params.update(fetch=vector_fetch, vector=list(vector), vector_k=vector_k)
    return "\nUNION ALL\n".join(branches), params


LINKED = "EXISTS { (n)-[:NEXT|DERIVED_FROM|TAGGED|MENTIONS]-() }"
"""Whether a memory has an edge recall's graph expansion could follow from it (a superset
of the expansion's edge types, either direction): one without any is a seed the expansion
need not be sent for (:meth:`Neo4jSearch.search_both`'s ``unlinked``). A memory with no
edge cannot be reached by the expansion either."""


def _ranked_vector_rows(pool: str, props: str, lean: bool, sim_param: str = "vector") -> str:
    """The vector branch's last clauses: the top ``$vector_k`` of the list ``pool`` by cosine,
    with one row even when the list is empty (it carries ``fetched``, how many the index
    returned, so the caller can tell "none passed" from "none near"). ``sim``: the cosine
    to ``$<sim_param>`` when ``lean`` (the score when that is the vector searched)."""
    sim = "null" if not lean else "score" if sim_param == "vector" else similarity(sim_param)
    return (
        f"UNWIND CASE WHEN size({pool}) = 0 THEN [null] ELSE {pool} END AS n\n"
        "WITH n, fetched, CASE WHEN n IS NULL THEN null\n"
        "  ELSE vector.similarity.cosine(n.embedding, $vector) END AS score\n"
        "ORDER BY score DESC, n.id LIMIT $vector_k\n"
        f"RETURN 'vector' AS channel, CASE WHEN n IS NULL THEN null ELSE {props} END\n"
        f"       AS props, score, fetched, {COSINE_PROBE}, {sim} AS sim,\n"
        f"       CASE WHEN n IS NULL THEN null ELSE {LINKED} END AS linked"
    )


def _scope_field(flt: Filter) -> str | None:
    """The indexed Memory field a scope read starts from (see :data:`SCOPE_INDEXED`): the
    most selective one the filter pins, ``id`` for an id list, None for neither."""
    for field in SCOPE_INDEXED:
        if flt.equals.get(field) is not None or field in flt.any_of:
            return field
    return "id" if flt.ids is not None else None


def _scope_start(flt: Filter) -> str:
    """The first clause of a scope read: a seek of the Tag a ``tags_all`` filter names
    (its memories through TAGGED), else a Memory match with an index seek hint on the most
    selective field the filter pins (see :data:`SCOPE_INDEXED`). The hint names the seek,
    not only the index: planned on statistics the server has not yet resampled (a store
    that has just grown), a plain index hint may be met by a scan of the whole index, one
    read of every memory with the field per recall."""
    if flt.tags_all:
        return "MATCH (:Tag {id: $scope_tag})<-[:TAGGED]-(n:Memory)"
    field = _scope_field(flt)
    if field is not None:
        return f"MATCH (n:Memory) USING INDEX SEEK n:Memory({field})"
    return "MATCH (n:Memory)"


def _scope_seek(flt: Filter) -> str:
    """The WHERE that makes :func:`_scope_start`'s index seek for a field (its values as
    counted, ``$scope_values``); none for a tag's edges or a label scan."""
    field = _scope_field(flt)
    if flt.tags_all or field is None:
        return ""
    return f" WHERE n.{field} IN $scope_values"


SCOPE_SAMPLE = 2_000
"""How many of the counted entries a scoped recall reads to measure the share the rest of
its filter keeps (a namespace among a tag's memories), when that scope is too large to
search exactly: its vector fetch is then sized by the count times that share, where the
count alone (2 % of the store for a tag, of which the namespace keeps a fifth) asked for
a fifth of the neighbours needed and then a second fetch eight times larger (at 1,000,000
memories: ns+tag recall 497 ms). Reading 2,000 entries with their filter fields costs
about what 200 more neighbours do, and gives the share within a few percent."""


SCOPE_COUNT_MAX = 50_000
"""The most index entries a scoped recall counts to size its first vector fetch (see
:func:`_scope_count`). Measured at 100,000 memories (384-d, load 4-5): counting costs
about 0.06 us per entry on the server, a vector neighbour about 9 us, and sizing by a
sample instead (a first fetch of a few dozen neighbours, then a second by the share passing
among them) costs that first fetch and, the sample being small, often twice the
neighbours needed. So a count pays up to tens of thousands of entries (this cap: about 3
ms); a scope with more is sized by the sample."""


def _scope_count(flt: Filter) -> tuple[str, dict[str, Any]]:
    """An expression counting the scope's entries, up to :data:`SCOPE_COUNT_MAX`, in the
    index its read starts from, read from the index alone (no memory's properties): the
    TAGGED edges of the first tag, the index entries of the field :func:`_scope_field`
    names, or null when the scope has neither. At least the scope's size (the rest of the
    filter only narrows it), it sizes the first vector fetch; the adaptive second fetch
    covers the difference. Measured at 100,000 memories: 0.3 ms for an agent's 5,000
    entries."""
    params: dict[str, Any] = {"scope_cap": SCOPE_COUNT_MAX}
    if flt.tags_all:
        pattern = "(:Tag {id: $scope_tag})<-[:TAGGED]-(c)"
        return f"COUNT {{ MATCH {pattern} WITH c LIMIT $scope_cap RETURN c }}", params
    field = _scope_field(flt)
    if field is None:
        return "null", params
    if field == "id":
        values = list(flt.ids or ())
    elif flt.equals.get(field) is not None:
        values = [flt.equals[field]]
    else:
        values = list(flt.any_of[field])
    count = (
        f"COUNT {{ MATCH (c:Memory) USING INDEX SEEK c:Memory({field}) "
        f"WHERE c.{field} IN $scope_values WITH c LIMIT $scope_cap RETURN c }}"
    )
    return count, {**params, "scope_values": param_value(values)}


VECTOR_SCOPE_SIGMAS = 2.0
"""How many standard deviations below its mean the number of the scope's memories among
the first fetch's neighbours may fall before the fetch is short (see
:func:`scope_expected_hits`). A short fetch costs a second, larger one in the same
statement (about 1 query in 70 at 2, against 1 in 2,000 at 3); the answer is the same
either way (the fetch is the index's nearest, so the best k of the scope among them are
the scope's best k). Measured at 100,000 memories, agent-scoped recall, paired queries,
load 9: 2 instead of 3 took 1.7 ms off the median (862 neighbours instead of 1,030)."""


def scope_expected_hits(k: int) -> float:
    """How many of the scope's memories the first vector fetch should hold on average so
    that ``k`` of them are among it unless chance is :data:`VECTOR_SCOPE_SIGMAS` standard
    deviations unkind: the least mean m of a Poisson count with m - z sqrt(m) >= k (for
    k = 30, 43.1: the fetch is 43.1 / share, e.g. 862 neighbours for an agent holding 5 %
    of the store)."""
    z = VECTOR_SCOPE_SIGMAS
    return float(((z + math.sqrt(z * z + 4 * k)) / 2) ** 2)


def _start_is_scope(flt: Filter) -> bool:
    """Whether ``flt`` narrows the entries its scope read starts from (see
    :func:`_scope_start`) by nothing but the status: then their count (see
    :func:`_scope_count`) is the scope's size, up to memories of another status."""
    others = (set(flt.equals) | set(flt.any_of)) - {"status"}
    if flt.ranges:
        return False
    if flt.tags_all:
        return len(flt.tags_all) == 1 and flt.ids is None and not others
    field = _scope_field(flt)
    if field == "id":
        return not others
    return field is not None and flt.ids is None and others == {field}


def _scoped_vector_branch(
    flt: Filter, clauses: list[str], props: str, lean: bool, sim_param: str = "vector"
) -> str:
    """Recall's vector branch under a scope (an agent, a namespace, tags ...), one
    statement whose cost follows k and the scope's share of the store, not the store:

    1. count the scope's entries in the index its read starts from (:func:`_scope_count`,
       read from the index alone);
    2. read up to ``$vector_scope`` memories of the scope through that index
       (:func:`_scope_start`) unless the count already shows the scope is larger (when
       the rest of the filter is only the status, :func:`_start_is_scope`); fewer than
       that: the read holds the whole scope, which is searched exactly when exact costs
       less than the index would (:func:`_exact_is_cheaper`);
    3. else the index's nearest ``$vector_mu / share`` (at least ``$fetch``), share = the
       scope's size over all memories, so that about ``$vector_mu`` of them pass the
       filter (:func:`scope_expected_hits`). The size: the read's, when it holds the whole
       scope; else the count, times the share the rest of the filter keeps among the
       first :data:`SCOPE_SAMPLE` counted entries when it narrows them (a namespace among
       a tag's memories); ``$fetch`` when the scope has no count or reached
       :data:`SCOPE_COUNT_MAX`;
    4. if fewer than ``$vector_k`` pass (and the index had more), the nearest
       ``3 x $vector_k / share``, share = (passing + 1) / fetched from step 3 (the
       margin and the + 1 because the passing share of a sample estimates it roughly),
       filtered.

    The rows are those of the unscoped branch; ``fetched`` is how many neighbours the
    answering step read from the index, 0 when its answer is complete (an exact search, or
    the index had no more), so the caller widens only when it is neither."""
    passing = " AND ".join(clauses) if clauses else "true"
    index = f"CALL db.index.vector.queryNodes('{VECTOR_INDEX}'"
    known = "read AND size(scope) < $vector_scope"  # the read holds the whole scope
    small = f"{known} AND (size(scope) < $vector_exact_min OR {_exact_is_cheaper('size(scope)')})"
    count = _scope_count(flt)[0]
    narrowed = not _start_is_scope(flt)
    read = "true" if narrowed else "entries IS NULL OR entries < $vector_scope"
    counted = "entries"
    sample = ""
    if narrowed and count != "null":
        counted = "entries * CASE WHEN sampled = 0 THEN 1.0 ELSE (kept + 0.5) / sampled END"
        sample = (
            "CALL {\n"
            "  WITH read, scope, entries\n"
            f"  UNWIND CASE WHEN entries > 0 AND NOT ({known}) THEN [1] ELSE [] END AS sampling\n"
            f"  {_scope_start(flt)}{_scope_seek(flt)}\n"
            "  WITH n LIMIT $scope_sample\n"
            "  RETURN count(n) AS sampled,\n"
            f"    sum(CASE WHEN {passing} AND n.embedding IS NOT NULL THEN 1 ELSE 0 END) AS kept\n"
            "}\n"
        )
    return (
        f"WITH {count} AS entries, COUNT {{ (:Memory) }} AS total\n"
        f"WITH entries, total, {read} AS read\n"
        "CALL {\n"
        "  WITH read\n"
        # a row only when the scope is read (a WHERE on read would be planned after the
        # seek below, which would then read every entry of the scope to reject it)
        "  UNWIND CASE WHEN read THEN [1] ELSE [] END AS reading\n"
        f"  {_scope_start(flt)}\n"
        f"  WHERE {passing} AND n.embedding IS NOT NULL\n"
        "  WITH n LIMIT $vector_scope\n"
        "  RETURN collect(n) AS scope\n"
        "}\n"
        f"{sample}"
        "CALL {\n"
        f"  WITH read, scope, entries, total{', sampled, kept' if sample else ''}\n"
        f"  WITH read, scope, entries, total{', sampled, kept' if sample else ''}"
        f" WHERE NOT ({small})\n"
        f"  WITH CASE WHEN {known} THEN size(scope)\n"
        "    WHEN entries IS NULL OR entries = 0 OR entries >= $scope_cap THEN null\n"
        f"    ELSE {counted} END AS size, total\n"
        "  WITH CASE WHEN size IS NULL THEN $fetch\n"
        "    ELSE toInteger(ceil($vector_mu * total / size)) END AS sized, total\n"
        "  WITH CASE WHEN sized < $fetch THEN $fetch WHEN sized > total THEN total\n"
        "    ELSE sized END AS asked\n"
        f"  {index}, asked, $vector) YIELD node AS n\n"
        "  WITH max(asked) AS asked, collect(n) AS near\n"
        "  RETURN asked AS asked0, size(near) AS fetched0,\n"
        f"    [n IN near WHERE {passing}] AS passed0\n"
        "}\n"
        "CALL {\n"
        "  WITH read, scope, total, asked0, fetched0, passed0\n"
        "  WITH asked0, fetched0, passed0\n"
        f"  WHERE NOT ({small}) AND size(passed0) < $vector_k AND fetched0 >= asked0\n"
        "  WITH 3 * $vector_k * fetched0 / (size(passed0) + 1) AS asked\n"
        f"  {index}, asked, $vector) YIELD node AS n\n"
        "  WITH max(asked) AS asked, collect(n) AS near\n"
        "  RETURN CASE WHEN size(near) < asked THEN 0 ELSE size(near) END AS fetched1,\n"
        f"    [n IN near WHERE {passing}] AS passed1\n"
        "}\n"
        f"WITH CASE WHEN {small} THEN [scope, 0]\n"
        "  WHEN size(passed0) >= $vector_k OR fetched0 < asked0 THEN [passed0, fetched0]\n"
        "  ELSE [passed1, fetched1] END AS answer\n"
        "WITH answer[0] AS pool, answer[1] AS fetched\n"
        + _ranked_vector_rows("pool", props, lean, sim_param)
    )


VECTOR_EXACT_MIN = 500
"""A scope held whole with fewer memories than this is searched exactly whatever the index
would cost: on a small store the index over-fetch is cheap but approximate (the quantized
index's neighbours), and exact keeps recall's vector channel the embedded store's."""


VECTOR_NEIGHBOUR_COST = 0.7
"""What one neighbour of a vector index search costs the server, relative to one exact
cosine over a memory read from the store (measured at 100,000 memories, 384-d, quantized
index, load 8: 8.9 us per neighbour asked, 13 us per memory scored exactly)."""


def _exact_is_cheaper(size: str) -> str:
    """Whether a scope of ``size`` memories (a Cypher expression) costs less searched
    exactly than through the index: exact costs ``size`` cosines, the index about
    ``$vector_mu * total / size`` neighbours (step 3 of :func:`_scoped_vector_branch`),
    so exact wins while ``size ** 2 <= $vector_exact * total`` (``$vector_exact`` =
    :data:`VECTOR_NEIGHBOUR_COST` x ``$vector_mu``): at 100,000 memories and k = 30, up
    to about 1,700 memories; at 1,000,000, 5,500; at 10,000, 550."""
    return f"{size} * {size} <= $vector_exact * total"


def _plain(vector: Sequence[float] | None) -> list[float] | None:
    """A query vector as sent (plain floats), None when there is none or it is not finite."""
    if vector is None:
        return None
    values = [float(x) for x in vector]
    return values if values and all(math.isfinite(x) for x in values) else None


def _cosine(score: Any, probe: Any) -> float:
    """The cosine behind a Neo4j vector score (see :data:`COSINE_PROBE`)."""
    s = float(score)
    return 2.0 * s - 1.0 if abs(float(probe)) < 0.5 else s


class Neo4jSearch(Neo4jSchema):
    """Lexical, vector and recall searches (the server computes every score)."""

    def search_text(self, query: TextQuery) -> list[Hit]:
        """Full-text search over Memory content (Lucene score), filter before the top-k."""
        require_memory(query.filter, "text search")
        lucene = lucene_query(query.text)
        if lucene is None:
            return []
        text, params = compile_text_search(query.filter, lucene, query.k)
        name = "search/text (bounded)"
        self._ready()
        rows = self._lexical_read("text search", name, text, params, self._fulltext_wait())
        return [
            Hit(node=self._memory(r["props"]), score=float(r["score"]))
            for r in rows
            if not vanished(r["props"])  # deleted while the statement read it
        ]

    def _fulltext_wait(self) -> bool:
        """Whether a lexical search must first wait for the full-text index: it is updated
        behind commits and this handle wrote memories since it last waited (cleared here:
        a write after this point marks it again, and its caller has not yet been told it
        is written)."""
        if not (self._fulltext_eventual and self._fulltext_behind):
            return False
        self._fulltext_behind = False
        return True

    def _lexical_read(
        self, what: str, name: str, text: str, params: dict[str, Any], wait: bool
    ) -> list[Any]:
        """The rows of a statement with a lexical search, after waiting for the full-text
        index when ``wait`` (from :meth:`_fulltext_wait`); if it fails after taking that
        wait, the next search waits instead."""

        def work(tx: Any) -> list[Any]:
            self._run_file(tx, Q_AWAIT_FULLTEXT).consume()
            return list(self._run(tx, name, text, params))

        if not wait:
            return self._query(what, name, text, params)
        try:
            rows: list[Any] = self._read(what, work)
        except BaseException:
            self._fulltext_behind = True
            raise
        return rows

    def _query_vector(self, query: VectorQuery) -> list[float] | None:
        """The query vector as sent, or None when nothing was ever embedded (no index)."""
        require_memory(query.filter, "vector search")
        self._ready()
        bulk = self._bulk
        if bulk is None and self._dim is None:
            self._schema_names()
        dim = bulk.dimension if bulk is not None else self._dim
        if dim is None:
            return None
        if len(query.vector) != dim:
            raise DimensionMismatch(
                f"query vector has {len(query.vector)} dimensions; this store uses {dim}"
            )
        q = np.asarray(query.vector, dtype=np.float32)
        if not np.isfinite(q).all() or float(np.linalg.norm(q)) == 0.0:
            raise InvalidInput("query vector must be finite and not all zeros")
        return [float(x) for x in query.vector]

    def _vector_fetch(self, k: int) -> int:
        """How many neighbours the vector index is asked for, to keep the best ``k``:
        ``vector_overfetch`` x k, at least :data:`VECTOR_MIN_FETCH`."""
        return max(k * self._vector_overfetch, VECTOR_MIN_FETCH)

    def search_vector(self, query: VectorQuery) -> list[Hit]:
        """Cosine nearest neighbours (score = cosine), filter applied before the top-k cut:
        a selective filter is searched exactly; otherwise the vector index is over-fetched
        (``vector_overfetch`` x k), re-scored exactly on the server, and widened until k
        memories pass the filter. The server computes every score; none is recomputed here."""
        flt = query.filter
        vector = self._query_vector(query)
        if vector is None:
            return []  # nothing was ever embedded
        k = query.k
        fetch0 = self._vector_fetch(k)

        def work(tx: Any) -> list[Any]:
            if self._bulk is not None:  # no index during a bulk load: every memory
                text, params = compile_vector_exact_search(flt, vector, k)
                return list(self._run(tx, "vector exact", text, params))
            if not has_conditions(flt):
                return list(self._run_file(tx, Q_SEARCH_VECTOR, fetch=fetch0, k=k, vector=vector))
            text, params = _compile_vector_plan(flt)
            plan = self._run(tx, "vector plan", text, params).single()
            matched, total = int(plan["matched"]), int(plan["total"])
            if matched == 0:
                return []
            if matched <= max(self._exact_search_max, k):
                text, params = compile_vector_exact_search(flt, vector, k)
                return list(self._run(tx, "vector exact", text, params))
            fetch = min(total, max(fetch0, math.ceil(2 * k * total / matched)))
            while True:
                text, params = compile_vector_index_search(flt, vector, fetch, k)
                rows = list(self._run(tx, "vector index", text, params))
                if len(rows) >= k or fetch >= total:
                    return rows
                if fetch * 4 > max(total // 2, self._exact_search_max):
                    # widening further costs about as much as an exact scan: do that
                    text, params = compile_vector_exact_search(flt, vector, k)
                    return list(self._run(tx, "vector exact", text, params))
                fetch = min(total, fetch * 4)

        rows = self._read("vector search", work)
        return [
            Hit(node=self._memory(r["props"]), score=_cosine(r["score"], r["probe"]))
            for r in rows
            if not vanished(r["props"])  # deleted while the statement read it
        ]

    def search_both(
        self,
        text: TextQuery | None,
        vector: VectorQuery | None,
        *,
        query_vector: Sequence[float] | None = None,
        similarities: dict[str, float] | None = None,
        unlinked: set[str] | None = None,
    ) -> tuple[list[Hit], list[Hit]]:
        """Recall's lexical and vector searches in one round trip (one statement, a
        ``UNION ALL`` of both, each filtered before its cut). Same results as
        :meth:`search_text` and :meth:`search_vector`; when a selective filter leaves fewer
        than k of the over-fetched vector neighbours, the vector search is redone by
        :meth:`search_vector` (one more round trip).

        With ``similarities`` (a dict to fill) the hits come without their embedding and
        the dict receives each one's cosine to ``query_vector`` (default: the vector
        query's), computed on the server: recall needs that number, not the 384 floats.
        ``unlinked`` (a set to fill) receives the ids of the hits without any edge recall's
        graph expansion could follow (:data:`LINKED`), so recall sends no expansion for
        them."""
        if text is not None and vector is not None and text.filter != vector.filter:
            return self.search_text(text), self.search_vector(vector)
        if text is not None:
            flt = text.filter
        elif vector is not None:
            flt = vector.filter
        else:
            return [], []
        require_memory(flt, "recall search")
        lucene = lucene_query(text.text) if text is not None else None
        qvec = self._query_vector(vector) if vector is not None else None
        if lucene is None and qvec is None:
            return [], []
        self._ready()
        vector_k = vector.k if vector is not None else 0
        fetch = self._vector_fetch(vector_k)
        sim_to: list[float] | None = None
        if similarities is not None:  # lean; without a query vector no sim is computed
            sim_to = _plain(query_vector) or qvec or []
        stmt = compile_recall_search(
            flt,
            lucene=lucene,
            text_k=text.k if text is not None else 0,
            vector=qvec,
            vector_fetch=fetch,
            vector_k=vector_k,
            similarity_to=sim_to,
            exact=self._bulk is not None,
        )
        wait = lucene is not None and self._fulltext_wait()
        rows = self._lexical_read("recall search", "recall search", *stmt, wait)
        lexical: list[Hit] = []
        near: list[Hit] = []
        fetched = 0
        decoded: dict[Any, Memory] = {}  # a memory both channels found is built once
        for r in rows:  # each field read once: a record's lookup by key costs ~1 us
            props, channel = r["props"], r["channel"]
            if channel == "vector":
                fetched = max(fetched, int(r["fetched"] or 0))
            if vanished(props):  # no match, or deleted while the statement read it
                continue
            memory = decoded.get(props["id"])
            if memory is None:
                memory = decoded[props["id"]] = self._memory(props)
            probe = r["probe"]
            if unlinked is not None and r["linked"] is False:
                unlinked.add(memory.id)
            if channel == "lexical":
                lexical.append(Hit(node=memory, score=float(r["score"])))
            else:
                near.append(Hit(node=memory, score=_cosine(r["score"], probe)))
            if similarities is not None and sim_to is not None:
                sim = r["sim"]
                if sim is not None:
                    similarities[str(props["id"])] = _cosine(sim, probe)
        if vector is not None and qvec is not None and len(near) < vector.k and has_conditions(flt):
            if fetched >= fetch:  # the filter passed too few of all the index returned
                near = self.search_vector(vector)
        return lexical, near

    def neighbours(
        self,
        seeds: Sequence[str],
        flt: Filter,
        *,
        link_types: Sequence[EdgeType] = (EdgeType.NEXT, EdgeType.DERIVED_FROM),
        tag_limit: int = 8,
        entity_hub_limit: int = 0,
        entity_limit: int = 8,
        query_vector: Sequence[float] | None = None,
        similarities: dict[str, float] | None = None,
    ) -> list[tuple[str, str, Memory]]:
        """Recall's graph expansion in one round trip: ``(seed id, via, memory)`` for every
        memory one ``link_types`` edge from a seed (via = the edge type) and up to
        ``tag_limit`` per seed sharing a tag with it (via = ``"tag"``) and, with
        ``entity_hub_limit`` > 1, up to ``entity_limit`` per seed sharing an entity mentioned
        by at most that many memories (via = ``"entity:<name>"``, each memory once, for
        the best seed), all matching ``flt``, in seed order. With ``similarities`` and
        ``query_vector`` the memories come without their embedding and the dict receives
        each one's cosine to the query vector (see :meth:`search_both`)."""
        if tag_limit < 0 or entity_hub_limit < 0 or entity_limit < 0:
            raise InvalidInput("tag_limit, entity_hub_limit and entity_limit must be >= 0")
        if not seeds:
            return []
        sim_to = (_plain(query_vector) or []) if similarities is not None else None
        text, params = compile_neighbours(
            flt,
            seeds,
            link_types=link_types,
            tag_limit=tag_limit,
            entity_hub_limit=entity_hub_limit,
            entity_limit=entity_limit,
            similarity_to=sim_to,
        )
        self._ready()
        rows = self._query("recall expansion", "recall expansion", text, params)
        rank = {s: i for i, s in enumerate(seeds)}
        out: list[tuple[str, str, Memory]] = []
        credited: set[Any] = set(seeds)
        for r in sorted(rows, key=lambda r: rank.get(r["seed"], len(rank))):
            # a memory deleted while the statement read it is not there (see vanished)
            linked, tagged, entities = (
                [x for x in r[key] if not vanished(x["props"])]
                for key in ("linked", "tagged", "entities")
            )
            if similarities is not None and sim_to is not None:
                for x in (*linked, *tagged, *entities):
                    if x["sim"] is not None:
                        similarities[str(x["props"]["id"])] = _cosine(x["sim"], r["probe"])
            linked.sort(key=lambda x: (x["type"], str(x["props"].get("id"))))
            out.extend((r["seed"], x["type"], self._memory(x["props"])) for x in linked)
            tagged.sort(key=lambda x: str(x["props"].get("id")))
            out.extend((r["seed"], "tag", self._memory(x["props"])) for x in tagged)
            for x in entities:
                ident = x["props"].get("id")
                if ident not in credited:  # best seed first: a memory is credited once
                    credited.add(ident)
                    out.append((r["seed"], f"entity:{x['entity']}", self._memory(x["props"])))
        return out
