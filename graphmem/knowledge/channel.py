"""Recall through entities: the entity channel and multi-hop over shared entities.

Read-only functions over the :class:`~graphmem.backends.base.GraphBackend` seam (``get``,
``match``, ``expand``), called by :class:`graphmem.retrieval.Retriever`:

- :func:`entity_channel` — the entities the query names (its words and word pairs looked
  up among the normalised names of entities in the caller's scope) -> the memories that
  mention them, ranked by how many and how rare the named entities they mention are, then
  by similarity to the query. A question about "Melanie" and "pottery" ranks Melanie's
  pottery memories first, even when they share no other word with the question.
- :func:`shared_entity_neighbours` — bounded multi-hop: from the best candidates, through
  the rarer entities they mention (hubs mentioned by more than ``hub_limit`` memories are
  skipped), to other memories mentioning the same entity ("moved from my home country" ->
  "my home country, Sweden").

Both only *propose* memories: the caller re-checks every proposed memory against its own
filter (scope, status, time), so entities never widen what a caller may read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from graphmem.backends.base import GraphBackend
from graphmem.models import EdgeType, Entity, Filter, Memory, NodeLabel, NodeRef

from .extract import _NOT_NAMES, normalise
from .resolve import entity_id

__all__ = [
    "EntityHit",
    "Neighbour",
    "audiences_of",
    "entity_channel",
    "query_entities",
    "shared_entity_neighbours",
]

_WORD_RE = re.compile(r"[\w+#&'’-]+")
#: longest name looked up in a query, in words
MAX_NAME_WORDS = 4


@dataclass(frozen=True)
class EntityHit:
    """A memory proposed by the entity channel, and the entities that brought it."""

    memory: Memory
    score: float
    entities: tuple[str, ...]


@dataclass(frozen=True)
class Neighbour:
    """A memory that shares the entity ``entity`` with the candidate ``seed_id``."""

    memory: Memory
    seed_id: str
    entity: str


def audiences_of(flt: Filter) -> tuple[str, ...] | None:
    """The audiences whose entities a memory filter can reach, or None when the filter
    does not say (then entities are looked up by name in every audience)."""
    if "audience" in flt.equals:
        return (str(flt.equals["audience"]),)
    if "audience" in flt.any_of:
        return tuple(str(a) for a in flt.any_of["audience"])
    agents = _values(flt, "agent_id")
    if not agents:
        return None  # the private audiences of a namespace's members are not known here
    namespaces = _values(flt, "namespace")
    out = [f"agent:{a}" for a in agents] + [f"ns:{n}" for n in namespaces]
    return (*out, "org")


def _values(flt: Filter, name: str) -> list[str]:
    if name in flt.equals and flt.equals[name] is not None:
        return [str(flt.equals[name])]
    return [str(v) for v in flt.any_of.get(name, ())]


def _names_in(query: str) -> list[str]:
    words = [normalise(w) for w in _WORD_RE.findall(query)]
    words = [w for w in words if w]
    out: dict[str, None] = {}
    for n in range(1, MAX_NAME_WORDS + 1):
        for i in range(len(words) - n + 1):
            gram = words[i : i + n]
            if gram[0] in _NOT_NAMES or gram[-1] in _NOT_NAMES:
                continue
            out[" ".join(gram)] = None
    return list(out)


def query_entities(backend: GraphBackend, query: str, flt: Filter) -> list[Entity]:
    """The entities in the filter's scope whose normalised name the query contains."""
    names = _names_in(query)
    if not names:
        return []
    audiences = audiences_of(flt)
    if audiences is not None:
        ids = [entity_id(a, n) for a in audiences for n in names]
        found = backend.get(Entity, ids)
    else:
        found = backend.match(
            Entity, Filter(label=NodeLabel.ENTITY, any_of={"norm": tuple(names)}), limit=1000
        )
    return [e for e in found if isinstance(e, Entity)]


def _rarity(e: Entity) -> float:
    """Weight of an entity: 1 for one mention, falling with how many memories mention it."""
    return 1.0 / math.log2(1.0 + max(e.mention_count, 1))


def entity_channel(
    backend: GraphBackend,
    query: str,
    flt: Filter,
    qvec: np.ndarray | None,
    *,
    k: int,
    per_entity: int = 500,
    similarity_weight: float = 1.0,
    role_weights: Mapping[str, float] | None = None,
    hub_limit: int | None = None,
) -> list[EntityHit]:
    """Memories mentioning the entities the query names, best first (module docstring).

    ``hub_limit`` skips entities mentioned by more memories than that.
    Score = the summed rarity of the named entities a memory mentions, plus
    ``similarity_weight`` x its cosine similarity to ``qvec`` (unit vector) when given.
    Memories come back unchecked against ``flt`` beyond the entities' scope: callers
    re-check them (:class:`~graphmem.retrieval.Retriever` does)."""
    entities = query_entities(backend, query, flt)
    if hub_limit is not None:
        # an entity named by most memories (the user, the speaker) says little about which
        entities = [e for e in entities if e.mention_count <= hub_limit]
    if not entities:
        return []
    by_id = {e.id: e for e in entities}
    sub = backend.expand(
        [e.ref for e in entities],
        [EdgeType.MENTIONS],
        direction="in",
        depth=1,
        limit=len(entities) * (per_entity + 1),
    )
    memories = {n.id: n for n in sub.nodes if isinstance(n, Memory)}
    named: dict[str, list[Entity]] = {}
    weight: dict[str, float] = {}
    for edge in sub.edges:
        e = by_id.get(edge.dst.id)
        if e is None or edge.src.id not in memories:
            continue
        w = 1.0 if role_weights is None else role_weights.get(str(edge.props.get("role")), 0.0)
        if w <= 0:
            continue
        named.setdefault(edge.src.id, []).append(e)
        weight[edge.src.id] = weight.get(edge.src.id, 0.0) + w * _rarity(e)
    if not named:
        return []
    ids = list(named)
    score = np.array([weight[i] for i in ids], dtype=np.float64)
    if qvec is not None and similarity_weight > 0:
        sims = np.zeros(len(ids))
        for j, i in enumerate(ids):
            vec = memories[i].embedding
            if vec is not None and len(vec) == qvec.shape[0]:
                v = np.asarray(vec, dtype=np.float32)
                sims[j] = float(v @ qvec) / max(float(np.linalg.norm(v)), 1e-12)
        score = score + similarity_weight * sims
    order = np.argsort(-score, kind="stable")[:k]
    return [
        EntityHit(memories[ids[j]], float(score[j]), tuple(sorted(e.name for e in named[ids[j]])))
        for j in order
    ]


def shared_entity_neighbours(
    backend: GraphBackend,
    seeds: Sequence[Memory],
    *,
    hub_limit: int = 25,
    per_seed: int = 8,
    exclude: frozenset[str] = frozenset(),
) -> list[Neighbour]:
    """Memories sharing a rare entity with ``seeds`` (best seed first): one hop
    Memory -> Entity -> Memory over MENTIONS, skipping entities mentioned by more than
    ``hub_limit`` memories and those whose id is in ``exclude``."""
    if not seeds:
        return []
    rank = {m.id: i for i, m in enumerate(seeds)}
    sub = backend.expand(
        [NodeRef(NodeLabel.MEMORY, m.id) for m in seeds],
        [EdgeType.MENTIONS],
        direction="out",
        depth=1,
        limit=len(seeds) * 32 + 1,
    )
    ents = {
        n.id: n
        for n in sub.nodes
        if isinstance(n, Entity) and 1 < n.mention_count <= hub_limit and n.id not in exclude
    }
    if not ents:
        return []
    best_seed: dict[str, str] = {}
    for edge in sub.edges:
        if edge.dst.id in ents and edge.src.id in rank:
            cur = best_seed.get(edge.dst.id)
            if cur is None or rank[edge.src.id] < rank[cur]:
                best_seed[edge.dst.id] = edge.src.id
    hop = backend.expand(
        [ents[i].ref for i in best_seed],
        [EdgeType.MENTIONS],
        direction="in",
        depth=1,
        limit=len(best_seed) * (hub_limit + 1) + 1,
    )
    mems = {n.id: n for n in hop.nodes if isinstance(n, Memory)}
    out: dict[str, Neighbour] = {}
    taken: dict[str, int] = {}
    # rarest entity first, so a memory is credited to the most specific link
    for edge in sorted(
        hop.edges, key=lambda e: ents[e.dst.id].mention_count if e.dst.id in ents else 1 << 30
    ):
        m = mems.get(edge.src.id)
        e = ents.get(edge.dst.id)
        if m is None or e is None or m.id in rank or m.id in out:
            continue
        seed = best_seed[e.id]
        if taken.get(seed, 0) >= per_seed:
            continue
        taken[seed] = taken.get(seed, 0) + 1
        out[m.id] = Neighbour(m, seed, e.name)
    return sorted(out.values(), key=lambda n: rank[n.seed_id])
