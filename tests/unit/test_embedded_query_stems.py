"""The stems of query terms, remembered per term, are those the store's tokenizer gives
(in the order its vocabulary table lists them), and text search finds the same hits
with the memo cold or warm."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded import search
from graphmem.backends.embedded.backend import NetworkXBackend
from graphmem.models import Filter, TextQuery
from graphmem.text import query_terms

pytestmark = pytest.mark.embedded("the embedded store's FTS5 query planning")

QUERIES = [
    ["running", "runs", "ran"],
    ["foo_bar", "a_a", "the"],
    ["straße", "ÀÉ", "naïve", "café"],
    ["lanterns", "lantern", "painting", "paints"],
]


def _vocabulary(backend: NetworkXBackend, terms: list[str]) -> list[tuple[int, str]]:
    db = backend._db
    db.executemany("INSERT INTO temp.query_tokens(rowid, t) VALUES (?, ?)", list(enumerate(terms)))
    rows = db.execute("SELECT doc, term FROM temp.query_tokens_vocab").fetchall()
    db.execute("DELETE FROM temp.query_tokens")
    return [(int(d), str(t)) for d, t in rows]


def test_remembered_stems_are_the_tokenizers_and_search_is_unchanged(tmp_path: Path) -> None:
    with GraphMemory.open(str(tmp_path / "s.db"), embedder=None) as mem:
        mem.remember_many(
            [{"content": f"{' '.join(q)} note {i}"} for i, q in enumerate(QUERIES * 5)]
        )
        backend = mem.backend
        assert isinstance(backend, NetworkXBackend)
        search._STEMS.clear()
        cold = [
            backend.search_text(TextQuery(text=" ".join(q), filter=Filter.for_memories()))
            for q in QUERIES
        ]
        for q in QUERIES:
            terms = query_terms(" ".join(q))
            assert terms and all(t in search._STEMS for t in terms)
            remembered = sorted(
                ((i, s) for i, t in enumerate(terms) for s in search._STEMS[t]),
                key=search._by_stem,
            )
            assert remembered == _vocabulary(backend, terms)
        warm = [
            backend.search_text(TextQuery(text=" ".join(q), filter=Filter.for_memories()))
            for q in QUERIES
        ]
        assert [[(h.node.id, h.score) for h in hits] for hits in warm] == [
            [(h.node.id, h.score) for h in hits] for hits in cold
        ]
        assert all(cold)
