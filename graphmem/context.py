"""The neighbour-context channel of recall: a memory read with the turns around it.

In a conversation the words of a question and its answer sit in neighbouring turns ("What
did you paint?" / "A sunset over the lake."), so a turn's own similarity to a query
undersells it. For the candidates the other channels found, this channel reads their
NEXT neighbours inside the same run (one graph call) and scores every memory seen as

    context(m) = cos(q, m) + neighbour_share * sum(max(0, cos(q, n) - cos(q, m)))

over the n next to m: a neighbour adds only the relevance the turn itself lacks, so a
turn repeated around itself (a question echoed by the tool call that follows it) gains
nothing. Memories outside any run keep their own similarity. Then it ranks them as a
channel fused like the others. Neighbours that no channel found join as candidates; the
relevance floor still applies to them: their own similarity or term coverage, or both
their context score and their best neighbour's own similarity reaching ``min_similarity``
(a turn next to relevant evidence, as graph expansion admits).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from graphmem.backends.base import GraphBackend, RecallNeighbours
from graphmem.models import EdgeType, Filter, Memory, NodeLabel, NodeRef, validated

__all__ = ["neighbour_context", "within"]


def _run_neighbours(
    backend: GraphBackend,
    pool: list[Memory],
    flt: Filter,
    qvec: np.ndarray,
    sims: dict[str, float] | None,
) -> dict[str, list[Memory]]:
    """Each pool memory's NEXT neighbours inside its own run, in both directions (with
    ``sims``, read as the pool was: without their vectors, their cosines added to it)."""
    by_id = {m.id: m for m in pool}
    out: dict[str, list[Memory]] = defaultdict(list)
    if isinstance(backend, RecallNeighbours):
        for seed_id, via, nb in backend.neighbours(
            list(by_id),
            flt,
            link_types=[EdgeType.NEXT],
            tag_limit=0,
            entity_hub_limit=0,
            query_vector=tuple(qvec.tolist()) if sims is not None else None,
            similarities=sims,
        ):
            if via == EdgeType.NEXT.value and nb.run_id == by_id[seed_id].run_id:
                out[seed_id].append(nb)
        return out
    sub = backend.expand(
        [NodeRef(NodeLabel.MEMORY, i) for i in by_id],
        [EdgeType.NEXT],
        direction="both",
        depth=1,
        limit=3 * len(by_id) + 16,
    )
    nodes = {n.id: n for n in sub.nodes if isinstance(n, Memory)}
    # a neighbour outside the caller's scope lends no relevance to one inside it (a
    # server backend filters inside its query)
    admitted = within(backend, flt, [i for i in nodes if i not in by_id])
    nodes = {i: n for i, n in nodes.items() if i in by_id or i in admitted}
    for e in sub.edges:
        if e.type is not EdgeType.NEXT:
            continue
        for a, b in ((e.src.id, e.dst.id), (e.dst.id, e.src.id)):
            node = nodes.get(b)
            if a in by_id and node is not None and node.run_id == by_id[a].run_id:
                out[a].append(node)
    return out


def within(backend: GraphBackend, flt: Filter, ids: list[str]) -> set[str]:
    """The ``ids`` of memories that match ``flt``."""
    allowed = set(ids) if flt.ids is None else set(ids) & set(flt.ids)
    if not allowed:
        return set()
    data = flt.model_dump()
    data["ids"] = tuple(allowed)
    scoped = validated(Filter, data)
    return {n.id for n in backend.match(Memory, scoped, limit=len(allowed))}


def neighbour_context(
    backend: GraphBackend,
    pool: Iterable[Memory],
    flt: Filter,
    qvec: np.ndarray,
    neighbour_share: float,
    sims: dict[str, float] | None = None,
) -> list[tuple[Memory, float, float]]:
    """(memory, context score, best neighbour's similarity) for the pool and its run
    neighbours, best first. ``sims``: the cosines to the query of memories read without
    their vector (a server backend keeps the embeddings and reports the cosines, see
    :class:`~graphmem.backends.base.RecallSearch`); the neighbours are then read the same
    way. Memories with neither a comparable vector nor a known cosine are left out; a
    neighbour outside ``flt`` is neither returned nor counted."""
    pool = list(pool)
    members = [m for m in pool if m.run_id is not None]
    links = _run_neighbours(backend, members, flt, qvec, sims) if members else {}
    seen: dict[str, Memory] = {m.id: m for m in pool}
    adj: dict[str, set[str]] = defaultdict(set)
    for a, nbs in links.items():
        for nb in nbs:
            seen.setdefault(nb.id, nb)
            adj[a].add(nb.id)
            adj[nb.id].add(a)
    dim = qvec.shape[0]
    own_vec = [m for m in seen.values() if m.embedding is not None and len(m.embedding) == dim]
    sim: dict[str, float] = {}
    if own_vec:
        mat = np.asarray([m.embedding for m in own_vec], dtype=np.float32)
        cos = (mat @ qvec) / np.maximum(np.linalg.norm(mat, axis=1), 1e-12)
        sim = {m.id: float(c) for m, c in zip(own_vec, cos, strict=True)}
    known = sims or {}
    sim.update({i: known[i] for i in seen if i not in sim and i in known})
    usable = [m for m in seen.values() if m.id in sim]
    scored = []
    for m in usable:
        own = sim[m.id]
        near = [sim.get(n, 0.0) for n in adj.get(m.id, ())]
        lift = sum(max(0.0, s - own) for s in near)
        scored.append((m, own + neighbour_share * lift, max(near, default=-1.0)))
    scored.sort(key=lambda t: (-t[1], t[0].id))
    return scored
