"""One scope rule on every memory-producing path: what is made from memories (a merge, a
summary, a fact, a new version) is of their one scope, and memories of different scopes
(agent, namespace, visibility, user) are never combined; only a run's agent (or the members
of the run's shared namespace) adds to a run."""

from __future__ import annotations

import pytest

from graphmem.errors import AccessDenied, Conflict, InvalidInput
from graphmem.memory import GraphMemory
from graphmem.models import Memory
from graphmem.scoping import Scope, scope_of

FACT = "the deploy key for the staging cluster rotates every friday at noon"


def _recall_ids(mem: GraphMemory, agent: str, text: str) -> set[str]:
    return {r.memory.id for r in mem.recall(text, scope=Scope(agent_id=agent), k=20)}


def test_consolidation_never_merges_private_with_org_or_two_users(mem: GraphMemory) -> None:
    a = mem.remember(FACT, agent_id="alice")
    b = mem.remember(FACT + ".", agent_id="alice", visibility="org")
    u1 = mem.remember(FACT + "!", agent_id="alice", user_id="u1")
    u2 = mem.remember(FACT + "!!", agent_id="alice", user_id="u2")
    report = mem.lifecycle.consolidate()
    for g in report.groups:
        assert len({scope_of(mem.get(i)) for i in g.source_ids}) == 1, g
    for m in (a, b, u1, u2):
        assert mem.get(m.id).status.value == "active"


def test_consolidating_shared_memories_keeps_them_shared(mem: GraphMemory) -> None:
    mem.namespaces.create("team", owner="alice", members=["bob"])
    first = mem.remember(FACT, agent_id="alice", namespace="team", visibility="shared")
    mem.remember(FACT + ".", agent_id="alice", namespace="team", visibility="shared")
    assert first.id in _recall_ids(mem, "bob", "deploy key staging")
    report = mem.lifecycle.consolidate()
    assert report.merged_ids, "the two near-duplicates are merged"
    merged = mem.get(report.merged_ids[0])
    assert merged.visibility.value == "shared" and merged.namespace == "team"
    assert merged.id in _recall_ids(mem, "bob", "deploy key staging")


def test_consolidated_user_memories_keep_their_user(mem: GraphMemory) -> None:
    mem.remember(FACT, agent_id="alice", user_id="u1")
    mem.remember(FACT + ".", agent_id="alice", user_id="u1")
    report = mem.lifecycle.consolidate()
    [merged_id] = report.merged_ids
    assert mem.get(merged_id).metadata.get("user_id") == "u1"


def test_improve_resolves_contradictions_within_a_user_never_across_two(mem: GraphMemory) -> None:
    u1 = mem.remember("Alice lives in Oslo", agent_id="alice", user_id="u1", reconcile="off")
    u2 = mem.remember("Alice lives in Bergen", agent_id="alice", user_id="u2", reconcile="off")
    old = mem.remember("Bob lives in Oslo", agent_id="alice", user_id="u1", reconcile="off")
    new = mem.remember("Bob lives in Bergen", agent_id="alice", user_id="u1", reconcile="off")
    report = mem.lifecycle.improve()
    assert report.superseded_ids == (old.id,)  # the pass ran: one user's own contradiction
    assert mem.get(new.id).status.value == "active"
    assert mem.get(u1.id).status.value == "active" and mem.get(u2.id).status.value == "active"


def test_a_summary_of_two_scopes_is_refused_and_writes_nothing(mem: GraphMemory) -> None:
    a = mem.remember("alice's private note about the launch", agent_id="alice")
    b = mem.remember("bob's private note about the launch", agent_id="bob")
    before = mem.count(status=None)
    with pytest.raises(InvalidInput):
        mem.lifecycle.summarize([a.id, b.id])
    assert mem.count(status=None) == before


def test_a_summary_of_shared_memories_is_shared(mem: GraphMemory) -> None:
    mem.namespaces.create("team", owner="alice", members=["bob"])
    ms = [
        mem.remember(
            f"team note {i} about the launch",
            agent_id="alice",
            namespace="team",
            visibility="shared",
        )
        for i in range(3)
    ]
    summary = mem.lifecycle.summarize([m.id for m in ms])
    assert scope_of(summary) == scope_of(ms[0])
    assert summary.id in _recall_ids(mem, "bob", "launch")


def test_facts_extracted_from_a_users_turn_stay_with_that_user(mem: GraphMemory) -> None:
    turn = mem.remember("I live in Oslo and I work as a nurse", agent_id="alice", user_id="u1")
    report = mem.lifecycle.extract_facts(
        "I live in Oslo and I work as a nurse", source_ids=[turn.id], agent_id="alice"
    )
    assert report.created
    for f in report.created:
        assert scope_of(mem.get(f.id)) == scope_of(turn)


def test_an_update_with_new_metadata_keeps_the_user(mem: GraphMemory) -> None:
    m = mem.remember("prefers window seats", agent_id="alice", user_id="u1")
    v = mem.update(m.id, metadata={"source": "chat"})
    assert v.metadata.get("user_id") == "u1"
    with pytest.raises(InvalidInput):
        mem.update(v.id, metadata={"user_id": "u2"})


def test_a_version_cannot_be_made_from_another_scope(mem: GraphMemory) -> None:
    a = mem.remember("alice's note", agent_id="alice")
    b = mem.remember("bob's note", agent_id="bob")
    with pytest.raises(InvalidInput):
        mem.writes.supersede([b.id], a.id, reason="merge")
    assert mem.get(b.id).status.value == "active"


def test_another_agent_cannot_add_to_a_private_run(mem: GraphMemory) -> None:
    run = mem.runs.start(agent_id="alice")
    mem.remember("alice's step", agent_id="alice", run_id=run.id)
    with pytest.raises(AccessDenied):
        mem.remember("bob's secret", agent_id="bob", run_id=run.id)
    with pytest.raises(AccessDenied):
        mem.remember_many([{"content": "bob's other secret", "agent_id": "bob", "run_id": run.id}])
    assert [m.content for m in mem.list(run_id=run.id, status=None)] == ["alice's step"]
    report = mem.lifecycle.on_run_end(run.id)
    assert report is not None
    assert not [m for m in mem.list(agent_id="alice", status=None) if "bob" in m.content]


@pytest.mark.parametrize("verb", ["extract_facts", "on_turn_end"])
def test_facts_of_a_turn_cannot_be_added_to_another_agents_run(mem: GraphMemory, verb: str) -> None:
    """A fact is written with ``run_id`` through the derivation path, which once skipped
    the run's joining rule: alice's fact landed in bob's private run."""
    run = mem.runs.start(agent_id="bob")
    mem.runs.add_event(run.id, "user_message", "bob's own turn")
    before = [m.id for m in mem.list(run_id=run.id, status=None)]
    turn = "I live in Paris and I work at Acme"
    with pytest.raises(AccessDenied):
        if verb == "extract_facts":
            mem.lifecycle.extract_facts(turn, agent_id="alice", run_id=run.id)
        else:
            mem.lifecycle.on_turn_end(run.id, turn=turn, agent_id="alice", extract_facts=True)
    assert [m.id for m in mem.list(run_id=run.id, status=None)] == before
    assert not mem.list(agent_id="alice", status=None)
    # the run's own agent may
    facts = mem.lifecycle.extract_facts(turn, agent_id="bob", run_id=run.id)
    assert facts.created and all(f.run_id == run.id for f in facts.created)


def test_members_of_a_runs_namespace_may_add_to_it(mem: GraphMemory) -> None:
    mem.namespaces.create("team", owner="alice", members=["bob"])
    run = mem.runs.start(agent_id="alice", namespace="team")
    mem.remember("bob's step", agent_id="bob", run_id=run.id, namespace="team", visibility="shared")
    with pytest.raises(AccessDenied):
        mem.remember("carol's step", agent_id="carol", run_id=run.id)
    assert [m.content for m in mem.list(run_id=run.id)] == ["bob's step"]


def test_a_run_summary_is_one_per_scope(mem: GraphMemory) -> None:
    mem.namespaces.create("team", owner="alice", members=["bob"])
    run = mem.runs.start(agent_id="alice", namespace="team")
    for i in range(3):
        mem.remember(f"alice private step {i}", agent_id="alice", run_id=run.id, tier="short_term")
        mem.remember(
            f"bob shared step {i}",
            agent_id="bob",
            run_id=run.id,
            namespace="team",
            visibility="shared",
            tier="short_term",
        )
    mem.lifecycle.on_run_end(run.id)
    summaries = [m for m in mem.list(run_id=run.id) if m.category.value == "summary"]
    assert len(summaries) == 2
    for s in summaries:
        prov = mem.lifecycle.provenance(s.id)
        sources = [n for n in prov.nodes if isinstance(n, Memory) and n.id != s.id]
        assert sources and all(scope_of(n) == scope_of(s) for n in sources)


@pytest.mark.parametrize("how", ["remember_many", "supersede"])
def test_a_copied_memory_object_is_stored_with_the_scope_of_its_fields(
    mem: GraphMemory, how: str
) -> None:
    """A Memory made with pydantic's ``model_copy(update=...)`` skips validation and keeps
    the original's derived audience: an org memory copied as alice's private one was
    stored readable by every agent."""
    org = mem.remember("the office opens at nine", agent_id="alice", visibility="org")
    diary = org.model_copy(
        update={"id": "diary-1", "visibility": "private", "content": "alice's private diary"}
    )
    if how == "remember_many":
        [stored] = mem.remember_many([diary])
    else:
        mine = mem.remember("alice's old diary line", agent_id="alice")
        stored = mem.writes.supersede([mine.id], diary, reason="rewrite")
    assert stored.audience == "agent:alice"
    assert mem.get("diary-1").audience == "agent:alice"
    assert not _recall_ids(mem, "bob", "private diary")
    assert _recall_ids(mem, "alice", "private diary") == {"diary-1"}


@pytest.mark.parametrize("given", ["mapping", "memory object", "write path", "supersede"])
def test_a_given_seq_does_not_let_another_agent_into_a_run(mem: GraphMemory, given: str) -> None:
    """A memory that came with a ``seq`` was taken as already placed in its run, so the
    run's joining rule was never asked: bob's message went into alice's private run and
    her conversation."""
    run = mem.runs.start(agent_id="alice")
    mem.runs.add_event(run.id, "user_message", "alice's own turn")
    fields = {"content": "bob sneaks in", "agent_id": "bob", "run_id": run.id, "seq": 1}
    with pytest.raises(AccessDenied):
        if given == "mapping":
            mem.remember_many([{**fields, "event_type": "user_message"}])
        elif given == "memory object":
            mem.remember_many([Memory(**fields)])
        elif given == "write path":
            mem.writes.create([Memory(**fields)])
        else:  # a new version of bob's own memory, placed in alice's run
            own = mem.remember("bob's note", agent_id="bob")
            mem.writes.supersede([own.id], Memory(**fields), reason="moved")
    assert [e.content for e in mem.runs.events(run.id)] == ["alice's own turn"]
    assert "bob" not in mem.runs.conversation_context(run.id)


def test_a_seq_given_to_remember_many_is_the_write_paths_to_give(mem: GraphMemory) -> None:
    """The run's order is the write path's: a given ``seq`` made a second event at an
    existing place in the run."""
    run = mem.runs.start(agent_id="alice")
    mem.runs.add_event(run.id, "user_message", "first")
    [m] = mem.remember_many(
        [{"content": "second", "agent_id": "alice", "run_id": run.id, "seq": 0}]
    )
    mem.runs.add_event(run.id, "user_message", "third")
    seqs = [e.seq for e in mem.runs.events(run.id)]
    assert len(seqs) == len(set(seqs))
    assert m.seq != 0


def test_an_edited_memory_object_given_to_archive_or_replace_is_refused(mem: GraphMemory) -> None:
    """set_status and supersede wrote the caller's object back: a copy with edited content
    rewrote the stored memory in place (no new version), and one whose visibility was
    edited to a str raised AttributeError."""
    a = mem.remember("Alice likes tea", agent_id="alice")
    with pytest.raises(Conflict):
        mem.writes.set_status([a.model_copy(update={"content": "rewritten"})], "archived")
    got = mem.get(a.id)
    assert (got.content, got.status.value) == ("Alice likes tea", "active")
    c = mem.remember("Carol likes coffee", agent_id="alice")
    doctored = c.model_copy(update={"content": "Carol rewritten", "visibility": "org"})
    new = mem.writes.validate([{"content": "Carol likes tea now", "agent_id": "alice"}])[0]
    with pytest.raises(Conflict):
        mem.writes.supersede([doctored], new, reason="changed her mind")
    old = mem.get(c.id)
    assert (old.content, old.visibility.value, old.status.value) == (
        "Carol likes coffee",
        "private",
        "active",
    )
    assert not _recall_ids(mem, "bob", "Carol")
    mem.writes.set_status([mem.get(a.id)], "archived")  # as read: archived
    assert mem.get(a.id).status.value == "archived"


def _sources(mem: GraphMemory, memory_id: str) -> set[str]:
    return {e.dst.id for e in mem.lifecycle.provenance(memory_id, depth=1).edges}


def test_a_memory_derives_only_from_what_its_agent_may_read(mem: GraphMemory) -> None:
    """``writes.link`` took provenance from bob's private memory into alice's: bob's forget
    then deleted alice's memory over the DERIVED_FROM edge (and alice's memory claimed to
    come from content she may not read)."""
    secret = mem.remember("bob's private diagnosis", agent_id="bob")
    mem.namespaces.create("bobs-team", owner="bob")
    closed = mem.remember(
        "bob's team note", agent_id="bob", namespace="bobs-team", visibility="shared"
    )
    note = mem.remember("alice's note on the launch", agent_id="alice")
    own = mem.remember("alice's earlier note", agent_id="alice")
    for unreadable in (secret, closed):
        with pytest.raises(AccessDenied):
            mem.writes.link(note.id, [own.id, unreadable.id])
        assert not _sources(mem, note.id)  # nothing written, not even the readable source
    mem.forget(secret.id)
    assert mem.get(note.id).content == "alice's note on the launch"
    # what alice may read: her own memories, a namespace she is a member of, org memories
    mem.namespaces.create("team", owner="bob", members=["alice"])
    shared = mem.remember("the team's plan", agent_id="bob", namespace="team", visibility="shared")
    org = mem.remember("the office opens at nine", agent_id="bob", visibility="org")
    mem.writes.link(note.id, [own.id, shared.id, org.id])
    assert _sources(mem, note.id) == {own.id, shared.id, org.id}


def test_a_memory_of_another_agent_cannot_be_made_to_derive_from_a_private_one(
    mem: GraphMemory,
) -> None:
    """The rule is the derived memory's agent's: bob's memory cannot be linked to alice's
    private one either (alice's forget would delete it)."""
    mine = mem.remember("alice's private plan", agent_id="alice")
    theirs = mem.remember("bob's note", agent_id="bob")
    with pytest.raises(AccessDenied):
        mem.writes.link(theirs.id, [mine.id])
    assert mem.forget(mine.id).deleted == (mine.id,)
    assert mem.get(theirs.id).content == "bob's note"


@pytest.mark.parametrize("verb", ["extract_facts", "on_turn_end"])
def test_facts_are_the_calling_agents_and_only_from_what_it_may_read(
    mem: GraphMemory, verb: str
) -> None:
    """``extract_facts(source_ids=[bob's turn], agent_id="alice")`` wrote the facts as bob's
    private memories: alice wrote into bob's scope, from a turn she may not read."""
    turn = "I live in Paris and I work at Acme"
    bobs = mem.remember(turn, agent_id="bob")

    def extract(agent: str, source: str) -> tuple[Memory, ...]:
        if verb == "extract_facts":
            report = mem.lifecycle.extract_facts(turn, agent_id=agent, source_ids=[source])
        else:
            facts = mem.lifecycle.on_turn_end(
                turn=turn, agent_id=agent, source_ids=[source], extract_facts=True
            ).facts
            assert facts is not None
            report = facts
        return report.created

    before = mem.count(status=None)
    with pytest.raises(AccessDenied):
        extract("alice", bobs.id)
    assert mem.count(status=None) == before
    # a turn alice may read (her namespace's): the facts are hers, in the turn's scope
    mem.namespaces.create("team", owner="bob", members=["alice"])
    shared = mem.remember(turn, agent_id="bob", namespace="team", visibility="shared")
    facts = extract("alice", shared.id)
    assert facts
    for f in facts:
        stored = mem.get(f.id)
        assert stored.agent_id == "alice" and scope_of(stored) == scope_of(shared)
    # bob's own turn gives bob's facts, as before
    assert {mem.get(f.id).agent_id for f in extract("bob", bobs.id)} == {"bob"}
