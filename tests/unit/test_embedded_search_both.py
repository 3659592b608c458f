"""The embedded store's recall search without the memories' vectors: the same hits as the
two searches, and each hit's cosine to the query from the vector index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphmem import GraphMemory
from graphmem.backends.base import RecallSearch
from graphmem.backends.embedded.backend import NetworkXBackend
from graphmem.models import Filter, Memory, TextQuery, VectorQuery

pytestmark = pytest.mark.embedded("recall's lean search over the in-process vector index")

WORDS = "river stone lamp orchard violin harbour meadow copper lantern thistle".split()


def test_search_both_gives_the_searches_hits_and_their_cosines(tmp_path: Path) -> None:
    with GraphMemory.open(str(tmp_path / "s.db"), embedder="hash:64") as mem:
        mem.remember_many(
            [
                {
                    "content": f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]} note {i}",
                    "agent_id": f"a{i % 2}",
                }
                for i in range(300)
            ]
        )
        mem.vectors.wait(timeout=60)
        backend = mem.backend
        assert isinstance(backend, NetworkXBackend) and isinstance(backend, RecallSearch)
        embedder = mem.embedder
        assert embedder is not None
        for words, agent in (("lantern violin", None), ("copper meadow", "a1"), ("stone", None)):
            flt = Filter.for_memories(agent_id=agent)
            qvec = np.asarray(embedder.embed([words])[0], dtype=np.float32)
            text = TextQuery(text=words, filter=flt, k=20)
            vector = VectorQuery(vector=tuple(qvec.tolist()), filter=flt, k=20)
            sims: dict[str, float] = {}
            lexical, near = backend.search_both(text, vector, similarities=sims)
            full_lexical, full_near = backend.search_text(text), backend.search_vector(vector)
            for lean, full in ((lexical, full_lexical), (near, full_near)):
                assert [(h.node.id, h.score) for h in lean] == [(h.node.id, h.score) for h in full]
                assert all(h.node.embedding is None for h in lean)
                assert [h.node.model_dump() for h in lean] == [
                    h.node.model_dump(exclude={"embedding"}) | {"embedding": None} for h in full
                ]
            # a memory both searches find is one model, built once
            by_id = {h.node.id: h.node for h in lexical}
            both = [h.node for h in near if h.node.id in by_id]
            assert both and all(m is by_id[m.id] for m in both)
            stored = {
                m.id: m
                for m in backend.get(Memory, [h.node.id for h in (*full_lexical, *full_near)])
            }
            with_vec = {i for i, m in stored.items() if m.embedding is not None}
            assert set(sims) == with_vec and with_vec
            for i in with_vec:
                vec = np.asarray(stored[i].embedding, dtype=np.float32)
                want = float(vec @ qvec / max(float(np.linalg.norm(vec)), 1e-12))
                assert sims[i] == pytest.approx(want, abs=1e-6)
            # without a dict to fill, the hits keep their vectors
            plain, _ = backend.search_both(text, None)
            assert all(h.node.embedding is not None for h in plain if h.node.id in with_vec)


def test_text_search_under_a_filter_is_the_filtered_prefix_of_the_whole_ranking(
    tmp_path: Path,
) -> None:
    # the agent's memories match the query less well than most others, so the first rows
    # read hold fewer than k of them and the search has to read on
    with GraphMemory.open(str(tmp_path / "t.db"), embedder=None) as mem:
        rows = [
            {"content": f"tea tea tea {WORDS[i % 10]} {i}", "agent_id": f"other{i % 3}"}
            for i in range(600)
        ]
        rows += [
            {"content": f"tea {WORDS[i % 10]} with a long tail of words {i}", "agent_id": "me"}
            for i in range(40)
        ]
        mem.remember_many(rows)
        mem.forget(mem.list(agent_id="me", limit=1)[0].id)  # not every memory passes
        backend = mem.backend
        whole = backend.search_text(TextQuery(text="tea", k=1000, filter=Filter.for_memories()))
        for agent, k in (("me", 30), ("me", 5), ("other1", 30), ("nobody", 10)):
            flt = Filter.for_memories(agent_id=agent)
            want = [(h.node.id, h.score) for h in whole if h.node.agent_id == agent][:k]
            got = backend.search_text(TextQuery(text="tea", k=k, filter=flt))
            assert [(h.node.id, h.score) for h in got] == want
            assert len(want) == (0 if agent == "nobody" else k)
