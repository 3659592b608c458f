"""Recall's graph expansion in the embedded store's own process (``neighbours``) ranks
exactly as the generic expansion over ``expand``: the same memories, scores and
breakdowns, on generated stores with runs, tags, provenance links, entities and several
scopes, for the configurations that use the expansion."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

import pytest

from graphmem import GraphMemory
from graphmem.backends.base import RecallNeighbours
from graphmem.backends.embedded.backend import NetworkXBackend
from graphmem.config import RecallConfig
from graphmem.errors import InvalidInput, NotFound
from graphmem.models import Filter, RecallResult, utcnow
from graphmem.retrieval.retriever import Retriever

pytestmark = pytest.mark.embedded("recall's graph expansion over the in-process graph")

NAMES = "Alice Bob Carmen Dmitri Esther Farid Greta Hiro Ines Jonas".split()
WORDS = (
    "river stone lamp orchard violin harbour meadow copper lantern thistle painting "
    "sunset lake bakery bicycle garden museum concert recipe mountain"
).split()


class _Generic(NetworkXBackend):
    """The same store without the capability: recall expands over ``expand``."""

    neighbours = None  # type: ignore[assignment]


def _store(path: Path, seed: int) -> None:
    """Memories in runs (NEXT chains) of two agents and two namespaces, with tags,
    names (entities, the knowledge layer on), some forgotten, and provenance links."""
    rng = random.Random(seed)
    with GraphMemory.open(str(path), embedder="hash:64", knowledge=True) as mem:
        items = []
        for i in range(400):
            agent = f"a{i % 2}"
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
            items.append(
                {
                    "content": f"{rng.choice(NAMES)} and {rng.choice(NAMES)} talked about "
                    f"{words} ({i})",
                    "agent_id": agent,
                    "namespace": f"ns{rng.randrange(2)}",
                    "run_id": f"{agent}-run{rng.randrange(12)}",
                    "tags": sorted({f"t{rng.randrange(15)}" for _ in range(rng.randrange(3))}),
                }
            )
        ids = [m.id for m in mem.remember_many(items)]
        for _ in range(25):
            # one agent's memories (every other one), across its namespaces and runs: a
            # memory derives only from what its agent may read
            derived, *sources = rng.sample(ids[rng.randrange(2) :: 2], 4)
            mem.writes.link(derived, sources)
        for gone in rng.sample(ids, 20):
            with contextlib.suppress(NotFound):  # taken by an earlier forget's cascade
                mem.forget(gone)
        mem.vectors.wait(timeout=60)


#: cosines: the vector index scores a memory's row as recall scores its embedding, both in
#: float32, but a matrix-vector product's last bits depend on the matrix it is part of
_COSINES = {"similarity", "context", "context_near"}


def _key(results: list[RecallResult]) -> list[tuple[str, float, dict[str, float]]]:
    """Each result without its cosines (compared to 1e-6 apart)."""
    return [
        (
            r.memory.id,
            round(r.score, 9),
            {k: round(v, 9) for k, v in r.breakdown.items() if k not in _COSINES},
        )
        for r in results
    ]


def _cosines(results: list[RecallResult]) -> list[float]:
    return [r.breakdown.get(k, 9.0) for r in results for k in sorted(_COSINES)]


CONFIGS = [
    RecallConfig(),
    RecallConfig(expand_seeds=12, expand_tag_limit=3),
    RecallConfig(expand_entities=True, entity_weight=0.5, entity_hub_limit=6),
    RecallConfig(context_weight=0.25),
    RecallConfig(mmr=True, expand_derived=False),
    RecallConfig(expand_next=False, expand_derived=False, expand_tags=False),
]

FILTERS = [
    None,
    Filter.for_memories(agent_id="a1"),
    Filter.for_memories(namespace="ns0"),
    Filter.for_memories(status=None),
]


@pytest.mark.parametrize("seed", [1, 2])
def test_in_process_expansion_ranks_as_the_generic_one(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "s.db"
    _store(path, seed)
    fast, generic = NetworkXBackend(str(path)), _Generic(str(path))
    try:
        assert isinstance(fast, RecallNeighbours) and not isinstance(generic, RecallNeighbours)
        with GraphMemory.open(str(path), embedder="hash:64") as mem:
            embedder = mem.embedder
        one, other = Retriever(fast, embedder), Retriever(generic, embedder)
        rng = random.Random(seed)
        now = utcnow()
        compared = with_graph = 0
        for cfg in CONFIGS:
            for flt in FILTERS:
                for _ in range(6):
                    query = f"{rng.choice(NAMES)} {rng.choice(WORDS)} {rng.choice(WORDS)}"
                    got, want = (
                        r.recall(query, k=15, filter=flt, config=cfg, touch=False, now=now)
                        for r in (one, other)
                    )
                    assert _key(got) == _key(want), (cfg, flt, query)
                    assert _cosines(got) == pytest.approx(_cosines(want), abs=1e-6)
                    compared += 1
                    with_graph += any(k.startswith("graph_via_") for r in got for k in r.breakdown)
        # the expansion did contribute: the comparison is not of empty expansions
        assert compared == len(CONFIGS) * len(FILTERS) * 6 and with_graph > compared // 2
    finally:
        fast.close()
        generic.close()


def test_neighbours_keep_to_the_filter_and_refuse_negative_limits(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _store(path, 3)
    backend = NetworkXBackend(str(path))
    try:
        with GraphMemory.open(str(path), embedder="hash:64") as mem:
            some = [r.memory.id for r in mem.recall("Alice river", k=10, touch=False)]
        flt = Filter.for_memories(agent_id="a0")
        found = backend.neighbours(some, flt, entity_hub_limit=6)
        assert found and all(m.agent_id == "a0" for _seed, _via, m in found)
        assert {via for _s, via, _m in found} & {"NEXT", "tag"}
        sims: dict[str, float] = {}
        lean = backend.neighbours(some, flt, query_vector=[0.1] * 64, similarities=sims)
        assert all(m.embedding is None for _s, _v, m in lean)
        assert {m.id for _s, _v, m in lean} <= set(sims)
        with pytest.raises(InvalidInput):
            backend.neighbours(some, flt, tag_limit=-1)
        assert backend.neighbours([], flt) == []
    finally:
        backend.close()
