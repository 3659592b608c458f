"""Recall's topic channel (graphmem.retrieval.topic): the query without the names that are
common in what it is near, searched by vector."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

from graphmem.config import RecallConfig
from graphmem.memory import GraphMemory
from graphmem.retrieval.topic import names, topic_query
from tests.conftest import Stores

# the person's name weighs most in a vector, as a name does in a small sentence model
_AXES = {"melanie": (0, 1.0), "activities": (1, 0.5), "swimming": (1, 0.5)}


def _vector(text: str, dim: int) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    for word in re.findall(r"[a-z]+", text.lower()):
        axis, weight = _AXES.get(word, (2 + zlib.crc32(word.encode()) % (dim - 2), 0.3))
        v[axis] += weight
    return v / max(float(np.linalg.norm(v)), 1e-12)


class NameHeavyEmbedder:
    """Vectors from keywords: "melanie" along one axis with weight 1, "activities" and
    "swimming" along a shared one with weight 0.5, every other word 0.3 along an axis of
    its own (hashed)."""

    name = "name-heavy"
    dim = 64

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray([_vector(t, self.dim) for t in texts], dtype=np.float32).reshape(
            len(texts), self.dim
        )


# bare replies that name her and say nothing about her: most of what her name is near
BARE_REPLIES = (
    "Caroline: thanks Melanie!",
    "Caroline: Melanie, you rock",
    "Caroline: good night Melanie",
    "Melanie: hi Caroline",
    "Caroline: miss you Melanie",
    "Caroline: Melanie, call me",
    "Melanie: sure thing",
    "Caroline: cheers Melanie",
)


def _store(mem: GraphMemory) -> tuple[str, str]:
    for i, text in enumerate(BARE_REPLIES):
        mem.remember(text, agent_id="c", run_id=f"s{i}", category="episodic")
    for i, text in enumerate(["the weather turned grey", "a parcel arrived at noon"]):
        mem.remember(text, agent_id="c", run_id=f"t{i}", category="episodic")
    # an answer that names her among many other words, and one that names no one; neither
    # shares a word with the question but the name
    told = mem.remember(
        "Melanie: going swimming with the kids every weekend at the lake near our old house",
        agent_id="c",
        run_id="a",
        category="episodic",
    ).id
    unnamed = mem.remember(
        "going swimming with the kids every weekend",
        agent_id="c",
        run_id="b",
        category="episodic",
    ).id
    mem.vectors.wait()
    return told, unnamed


def test_the_topic_query_finds_what_the_name_crowds_out(stores: Stores) -> None:
    with stores.open("m1.db", embedder=NameHeavyEmbedder()) as mem:
        told, unnamed = _store(mem)
        q = "What activities does Melanie enjoy?"
        # by the whole question the name decides: a bare reply that names her ranks above
        # the answer, and the answer that names no one is below the floor
        off = mem.recall(
            q, agent_id="c", k=20, config=RecallConfig(topic_weight=0.0, subject_weight=0.0)
        )
        ranked = [r.memory.id for r in off]
        assert ranked[0] != told and told in ranked and unnamed not in ranked
        assert all("topic_rank" not in r.breakdown for r in off)
        got = mem.recall(
            q, agent_id="c", k=20, config=RecallConfig(topic_weight=1.0, subject_weight=0.0)
        )
        ranked = [r.memory.id for r in got]
        assert ranked[0] == told
        # the unnamed answer came by the topic channel, its cosine to the topic query
        # ("What activities does enjoy?") its evidence
        found = got[ranked.index(unnamed)].breakdown
        assert found["topic_rank"] <= 2.0
        assert found["topic"] >= RecallConfig().min_similarity > found["similarity"]


def test_a_rare_name_is_the_topic_and_stays(stores: Stores) -> None:
    with stores.open("m2.db", embedder=NameHeavyEmbedder()) as mem:
        _store(mem)
        # "Lisbon" is in none of the memories: nothing to leave out, no channel
        got = mem.recall("trips to Lisbon", agent_id="c", k=3, config=RecallConfig(topic_weight=1))
        assert all("topic_rank" not in r.breakdown for r in got)


def test_topic_query() -> None:
    near = ["Melanie: hi", "Caroline: hey", "Melanie: I loved Charlotte's Web"]
    assert topic_query("Did Melanie read Charlotte's Web in May?", near, 0.5) == (
        "Did read Charlotte's Web in May?"
    )
    # a name in fewer than the share of the texts stays (Melanie is in 2 of 3)
    assert topic_query("Did Melanie read Charlotte's Web?", near, 0.9) is None
    assert topic_query("what about the weather?", near, 0.25) is None  # no name
    assert topic_query("Who is Melanie?", near, 0.25) is None  # nothing left to ask
    assert names("When did Jon meet Gina on Friday in March?") == {"Jon", "Gina"}
    # a capitalised word opening a sentence may be any word: not taken for a name
    assert names("Did Jon call? Gina said so, and Jon agreed.") == {"Jon"}
