"""Search: BM25 over the FTS5 index (query terms planned by document frequency) and
cosine search over the vector index, the filter applied before the top-k cut."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Collection, Sequence
from typing import NamedTuple, cast

import numpy as np

from graphmem.backends.embedded.journal import EmbeddedJournal
from graphmem.errors import DimensionMismatch, InvalidInput, QueryFailed
from graphmem.models import EdgeType, Filter, Hit, Memory, NodeLabel, TextQuery, VectorQuery
from graphmem.text import query_terms


def fts_query(terms: Sequence[str]) -> str | None:
    """An FTS5 MATCH expression: the terms quoted (so no operator syntax gets through) and
    OR-ed. None when there is no term."""
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


#: a query term in more than this share of the memories (and more than _COMMON_MIN of
#: them) is left out of the BM25 match: its IDF is low, so it changes the ranking little,
#: but every memory it matches is scored — in a conversation's turns a speaker's name
#: matches a third of them, and BM25 over those cost three times the rest of the match
#: (LoCoMo dev R@10 80.3 -> 80.7 with 100 instead of 1,000)
_COMMON_SHARE = 0.05


_COMMON_MIN = 100


#: a query term -> the index's stems of it (the store's tokenizer, as the temporary
#: vocabulary table gives them): most queries repeat words, and asking SQLite takes
#: three statements
_STEMS: dict[str, list[str]] = {}
_STEMS_MAX = 50_000


def _by_stem(pair: tuple[int, str]) -> tuple[str, int]:
    return pair[1], pair[0]


class _Reach(NamedTuple):
    """The memories a filter admits as the index buckets tell: ``keys`` when they answer
    all of the filter (None: the predicate has to look at the nodes), ``every`` when that
    is every memory (recall's default, nothing forgotten: no check at all)."""

    keys: set[str] | None
    every: bool


class EmbeddedSearch(EmbeddedJournal):
    """Lexical and vector search of :class:`NetworkXBackend`."""

    def search_text(self, query: TextQuery) -> list[Hit]:
        with self._fresh():
            return self._search_text(query, vectors=True)

    def _reach(self, flt: Filter) -> _Reach:
        keys = self._indexed_matches(flt)
        every = keys is not None and len(keys) >= len(self._by_label.get(NodeLabel.MEMORY, ()))
        return _Reach(keys, every)

    def _search_text(
        self,
        query: TextQuery,
        *,
        vectors: bool,
        built: dict[str, Memory] | None = None,
        reach: _Reach | None = None,
    ) -> list[Hit]:
        """The text search, the caller holding :meth:`_fresh` (``reach``: the filter's,
        when the caller has it)."""
        if query.filter.label is not NodeLabel.MEMORY:
            raise InvalidInput("text search runs over Memory nodes")
        terms = query_terms(query.text)
        if not terms:
            return []
        expr = fts_query(self._selective_terms(terms))
        if expr is None:
            return []
        reach = reach or self._reach(query.filter)
        admits: Callable[[str], bool] | None
        if reach.keys is not None:
            admits = None if reach.every else reach.keys.__contains__
        else:
            ok = self._predicate(query.filter)
            cand = self._candidates(query.filter)
            nodes = self._g.nodes

            def admits(key: str) -> bool:
                return (cand is None or key in cand) and ok(nodes[key])

        if reach.keys is not None and not reach.keys:
            return []  # the filter admits no memory
        results: list[tuple[str, float]] = []
        try:
            # FTS5 evaluates ``rowid IN (...)`` badly, so the filter runs in Python over
            # a growing prefix of the BM25 ranking until k pass or the matches run out
            fetch = self._text_fetch(query.k, reach)
            while True:
                rows = self._db.execute(
                    "SELECT rowid, bm25(memory_fts) AS s FROM memory_fts "
                    "WHERE memory_fts MATCH ? ORDER BY s LIMIT ?",
                    (expr, fetch),
                ).fetchall()
                results = []
                for rid, s in rows:
                    key = self._key_of.get(rid)
                    if key is not None and (admits is None or admits(key)):
                        results.append((key, -s))
                        if len(results) == query.k:
                            break
                if len(results) == query.k or len(rows) < fetch:
                    break
                fetch *= 8
        except sqlite3.Error as e:
            raise QueryFailed(f"text search failed: {e}") from e
        return self._hits(results, vectors, built)

    def _text_fetch(self, k: int, reach: _Reach) -> int:
        """How many BM25 rows to read first for ``k`` that pass the filter: SQLite keeps
        the LIMIT's rows sorted while it scores every match, so four times as many rows
        cost about a third more. Every memory passing: k. A filter the index buckets
        answer: about what holds k of its memories if they match like the others (more
        are read if not). Else four times k."""
        if reach.every:
            return k
        if reach.keys is None:
            return max(k * 4, 64)
        n = len(self._by_label.get(NodeLabel.MEMORY, ()))
        return math.ceil(k * n / max(len(reach.keys), 1) * 1.25) + 4

    def _hits(
        self,
        found: list[tuple[str, float]],
        vectors: bool,
        built: dict[str, Memory] | None = None,
    ) -> list[Hit]:
        """Hits without validating them again: ``Hit(node=...)`` would re-run the memory's
        model validators (about 20 µs a hit; ~100 hits per recall) on a node just built
        from validated state. ``built`` (key -> model) is shared by searches whose hits may
        repeat: a frozen model serves both. Without ``vectors`` (recall's searches) the
        models are the node table's own (see :class:`RecallSearch`)."""
        make = Hit.trusted
        node = self._node
        lean = not vectors
        if built is None:
            return [
                make(cast(Memory, node(k, vector=vectors, shared=lean)), float(s)) for k, s in found
            ]
        out = []
        for k, s in found:
            m = built.get(k)
            if m is None:
                m = built[k] = cast(Memory, node(k, vector=vectors, shared=lean))
            out.append(make(m, float(s)))
        return out

    def _selective_terms(self, terms: list[str]) -> list[str]:
        """The query terms worth matching: present in the index and not near-ubiquitous
        (see _COMMON_SHARE); when every term is common, the two rarest."""
        db = self._db
        try:
            new = [t for t in dict.fromkeys(terms) if t not in _STEMS]
            if new:
                db.executemany(
                    "INSERT INTO temp.query_tokens(rowid, t) VALUES (?, ?)", list(enumerate(new))
                )
                rows = db.execute("SELECT doc, term FROM temp.query_tokens_vocab").fetchall()
                db.execute("DELETE FROM temp.query_tokens")
                if len(_STEMS) > _STEMS_MAX:
                    _STEMS.clear()
                stemmed: dict[str, list[str]] = {t: [] for t in new}
                for d, stem in rows:
                    stemmed[new[d]].append(stem)
                _STEMS.update(stemmed)
            # as the vocabulary table lists them: by stem, then by term
            stems = sorted(((i, s) for i, t in enumerate(terms) for s in _STEMS[t]), key=_by_stem)
            # document frequencies only steer which terms to match, so a cached value is
            # good enough until the store has grown or shrunk by a tenth
            n_now = len(self._by_label.get(NodeLabel.MEMORY, ()))
            cache = self._df_cache
            if abs(n_now - self._df_cache_n) > 0.1 * max(self._df_cache_n, 1000):
                cache.clear()
                self._df_cache_n = n_now
            missing = list({t for _d, t in stems if t not in cache})
            if missing:
                marks = ",".join("?" * len(missing))
                found = dict(
                    db.execute(
                        f"SELECT term, doc FROM temp.memory_vocab WHERE term IN ({marks})", missing
                    ).fetchall()
                )
                cache.update(found)  # absent terms are not cached: they may appear any time
            df = {t: cache.get(t, 0) for _d, t in stems}
        except sqlite3.Error as e:
            raise QueryFailed(f"text search planning failed: {e}") from e
        freq: dict[int, int] = {}
        for i, stem in stems:  # a token can yield several stems; keep its rarest
            n = df.get(stem, 0)
            if n:
                freq[i] = min(freq.get(i, n), n)
        if not freq:
            return []
        limit = max(_COMMON_MIN, _COMMON_SHARE * len(self._by_label.get(NodeLabel.MEMORY, ())))
        keep = [i for i, n in freq.items() if n <= limit]
        if not keep:
            keep = sorted(freq, key=freq.__getitem__)[:2]
        return [terms[i] for i in sorted(keep)]

    def search_vector(self, query: VectorQuery) -> list[Hit]:
        with self._fresh():
            return self._search_vector(query, vectors=True)

    def _search_vector(
        self,
        query: VectorQuery,
        *,
        vectors: bool,
        built: dict[str, Memory] | None = None,
        reach: _Reach | None = None,
    ) -> list[Hit]:
        """The vector search, the caller holding :meth:`_fresh` (``reach``: as for
        :meth:`_search_text`)."""
        if query.filter.label is not NodeLabel.MEMORY:
            raise InvalidInput("vector search runs over Memory nodes")
        if self._vindex is None:
            return []
        if len(query.vector) != self._vindex.dim:
            raise DimensionMismatch(
                f"query vector has {len(query.vector)} dimensions; "
                f"this store uses {self._vindex.dim}"
            )
        allowed: Callable[[str], bool] | None
        reach = reach or self._reach(query.filter)
        if reach.keys is not None:
            # the index buckets answer the whole filter: membership is a C call, and a
            # filter every memory passes needs no check at all — the HNSW search visits
            # ~400 nodes per query
            cand: set[str] | None = None if reach.every else reach.keys
            allowed = None if reach.every else reach.keys.__contains__
        else:
            ok = self._predicate(query.filter)
            nodes = self._g.nodes
            cand = self._candidates(query.filter)

            def allowed(k: str) -> bool:
                return k in nodes and ok(nodes[k])

        if cand is not None and len(cand) > len(self._vindex) // 5:
            cand = None  # broad filter: scan everything and check while taking top-k
        found = self._vindex.search(
            np.asarray(query.vector, dtype=np.float32),
            query.k,
            candidates=cand,
            allowed=allowed,
        )
        return self._hits(found, vectors, built)

    def search_both(
        self,
        text: TextQuery | None,
        vector: VectorQuery | None,
        *,
        query_vector: Sequence[float] | None = None,
        similarities: dict[str, float] | None = None,
        unlinked: set[str] | None = None,
    ) -> tuple[list[Hit], list[Hit]]:
        """Recall's lexical and vector searches (the ``RecallSearch`` capability): the
        results of :meth:`search_text` and :meth:`search_vector`. With ``similarities`` (a
        dict to fill) the hits come without their embedding and the dict receives each
        one's cosine to ``query_vector`` (default: the vector query's), from the vector
        index: recall needs that number, and a memory's tuple of 384 Python floats costs
        more to build than the rest of its model. ``unlinked`` is left as it is: the
        expansion here is in process, with no round trip to save."""
        lean = similarities is not None
        built: dict[str, Memory] = {}  # a memory both searches find is built once
        with self._fresh():
            # one filter for both (recall's): what it admits is worked out once
            reach = (
                self._reach(text.filter)
                if text is not None and vector is not None and text.filter == vector.filter
                else None
            )
            lexical = (
                self._search_text(text, vectors=not lean, built=built, reach=reach)
                if text is not None
                else []
            )
            found = (
                self._search_vector(vector, vectors=not lean, built=built, reach=reach)
                if vector is not None
                else []
            )
            if similarities is not None:
                q = query_vector if query_vector is not None else vector.vector if vector else None
                hits = (*lexical, *found)
                if vector is not None and (q is vector.vector or q == vector.vector):
                    # a vector hit's score is its cosine to q (exact, from the same row)
                    scored = {h.node.id: h.score for h in found}
                    similarities.update(scored)
                    hits = tuple(h for h in lexical if h.node.id not in scored)
                keys = {"Memory:" + h.node.id for h in hits}
                self._cosines_into(similarities, keys, q)
        return lexical, found

    def _cosines_into(
        self, similarities: dict[str, float], keys: Collection[str], q: Sequence[float] | None
    ) -> None:
        """Each memory key's cosine to ``q`` from the vector index, into ``similarities``
        by memory id (nothing without a query vector or an index)."""
        if q is not None and self._vindex is not None:
            for key, cos in self._vindex.cosines(keys, q).items():
                similarities[key[7:]] = cos

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
        """Recall's graph expansion in process (the ``RecallNeighbours`` capability):
        ``(seed id, via, memory)`` as the generic expansion over :meth:`expand` finds them,
        in the same order, keeping only memories that match ``flt`` — so recall ranks
        exactly as it does over ``expand``, without building a model for every node the
        walk passes (seeds, tags, entities, neighbours outside the filter). The same
        bounds: ``8 * len(seeds) + 16`` nodes over ``link_types``; ``len(tagged seeds) +
        tag_limit`` nodes (tags included) two hops over TAGGED, each memory credited to the
        best seed sharing a tag; with ``entity_hub_limit`` > 0, memories sharing an entity
        mentioned by 2..``entity_hub_limit`` memories, rarest entity first, at most
        ``entity_limit`` per seed. ``similarities``: as for :meth:`search_both`."""
        if tag_limit < 0 or entity_hub_limit < 0 or entity_limit < 0:
            raise InvalidInput("tag_limit, entity_hub_limit and entity_limit must be >= 0")
        if not seeds:
            return []
        with self._fresh():
            nodes = self._g._node
            keys = ["Memory:" + i for i in dict.fromkeys(seeds)]
            keys = [k for k in keys if k in nodes]
            rank = {k: i for i, k in enumerate(keys)}
            found: list[tuple[str, str, str]] = []  # (seed key, via, memory key)
            types = {EdgeType(t).value for t in link_types}
            if types:
                seen, edges = self._walk(keys, types, "both", 1, len(keys) * 8 + 16)
                mems = {k for k in seen if nodes[k].get("label") == "Memory"}
                for s, t, d in edges:
                    for a, b in ((s, d), (d, s)):
                        if a in rank and b in mems:
                            found.append((a, t, b))
            if tag_limit > 0:
                seed_tags = {k: set(nodes[k]["tags"]) for k in keys if nodes[k].get("tags")}
                tagged = list(seed_tags)
                if tagged:
                    seen, _ = self._walk(tagged, {"TAGGED"}, "both", 2, len(tagged) + tag_limit)
                    for k in seen:
                        attrs = nodes[k]
                        if attrs.get("label") != "Memory" or k in rank:
                            continue
                        tags = set(attrs.get("tags") or ())
                        shared = [c for c in tagged if tags & seed_tags[c]]
                        if shared:
                            found.append((min(shared, key=rank.__getitem__), "tag", k))
            if entity_hub_limit > 0:
                found += self._entity_neighbours(keys, rank, entity_hub_limit, entity_limit)
            ok = self._predicate(flt)
            passing = {b for _a, _v, b in found if ok(nodes[b])}
            lean = similarities is not None
            built = {b: cast(Memory, self._node(b, vector=not lean, shared=lean)) for b in passing}
            if similarities is not None:
                self._cosines_into(similarities, built, query_vector)
            return [(a[7:], via, built[b]) for a, via, b in found if b in passing]

    def _entity_neighbours(
        self, keys: list[str], rank: dict[str, int], hub_limit: int, per_seed: int
    ) -> list[tuple[str, str, str]]:
        """``(seed key, "entity:<name>", memory key)`` of memories sharing a rare entity with
        the seeds, as the knowledge layer's ``shared_entity_neighbours`` finds them over
        :meth:`expand` (the same bounds, order and credit), best seed first."""
        nodes = self._g._node
        seen, edges = self._walk(keys, {"MENTIONS"}, "out", 1, len(keys) * 32 + 1)
        ents = {
            k: nodes[k]
            for k in seen
            if nodes[k].get("label") == "Entity"
            and 1 < nodes[k].get("mention_count", 0) <= hub_limit
        }
        best: dict[str, str] = {}  # entity key -> its best seed
        for s, _t, d in edges:
            if d in ents and s in rank:
                cur = best.get(d)
                if cur is None or rank[s] < rank[cur]:
                    best[d] = s
        if not best:
            return []
        seen, edges = self._walk(list(best), {"MENTIONS"}, "in", 1, len(best) * (hub_limit + 1) + 1)
        mems = {k for k in seen if nodes[k].get("label") == "Memory"}
        out: dict[str, tuple[str, str, str]] = {}
        taken: dict[str, int] = {}
        # rarest entity first, so a memory is credited to the most specific link
        far = 1 << 30
        for s, _t, d in sorted(
            edges, key=lambda e: ents[e[2]]["mention_count"] if e[2] in ents else far
        ):
            if s not in mems or d not in ents or s in rank or s in out:
                continue
            seed = best[d]
            if taken.get(seed, 0) >= per_seed:
                continue
            taken[seed] = taken.get(seed, 0) + 1
            out[s] = (seed, "entity:" + ents[d]["name"], s)
        return sorted(out.values(), key=lambda f: rank[f[0]])
