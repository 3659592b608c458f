"""The write path: preconditions in the transaction, no forked chains, no undone forgets."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from graphmem import GraphMemory
from graphmem.backends.base import Expect, WriteBatch, spelled_out
from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.models import Edge, EdgeType, Memory, NodeLabel, NodeRef, RunStatus, Status
from tests.conftest import Stores
from tests.threads import run_threads


def _open(stores: Stores) -> GraphMemory:
    return stores.open("s.db", embedder=None)


def _active(history: list[Memory]) -> list[Memory]:
    return [m for m in history if m.status is Status.ACTIVE]


# -- the seam ------------------------------------------------------------------------------


def test_failed_precondition_writes_nothing(stores: Stores) -> None:
    with _open(stores) as mem:
        m = mem.remember("Alice lives in Oslo")
        other = m.evolve(id="other", content="something else", content_hash="")
        before = mem.backend.stats()
        with pytest.raises(Conflict, match="precondition"):
            mem.backend.write(
                WriteBatch(nodes=[other], expect=[Expect(m.ref, props={"status": Status.ARCHIVED})])
            )
        with pytest.raises(Conflict):
            mem.backend.write(WriteBatch(nodes=[other], expect=[Expect(m.ref, exists=False)]))
        with pytest.raises(Conflict):
            mem.backend.write(
                WriteBatch(nodes=[other], expect=[Expect(NodeRef(NodeLabel.MEMORY, "nope"))])
            )
        with pytest.raises(Conflict):
            mem.backend.write(
                WriteBatch(
                    nodes=[other],
                    expect=[
                        Expect(m.ref, incoming=(EdgeType.SUPERSEDES,), sources=frozenset({"x"}))
                    ],
                )
            )
        assert mem.backend.stats() == before
        assert mem.get(["other"]) == []
        mem.backend.write(
            WriteBatch(
                nodes=[other],
                expect=[
                    Expect(
                        m.ref,
                        props={"status": Status.ACTIVE, "content": m.content},
                        incoming=(EdgeType.SUPERSEDES,),
                        sources=frozenset(),
                    ),
                    Expect(other.ref, exists=False),
                ],
            )
        )
        assert mem.get("other").content == "something else"


def test_one_write_cannot_upsert_and_delete_the_same_node(stores: Stores) -> None:
    with stores.open("m1.db", embedder=None) as mem:
        m = mem.remember("x")
        with pytest.raises(InvalidInput):
            mem.backend.write(WriteBatch(nodes=[m], delete_nodes=[m.ref]))


def test_remember_never_overwrites_an_existing_id(stores: Stores) -> None:
    with stores.open("m2.db", embedder=None) as mem:
        m = mem.remember("the original")
        with pytest.raises(Conflict):
            mem.remember_many([{"id": m.id, "content": "an impostor"}])
        assert mem.get(m.id).content == "the original"


# -- finding 1: lost update ----------------------------------------------------------------


def test_stale_update_gets_conflict_and_the_chain_never_forks(stores: Stores) -> None:
    a, b = _open(stores), _open(stores)
    try:
        m = a.remember("Alice lives in Oslo")
        real_get = a.get

        def get_then_race(i: str) -> Memory:
            read = real_get(i)
            b.update(i, "Alice lives in Bergen")  # commits between a's read and a's write
            return read

        a.get = get_then_race  # type: ignore[method-assign]
        with pytest.raises(Conflict):
            a.update(m.id, "Alice lives in Paris")
        a.get = real_get  # type: ignore[method-assign]
        history = a.history(m.id)
        assert [h.content for h in _active(history)] == ["Alice lives in Bergen"]
        assert "Alice lives in Paris" not in [h.content for h in history]
        assert [h.content for h in _active(b.history(m.id))] == ["Alice lives in Bergen"]
    finally:
        a.close()
        b.close()


def test_eight_threads_updating_one_chain_leave_one_active_version(stores: Stores) -> None:
    with stores.open("m3.db", embedder=None) as mem:
        m = mem.remember("counter 0")
        wins: list[str] = []
        lock = threading.Lock()

        def worker(n: int) -> None:
            for j in range(15):
                try:
                    cur = mem.get(m.id, current=True)
                    new = mem.update(cur.id, f"counter {n}-{j}")
                    with lock:
                        wins.append(new.id)
                except (Conflict, NotFound):
                    pass  # lost the race: another thread's version is the current one

        run_threads(worker, [(n,) for n in range(8)])
        history = mem.history(m.id)
        assert len(_active(history)) == 1
        assert len(history) == len(wins) + 1  # every acknowledged version is in the chain
        # a linear chain: every version but the newest is superseded by exactly one
        g = mem.graph
        for h in history[:-1]:
            incoming = [
                u for u, _v, k in g.in_edges(h.ref.key, keys=True) if k == EdgeType.SUPERSEDES.value
            ]
            assert len(incoming) == 1, h.content


# -- finding 2: forget undone --------------------------------------------------------------


def test_update_racing_a_forget_never_brings_the_forgotten_text_back(stores: Stores) -> None:
    a, b = _open(stores), _open(stores)
    try:
        m = a.remember("my password is hunter2")
        real_get = a.get

        def get_then_forget(i: str) -> Memory:
            read = real_get(i)
            b.forget(i)
            return read

        a.get = get_then_forget  # type: ignore[method-assign]
        with pytest.raises(Conflict):
            a.update(m.id, "my password is (redacted)")
        a.get = real_get  # type: ignore[method-assign]
        assert a.list(status=None) == []
        assert b.list(status=None) == []
    finally:
        a.close()
        b.close()


def test_forget_replans_when_something_was_derived_meanwhile(stores: Stores) -> None:
    a, b = _open(stores), _open(stores)
    try:
        m = a.remember("my password is hunter2")
        real = a.writes.plan_forget
        calls = 0

        def plan_then_race(i: str, *, cascade: bool = True):  # type: ignore[no-untyped-def]
            nonlocal calls
            plan = real(i, cascade=cascade)
            calls += 1
            if calls == 1:  # a summary of the memory is written after the plan was made
                b.lifecycle.summarize([m.id])
            return plan

        a.writes.plan_forget = plan_then_race  # type: ignore[method-assign]
        report = a.forget(m.id)
        assert calls == 2
        assert len(report.deleted) == 2
        assert a.list(status=None) == [] and b.list(status=None) == []
    finally:
        a.close()
        b.close()


def test_archive_of_a_superseded_memory_is_refused_when_it_changed(stores: Stores) -> None:
    with stores.open("m4.db", embedder=None) as mem:
        m = mem.remember("Alice lives in Oslo")
        stale = mem.get(m.id)
        mem.update(m.id, "Alice lives in Bergen")
        with pytest.raises(Conflict):
            mem.writes.set_status([stale], Status.ARCHIVED, reason="test")
        assert mem.get(m.id).status is Status.SUPERSEDED


# -- scoped reads ----------------------------------------------------------------------------


def test_history_provenance_and_get_never_leak_another_namespace(stores: Stores) -> None:
    with stores.open("m5.db", embedder=None) as mem:
        mem.namespaces.create("secret", owner="alice")
        mem.namespaces.create("team", owner="alice", members=["bob"])
        v1 = mem.remember(
            "launch code 1234", agent_id="alice", namespace="secret", visibility="shared"
        )
        v2 = mem.update(v1.id, "we launch on Friday", namespace="team")
        assert [m.content for m in mem.history(v2.id, scope="bob")] == ["we launch on Friday"]
        assert mem.get(v2.id, scope="bob", current=True).id == v2.id
        with pytest.raises(NotFound):
            mem.get(v1.id, scope="bob")
        assert mem.get([v1.id, v2.id], scope="bob") == [mem.get(v2.id)]
        prov = mem.lifecycle.provenance(v2.id, scope="bob")
        assert [n.id for n in prov.nodes] == [v2.id] and prov.edges == ()
        assert [m.content for m in mem.history(v2.id, scope="alice")] == [
            "launch code 1234",
            "we launch on Friday",
        ]
        assert mem.count(scope="bob") == 1 and mem.count(scope="bob", status=None) == 1
        assert [m.id for m in mem.list(scope="bob", status=None)] == [v2.id]


@pytest.mark.embedded("durability is an option of the embedded store, which makes no file")
def test_a_misspelled_backend_option_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="durabilty"):
        GraphMemory.open(str(tmp_path / "s.db"), embedder=None, durabilty="full")
    assert not (tmp_path / "s.db").exists()
    with GraphMemory.open(str(tmp_path / "s.db"), embedder=None, durability="full") as mem:
        assert mem.remember("kept").content == "kept"


def test_forget_restores_only_what_no_surviving_memory_supersedes(stores: Stores) -> None:
    with stores.open("m6.db", embedder=None) as mem:
        old = mem.remember("the first draft of the plan")
        a = mem.remember("a second take on it")
        b = mem.remember("a third, independent rewrite")
        mem.writes.supersede([old.id], a.id, reason="moved")
        mem.writes.link(b.id, [old.id], pass_name="manual")
        mem.backend.write(
            WriteBatch(
                edges=[
                    mem.writes.backend.expand(  # b supersedes old too
                        [a.ref], [EdgeType.SUPERSEDES], direction="out"
                    )
                    .edges[0]
                    .model_copy(update={"src": b.ref})
                ]
            )
        )
        report = mem.forget(a.id, cascade=False)
        assert report.deleted == (a.id,) and report.restored == ()
        assert mem.get(old.id).status is Status.SUPERSEDED  # b still supersedes it
        report = mem.forget(b.id, cascade=False)
        assert report.restored == (old.id,)
        assert mem.get(old.id).status is Status.ACTIVE


def test_archive_then_restore_of_an_old_version_never_forks_the_chain(stores: Stores) -> None:
    with stores.open("m7.db", embedder=None) as mem:
        v1 = mem.remember("the plan is A")
        v2 = mem.update(v1.id, "the plan is B")
        mem.lifecycle.archive([v1.id])  # archiving an old version is allowed
        assert mem.get(v1.id).status is Status.ARCHIVED
        mem.lifecycle.restore([v1.id])  # it comes back as what it was
        assert mem.get(v1.id).status is Status.SUPERSEDED
        assert [m.id for m in mem.history(v2.id) if m.status is Status.ACTIVE] == [v2.id]
        with pytest.raises(Conflict):
            mem.writes.set_status([v1.id], "active")  # a superseded version is not restorable
        with pytest.raises(InvalidInput):
            mem.writes.set_status([v2.id], "superseded")  # only a new version supersedes
        assert [m.id for m in mem.history(v2.id) if m.status is Status.ACTIVE] == [v2.id]
        mem.lifecycle.archive([v2.id])
        mem.lifecycle.restore([v2.id])
        assert mem.get(v2.id).status is Status.ACTIVE and mem.get(v2.id).valid_to is None


def test_export_import_and_events_arguments_are_typed(stores: Stores) -> None:
    with stores.open("m8.db", embedder=None) as mem:
        mem.runs.add_event("r1", "user_message", "hello")
        with pytest.raises(InvalidInput):
            mem.runs.events("r1", limit=2.5)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            mem.transfer.export(5)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            mem.transfer.import_(5)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            mem.transfer.import_("x.jsonl", batch_size=0)
        assert [e.content for e in mem.runs.events("r1", limit=1)] == ["hello"]


def test_memories_of_a_run_form_one_chain_across_handles_and_threads(stores: Stores) -> None:
    a, b = _open(stores), _open(stores)
    try:
        first = a.remember("we met at the station", run_id="s1", reconcile="off")
        a.runs.add_event("s1", "user_message", "where are we going?")

        def writer(mem: GraphMemory, tag: str) -> None:
            for i in range(15):
                mem.remember(f"{tag} note {i}", run_id="s1", reconcile="off")

        run_threads(writer, [(a, "a1"), (a, "a2"), (b, "b1"), (b, "b2")])
        in_run = a.list(run_id="s1", status=None, limit=None)
        assert len(in_run) == 62
        g = a.graph
        nxt = [(u, v) for u, v, k in g.edges(keys=True) if k == EdgeType.NEXT.value]
        assert len(nxt) == 61  # one linear chain:
        assert len({u for u, _ in nxt}) == 61 == len({v for _, v in nxt})
        assert first.ref.key not in {v for _, v in nxt}  # it starts at the first
        run = a.runs.get("s1")
        assert run.event_count == 1  # only the event is an event
        assert [e.seq for e in a.runs.events("s1", event_types=["user_message"])] == [0]
    finally:
        a.close()
        b.close()


def test_a_precondition_on_a_run_holds_only_when_every_value_does(stores: Stores) -> None:
    """A run is held as its dict: each value is compared as held, an enum with its text,
    a missing field with None; one value that differs refuses the write."""
    with _open(stores) as mem:
        m = mem.remember("step one", run_id="r1", agent_id="a")
        ref = NodeRef(NodeLabel.RUN, "r1")
        other = m.evolve(id="other", content="something else", content_hash="", run_id=None)
        before = mem.backend.stats()
        for props in (
            {"last_event_id": "someone else"},
            {"last_event_id": None},
            {"agent_id": "b"},
            {"status": "ended"},
            {"user_id": "u"},
            {"agent_id": "a", "event_count": 7},
        ):
            with pytest.raises(Conflict, match="precondition"):
                mem.backend.write(WriteBatch(nodes=[other], expect=[Expect(ref, props=props)]))
        assert mem.backend.stats() == before
        assert mem.get(["other"]) == []
        held = {
            "event_count": 0,
            "last_event_id": m.id,
            "agent_id": "a",
            "namespace": "default",
            "status": RunStatus.RUNNING,
            "user_id": None,
        }
        mem.backend.write(WriteBatch(nodes=[other], expect=[Expect(ref, props=held)]))
        assert mem.get("other").content == "something else"


def test_a_batch_spelled_out_names_each_precondition_and_edge_in_its_place() -> None:
    """What a backend that checks and writes one by one (Neo4j) makes of a batch's
    ``new_memories`` and ``links``: the absent preconditions first, then the batch's own;
    the NEXT edges first, then the batch's own."""

    def ref(i: str) -> NodeRef:
        return NodeRef(NodeLabel.MEMORY, i)

    run = Expect(NodeRef(NodeLabel.RUN, "r"), props={"event_count": 1})
    derived = Edge(type=EdgeType.DERIVED_FROM, src=ref("b"), dst=ref("a"))
    batch = WriteBatch(
        expect=[run],
        edges=[derived],
        new_memories=["a", "b"],
        links=[("z", "a"), ("a", "b")],
        appends=[("r1", (3, "y", "ag", "ns"), "z"), ("r2", None, None)],
    )
    out = spelled_out(batch)
    state = {"event_count": 3, "last_event_id": "y", "agent_id": "ag", "namespace": "ns"}
    assert out.expect == [
        Expect(ref("a"), exists=False),
        Expect(ref("b"), exists=False),
        Expect(NodeRef(NodeLabel.RUN, "r1"), props=state),
        Expect(ref("z")),
        Expect(NodeRef(NodeLabel.RUN, "r2"), exists=False),
        run,
    ]
    assert out.edges == [
        Edge(type=EdgeType.NEXT, src=ref("z"), dst=ref("a")),
        Edge(type=EdgeType.NEXT, src=ref("a"), dst=ref("b")),
        derived,
    ]
    assert (out.new_memories, out.links, out.appends, out.nodes) == ((), (), (), ())
    plain = WriteBatch(expect=[run], edges=[derived])
    assert spelled_out(plain) is plain
    with pytest.raises(InvalidInput, match="itself"):
        spelled_out(WriteBatch(links=[("a", "a")]))
    for bad in (("r", None), ("r", (1, None, "a"), None), (7, None, None), ("r", None, 7)):
        with pytest.raises(InvalidInput, match="appends to"):
            spelled_out(WriteBatch(appends=[bad]))  # type: ignore[list-item]
