"""Search: BM25 over the FTS5 index (query terms planned by document frequency) and
cosine search over the vector index, the filter applied before the top-k cut."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import cast

import numpy as np

from graphmem.backends.embedded.journal import EmbeddedJournal
from graphmem.errors import DimensionMismatch, InvalidInput, QueryFailed
from graphmem.models import Hit, Memory, NodeLabel, TextQuery, VectorQuery
from graphmem.text import query_terms


def fts_query(terms: Sequence[str]) -> str | None:
    """An FTS5 MATCH expression: the terms quoted (so no operator syntax gets through) and
    OR-ed. None when there is no term."""
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


#: a query term in more than this share of the memories (and more than _COMMON_MIN of
#: them) is left out of the BM25 match: its IDF is near zero, so it barely changes the
#: ranking, but scoring it means visiting most of the index
_COMMON_SHARE = 0.05


_COMMON_MIN = 1000


class EmbeddedSearch(EmbeddedJournal):
    """Lexical and vector search of :class:`NetworkXBackend`."""

    def search_text(self, query: TextQuery) -> list[Hit]:
        return self._search_text(query, vectors=True)

    def _search_text(self, query: TextQuery, *, vectors: bool) -> list[Hit]:
        if query.filter.label is not NodeLabel.MEMORY:
            raise InvalidInput("text search runs over Memory nodes")
        terms = query_terms(query.text)
        if not terms:
            return []
        with self._fresh():
            expr = fts_query(self._selective_terms(terms))
            if expr is None:
                return []
            ok = self._predicate(query.filter)
            cand = self._candidates(query.filter)
            nodes = self._g.nodes
            results: list[tuple[str, float]] = []
            try:
                # FTS5 evaluates ``rowid IN (...)`` badly, so the filter runs in Python over
                # a growing prefix of the BM25 ranking until k pass or the matches run out
                fetch = max(query.k * 4, 64)
                while True:
                    rows = self._db.execute(
                        "SELECT rowid, bm25(memory_fts) AS s FROM memory_fts "
                        "WHERE memory_fts MATCH ? ORDER BY s LIMIT ?",
                        (expr, fetch),
                    ).fetchall()
                    results = []
                    for rid, s in rows:
                        key = self._key_of.get(rid)
                        if key is not None and (cand is None or key in cand) and ok(nodes[key]):
                            results.append((key, -s))
                            if len(results) == query.k:
                                break
                    if len(results) == query.k or len(rows) < fetch:
                        break
                    fetch *= 8
            except sqlite3.Error as e:
                raise QueryFailed(f"text search failed: {e}") from e
            return self._hits(results, vectors)

    def _hits(self, found: list[tuple[str, float]], vectors: bool) -> list[Hit]:
        """Hits without validating them again: ``Hit(node=...)`` would re-run the memory's
        model validators (about 20 µs a hit; ~100 hits per recall) on a node just built
        from validated state."""
        make = Hit.model_construct
        node = self._node
        return [make(node=cast(Memory, node(k, vector=vectors)), score=float(s)) for k, s in found]

    def _selective_terms(self, terms: list[str]) -> list[str]:
        """The query terms worth matching: present in the index and not near-ubiquitous
        (see _COMMON_SHARE); when every term is common, the two rarest."""
        db = self._db
        try:
            db.executemany(
                "INSERT INTO temp.query_tokens(rowid, t) VALUES (?, ?)", list(enumerate(terms))
            )
            stems = db.execute("SELECT doc, term FROM temp.query_tokens_vocab").fetchall()
            db.execute("DELETE FROM temp.query_tokens")
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
        return self._search_vector(query, vectors=True)

    def _search_vector(self, query: VectorQuery, *, vectors: bool) -> list[Hit]:
        if query.filter.label is not NodeLabel.MEMORY:
            raise InvalidInput("vector search runs over Memory nodes")
        with self._fresh():
            if self._vindex is None:
                return []
            if len(query.vector) != self._vindex.dim:
                raise DimensionMismatch(
                    f"query vector has {len(query.vector)} dimensions; "
                    f"this store uses {self._vindex.dim}"
                )
            ok = self._predicate(query.filter)
            nodes = self._g.nodes
            cand = self._candidates(query.filter)
            if cand is not None and len(cand) > len(self._vindex) // 5:
                cand = None  # broad filter: scan everything and check while taking top-k
            found = self._vindex.search(
                np.asarray(query.vector, dtype=np.float32),
                query.k,
                candidates=cand,
                allowed=lambda k: k in nodes and ok(nodes[k]),
            )
            return self._hits(found, vectors)

    def search_both(
        self,
        text: TextQuery | None,
        vector: VectorQuery | None,
        *,
        query_vector: Sequence[float] | None = None,
        similarities: dict[str, float] | None = None,
    ) -> tuple[list[Hit], list[Hit]]:
        """Recall's lexical and vector searches (the ``RecallSearch`` capability): the
        results of :meth:`search_text` and :meth:`search_vector`. With ``similarities`` (a
        dict to fill) the hits come without their embedding and the dict receives each
        one's cosine to ``query_vector`` (default: the vector query's), from the vector
        index: recall needs that number, and a memory's tuple of 384 Python floats costs
        more to build than the rest of its model."""
        lean = similarities is not None
        lexical = self._search_text(text, vectors=not lean) if text is not None else []
        found = self._search_vector(vector, vectors=not lean) if vector is not None else []
        if similarities is not None:
            q = query_vector if query_vector is not None else vector.vector if vector else None
            with self._fresh():
                if q is not None and self._vindex is not None:
                    keys = {"Memory:" + h.node.id for h in (*lexical, *found)}
                    for key, cos in self._vindex.cosines(keys, q).items():
                        similarities[key[7:]] = cos
        return lexical, found
