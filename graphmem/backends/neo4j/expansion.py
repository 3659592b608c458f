"""Recall's graph expansion in one statement, and the projections in which recall's
statements return memories (with or without the embedding, and each one's cosine to the
query as the server computes it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphmem.backends.neo4j.filters import compile_where, require_memory, where_clause
from graphmem.backends.neo4j.values import props_projection
from graphmem.models import EdgeType, Filter, NodeLabel

MEMORY_PROPS = props_projection("n", NodeLabel.MEMORY)
"""A memory's properties as the search statements return them (times as text)."""

LEAN_PROPS = props_projection("n", NodeLabel.MEMORY, lean=True)
"""The same without the embedding: recall's statements send the query vector instead and
return each memory's cosine to it (:data:`SIMILARITY`), so no embedding crosses the wire."""


def similarity(param: str = "vector") -> str:
    """A memory's cosine to the vector ``$<param>`` (the query's) as the server reports it
    (see :data:`COSINE_PROBE`); null without a comparable embedding. The embedding is read
    once (bound in a one-element list): each ``n.embedding`` reads the 384 floats from the
    store again (measured at 100,000 memories, load 6: 30 memories' cosines cost the server
    0.9 ms reading it three times, 0.25 ms once)."""
    return (
        f"[e IN [n.embedding] | CASE WHEN e IS NULL OR size(e) <> size(${param})\n"
        f"  THEN null ELSE vector.similarity.cosine(e, ${param}) END][0]"
    )


SIMILARITY = similarity()

COSINE_PROBE = "vector.similarity.cosine([1.0, 0.0], [-1.0, 0.0]) AS probe"
"""Returned with every vector score: 0.0 when the server reports cosine as (1 + cos) / 2 (the
documented normalisation), -1.0 if it ever reports the plain cosine."""


def compile_neighbours(
    flt: Filter,
    seeds: Sequence[str],
    *,
    link_types: Sequence[EdgeType],
    tag_limit: int,
    entity_hub_limit: int = 0,
    entity_limit: int = 8,
    similarity_to: Sequence[float] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Recall's graph expansion in one statement: per seed memory, the memories one
    ``link_types`` edge away (either direction) and at most ``tag_limit`` memories sharing a
    tag with it (the LIMIT is inside the per-seed subquery, so a Tag hub holding thousands of
    memories costs ``tag_limit`` rows, not thousands), and at most ``entity_limit``
    memories sharing with it an entity mentioned by 2..``entity_hub_limit`` memories (each
    credited to its rarest shared entity; 0 turns this off), all passing ``flt``. Returns
    rows ``seed, linked ([{type, props, sim}]), tagged ([{props, sim}]), entities ([{entity,
    props, sim}]), probe``; with ``similarity_to`` (the query vector) the memories come
    without their embedding and ``sim`` is each one's cosine to it (else null).
    """
    require_memory(flt, "recall expansion")
    clauses, params = compile_where(flt)
    types = sorted({EdgeType(t).value for t in link_types})
    # every node the subqueries reach is label-checked with labels(), not with a label
    # predicate: the planner then cannot start from an index seek over every memory that
    # passes the filter and join (a plan it picks for a Tag hub, or for a relationship type
    # no edge has yet); it walks from the seed and, where there is one, stops at the limit
    is_memory = "'Memory' IN labels(n)"
    link_where = where_clause([is_memory, "type(r) IN $types", *clauses]).replace("\n", "\n    ")
    tag_where = where_clause([is_memory, "n <> s", *clauses]).replace("\n", "\n    ")
    entity_where = where_clause(
        [
            "'Entity' IN labels(e)",
            "e.mention_count > 1",
            "e.mention_count <= $entity_hub_limit",
            is_memory,
            "n <> s",
            *clauses,
        ]
    ).replace("\n", "\n    ")
    lean = similarity_to is not None
    found = (
        f"props: {LEAN_PROPS}, sim: {SIMILARITY}".replace("\n", " ")
        if lean
        else f"props: {MEMORY_PROPS}, sim: null"
    )
    text = (
        "UNWIND $seeds AS seed\n"
        "MATCH (s:Memory {id: seed})\n"
        "RETURN seed,\n"
        "  COLLECT {\n"
        f"    MATCH (s)-[r:NEXT|DERIVED_FROM]-(n){link_where}\n"
        f"    RETURN {{type: type(r), {found}}}\n"
        "  } AS linked,\n"
        "  COLLECT {\n"
        f"    MATCH (s)-[:TAGGED]->()<-[:TAGGED]-(n){tag_where}\n"
        "    WITH DISTINCT n LIMIT $tag_limit\n"
        f"    RETURN {{{found}}}\n"
        "  } AS tagged,\n"
        "  COLLECT {\n"
        f"    MATCH (s)-[:MENTIONS]->(e)<-[:MENTIONS]-(n){entity_where}\n"
        "    WITH n, e ORDER BY e.mention_count, e.id\n"
        "    WITH n, head(collect(e)) AS e\n"
        "    ORDER BY e.mention_count, n.id LIMIT $entity_limit\n"
        f"    RETURN {{entity: e.name, {found}}}\n"
        "  } AS entities,\n"
        f"  {COSINE_PROBE}"
    )
    if lean:
        params["vector"] = list(similarity_to or ())
    return text, {
        **params,
        "seeds": list(seeds),
        "types": types,
        "tag_limit": tag_limit,
        "entity_hub_limit": entity_hub_limit,
        "entity_limit": entity_limit if entity_hub_limit > 1 else 0,
    }
