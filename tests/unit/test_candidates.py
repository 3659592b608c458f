"""A filter matched in the embedded store gives the memories that hold every value it
names, whichever of its index buckets have been worked out from the columns; a value
nobody asked for is not worked out (a walk of every memory's column) when the filter's
other values already narrow it to a few memories, as a duplicate check's content hash
does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded.buckets import MemoryBucket
from graphmem.models import Filter, Memory, NodeLabel
from graphmem.models.values import content_hash

pytestmark = pytest.mark.embedded("reads which of the embedded store's buckets are worked out")

AGENTS = [f"agent{i}" for i in range(6)]
TEXTS = [f"shared text number {i}" for i in range(10)]


def _store(tmp_path: Path) -> GraphMemory:
    mem = GraphMemory.open(str(tmp_path / "s.db"), embedder=None)
    # every text held by several agents, in several namespaces: a content hash alone
    # matches memories a filter on the agent must leave out
    mem.remember_many(
        [
            {"content": TEXTS[i % len(TEXTS)], "agent_id": AGENTS[i % 5], "namespace": f"ns{i % 2}"}
            for i in range(120)
        ]
    )
    return mem


def _bucket(mem: GraphMemory, field: str) -> MemoryBucket:
    bucket = mem.backend._index[(NodeLabel.MEMORY, field)]  # type: ignore[attr-defined]
    assert isinstance(bucket, MemoryBucket)
    return bucket


def _expected(mem: GraphMemory, equals: dict[str, Any]) -> set[str]:
    every = mem.backend.match(Memory, Filter(), limit=None)
    return {m.id for m in every if all(getattr(m, f) == v for f, v in equals.items())}


def _got(mem: GraphMemory, equals: dict[str, Any]) -> set[str]:
    return {m.id for m in mem.backend.match(Memory, Filter(equals=equals), limit=None)}


@pytest.mark.parametrize("text", [0, 3])
@pytest.mark.parametrize("agent", ["agent1", "agent4", "agent5"])
def test_a_hash_and_an_unasked_agent_match_what_the_memories_hold(
    tmp_path: Path, text: int, agent: str
) -> None:
    mem = _store(tmp_path)
    h = content_hash(TEXTS[text])
    equals = {"content_hash": h, "agent_id": agent, "namespace": "ns0"}
    assert not _bucket(mem, "agent_id").known(agent)
    assert _got(mem, equals) == _expected(mem, equals)
    # the agent's bucket was not walked for it: the hash narrowed to a few memories
    assert not _bucket(mem, "agent_id").known(agent)
    # a count answered by the buckets alone works it out, and agrees
    assert mem.backend.count(Filter(equals=equals)) == len(_expected(mem, equals))
    assert _got(mem, equals) == _expected(mem, equals)
    mem.close()


def test_an_agent_alone_is_worked_out_and_kept_up_to_date(tmp_path: Path) -> None:
    mem = _store(tmp_path)
    equals = {"agent_id": "agent2"}
    assert _got(mem, equals) == _expected(mem, equals)
    assert _bucket(mem, "agent_id").known("agent2")
    mem.remember_many([{"content": f"later {i}", "agent_id": "agent2"} for i in range(20)])
    assert _got(mem, equals) == _expected(mem, equals)
    assert len(_got(mem, equals)) == 24 + 20
    mem.close()


def test_a_single_remember_after_a_batch_leaves_its_agent_unasked(tmp_path: Path) -> None:
    mem = _store(tmp_path)
    mem.remember("a new text for agent three", agent_id="agent3")
    mem.remember(TEXTS[1], agent_id="agent3")  # a duplicate of memories of other agents
    assert not _bucket(mem, "agent_id").known("agent3")
    equals = {"agent_id": "agent3"}
    assert _got(mem, equals) == _expected(mem, equals)
    held = {m.content for m in mem.backend.match(Memory, Filter(equals=equals), limit=None)}
    assert {"a new text for agent three", TEXTS[1]} <= held
    mem.close()
