"""GraphMemStore against the real LangGraph package: the BaseStore API and a compiled graph."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph.store.base", reason="langgraph is not installed")

from langgraph.graph import START, StateGraph
from langgraph.store.base import BaseStore, GetOp, PutOp, SearchOp

from graphmem.integrations.langgraph import GraphMemStore
from graphmem.memory import GraphMemory
from tests.conftest import Stores


@pytest.fixture
def mem(stores: Stores) -> GraphMemory:
    return stores.open(embedder="hash")


@pytest.fixture
def store(mem: GraphMemory) -> GraphMemStore:
    return GraphMemStore(mem, agent_id="assistant")


def test_put_get_update_delete(store: GraphMemStore, mem: GraphMemory) -> None:
    ns = ("users", "alice")
    assert store.get(ns, "drink") is None
    store.put(ns, "drink", {"content": "Alice drinks green tea", "n": 1})
    item = store.get(ns, "drink")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (
        ns,
        "drink",
        {"content": "Alice drinks green tea", "n": 1},
    )
    store.put(ns, "drink", {"content": "Alice drinks coffee now", "n": 2})
    newer = store.get(ns, "drink")
    assert newer is not None and newer.value["n"] == 2
    assert newer.created_at == item.created_at and newer.updated_at > item.updated_at
    # the old value is a superseded version in graphmem, not lost
    current = mem.list(agent_id="assistant", namespace="users.alice")
    assert len(current) == 1
    assert [m.content for m in mem.history(current[0].id)] == [
        "Alice drinks green tea",
        "Alice drinks coffee now",
    ]
    store.delete(ns, "drink")
    assert store.get(ns, "drink") is None
    assert mem.count(agent_id="assistant", status=None) == 0
    store.delete(ns, "drink")  # deleting a missing key is a no-op


def test_same_text_under_two_keys_stays_two_items(store: GraphMemStore) -> None:
    store.put(("a",), "k1", {"content": "same words"})
    store.put(("a",), "k2", {"content": "same words"})
    assert sorted(i.key for i in store.search(("a",))) == ["k1", "k2"]


def test_search_by_prefix_query_filter_and_pages(store: GraphMemStore) -> None:
    store.put(("users", "alice"), "tea", {"content": "Alice drinks green tea", "kind": "pref"})
    store.put(("users", "alice"), "trip", {"content": "Alice flies to Lisbon", "kind": "plan"})
    store.put(("users", "bob"), "tea", {"content": "Bob drinks black tea", "kind": "pref"})
    store.put(("users2",), "x", {"content": "tea in another namespace tree"})
    assert {(i.namespace, i.key) for i in store.search(("users",))} == {
        (("users", "alice"), "tea"),
        (("users", "alice"), "trip"),
        (("users", "bob"), "tea"),
    }
    hits = store.search(("users",), query="who drinks tea?", limit=2)
    assert len(hits) == 2 and all("tea" in h.value["content"] for h in hits)
    assert hits[0].score is not None and hits[0].score >= hits[1].score  # type: ignore[operator]
    prefs = store.search(("users",), filter={"kind": "plan"})
    assert [i.key for i in prefs] == ["trip"]
    assert [i.key for i in store.search(("users",), filter={"kind": {"$ne": "pref"}})] == ["trip"]
    everything = store.search((), limit=10)
    assert len(everything) == 4
    page = store.search((), limit=2, offset=1)
    assert [i.key for i in page] == [i.key for i in everything[1:3]]
    with pytest.raises(ValueError, match="operator"):
        store.search(("users",), filter={"kind": {"$regex": "p"}})


def test_index_fields_decide_what_recall_sees(store: GraphMemStore) -> None:
    store.put(("docs",), "d1", {"title": "Quarterly taxes", "body": "due on the 15th"}, ["title"])
    store.put(("docs",), "d2", {"title": "Holiday", "body": "quarterly taxes mentioned here"})
    hits = store.search(("docs",), query="quarterly taxes", limit=1)
    assert hits[0].key in {"d1", "d2"}
    indexed = store.mem.list(agent_id="assistant", metadata={"lg_key": "d1"})[0]
    assert indexed.content == "Quarterly taxes"


def test_list_namespaces_prefix_suffix_depth(store: GraphMemStore) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "c", "f")]:
        store.put(ns, "k", {"content": "x " + ".".join(ns)})
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "c", "f")]
    assert len(store.list_namespaces(limit=2, offset=1)) == 2


def test_batch_runs_in_order_and_abatch_agrees(store: GraphMemStore) -> None:
    results = store.batch(
        [
            PutOp(("n",), "k", {"content": "first"}),
            GetOp(("n",), "k"),
            PutOp(("n",), "k", None),
            GetOp(("n",), "k"),
            SearchOp(("n",), None, 10, 0, None),
        ]
    )
    assert results[0] is None and results[1].value == {"content": "first"}  # type: ignore[union-attr]
    assert results[3] is None and results[4] == []

    async def run() -> list[Any]:
        await store.aput(("n",), "a", {"content": "async write"})
        return await store.abatch([GetOp(("n",), "a"), SearchOp(("n",), None, 10, 0, "async")])

    got, found = asyncio.run(run())
    assert got.value == {"content": "async write"} and [i.key for i in found] == ["a"]


def test_stores_of_two_agents_do_not_see_each_other(mem: GraphMemory) -> None:
    a, b = GraphMemStore(mem, agent_id="a"), GraphMemStore(mem, agent_id="b")
    a.put(("shared",), "k", {"content": "only for a"})
    assert b.get(("shared",), "k") is None and b.search(("shared",), query="only") == []
    assert b.list_namespaces() == []


class _State(TypedDict):
    question: str
    answer: str


def test_a_compiled_graph_uses_it_as_its_store(store: GraphMemStore) -> None:
    def remember(state: _State, *, store: BaseStore) -> dict[str, str]:
        store.put(("users", "alice"), "pref", {"content": "Alice is vegetarian"})
        return {}

    def answer(state: _State, *, store: BaseStore) -> dict[str, str]:
        hits = store.search(("users", "alice"), query=state["question"], limit=1)
        return {"answer": hits[0].value["content"] if hits else ""}

    graph = StateGraph(_State)
    graph.add_node("remember", remember)
    graph.add_node("answer", answer)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "answer")
    app = graph.compile(store=store)
    out = app.invoke({"question": "is alice vegetarian?", "answer": ""})
    assert out["answer"] == "Alice is vegetarian"
    assert store.mem.count(agent_id="assistant") == 1
