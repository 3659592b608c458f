"""Consolidation: exact pair finding, merges with provenance, dry runs, unmerge, LLM passes
written to the graph — on every backend through the GraphBackend seam."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphmem.backends.base import GraphBackend
from graphmem.config import ConsolidationConfig, Settings
from graphmem.consolidation import (
    brute_force_pairs,
    consolidate,
    find_similar_pairs,
    group_pairs,
    improve_memories,
    store_facts,
    summarize_into_memory,
    token_set,
    unmerge,
)
from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.llm import AnthropicLLM, OfflineLLM
from graphmem.memory import GraphMemory
from graphmem.models import MAX_CONTENT_CHARS, Edge, EdgeType, Memory, NodeLabel, Status, Tier
from tests.llm.anthropic_stub import StubAnthropic

T0 = datetime(2024, 1, 1, tzinfo=UTC)
NOW = datetime(2024, 6, 1, tzinfo=UTC)
NO_RECONCILE = Settings(reconcile={"mode": "off"})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# exact pair finding


def near_duplicate_corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(400)] + "the a of to in is and for on with".split()
    weights = [1.0 / (r + 1) for r in range(len(vocab))]
    texts: list[str] = []
    for _ in range(n):
        if texts and rng.random() < 0.3:  # a near-duplicate of an earlier memory
            words = rng.choice(texts).rstrip(".!").split()
            for _ in range(rng.randint(0, 3)):
                op = rng.random()
                if op < 0.5:
                    words[rng.randrange(len(words))] = rng.choice(vocab)
                elif op < 0.8:
                    words.insert(rng.randrange(len(words) + 1), rng.choice(vocab))
                elif len(words) > 1:
                    words.pop(rng.randrange(len(words)))
            text = " ".join(words)
            text = text.upper() if rng.random() < 0.1 else text.capitalize()
            texts.append(text + rng.choice([".", "!", "", "?!"]))
        else:
            texts.append(" ".join(rng.choices(vocab, weights, k=rng.randint(1, 30))))
    texts.append("... !!!")  # no token: never pairs
    return texts


def test_exactly_the_brute_force_pairs_on_thousands_of_memories() -> None:
    texts = near_duplicate_corpus(2000, seed=11)
    expected = brute_force_pairs(texts, 0.6)
    got = find_similar_pairs(texts, 0.6)
    assert len(expected) > 500  # the corpus really has near-duplicates
    assert got == expected
    # 0.7 (duplicates) is the subset of the 0.6 pairs that reach 0.7, checked exactly
    sets = [token_set(t) for t in texts]
    dup = [
        p for p in expected if 10 * len(sets[p[0]] & sets[p[1]]) >= 7 * len(sets[p[0]] | sets[p[1]])
    ]
    assert find_similar_pairs(texts, 0.7) == dup


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("abcdefghij"), max_size=8), min_size=2, max_size=40),
    st.sampled_from([0.3, 0.5, 0.6, 0.7, 0.75, 1.0]),
)
def test_property_same_pairs_as_brute_force(words: list[list[str]], t: float) -> None:
    texts = [" ".join(w) for w in words]
    assert find_similar_pairs(texts, t) == brute_force_pairs(texts, t)


def test_tokens_ignore_case_and_punctuation_and_threshold_is_inclusive() -> None:
    texts = [
        "Alice prefers tea.",
        "alice PREFERS tea!!!",
        "a b c d",
        "a b c e",  # 3/5 = 0.6 with the previous: included
        "a b c f g",  # 3/6 = 0.5 with "a b c d": excluded
    ]
    pairs = {(i, j): s for i, j, s in find_similar_pairs(texts, 0.6)}
    assert pairs[(0, 1)] == 1.0
    assert pairs[(2, 3)] == pytest.approx(0.6)
    assert (2, 4) not in pairs
    with pytest.raises(InvalidInput):
        find_similar_pairs(texts, 0.0)


def test_groups_are_transitive() -> None:
    assert group_pairs(6, [(0, 1, 0.7), (1, 3, 0.6), (4, 5, 0.9)]) == [[0, 1, 3], [4, 5]]


# ---------------------------------------------------------------------------------------
# merges through the backend


@pytest.fixture
def store(backend: GraphBackend) -> Iterator[GraphMemory]:
    # these tests build duplicates and contradictions on purpose
    m = GraphMemory(
        backend, embedder=None, owns_backend=False, settings=NO_RECONCILE, clock=lambda: NOW
    )
    yield m
    m.close()


def seed(mem: GraphMemory) -> dict[str, Memory]:
    out = {
        "a": mem.remember(
            "Alice prefers green tea in the morning.",
            agent_id="ann",
            importance=0.4,
            tags=["prefs"],
            created_at=T0,
        ),
        "b": mem.remember(
            "alice prefers green tea in the morning!",
            agent_id="ann",
            importance=0.8,
            tags=["drinks"],
            created_at=T0 + timedelta(days=2),
        ),
        "c": mem.remember(
            "Alice prefers green tea in the morning. She hates coffee.",
            agent_id="ann",
            importance=0.5,
            created_at=T0 + timedelta(days=5),
        ),
        "other_agent": mem.remember(
            "Alice prefers green tea in the morning.", agent_id="bob", created_at=T0
        ),
        "unrelated": mem.remember(
            "The build server runs on port 8080.", agent_id="ann", created_at=T0
        ),
    }
    mem.backend.touch([out["a"].id, out["c"].id], NOW)
    mem.backend.touch([out["a"].id], NOW)
    return out


def snapshot(backend: GraphBackend) -> tuple[list[dict[str, object]], list[tuple[str, ...]]]:
    nodes: list[dict[str, object]] = []
    edges: list[tuple[str, ...]] = []
    for ns, es in backend.scan():
        nodes += [n.to_props() for n in ns]
        edges += [e.key for e in es]
    return sorted(nodes, key=lambda p: str(p["id"])), sorted(edges)


def out_edges(backend: GraphBackend, node_id: str, etype: EdgeType) -> list[Edge]:
    from graphmem.models import NodeRef

    sub = backend.expand([NodeRef(NodeLabel.MEMORY, node_id)], [etype], direction="out")
    return [e for e in sub.edges if e.src.id == node_id and e.type is etype]


def test_dry_run_reports_exactly_what_the_merge_writes(store: GraphMemory) -> None:
    s = seed(store)
    before = snapshot(store.backend)
    plan = consolidate(store.writes, dry_run=True, now=NOW)
    assert snapshot(store.backend) == before  # nothing written
    [group] = plan.groups
    assert set(group.source_ids) == {s["a"].id, s["b"].id, s["c"].id}
    assert group.scope == {
        "agent_id": "ann",
        "namespace": "default",
        "visibility": "private",
        "user_id": None,
        "audience": "agent:ann",
    }
    assert group.kind == "duplicate"

    done = consolidate(store.writes, now=NOW)
    [applied] = done.groups
    assert applied.model_dump(exclude={"merged_id"}) == group.model_dump(exclude={"merged_id"})
    assert plan.superseded_ids == done.superseded_ids


def test_a_merge_too_long_for_one_memory_is_skipped_and_the_rest_merged(
    store: GraphMemory,
) -> None:
    """Two near-duplicates of 78,000 characters whose merge keeps every distinct sentence
    (156,000) made the merged memory's validation raise InvalidInput: consolidate, and with
    it every maintain / on_idle run, failed as long as the pair existed."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota".split()
    sentences = [
        " ".join(p).capitalize() + "."
        for p in itertools.islice(itertools.permutations(words), 3000)
    ]
    big = [store.remember(" ".join(sentences[i : i + 1500]), agent_id="ann") for i in (0, 1500)]
    assert all(len(m.content) > MAX_CONTENT_CHARS // 2 for m in big)
    s = seed(store)
    plan = consolidate(store.writes, dry_run=True, now=NOW)
    done = consolidate(store.writes, now=NOW)
    for report in (plan, done):
        too_long = [g for g in report.groups if set(g.source_ids) == {m.id for m in big}]
        assert [g.skipped for g in too_long] == [
            "the merged content would exceed 100000 characters"
        ]
        assert not set(report.superseded_ids) & {m.id for m in big}
    [merged_id] = done.merged_ids  # the seed's group is merged all the same
    assert set(done.superseded_ids) == {s["a"].id, s["b"].id, s["c"].id}
    assert store.get(merged_id).status is Status.ACTIVE
    assert all(store.get(m.id).status is Status.ACTIVE for m in big)


def test_merge_provenance_and_field_rules(store: GraphMemory) -> None:
    s = seed(store)
    report = consolidate(store.writes, now=NOW)
    [merged_id] = report.merged_ids
    merged = store.get(merged_id)
    sources = [s["a"], s["b"], s["c"]]
    assert merged.status is Status.ACTIVE and merged.agent_id == "ann"
    assert merged.importance == 0.8
    assert merged.access_count == 3  # a: 2, c: 1, b: 0
    assert set(merged.tags) == {"prefs", "drinks"}
    assert merged.valid_from == T0
    assert merged.last_accessed == NOW
    # deterministic content: every distinct sentence once
    assert merged.content == "Alice prefers green tea in the morning. She hates coffee."
    assert merged.metadata["pass"] == "consolidate"
    derived = out_edges(store.backend, merged_id, EdgeType.DERIVED_FROM)
    supers = out_edges(store.backend, merged_id, EdgeType.SUPERSEDES)
    assert {e.dst.id for e in derived} == {m.id for m in sources}
    assert {e.dst.id for e in supers} == {m.id for m in sources}
    assert all(e.props["pass"] == "consolidate" and e.props["at"] == NOW for e in derived)
    assert all(
        "consolidated duplicate" in e.props["reason"] and e.props["at"] == NOW for e in supers
    )
    for m in store.get([m.id for m in sources]):
        assert m.status is Status.SUPERSEDED and m.valid_to == NOW
        assert m.content  # kept, not deleted
    # other scopes and unrelated memories untouched
    assert store.get(s["other_agent"].id).status is Status.ACTIVE
    assert store.get(s["unrelated"].id).status is Status.ACTIVE
    # idempotent: nothing left to merge
    assert consolidate(store.writes, now=NOW).groups == ()


def test_unmerge_restores_sources_and_removes_the_merged_node(store: GraphMemory) -> None:
    s = seed(store)
    sources = {s["a"].id, s["b"].id, s["c"].id}
    before = {m.id: m for m in store.get(list(sources))}
    [merged_id] = consolidate(store.writes, now=NOW).merged_ids
    dry = unmerge(store.writes, merged_id, dry_run=True, now=NOW)
    assert set(dry.restored_ids) == sources
    assert store.get(merged_id).status is Status.ACTIVE

    report = unmerge(store.writes, merged_id, now=NOW)
    assert set(report.restored_ids) == sources
    with pytest.raises(NotFound):
        store.get(merged_id)
    for m in store.get(list(sources)):
        assert m.status is Status.ACTIVE and m.valid_to is None
        assert m.content == before[m.id].content and m.tags == before[m.id].tags
    # the same group is found again
    assert [set(g.source_ids) for g in consolidate(store.writes, dry_run=True).groups] == [sources]
    with pytest.raises(NotFound):
        unmerge(store.writes, merged_id)
    with pytest.raises(InvalidInput):
        unmerge(store.writes, s["unrelated"].id)


def test_unmerge_refuses_a_merge_that_was_replaced(store: GraphMemory) -> None:
    seed(store)
    [merged_id] = consolidate(store.writes, now=NOW).merged_ids
    store.update(merged_id, "Alice drinks green tea every morning; she hates coffee.")
    with pytest.raises(Conflict):
        unmerge(store.writes, merged_id)


def test_similar_group_content_from_llm_duplicates_deterministic(store: GraphMemory) -> None:
    store.remember("Deploys happen on Tuesday after the standup meeting.", agent_id="x")
    store.remember("Deploys happen on Tuesday after the standup meeting ends.", agent_id="x")
    store.remember("Backups run nightly at two in the morning.", agent_id="x")
    store.remember("backups run NIGHTLY at two in the morning!", agent_id="x")
    with StubAnthropic() as stub:
        llm = AnthropicLLM(base_url=stub.url, api_key="k", max_retries=0)
        cfg = ConsolidationConfig(merge_threshold=0.6, duplicate_threshold=0.95)
        plan = consolidate(store.writes, llm=llm, config=cfg, dry_run=True)
        assert stub.requests == []  # a dry run makes no LLM call
        kinds = sorted((g.kind, g.content_source, g.content is None) for g in plan.groups)
        assert kinds == [("duplicate", "deterministic", False), ("similar", "llm", True)]
        report = consolidate(store.writes, llm=llm, config=cfg)
        assert len(stub.requests) == 1
        contents = {g.kind: g.content for g in report.groups}
        assert contents["similar"] == "Synthesis of 2 memories."
        assert "Backups run nightly" in (contents["duplicate"] or "")
        assert llm.usage["summarize"].calls == 1


def test_scope_and_exclusions(store: GraphMemory) -> None:
    store.remember("Same words here exactly", agent_id="a", namespace="n1")
    store.remember("Same words here exactly", agent_id="a", namespace="n2")
    store.remember("Nightly report of the build farm", agent_id="a", category="summary")
    store.remember("Nightly report of the build farm", agent_id="a", category="summary")
    assert consolidate(store.writes, dry_run=True).groups == ()
    cfg = ConsolidationConfig(scope=("agent_id",), exclude_categories=())
    # a narrower config never widens the scope rule: the namespaces stay apart
    [group] = consolidate(store.writes, dry_run=True, config=cfg).groups
    assert group.category == "summary"


def test_write_path_makes_no_llm_call(backend: GraphBackend) -> None:
    with StubAnthropic() as stub:
        llm = AnthropicLLM(base_url=stub.url, api_key="k")
        mem = GraphMemory(backend, embedder=None, llm=llm, owns_backend=False)
        mem.remember("Alice prefers tea.")
        mem.remember_many([{"content": "Bob prefers coffee."}])
        assert stub.requests == []


# ---------------------------------------------------------------------------------------
# LLM passes written to the graph


def test_improve_writes_new_versions_and_contradictions(store: GraphMemory) -> None:
    old = store.remember("Alice lives in Oslo.", created_at=T0)
    new = store.remember("Alice lives in Berlin.", created_at=T0 + timedelta(days=3))
    noisy = store.remember("basically the build uses python 3.11", created_at=T0)
    dry = improve_memories(store.writes, OfflineLLM(), [old, new, noisy], dry_run=True, now=NOW)
    assert store.get(old.id).status is Status.ACTIVE  # dry run wrote nothing
    report = improve_memories(store.writes, OfflineLLM(), [old, new, noisy], now=NOW)
    assert set(report.superseded_ids) == set(dry.superseded_ids) == {old.id, noisy.id}
    [rewritten] = report.created
    assert rewritten.content == "The build uses python 3.11"
    assert store.get(noisy.id).status is Status.SUPERSEDED
    [sup] = out_edges(store.backend, new.id, EdgeType.SUPERSEDES)
    assert sup.dst.id == old.id and "berlin" in sup.props["reason"]
    # one valid_to rule for every pass: the old fact held until the newer one began
    assert store.get(old.id).valid_to == new.valid_from == T0 + timedelta(days=3)
    [df] = out_edges(store.backend, rewritten.id, EdgeType.DERIVED_FROM)
    assert df.dst.id == noisy.id and df.props["pass"] == "improve"
    assert [m.id for m in store.history(rewritten.id)] == [noisy.id, rewritten.id]


def test_extracted_facts_are_stored_once_with_provenance(store: GraphMemory) -> None:
    turn = store.remember(
        "I prefer aisle seats. Thanks!",
        agent_id="ann",
        event_type="user_message",
        category="episodic",
        tier="short_term",
    )
    r1 = store_facts(
        store.writes,
        OfflineLLM(),
        turn.content,
        agent_id="ann",
        speaker="Ann",
        source_ids=[turn.id],
        now=NOW,
    )
    [fact] = r1.created
    assert fact.content == "Ann prefers aisle seats." and fact.tier is Tier.LONG_TERM
    [df] = out_edges(store.backend, fact.id, EdgeType.DERIVED_FROM)
    assert df.dst.id == turn.id and df.props["pass"] == "extract_facts"
    r2 = store_facts(
        store.writes,
        OfflineLLM(),
        turn.content,
        agent_id="ann",
        speaker="Ann",
        source_ids=[turn.id],
        now=NOW,
    )
    assert r2.created == () and r2.skipped_existing == 1
    assert store_facts(store.writes, OfflineLLM(), "hello!", agent_id="ann").created == ()
    with pytest.raises(NotFound):
        store_facts(store.writes, OfflineLLM(), turn.content, source_ids=["nope"])


def test_summary_memory_is_derived_from_its_sources(store: GraphMemory) -> None:
    a = store.remember("The migration failed at 10:00.", run_id="r1")
    b = store.remember("The migration was retried and succeeded at 11:00.", run_id="r1")
    summary = summarize_into_memory(store.writes, OfflineLLM(), [a, b], purpose="run", now=NOW)
    assert summary.category.value == "summary" and summary.run_id == "r1"
    assert {e.dst.id for e in out_edges(store.backend, summary.id, EdgeType.DERIVED_FROM)} == {
        a.id,
        b.id,
    }
    assert store.get(a.id).status is Status.ACTIVE  # sources are unchanged
