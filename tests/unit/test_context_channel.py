"""Recall's neighbour-context channel (graphmem.context): a turn read with the turns next
to it in its run."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

from graphmem.config import RecallConfig
from graphmem.context import neighbour_context
from graphmem.memory import GraphMemory
from graphmem.models import Filter, Memory
from tests.conftest import Stores

# the question's topic and the answer's (unlike the question)
_TOPIC = {"paint": 0, "answer": 1}


class KeywordEmbedder:
    """Vectors from keywords, so the test sets every similarity: "paint" points along the
    question, "answer" along an axis the question does not share, and every other word
    adds a little of an axis of its own (hashed)."""

    name = "keywords"
    dim = 64

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = np.zeros(self.dim, dtype=np.float32)
            for word in re.findall(r"[a-z]+", t.lower()):
                if word in _TOPIC:
                    v[_TOPIC[word]] += 1.0
                else:
                    v[2 + zlib.crc32(word.encode()) % (self.dim - 2)] += 0.1
            out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
        return out


def _store(mem: GraphMemory) -> dict[str, str]:
    ids: dict[str, str] = {}
    # session 1: the question about painting, then its answer (no shared word)
    for key, text in (
        ("ask", "Caroline: did you paint anything lately?"),
        ("reply", "Melanie: yes, an answer of orange skies over the lake"),
        ("bye", "Caroline: talk soon"),
    ):
        ids[key] = mem.remember(text, agent_id="c", run_id="s1").id
    # session 2: a turn as like the reply on its own, with unrelated neighbours
    for key, text in (
        ("chat", "Caroline: the weather is grey"),
        ("other", "Melanie: an answer about groceries"),
        ("end", "Caroline: see you"),
    ):
        ids[key] = mem.remember(text, agent_id="c", run_id="s2").id
    mem.vectors.wait()
    return ids


def test_context_adds_the_neighbours_similarity_within_the_run(stores: Stores) -> None:
    with stores.open("m1.db", embedder=KeywordEmbedder()) as mem:
        ids = _store(mem)
        q = KeywordEmbedder().embed(["what did Melanie paint?"])[0]
        pool = mem.get([ids["reply"], ids["other"]])
        scored = {
            m.id: (s, near)
            for m, s, near in neighbour_context(mem.backend, pool, Filter.for_memories(), q, 0.5)
        }
        # the neighbours came in with the pool
        assert ids["ask"] in scored and ids["chat"] in scored
        own = {
            i: float(v @ q)
            for i, v in zip(
                ids.values(),
                KeywordEmbedder().embed([m.content for m in mem.get(list(ids.values()))]),
                strict=True,
            )
        }
        reply, near = scored[ids["reply"]]
        r = own[ids["reply"]]
        # a neighbour adds only the similarity the turn itself lacks
        lift = max(0.0, own[ids["ask"]] - r) + max(0.0, own[ids["bye"]] - r)
        assert own[ids["ask"]] > r
        assert abs(reply - (r + 0.5 * lift)) < 1e-5
        assert abs(near - max(own[ids["ask"]], own[ids["bye"]])) < 1e-5
        # the reply beside the question outranks the equally unlike turn of session 2
        assert scored[ids["reply"]][0] > scored[ids["other"]][0]
        # no NEXT link crosses runs: session 1's last turn is not session 2's neighbour
        chat = own[ids["chat"]] + 0.5 * max(0.0, own[ids["other"]] - own[ids["chat"]])
        assert abs(scored[ids["chat"]][0] - chat) < 1e-5


def test_memories_read_without_their_vector_score_from_the_cosines_given(stores: Stores) -> None:
    # a server backend's recall reads its candidates without their embeddings and reports
    # their cosines instead: the channel must score them as if it had the vectors
    with stores.open("m5.db", embedder=KeywordEmbedder()) as mem:
        ids = _store(mem)
        q = KeywordEmbedder().embed(["what did Melanie paint?"])[0]
        full = mem.get([ids["reply"], ids["other"]])
        cosines = {m.id: float(np.asarray(m.embedding) @ q) for m in full}
        lean = [m.evolve(embedding=None) for m in full]

        def scores(
            pool: list[Memory], sims: dict[str, float] | None
        ) -> dict[str, tuple[float, float]]:
            return {
                m.id: (round(s, 5), round(near, 5))
                for m, s, near in neighbour_context(
                    mem.backend, pool, Filter.for_memories(), q, 0.5, sims
                )
            }

        expected = scores(full, None)
        assert ids["reply"] in expected and ids["ask"] in expected
        assert scores(lean, dict(cosines)) == expected
        assert ids["reply"] not in scores(lean, None)  # no vector, no cosine: left out


def test_the_channel_lifts_an_answer_that_shares_no_word_with_the_question(stores: Stores) -> None:
    with stores.open("m2.db", embedder=KeywordEmbedder()) as mem:
        ids = _store(mem)
        on = RecallConfig(context_weight=0.25, expand_next=False)
        off = on.model_copy(update={"context_weight": 0.0})
        with_ctx = mem.recall("what did she paint?", agent_id="c", k=6, config=on)
        without = mem.recall("what did she paint?", agent_id="c", k=6, config=off)
        ranked_on = [r.memory.id for r in with_ctx]
        # on its own the reply shows no evidence (no shared word, unlike vector) ...
        assert ids["reply"] not in [r.memory.id for r in without]
        # ... read beside the question it answers, it is found, and not its look-alike
        assert ids["reply"] in ranked_on
        assert "context_rank" in with_ctx[ranked_on.index(ids["reply"])].breakdown
        assert ids["other"] not in ranked_on


def test_an_echoed_turn_gains_nothing_and_a_memory_outside_runs_keeps_its_own_score(
    stores: Stores,
) -> None:
    with stores.open("m3.db", embedder=KeywordEmbedder()) as mem:
        alone = mem.remember("paint answer", agent_id="c")  # no run
        asked = mem.remember("paint paint", agent_id="c", run_id="r")
        mem.remember("paint paint paint", agent_id="c", run_id="r")  # the echo after it
        mem.vectors.wait()
        q = KeywordEmbedder().embed(["paint"])[0]
        got = {
            m.id: s
            for m, s, _ in neighbour_context(
                mem.backend, mem.get([alone.id, asked.id]), Filter.for_memories(), q, 0.5
            )
        }
        assert abs(got[asked.id] - 1.0) < 1e-5  # its echo is no more relevant than itself
        assert abs(got[alone.id] - float(KeywordEmbedder().embed(["paint answer"])[0] @ q)) < 1e-5


def test_an_unrelated_query_still_finds_nothing(stores: Stores) -> None:
    with stores.open("m4.db", embedder=KeywordEmbedder()) as mem:
        _store(mem)
        # (words hashed to axes no stored word uses)
        for weight in (0.25, 0.0):
            cfg = RecallConfig(context_weight=weight)
            assert mem.recall("kangaroo volcano", agent_id="c", k=5, config=cfg) == []
