"""New memories written column-wise (graphmem.backends.embedded.appends) leave the store the
general plan leaves: the same attributes, rows, index buckets, edges in the same order,
file rows, full-text rows and change log, for batches that append to runs, start runs,
make agents and tags, carry metadata, times the columns cannot hold and a second writer's
reload."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest

import graphmem.backends.embedded.backend as backend_mod
import graphmem.backends.embedded.graph as graph_mod
import graphmem.backends.embedded.journal as journal_mod
from graphmem import GraphMemory
from graphmem.backends.embedded import state_file
from graphmem.backends.embedded.appends import FRESH_MIN
from graphmem.backends.embedded.appends import fresh_memories as column_wise
from graphmem.backends.embedded.buckets import MemoryBucket
from graphmem.errors import GraphMemError
from graphmem.models import Memory

pytestmark = pytest.mark.embedded("compares the embedded store's in-memory state and its file")

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _items(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        item: dict[str, Any] = {
            "id": f"m{seed}-{i}",
            "content": " ".join(rng.choice("alpha beta gamma delta eps".split()) for _ in range(5)),
            "agent_id": f"agent{rng.randrange(3)}",
            "namespace": f"ns{rng.randrange(2)}",
            "tags": [f"t{rng.randrange(4)}" for _ in range(rng.randrange(3))],
            "importance": rng.random(),
            "created_at": T0 + timedelta(seconds=i),
        }
        if rng.random() < 0.8:
            item["run_id"] = f"run-{item['agent_id']}-{rng.randrange(4)}"
        if rng.random() < 0.2:
            item["metadata"] = {"k": rng.randrange(9), "nested": {"a": [1, 2]}}
        if rng.random() < 0.1:
            item["created_at"] = datetime(1960, 5, 1, tzinfo=UTC)  # before the columns' range
        if rng.random() < 0.1:
            item["expires_at"] = datetime(2030, 1, 1, tzinfo=timezone(timedelta(hours=2)))
        if rng.random() < 0.1:
            item["event_type"] = "turn"
        if rng.random() < 0.1:
            item["visibility"] = "org"
        out.append(item)
    return out


def _general(nodes: Any, held: Any, rid_of: Any, absent: Any = ()) -> tuple[None, Any]:
    return None, nodes


def _timeless(label: str, props: dict[str, Any]) -> dict[str, Any]:
    """A node's properties without the times of a node made now (an agent, a run, a tag
    the write created): those differ between two stores built one after the other."""
    if label == "Memory":
        return props
    return {k: v for k, v in props.items() if not isinstance(v, datetime) and "_at" not in k}


def _state(mem: GraphMemory, path: Path, *, with_asked: bool = False) -> dict[str, Any]:
    """Every part of the store, in comparable form; ``with_asked``: also the memory buckets'
    entries as writes kept them, before every value is asked for here."""
    b: Any = mem.backend
    g = b._g
    nodes = g._node
    out: dict[str, Any] = {
        "attrs": {k: _timeless(k.split(":")[0], dict(nodes.attrs(k))) for k in nodes},
        "rows": sorted(nodes.memories.row_of.items()),
        "dicts": sorted(nodes.dicts),
        "succ": {k: [(d, dict(v)) for d, v in g._succ[k].items()] for k in g._succ},
        "pred": {k: [(s, dict(v)) for s, v in g._pred[k].items()] for k in g._pred},
        # the nodes' order in the adjacency dicts (networkx's edge views walk it)
        "succ_order": list(g._succ),
        "pred_order": list(g._pred),
        # memory keys in the adjacency that are not the node table's own strings (a row's
        # key is one object, however many places hold it)
        "foreign": sorted(
            k
            for adj in (g._succ, g._pred)
            for u, nbrs in adj.items()
            for k in (u, *nbrs)
            if k.startswith("Memory:") and k is not nodes.own(k)
        ),
        "rid_of": dict(b._rid_of),
        "key_of": dict(b._key_of),
        "by_label": {str(k): set(v) for k, v in b._by_label.items()},
        "unvectored": set(b._unvectored),
    }
    index = {}
    asked = {}
    for (label, f), bucket in b._index.items():
        if isinstance(bucket, MemoryBucket):
            # what writes kept of it (the values asked for before them), then every value
            asked[f] = {
                v: {held} if isinstance(held, str) else set(held) for v, held in bucket.items()
            }
            for k in nodes:
                v = nodes[k].get(f) if nodes[k].get("label") == "Memory" else None
                for item in v if isinstance(v, tuple | list) else (v,):
                    bucket.get(item)
        index[(str(label), f)] = {
            v: ({held} if isinstance(held, str) else set(held)) for v, held in bucket.items()
        }
    out["index"] = index
    if with_asked:  # (asking for every value above changes it: the first call's only)
        out["asked"] = asked
    db = sqlite3.connect(path)
    out["file_nodes"] = [
        (rid, label, ident, _timeless(label, orjson.loads(props)))
        for rid, label, ident, props in db.execute("SELECT rid, label, id, props FROM nodes")
    ]
    out["file_json"] = [
        props
        for (props,) in db.execute("SELECT props FROM nodes WHERE label = 'Memory' ORDER BY rid")
    ]
    # the bare NEXT edges are held by row ids (see rows.SCHEMA), the others by keys
    out["file_edges"] = db.execute(
        "SELECT src, type, dst, props FROM edges UNION ALL "
        "SELECT s.label || ':' || s.id, 'NEXT', d.label || ':' || d.id, '{}' FROM next_edges "
        "JOIN nodes s ON s.rid = next_edges.src JOIN nodes d ON d.rid = next_edges.dst "
        "ORDER BY 1, 2, 3"
    ).fetchall()
    out["fts"] = db.execute("SELECT rowid, content FROM memory_fts ORDER BY rowid").fetchall()
    out["changes"] = sorted(db.execute("SELECT key FROM changes").fetchall())
    db.close()
    return out


def _build(path: Path, batches: list[list[dict[str, Any]]]) -> dict[str, Any]:
    with GraphMemory.open(path, embedder=None) as mem:
        for n, batch in enumerate(batches):
            mem.remember_many(batch)
            if n == 0:  # values asked for: the next batches' writes keep their entries
                mem.list(limit=None, agent_id="agent1", namespace="ns0", tags=["t2"])
                mem.list(limit=None, run_id="run-agent0-1")
            if n == 1:  # rows freed in the middle: the next batch's rows are not consecutive
                mem.forget(batch[3]["id"])
                mem.forget(batch[9]["id"])
        mem.remember_many(
            [
                {
                    "id": "single",
                    "content": "one more",
                    "agent_id": "agent1",
                    "run_id": "run-agent1-0",
                    "created_at": T0,
                }
            ]
        )
        state = _state(mem, path, with_asked=True)
        got = [m.model_dump() for m in mem.get([i["id"] for b in batches for i in b])]
        assert len(got) == sum(map(len, batches)) - 2
    with GraphMemory.open(path, embedder=None) as again:  # read back from the rows
        state["reopened"] = _state(again, path)["attrs"]
    state["models"] = got
    return state


def _same_both_ways(
    build: Callable[[Path], dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The state ``build`` leaves with new memories planned column-wise, checked equal,
    part by part, to the one it leaves through the general plan."""
    taken: list[int] = []

    def spied(nodes: Any, held: Any, rid_of: Any, absent: Any = ()) -> tuple[Any, Any]:
        fresh, rest = column_wise(nodes, held, rid_of, absent)
        taken.append(0 if fresh is None else len(fresh))
        return fresh, rest

    with monkeypatch.context() as m:
        m.setattr(backend_mod, "fresh_memories", spied)
        fast = build(tmp_path / "fast.db")
    with monkeypatch.context() as m:
        m.setattr(backend_mod, "fresh_memories", _general)
        slow = build(tmp_path / "slow.db")
    assert fast.keys() == slow.keys()
    for part in fast:
        assert fast[part] == slow[part], part
    assert not fast.get("foreign")
    fast["taken"] = taken  # how many new memories each write took column-wise
    return fast


def _batches() -> list[list[dict[str, Any]]]:
    return [_items(40, seed) for seed in range(5)]


def test_new_memories_leave_the_store_the_general_plan_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _same_both_ways(lambda p: _build(p, _batches()), tmp_path, monkeypatch)
    assert fast["taken"].count(40) == 5  # every batch column-wise, the single memory not
    assert 1 not in fast["taken"] and FRESH_MIN > 1
    assert fast["dicts"]  # the times the columns cannot hold were kept as dicts
    assert any(e[1] == "NEXT" for e in fast["file_edges"])


def test_batches_whose_endpoints_exist_are_linked_as_the_general_plan_links_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a run and one tag each (most batches), then tags and runs of every shape; the first
    # batch makes its endpoints, the others find them all (their links a column at a time)
    walked: list[bool] = []
    linked: list[bool] = []

    def walked_last(*a: Any) -> bool:
        walked.append(graph_mod._walked_last.__wrapped__(*a))  # type: ignore[attr-defined]
        return walked[-1]

    def link_next(*a: Any) -> bool:
        linked.append(graph_mod._link_next.__wrapped__(*a))  # type: ignore[attr-defined]
        return linked[-1]

    walked_last.__wrapped__ = graph_mod._walked_last  # type: ignore[attr-defined]
    link_next.__wrapped__ = graph_mod._link_next  # type: ignore[attr-defined]
    monkeypatch.setattr(graph_mod, "_walked_last", walked_last)
    monkeypatch.setattr(graph_mod, "_link_next", link_next)

    def batch(seed: int, shaped: bool) -> list[dict[str, Any]]:
        items = _items(30, seed)
        for i, item in enumerate(items):
            if not shaped:
                item["run_id"] = f"run-{item['agent_id']}-{i % 4}"
                item["tags"] = [f"t{i % 4}"]
            item.pop("metadata", None)
            item["created_at"] = T0 + timedelta(seconds=i)
            item.pop("expires_at", None)
        return items

    monkeypatch.setattr(journal_mod, "STATE_MIN_NODES", 20)

    def run(path: Path) -> dict[str, Any]:
        with GraphMemory.open(path, embedder=None) as mem:
            mem.remember_many(batch(0, False))
            mem.remember_many(batch(1, False))
        # read back from the state file (its memory keys not interned): the next batches
        # link to those memories, each through the key the node table holds
        assert state_file.file_of(path).exists()
        with GraphMemory.open(path, embedder=None) as mem:
            mem.remember_many([{**i, "tags": i["tags"][:1]} for i in batch(2, True)])
            mem.remember_many(batch(3, True))
            return _state(mem, path)

    _same_both_ways(run, tmp_path, monkeypatch)
    assert walked == [False, True, True, True]  # the first batch made its endpoints
    assert linked == [True] * 4  # every batch's edges are its run links


def test_a_batch_after_another_handles_write_is_the_general_plans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(path: Path) -> dict[str, Any]:
        with GraphMemory.open(path, embedder=None) as a, GraphMemory.open(path, embedder=None) as b:
            for seed in range(4):
                (a if seed % 2 else b).remember_many(_items(30, seed))
            a.count()  # a catches up with b's writes
            return _state(a, path)

    _same_both_ways(run, tmp_path, monkeypatch)


def test_a_memory_given_whole_with_an_id_that_exists_is_refused(tmp_path: Path) -> None:
    with GraphMemory.open(tmp_path / "s.db", embedder=None) as mem:
        mem.remember_many([{"id": "x", "content": "first"}])
        with pytest.raises(Exception) as e:
            mem.remember_many([{"id": "y", "content": "new"}, Memory(id="x", content="again")])
        assert type(e.value).__name__ == "Conflict"
        assert [m.content for m in mem.get(["x"])] == ["first"]
        assert mem.get(["y"]) == []


def test_endpoints_made_for_new_memories_are_the_general_plans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # written as given (no run chaining): the runs, agents and tags they name are made
    # by the store, a run from the fields of the last memory naming it
    def run(path: Path) -> dict[str, Any]:
        with GraphMemory.open(path, embedder=None) as mem:
            made = [
                Memory(
                    id=f"w{i}",
                    content=f"text {i}",
                    agent_id=f"a{i % 2}",
                    run_id="r1",
                    namespace=f"n{i % 3}",
                    tags=(f"x{i % 2}",),
                    created_at=T0,
                )
                for i in range(20)
            ]
            mem.writes.create(made, chain="off")
            return _state(mem, path)

    fast = _same_both_ways(run, tmp_path, monkeypatch)
    assert fast["taken"] == [20]
    assert fast["attrs"]["Run:r1"]["agent_id"] == "a1"  # memory w19's, the last naming it


_GOOD = {"content": "a good memory", "agent_id": "a", "run_id": "r", "tags": ["ok"]}
_NAIVE = datetime(2025, 1, 1)
#: one bad field each (the rest of the item good), and items that are not items at all
_BAD: list[Any] = [
    *({**_GOOD, "content": v} for v in ("", "   ", 5, "x\x00y", "\ud800", "x" * 100_001)),
    *({**_GOOD, "agent_id": v} for v in ("", " a", 5, "a\x01b", "\ud800")),
    *({**_GOOD, "run_id": v} for v in ("", 3.5)),
    {**_GOOD, "namespace": 7},
    *(
        {**_GOOD, "tags": v}
        for v in ("ok", ["Bad Tag!"], [5], [["x"]], [f"t{i}" for i in range(65)])
    ),
    {**_GOOD, "tags": ["ok", "no good"]},  # a good tag checked before, with a bad one
    *({**_GOOD, "importance": v} for v in (1.5, -0.1, "high", float("nan"))),
    {**_GOOD, "confidence": 2.0},
    {**_GOOD, "created_at": _NAIVE},
    {**_GOOD, "expires_at": _NAIVE},
    *({**_GOOD, f: "nope"} for f in ("category", "tier", "visibility", "status")),
    {**_GOOD, "event_type": "Bad Type"},
    *({**_GOOD, "metadata": v} for v in ({"k": float("inf")}, "text", {"k": "\ud800"})),
    {**_GOOD, "bogus": 1},
    *({**_GOOD, "id": v} for v in ("", "a\nb", 5)),
    {**_GOOD, "seq": -1},
    5,
    "a string",
    None,
]


@pytest.mark.parametrize("bad", _BAD, ids=[f"bad{i}" for i in range(len(_BAD))])
def test_a_bad_item_is_refused_alike_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: Any
) -> None:
    def run(path: Path) -> dict[str, Any]:
        with GraphMemory.open(path, embedder=None) as mem:
            mem.remember_many([{**_GOOD, "id": "first", "created_at": T0}])
            before = _state(mem, path)
            with pytest.raises(GraphMemError) as e:
                mem.remember_many([{**_GOOD, "id": "g1"}, bad, {**_GOOD, "id": "g2"}])
            after = _state(mem, path)
            assert after == before  # nothing written, in memory or in the file
            return {"error": (type(e.value), str(e.value))}

    _same_both_ways(run, tmp_path, monkeypatch)
