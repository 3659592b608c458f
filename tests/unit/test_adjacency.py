"""The embedded store's graph dicts (graphmem.backends.embedded.adjacency) behave as the
networkx MultiDiGraph they stand in for, and its networkx view is live and read-only."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from graphmem.backends.embedded.adjacency import Adjacency
from graphmem.backends.embedded.graph import _link


def _add(adj: Adjacency, ref: nx.MultiDiGraph, u: str, v: str, k: str) -> None:
    for g in (adj, ref):
        for n in (u, v):
            if n not in g._node:
                g._node[n] = {"id": n}
                g._succ[n] = {}
                g._pred[n] = {}
    _link(adj._succ, adj._pred, u, v, k, {"type": k})
    ref.add_edge(u, v, key=k, type=k)


def _same(adj: Adjacency, ref: nx.MultiDiGraph) -> None:
    assert sorted(adj.edges(keys=True, data=True)) == sorted(ref.edges(keys=True, data=True))
    assert adj.number_of_nodes() == ref.number_of_nodes()
    for n in [*ref.nodes, "absent"]:
        assert (n in adj) == (n in ref)
        if n in ref:
            assert adj.nodes[n] == ref.nodes[n]
        assert sorted(adj.out_edges(n, keys=True)) == sorted(ref.out_edges(n, keys=True))
        assert sorted(adj.in_edges(n, keys=True, data=True)) == sorted(
            ref.in_edges(n, keys=True, data=True)
        )
    assert adj._succ == dict(ref._succ) and adj._pred == dict(ref._pred)


def test_random_edits_match_networkx() -> None:
    rng = random.Random(7)
    names = [f"n{i}" for i in range(8)]
    adj, ref = Adjacency(), nx.MultiDiGraph()
    for _ in range(400):
        op = rng.random()
        u, v, k = rng.choice(names), rng.choice(names), rng.choice(["A", "B"])
        if op < 0.6:
            _add(adj, ref, u, v, k)
        elif op < 0.85:
            assert adj.has_edge(u, v, key=k) == ref.has_edge(u, v, key=k)
            if ref.has_edge(u, v, key=k):
                adj.remove_edge(u, v, key=k)
                ref.remove_edge(u, v, key=k)
            else:
                with pytest.raises(KeyError):
                    adj.remove_edge(u, v, key=k)
        elif u in ref:  # self-loops included: u == v is drawn now and then
            adj.remove_node(u)
            ref.remove_node(u)
        else:
            with pytest.raises(KeyError):
                adj.remove_node(u)
        _same(adj, ref)


def test_networkx_view_is_live_and_read_only() -> None:
    adj, ref = Adjacency(), nx.MultiDiGraph()
    _add(adj, ref, "a", "b", "A")
    view = adj.as_networkx()
    assert isinstance(view, nx.MultiDiGraph) and nx.is_frozen(view)
    assert list(view.edges(keys=True)) == [("a", "b", "A")]
    _add(adj, ref, "b", "c", "B")
    adj.remove_edge("a", "b", key="A")
    assert list(view.edges(keys=True, data=True)) == [("b", "c", "B", {"type": "B"})]
    assert dict(view.nodes(data=True)) == dict(ref.nodes(data=True))
    with pytest.raises(nx.NetworkXError):
        view.add_edge("x", "y")
