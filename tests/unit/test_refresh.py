"""Another process's commits reach this one: the in-memory graph after an incremental
refresh equals the graph loaded from the file."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded import NetworkXBackend
from graphmem.errors import Conflict, NotFound

pytestmark = pytest.mark.embedded("the embedded store's incremental refresh from its SQLite file")


def _state(b: NetworkXBackend) -> tuple[dict[str, Any], set[tuple[str, str, str]], set[str]]:
    g = b.graph
    nodes = {k: dict(v) for k, v in g.nodes(data=True)}
    edges = {(u, k, v) for u, v, k in g.edges(keys=True)}
    vecs = {k for k in nodes if b.vector_index is not None and k in b.vector_index}
    return nodes, edges, vecs


def test_incremental_refresh_matches_a_fresh_load(tmp_path: Path) -> None:
    p = str(tmp_path / "s.db")
    writer = GraphMemory.open(p, embedder=None)
    reader = GraphMemory.open(p, embedder=None)
    rng = random.Random(7)
    try:
        ids: list[str] = []
        for step in range(120):
            r = rng.random()
            if r < 0.45 or not ids:
                agent = rng.choice("ab")
                m = writer.remember(
                    f"note {step} about tea",
                    agent_id=agent,
                    tags=[rng.choice(["x", "y", "z"])],
                    # a run is its agent's: only it adds to it
                    run_id=rng.choice([None, "r1", "r2"] if agent == "a" else [None, "r3"]),
                )
                ids.append(m.id)
            elif r < 0.65:
                try:
                    ids.append(writer.update(rng.choice(ids), f"changed at {step}").id)
                except (Conflict, NotFound):
                    pass
            elif r < 0.75:
                try:  # a cascade may have taken it with an earlier forget
                    writer.forget(ids.pop(rng.randrange(len(ids))))
                except NotFound:
                    pass
            elif r < 0.85:
                writer.runs.add_event("r1", "user_message", f"event {step}", agent_id="a")
            elif r < 0.9:
                # a summary is of one scope: the last two of one agent
                found = writer.get(list(ids))
                live = [m.id for m in found if m.agent_id == found[-1].agent_id] if found else []
                if len(live) >= 2:
                    writer.lifecycle.summarize(live[-2:])
            else:
                writer.backend.touch([i for i in ids[-3:]], writer.writes.now())
                writer.backend.flush()  # type: ignore[attr-defined]
            if step % 7 == 0:
                reader.count()  # the reader catches up now and then, not after every write
        reader.count()
        fresh = NetworkXBackend(p)
        try:
            assert _state(reader.backend) == _state(fresh)  # type: ignore[arg-type]
            assert _state(writer.backend) == _state(fresh)  # type: ignore[arg-type]
        finally:
            fresh.close()
    finally:
        writer.close()
        reader.close()


def test_a_reader_sees_vectors_and_deletes_of_another_handle(tmp_path: Path) -> None:
    from graphmem.embeddings import HashEmbedder

    p = str(tmp_path / "s.db")
    with (
        GraphMemory.open(p, embedder=HashEmbedder(32)) as a,
        GraphMemory.open(p, embedder=HashEmbedder(32)) as b,
    ):
        m = a.remember("Alice prefers green tea")
        assert b.get(m.id).embedding is not None
        [hit] = b.recall("green tea", touch=False)
        assert hit.memory.id == m.id
        a.forget(m.id)
        assert b.get([m.id]) == [] and b.recall("green tea") == []
