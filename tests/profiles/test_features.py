"""General features the profiles need, usable with any profile."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from graphmem import GraphMemory
from graphmem.config import RecallConfig, Settings
from graphmem.errors import InvalidInput
from graphmem.models import Memory
from graphmem.opening import open_memory
from graphmem.scoping import Scope
from tests.conftest import Stores

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


@pytest.fixture
def mem(stores: Stores) -> GraphMemory:
    m = stores.open("m1.db", embedder=None, clock=lambda: NOW)
    yield m
    m.close()


# -- min_relevance per call ----------------------------------------------------------------


def test_min_relevance_drops_results_below_it_per_call(mem: GraphMemory) -> None:
    mem.remember("the invoice total is 40 euros", importance=0.9)
    mem.remember("invoice numbers start at 1000", importance=0.1)
    every = mem.recall("invoice total", touch=False)
    assert len(every) == 2
    cut = (every[0].score + every[1].score) / 2
    kept = mem.recall("invoice total", touch=False, min_relevance=cut)
    assert [r.memory.id for r in kept] == [every[0].memory.id]
    assert mem.recall("invoice total", touch=False, min_relevance=every[0].score + 1) == []


@pytest.mark.parametrize("bad", [-0.1, float("nan"), "0.5", True])
def test_min_relevance_must_be_a_non_negative_number(mem: GraphMemory, bad: object) -> None:
    mem.remember("the invoice total is 40 euros")
    with pytest.raises(InvalidInput, match="min_relevance"):
        mem.recall("invoice", min_relevance=bad)  # type: ignore[arg-type]


def test_min_relevance_from_the_config(stores: Stores) -> None:
    cfg = RecallConfig(min_relevance=10.0)
    with stores.open("m2.db", embedder=None) as m:
        m.remember("the invoice total is 40 euros")
        assert m.recall("invoice", config=cfg) == []
        assert m.recall("invoice", config=cfg, min_relevance=0.0)


# -- personal boost --------------------------------------------------------------------------


def test_personal_boost_lifts_the_asking_agents_own_memories(stores: Stores) -> None:
    s = Settings.load(environ={}, recall={"personal_boost": 0.5})
    with stores.open("m3.db", settings=s, embedder=None) as m:
        theirs = m.remember("release train friday", agent_id="bob", importance=1)
        mine = m.remember(
            "the release of the new version is planned for one friday afternoon soon",
            agent_id="alice",
            importance=0.1,
        )
        plain = m.recall("release friday", touch=False)
        assert [h.memory.id for h in plain] == [theirs.id, mine.id]
        asked = m.recall("release friday", touch=False, scope=Scope(agent_id="alice"))
        assert asked[0].memory.id == mine.id
        assert asked[0].breakdown["personal"] > 0
    with stores.open("m4.db", embedder=None) as m:  # off by default
        m.remember("release notes are due friday", agent_id="alice")
        [hit] = m.recall("release friday", touch=False, scope="alice")
        assert "personal" not in hit.breakdown


def test_personal_boost_reorders_within_a_shared_scope(stores: Stores) -> None:
    s = Settings.load(environ={}, recall={"personal_boost": 0.5})
    with stores.open("m5.db", settings=s, embedder=None) as m:
        theirs = m.remember("release train friday", agent_id="bob", importance=1)
        mine = m.remember(
            "the release of the new version is planned for one friday afternoon soon",
            agent_id="alice",
            importance=0.1,
        )
        flt_hits = m.recall("release friday", touch=False)
        assert [h.memory.id for h in flt_hits] == [theirs.id, mine.id]
        cfg = m.settings.recall
        r = m._retriever().recall("release friday", config=cfg, touch=False, asking_agent="alice")
        assert [h.memory.id for h in r] == [mine.id, theirs.id]


# -- MMR without embeddings ----------------------------------------------------------------


def test_mmr_without_embeddings_uses_bigram_jaccard(mem: GraphMemory) -> None:
    a = mem.remember("deploy the api service to the staging cluster today", importance=0.9)
    b = mem.remember("deploy the api service to the staging cluster today please", importance=0.8)
    c = mem.remember("the staging cluster database is small", importance=0.1)
    plain = mem.recall("deploy staging cluster", k=2, touch=False)
    assert {r.memory.id for r in plain} == {a.id, b.id}
    diverse = mem.recall(
        "deploy staging cluster", k=2, touch=False, config=RecallConfig(mmr=True, mmr_lambda=0.5)
    )
    assert [r.memory.id for r in diverse] == [a.id, c.id]
    assert diverse[1].breakdown["mmr_rank"] == 2


# -- any JSON value as event content -----------------------------------------------------------


@pytest.mark.parametrize(
    "value", [{"tool": "search", "args": {"q": "oslo"}}, [1, 2, 3], 42, 2.5, True, None]
)
def test_event_content_may_be_any_json_value(mem: GraphMemory, value: object) -> None:
    ev = mem.runs.add_event("r1", "tool_call", value)
    [back] = mem.runs.events("r1")
    assert back.id == ev.id and back.value == value
    assert back.metadata.get("content_json") is True


def test_json_event_content_is_searchable_and_text_stays_text(mem: GraphMemory) -> None:
    mem.runs.add_event("r1", "tool_call", {"tool": "weather", "city": "Bergen"})
    text = mem.runs.add_event("r1", "user_message", "plain words")
    assert text.value == "plain words" and "content_json" not in text.metadata
    assert mem.recall("Bergen weather")[0].memory.value["city"] == "Bergen"


def test_non_json_event_content_is_rejected_and_nothing_is_written(mem: GraphMemory) -> None:
    with pytest.raises(InvalidInput, match="content"):
        mem.runs.add_event("r1", "tool_call", {"when": object()})
    assert mem.count(run_id="r1", status=None) == 0


# -- in-process decay sweep ----------------------------------------------------------------------


def _sweepers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "graphmem-maintenance"]


def test_in_process_sweep_is_off_by_default(stores: Stores) -> None:
    before = len(_sweepers())
    with stores.open("m6.db", settings=Settings.load(environ={}), embedder=None):
        assert len(_sweepers()) == before


def test_in_process_sweep_archives_expired_memories_and_stops_on_close(stores: Stores) -> None:
    before = len(_sweepers())
    clock_at = [NOW]
    s = Settings.load(
        environ={},
        profile="orka",
        maintenance={"in_process": True, "every": "0.05s"},
    )
    mem = stores.open("m7.db", settings=s, embedder=None, clock=lambda: clock_at[0])
    try:
        assert len(_sweepers()) == before + 1
        short = mem.runs.add_event("r1", "debug", "a debug line")
        clock_at[0] = NOW + timedelta(hours=2)
        deadline = time.monotonic() + 30
        while mem.get(short.id).status.value != "archived" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mem.get(short.id).status.value == "archived"
    finally:
        mem.close()
    assert len(_sweepers()) == before  # joined, no thread left behind


# -- key-addressed fleeting entries in recall(tiers=...) ------------------------------------------


def test_recall_searches_the_fleeting_tier_when_asked(mem: GraphMemory) -> None:
    pad = mem.runs.scratchpad("r1")
    pad.put("plan", "book the flight to Oslo")
    pad.put("budget", {"max": 900, "currency": "NOK"})
    stored = mem.remember("Oslo flights leave from gate 4", run_id="r1")
    assert [r.memory.id for r in mem.recall("Oslo flight", run_id="r1")] == [stored.id]
    both = mem.recall("Oslo flight", run_id="r1", tiers=["fleeting", "long_term"])
    assert [r.memory.metadata.get("key") for r in both] == ["plan", None]
    assert both[0].score >= both[1].score
    [note] = mem.recall("900 NOK", run_id="r1", tiers="fleeting")
    assert note.memory.value == {"max": 900, "currency": "NOK"}
    assert mem.count() == 1  # fleeting notes never reach the store
    pad.forget("plan")
    assert mem.recall("Oslo flight", run_id="r1", tiers="fleeting") == []


def test_fleeting_substring_match_finds_parts_of_words(stores: Stores) -> None:
    s = Settings.load(environ={}, profile="openagentflow")
    with stores.open("m8.db", settings=s, embedder=None) as m:
        m.runs.scratchpad().put("user:42:pref", "likes dark roast")
        [hit] = m.recall("user:42", tiers="fleeting")
        assert hit.memory.metadata["key"] == "user:42:pref"
    with stores.open("m9.db", embedder=None) as m:  # words by default
        m.runs.scratchpad().put("user:42:pref", "likes dark roast")
        assert m.recall("roa", tiers="fleeting") == []


@pytest.mark.parametrize("tiers", [["nope"], [], "fleet"])
def test_recall_tiers_are_checked(mem: GraphMemory, tiers: object) -> None:
    with pytest.raises(InvalidInput, match="tiers"):
        mem.recall("x", tiers=tiers)  # type: ignore[arg-type]


# -- dense content compressed in context -------------------------------------------------------


def test_context_compresses_dense_content_when_asked(stores: Stores) -> None:
    code = "\n".join(
        [f"def handler_{i}(event, context):\n    return route(event, table_{i})" for i in range(40)]
    )
    s = Settings.load(environ={}, profile="synthorg")
    with stores.open("m10.db", settings=s, embedder=None) as m:
        m.remember("routing code for the handlers:\n" + code)
        compact = m.context("handler routing code", max_tokens=4000)
    with stores.open("m11.db", embedder=None) as m:
        m.remember("routing code for the handlers:\n" + code)
        whole = m.context("handler routing code", max_tokens=4000)
    assert code in whole and code not in compact
    assert 'compressed="true"' in compact and "lines left out" in compact
    assert "def handler_0(event, context):" in compact  # extractive: lines kept verbatim
    assert len(compact) < len(whole) / 2


def test_prose_is_never_compressed(stores: Stores) -> None:
    prose = " ".join(["The team met on Monday and agreed on the plan for the launch."] * 20)
    s = Settings.load(environ={}, recall={"compress_dense": True})
    with stores.open("m12.db", settings=s, embedder=None) as m:
        m.remember(prose)
        assert prose in m.context("team launch plan", max_tokens=4000)


# -- per-turn fact extraction (Operator's "I moved to Bergen.") ----------------------------------


def test_turn_end_extracts_a_move_as_a_durable_fact(mem: GraphMemory) -> None:
    report = mem.lifecycle.on_turn_end("r1", turn="I moved to Bergen.", extract_facts=True)
    assert report.facts is not None
    assert [f.content for f in mem.list(category="semantic")] == ["User moved to Bergen."]
    none = mem.lifecycle.on_turn_end("r1", turn="I moved the chair.", extract_facts=True)
    assert none.facts is not None and mem.count(category="semantic") == 1


# -- memory switched off from the environment ------------------------------------------------------


def test_graphmem_enabled_false_opens_a_memory_that_stores_nothing() -> None:
    from graphmem.null import NullMemory

    s = Settings.load(environ={"GRAPHMEM_ENABLED": "false", "GRAPHMEM_URL": "memory://"})
    m = open_memory(s, embedder=None)
    assert isinstance(m, NullMemory)
    m.remember("nothing kept")
    assert not m.recall("nothing")
    m.close()
    on = open_memory(Settings.load(environ={"GRAPHMEM_URL": "memory://"}), embedder=None)
    assert isinstance(on, GraphMemory)
    on.close()


def test_null_memory_accepts_the_new_verbs_and_keeps_nothing() -> None:
    from graphmem.null import NullMemory
    from graphmem.protocol import LogAPI, MemoryAPI

    null = NullMemory()
    assert isinstance(null, MemoryAPI) and isinstance(null.log, LogAPI)
    assert null.log.set("k", 1) is True and null.log.get("k", "gone") == "gone"
    assert null.log.sadd("s", "a") == 1 and null.log.smembers("s") == set()
    assert null.relevance(Memory(content="x")) == 0.0
    with pytest.raises(InvalidInput):
        null.relevance("not a memory")  # type: ignore[arg-type]
