"""The in-memory graph's dicts, in networkx's ``MultiDiGraph`` layout, without networkx.

The embedded store keeps its nodes and edges in the three dicts networkx documents for
``MultiDiGraph`` (``_node``, ``_succ``, ``_pred``) and fills them directly; what it needs
of the graph class beyond that is a handful of methods, given here. Importing networkx
costs a new process ~0.2 s (it loads all its algorithms), a third of a cold ``graphmem
recall``, so it is imported only when someone asks for the networkx view
(:meth:`Adjacency.as_networkx`, behind ``mem.graph``), which shares these dicts: live,
read-only, no copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from graphmem.backends.embedded.records import NodeTable

if TYPE_CHECKING:
    import networkx as nx

#: node key -> neighbour key -> edge key -> edge attribute dict
Adj = dict[str, dict[str, dict[str, dict[str, Any]]]]


class Adjacency:
    """A directed multigraph as networkx lays one out; edge keys are the edge types."""

    __slots__ = ("_node", "_pred", "_succ")

    def __init__(self) -> None:
        self._node = NodeTable()
        self._succ: Adj = {}
        self._pred: Adj = {}

    @property
    def nodes(self) -> NodeTable:
        """Node key -> its attributes (networkx's ``G.nodes[key]`` is that mapping)."""
        return self._node

    def __contains__(self, key: object) -> bool:
        return key in self._node

    def number_of_nodes(self) -> int:
        return len(self._node)

    def has_edge(self, src: str, dst: str, key: str) -> bool:
        return key in self._succ.get(src, {}).get(dst, {})

    def remove_edge(self, src: str, dst: str, key: str) -> None:
        """Remove one edge (KeyError if there is none). The pair's keyed dict is replaced,
        not edited: pairs of nodes may share one (see the embedded graph's ``_link``)."""
        keyed = self._succ[src][dst]
        if key not in keyed:
            raise KeyError(key)
        rest = {t: data for t, data in keyed.items() if t != key}
        if rest:
            self._succ[src][dst] = self._pred[dst][src] = rest
        else:
            del self._succ[src][dst]
            del self._pred[dst][src]

    def remove_node(self, key: str) -> None:
        """Remove a node and every edge at it (KeyError if there is none)."""
        del self._node[key]
        for dst in self._succ.pop(key):
            if dst != key:
                del self._pred[dst][key]
        for src in self._pred.pop(key):
            if src != key:
                del self._succ[src][key]

    def out_edges(
        self, key: str, keys: bool = True, data: bool = False
    ) -> Iterator[tuple[Any, ...]]:
        """``(key, dst, type)`` (``+ (attrs,)`` with ``data``) of each edge leaving ``key``;
        nothing for a node that is not there."""
        for dst, keyed in self._succ.get(key, {}).items():
            for etype, attrs in keyed.items():
                yield (key, dst, etype, attrs) if data else (key, dst, etype)

    def in_edges(
        self, key: str, keys: bool = True, data: bool = False
    ) -> Iterator[tuple[Any, ...]]:
        """``(src, key, type)`` (``+ (attrs,)`` with ``data``) of each edge arriving at
        ``key``; nothing for a node that is not there."""
        for src, keyed in self._pred.get(key, {}).items():
            for etype, attrs in keyed.items():
                yield (src, key, etype, attrs) if data else (src, key, etype)

    def edges(self, keys: bool = True, data: bool = False) -> Iterator[tuple[Any, ...]]:
        """Every edge, as :meth:`out_edges` gives them, node by node."""
        for key in self._succ:
            yield from self.out_edges(key, data=data)

    def as_networkx(self) -> nx.MultiDiGraph:
        """A read-only networkx view of this graph: the same dicts, so it shows later
        writes too."""
        import networkx as nx

        base = nx.MultiDiGraph()
        base._node = self._node
        base._succ = self._succ  # sets _adj too: networkx keeps them one dict
        base._pred = self._pred
        view: nx.MultiDiGraph = base.copy(as_view=True)
        return view
