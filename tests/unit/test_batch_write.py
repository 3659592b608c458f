"""The batch write path's shortcuts keep its promises: the collector pause, edges built
without validation, run chaining checked with a count, and one boundary walk per batch."""

from __future__ import annotations

import gc
import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphmem import GraphMemory
from graphmem.backends.base import WriteBatch
from graphmem.backends.embedded import NetworkXBackend
from graphmem.errors import Conflict, InvalidInput
from graphmem.gcpause import gc_paused
from graphmem.models import Edge, EdgeType, Memory, NodeLabel, NodeRef, Run

pytestmark = pytest.mark.embedded("checks the embedded write path on its networkx graph")


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[GraphMemory]:
    with GraphMemory.open(str(tmp_path / "s.db"), embedder=None) as m:
        yield m


def _next_pairs(mem: GraphMemory, run_id: str) -> set[tuple[str, str]]:
    assert isinstance(mem.backend, NetworkXBackend)
    g = mem.backend.graph
    keys = {f"Memory:{m.id}" for m in mem.list(run_id=run_id, status=None, limit=1000)}
    return {
        (s[7:], d[7:])
        for s, d, t in g.edges(keys=True)
        if t == EdgeType.NEXT.value and s in keys and d in keys
    }


def test_an_open_leaves_its_state_in_the_oldest_generation_and_keeps_a_freeze(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "s.db")
    with GraphMemory.open(path, embedder=None) as m:
        m.remember_many([{"content": f"note {i}", "tags": ["t"]} for i in range(50)])
    again = NetworkXBackend(path)
    try:
        young = {id(o) for o in gc.get_objects(0) + gc.get_objects(1)}
        table = again._g._node
        states = [
            table.memories.keys,
            table.memories.content,
            *again._g._succ.values(),
            *table.dicts.values(),
        ]
        assert states and all(gc.is_tracked(d) for d in states[:5])
        assert not any(id(d) in young for d in states)
    finally:
        again.close()
    # the process's own frozen objects stay frozen (the collector lists no frozen object;
    # not a count: other threads may free frozen objects meanwhile)
    mine = [[i] for i in range(10)]
    gc.freeze()
    try:
        NetworkXBackend(path).close()
        listed = {id(o) for o in gc.get_objects()}
        assert not any(id(o) in listed for o in [mine, *mine])
    finally:
        gc.unfreeze()
    assert id(mine) in {id(o) for o in gc.get_objects()}


class _Cyclic:
    """A cycle's node that a weak reference can watch."""

    def __init__(self) -> None:
        self.me = self


def test_a_big_batch_leaves_its_objects_in_the_oldest_generation_and_no_caller_garbage(
    mem: GraphMemory,
) -> None:
    import weakref

    assert gc.isenabled()
    garbage = _Cyclic()
    watch = weakref.ref(garbage)
    del garbage  # cyclic garbage of the caller's, young when the batch begins
    made = mem.remember_many([{"content": f"note {i}", "tags": ["t"]} for i in range(100)])
    young = {id(o) for o in gc.get_objects(0) + gc.get_objects(1)}
    assert not any(id(m) in young for m in made)  # promoted: no young pass walks them
    assert any(o is made[0] for o in gc.get_objects(2))
    # collected before the batch's objects were promoted, not promoted with them
    assert watch() is None
    few = mem.remember_many([{"content": f"other {i}"} for i in range(3)])
    young = {id(o) for o in gc.get_objects(0) + gc.get_objects(1)}
    assert all(id(m) in young for m in few)  # a small batch is left to the collector


def test_a_big_batch_promotes_nothing_beside_a_freeze_or_a_disabled_collector(
    mem: GraphMemory,
) -> None:
    mine = [[i] for i in range(10)]
    gc.freeze()
    try:
        made = mem.remember_many([{"content": f"note {i}"} for i in range(100)])
        listed = {id(o) for o in gc.get_objects()}
        assert not any(id(o) in listed for o in [mine, *mine])  # still frozen
        assert id(made[0]) in {id(o) for o in gc.get_objects(0) + gc.get_objects(1)}
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        made = mem.remember_many([{"content": f"more {i}"} for i in range(100)])
        assert not gc.isenabled()
        assert id(made[0]) in {id(o) for o in gc.get_objects(0) + gc.get_objects(1)}
    finally:
        gc.enable()


def test_gc_pause_nests_across_threads_and_restores_the_collector() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    leave = threading.Event()
    seen: list[bool] = []

    def worker() -> None:
        with gc_paused():
            inside.set()
            leave.wait(5)
            seen.append(gc.isenabled())

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(5)
    with gc_paused(), gc_paused():
        assert not gc.isenabled()
    # the other thread still holds its pause: leaving ours must not resume collection
    assert not gc.isenabled()
    leave.set()
    t.join(5)
    assert seen == [False]
    assert gc.isenabled()


def test_gc_pause_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_trusted_edge_is_the_validated_edge() -> None:
    a, b = NodeRef(NodeLabel.MEMORY, "a"), NodeRef(NodeLabel.MEMORY, "b")
    trusted = Edge.trusted(EdgeType.NEXT, a, b, {})
    checked = Edge(type=EdgeType.NEXT, src=a, dst=b)
    assert trusted == checked
    assert trusted.key == checked.key
    assert trusted.model_dump() == checked.model_dump()
    assert trusted.model_copy(update={"props": {"x": 1}}).props == {"x": 1}


def test_runs_chain_across_batches_in_order(mem: GraphMemory) -> None:
    first = mem.remember_many([{"content": f"a{i}", "run_id": "r1"} for i in range(3)])
    second = mem.remember_many([{"content": f"b{i}", "run_id": "r1"} for i in range(2)])
    ids = [m.id for m in (*first, *second)]
    assert _next_pairs(mem, "r1") == set(itertools.pairwise(ids))


def test_a_batch_after_the_runs_last_memory_was_forgotten_chains_on_the_newest_left(
    mem: GraphMemory,
) -> None:
    first = mem.remember_many([{"content": f"a{i}", "run_id": "r1"} for i in range(3)])
    mem.forget(first[-1].id)
    [late] = mem.remember_many([{"content": "later", "run_id": "r1"}])
    pairs = _next_pairs(mem, "r1")
    assert (first[1].id, late.id) in pairs
    assert (first[0].id, first[1].id) in pairs


def test_events_get_consecutive_seqs_across_batches(mem: GraphMemory) -> None:
    mem.runs.start(run_id="r2")
    one = mem.runs.add_events("r2", [{"content": "e0"}, {"content": "e1"}])
    two = mem.runs.add_events("r2", [{"content": "e2"}])
    assert [m.seq for m in (*one, *two)] == [0, 1, 2]
    assert [m.seq for m in mem.runs.events("r2")] == [0, 1, 2]


def test_a_memory_cannot_follow_itself_in_its_run(mem: GraphMemory) -> None:
    [m] = mem.remember_many([{"content": "one", "run_id": "r3"}])
    with pytest.raises(InvalidInput, match="itself"):
        mem.writes.create([m], replace=True)


def test_bad_text_late_in_a_large_batch_is_refused_and_nothing_is_written(
    mem: GraphMemory,
) -> None:
    # wide items: the boundary's text walk stops before item 1400 (it is bounded), so the
    # batch's own validation must catch it
    items = [
        {"content": f"fine {i}", "run_id": f"r{i % 7}", "agent_id": "a", "tags": ["x", "y"]}
        for i in range(1500)
    ]
    items[1400]["content"] = "bad \ud800 text"
    with pytest.raises(InvalidInput, match="item 1400"):
        mem.remember_many(items)
    items[1400] = {"content": "fine", "tags": ["ok", "t\udc80"]}
    with pytest.raises(InvalidInput, match="item 1400"):
        mem.remember_many(items)
    assert mem.count() == 0
    assert mem.backend.get(Memory, ["x"]) == []


def test_the_change_log_stays_bounded_under_large_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    import graphmem.backends.embedded.journal as journal

    monkeypatch.setattr(journal, "_CHANGES_KEPT", 200)
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        other = GraphMemory.open(str(path), embedder=None)
        for b in range(12):  # 12 writes of 60 memories and their runs: ~780 changed keys
            mem.remember_many([{"content": f"m{b}-{i}", "run_id": f"r{i % 3}"} for i in range(60)])
        with sqlite3.connect(path) as db:
            rows = db.execute("SELECT seq, key FROM changes ORDER BY seq").fetchall()
        # a row a write; the log keeps the writes of the last 200 positions (changed keys),
        # pruned once a quarter of that has been logged since
        first, last = rows[0][0] - len(json.loads(rows[0][1])) + 1, rows[-1][0]
        assert last > 700
        assert 0 < last - first + 1 <= 200 + 50 + 63
        # a handle that fell behind the pruned log still sees every memory (a full reload)
        assert other.count() == 720
        other.close()


def test_edges_without_properties_stay_bare_when_another_gets_some(tmp_path: Path) -> None:
    """Edges without properties share their type's data dict in memory: giving one edge
    properties must not give them to the others, before or after a reopen."""
    path = str(tmp_path / "e.db")
    with GraphMemory.open(path, embedder=None) as m:
        a, b, c = (m.remember(f"memory {i}").id for i in range(3))
        ref = {i: NodeRef(NodeLabel.MEMORY, i) for i in (a, b, c)}
        bare = [Edge(type=EdgeType.DERIVED_FROM, src=ref[a], dst=ref[i]) for i in (b, c)]
        m.backend.write(WriteBatch(edges=bare))
    for reopen in range(2):
        with GraphMemory.open(path, embedder=None) as m:
            backend = m.backend
            assert isinstance(backend, NetworkXBackend)
            if reopen == 0:
                weighted = Edge(
                    type=EdgeType.DERIVED_FROM, src=ref[a], dst=ref[b], props={"weight": 0.5}
                )
                backend.write(WriteBatch(edges=[weighted]))
            sub = backend.expand([ref[a]], [EdgeType.DERIVED_FROM], direction="out")
            props = {e.dst.id: dict(e.props) for e in sub.edges}
            assert props == {b: {"weight": 0.5}, c: {}}


def test_a_run_head_sets_only_where_the_chain_ends_in_memory_and_in_the_file(
    tmp_path: Path,
) -> None:
    """A batch's run heads change a stored run's count and last memory and nothing else,
    the same in this handle and in a handle that reads the rows."""
    path = str(tmp_path / "h.db")
    with GraphMemory.open(path, embedder=None) as mem:
        mem.runs.start(run_id="r1", agent_id="a", metadata={"topic": "tea"})
        mem.runs.start(run_id="r2", agent_id="a")
        ended = mem.runs.end("r1")
        [m] = mem.remember_many([{"content": "one", "run_id": "r2", "agent_id": "a"}])
        mem.backend.write(
            WriteBatch(run_heads={"r1": (7, m.id), "r2": (0, None), "nope": (1, "x")})
        )
        one, two = mem.backend.get(Run, ["r1", "r2"])
        assert one == ended.model_copy(update={"event_count": 7, "last_event_id": m.id})
        assert (two.event_count, two.last_event_id) == (0, None)
        assert mem.backend.get(Run, ["nope"]) == []
        held = {k: dict(mem.backend.graph.nodes[f"Run:{k}"]) for k in ("r1", "r2")}
    fresh = NetworkXBackend(path)
    try:
        assert fresh.get(Run, ["r1", "r2"]) == [one, two]
        assert {k: dict(fresh.graph.nodes[f"Run:{k}"]) for k in ("r1", "r2")} == held
    finally:
        fresh.close()


def test_the_first_refused_new_memory_names_the_refusal(mem: GraphMemory) -> None:
    """``new_memories`` checked at once and, when one is refused, in turn: the first
    refused id decides between Conflict (it exists) and InvalidInput (not text), and
    nothing is written."""
    backend = mem.backend
    assert isinstance(backend, NetworkXBackend)
    [held] = mem.remember_many([{"content": "held", "agent_id": "a"}])
    before = backend.stats()
    new = Memory(content="new", agent_id="a")
    cases: list[tuple[list[object], type[Exception], str]] = [
        ([new.id, held.id, 7], Conflict, f"Memory:{held.id} must not exist"),
        ([new.id, 7, held.id], InvalidInput, "named by their ids, got 7"),
    ]
    for ids, error, says in cases:
        with pytest.raises(error, match=says):
            backend.write(WriteBatch(nodes=[new], new_memories=ids))  # type: ignore[arg-type]
        assert backend.stats() == before
        assert backend.get(Memory, [new.id]) == []
