"""Batches large enough to be planned column-wise keep scope as single writes do: a
memory of another agent never joins a run it may not join (a new run or a stored one,
whether this handle wrote the run last or not), and what they store is read by exactly
the agents its visibility names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded.appends import FRESH_MIN
from graphmem.errors import AccessDenied, NotFound
from tests.unit.test_fresh_memories import _state

pytestmark = pytest.mark.embedded("scope of the embedded store's column-wise writes")

N = FRESH_MIN + 4


def _batch(run_id: str, agents: list[str], namespace: str = "default", **kw: Any) -> list[Any]:
    return [
        {
            "content": f"{run_id} note {i} by {agents[i % len(agents)]}",
            "agent_id": agents[i % len(agents)] if i >= N // 2 else agents[0],
            "run_id": run_id,
            "namespace": namespace,
            **kw,
        }
        for i in range(N)
    ]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[GraphMemory]:
    with GraphMemory.open(tmp_path / "s.db", embedder=None) as m:
        m.namespaces.create("team", owner="a", members=["b"])
        yield m


@pytest.mark.parametrize("stored", ["new", "written here last", "written by another handle"])
def test_a_batch_mixing_agents_into_one_run_is_refused_and_writes_nothing(
    mem: GraphMemory, tmp_path: Path, stored: str
) -> None:
    if stored != "new":
        writer = (
            mem
            if stored == "written here last"
            else GraphMemory.open(tmp_path / "s.db", embedder=None)
        )
        writer.remember_many(_batch("r", ["a"]))
        if writer is not mem:
            writer.close()
    mem.count()  # caught up with the other handle's write
    before = _state(mem, tmp_path / "s.db")
    for agents in (["a", "b"], ["b"], ["a", "a", "a", "c"]):
        if stored == "new" and agents == ["b"]:
            continue  # b may start the run
        with pytest.raises(AccessDenied):
            mem.remember_many(_batch("r", agents))
        if stored == "new":
            continue
        with pytest.raises(AccessDenied):
            mem.remember(f"one by {agents[-1]}", agent_id=agents[-1], run_id="r")
        if agents[0] == "a":
            continue
        with pytest.raises(AccessDenied):
            mem.runs.add_events("r", [{"event_type": "turn", "content": "x", "agent_id": "b"}])
    assert _state(mem, tmp_path / "s.db") == before


def test_a_shared_run_takes_members_only(mem: GraphMemory, tmp_path: Path) -> None:
    made = mem.remember_many(_batch("t", ["a", "b"], "team", visibility="shared"))
    assert len(made) == N and {m.agent_id for m in made} == {"a", "b"}
    before = _state(mem, tmp_path / "s.db")
    with pytest.raises(AccessDenied):
        mem.remember_many(_batch("t", ["a", "c"], "team"))
    with pytest.raises(AccessDenied):
        mem.remember_many(_batch("t2", ["b", "c"], "team"))
    assert _state(mem, tmp_path / "s.db") == before


@pytest.mark.parametrize("visibility", ["private", "shared", "org"])
def test_what_a_batch_stores_is_read_by_whom_its_visibility_names(
    mem: GraphMemory, tmp_path: Path, visibility: str
) -> None:
    made = mem.remember_many(_batch("v", ["a"], "team", visibility=visibility))
    ids = {m.id for m in made}
    readers = {"private": {"a"}, "shared": {"a", "b"}, "org": {"a", "b", "c"}}[visibility]
    for handle in (mem, GraphMemory.open(tmp_path / "s.db", embedder=None)):
        for agent in ("a", "b", "c"):
            listed = {m.id for m in handle.list(scope=agent, limit=None)}
            recalled = {r.memory.id for r in handle.recall("note", k=50, scope=agent)}
            want = ids if agent in readers else set()
            assert listed & ids == want and recalled & ids == want, (agent, visibility)
            assert handle.count(scope=agent, run_id="v") == len(want)
            for i in list(ids)[:3]:
                if agent in readers:
                    assert handle.get(i, scope=agent).id == i
                else:
                    with pytest.raises((NotFound, AccessDenied)):
                        handle.get(i, scope=agent)
        if handle is not mem:
            handle.close()
