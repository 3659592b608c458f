"""Recall's substance share: an episodic memory's relevance scaled by how much it says."""

from __future__ import annotations

import pytest

from graphmem.config import RecallConfig
from graphmem.memory import GraphMemory
from tests.conftest import Stores


def _store(mem: GraphMemory) -> tuple[str, str]:
    # the bare reply matches the name as well as the account does (and is shorter, so
    # BM25 prefers it); only the account says anything about Melanie
    bare = mem.remember(
        "Caroline: thanks Melanie!", agent_id="c", run_id="s1", category="episodic"
    ).id
    told = mem.remember(
        "Melanie: signed up for a pottery class yesterday, clay is calming after work",
        agent_id="c",
        run_id="s2",
        category="episodic",
    ).id
    for i in range(6):  # other talk, so the name is not in every memory
        mem.remember(
            f"Caroline: the weather report number {i} says rain",
            agent_id="c",
            category="episodic",
        )
    return bare, told


def test_a_bare_acknowledgement_ranks_below_a_memory_that_says_something(stores: Stores) -> None:
    with stores.open("m1.db", embedder=None) as mem:
        bare, told = _store(mem)
        off = RecallConfig(substance=0.0)
        on = RecallConfig(substance=3.0)
        q = "what does Melanie enjoy?"
        without = [r.memory.id for r in mem.recall(q, agent_id="c", k=5, config=off)]
        assert without.index(bare) < without.index(told)  # what the share corrects
        assert all("substance" in r.breakdown for r in mem.recall(q, agent_id="c", k=5))
        got = mem.recall(q, agent_id="c", k=5, config=on)
        ranked = [r.memory.id for r in got]
        assert ranked.index(told) < ranked.index(bare)
        share = {r.memory.id: r.breakdown["substance"] for r in got}
        # relative to the largest share: the account (9 content terms: melanie, sign,
        # pottery, class, yesterday, clay, calm, after, work: 9 / 12) keeps all its
        # relevance, the reply (caroline, thank, melanie: 3 / 6, no more than its
        # coverage of the query's terms melanie, enjoy) (3 / 6) / (9 / 12) of it
        assert share[told] == max(share.values()) == 1.0
        assert share[bare] == pytest.approx((3 / 6) / (9 / 12))


def test_zero_leaves_the_ranking_alone(stores: Stores) -> None:
    with stores.open("m2.db", embedder=None) as mem:
        _store(mem)
        got = mem.recall("Melanie", agent_id="c", k=5, config=RecallConfig(substance=0.0))
        assert got and all("substance" not in r.breakdown for r in got)


@pytest.mark.parametrize("category", ["episodic", "semantic"])
def test_a_short_memory_that_says_all_the_query_asks_keeps_its_place(
    stores: Stores, category: str
) -> None:
    with stores.open("m3.db", embedder=None) as mem:
        short = mem.remember("release train friday", importance=1, category=category).id
        long = mem.remember(
            "the release of the new version is planned for one friday afternoon soon",
            importance=0.1,
            category=category,
        ).id
        for substance in (0.0, 8.0, 40.0):
            cfg = RecallConfig(substance=substance)
            got = mem.recall("release friday", k=2, config=cfg, touch=False)
            assert [r.memory.id for r in got] == [short, long]


def test_a_stated_fact_keeps_its_relevance_beside_long_turns(stores: Stores) -> None:
    # the demo's case: a short fact that covers one of the query's terms, beside turns of
    # talk that cover them all or say more; the share scales only the turns
    with stores.open("m4.db", embedder=None) as mem:
        fact = mem.remember("Carla, Alice's sister, is allergic to peanuts.").id
        turns = [
            "I'll avoid places that cook with peanuts for Carla.",
            "My sister Carla will join me; she is allergic to peanuts.",
            "We booked a hotel in Alfama for five nights, Carla is coming too.",
        ]
        for t in turns:
            mem.remember(t, run_id="s1", category="episodic")
        q = "What should we avoid cooking for Carla?"
        off = mem.recall(q, k=4, config=RecallConfig(substance=0.0), touch=False)
        on = mem.recall(q, k=4, touch=False)
        assert "substance" not in next(r for r in on if r.memory.id == fact).breakdown
        assert all("substance" in r.breakdown for r in on if r.memory.id != fact)
        rank_off = [r.memory.id for r in off].index(fact)
        rank_on = [r.memory.id for r in on].index(fact)
        assert rank_on <= rank_off and rank_on <= 1
