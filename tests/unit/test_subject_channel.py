"""Recall's subject channel: for a question asking for a list about a person common in
what it is near, that person's own memories ranked by the topic query
(graphmem.retrieval.topic, graphmem.retrieval.questions)."""

from __future__ import annotations

from graphmem.config import RecallConfig
from graphmem.memory import GraphMemory
from graphmem.retrieval.questions import is_list_question
from graphmem.retrieval.topic import subject
from tests.conftest import Stores
from tests.unit.test_topic_channel import BARE_REPLIES, NameHeavyEmbedder


def _store(mem: GraphMemory) -> dict[str, str]:
    ids = {}
    for i, text in enumerate(BARE_REPLIES):
        mem.remember(text, agent_id="c", run_id=f"s{i}", category="episodic")
    for key, text in (
        # her answer shares no word with the question but her name, and is long
        ("hers", "Melanie: swimming with the kids every weekend at the lake by our old house"),
        # the same topic in someone else's words, nearer the question by vector
        ("theirs", "Caroline: swimming is fun, Melanie"),
    ):
        ids[key] = mem.remember(text, agent_id="c", run_id=key, category="episodic").id
    mem.vectors.wait()
    return ids


def test_a_list_question_reaches_what_the_person_said(stores: Stores) -> None:
    with stores.open("s1.db", embedder=NameHeavyEmbedder()) as mem:
        ids = _store(mem)
        q = "What activities does Melanie enjoy?"
        off = mem.recall(q, agent_id="c", k=20, config=RecallConfig(subject_weight=0.0))
        ranked = [r.memory.id for r in off]
        # by the whole question the name decides: bare replies that name her come first
        assert ranked[0] != ids["hers"]
        assert all("subject_rank" not in r.breakdown for r in off)
        got = mem.recall(q, agent_id="c", k=20)  # the default: on
        ranked = [r.memory.id for r in got]
        assert ranked[0] == ids["hers"]
        by_id = {r.memory.id: r.breakdown for r in got}
        assert by_id[ids["hers"]]["subject_rank"] == 1.0
        # only memories she opens come by the channel
        assert all(
            r.memory.content.startswith("Melanie") for r in got if "subject_rank" in r.breakdown
        )


def test_a_question_about_one_thing_is_left_alone(stores: Stores) -> None:
    with stores.open("s2.db", embedder=NameHeavyEmbedder()) as mem:
        _store(mem)
        cfg = RecallConfig(subject_weight=1.0)
        got = mem.recall("Did Melanie go swimming at the lake?", agent_id="c", k=20, config=cfg)
        assert got and all("subject_rank" not in r.breakdown for r in got)
        # a list about a name that is rare among the hits: the name is the topic
        got = mem.recall("Which cities has Lisbon twinned with?", agent_id="c", k=20, config=cfg)
        assert all("subject_rank" not in r.breakdown for r in got)


def test_list_questions() -> None:
    for q in (
        "What sports does Tomas play?",
        "Which cities has Priya visited?",
        "What do Ana and Ben both like?",
        "What have they built in common?",
        "What are Ana's favourite films?",
        "Where has Ben camped?",
    ):
        assert is_list_question(q), q
    for q in (
        "What did Tomas eat on Friday?",
        "When did Ana move to Porto?",
        "Where does Ben work?",
        "Is this his bike?",
        "Who has to sign the lease?",
        "What is Priya's address?",
    ):
        assert not is_list_question(q), q


def test_subject() -> None:
    assert subject("Ana: I moved to Porto") == "Ana"
    assert subject("Ana's sister is a nurse") == "Ana"
    assert subject('"Ana" said so') == "Ana"
    assert subject("the deploy failed") is None
    assert subject("ANA: shouting") is None
    assert subject("") is None
