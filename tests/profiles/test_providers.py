"""The provider registry and the hooks prefetch / on_pre_compact / on_memory_write."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.errors import ConfigError, InvalidInput
from graphmem.models import Memory
from graphmem.providers import REGISTRY, GraphMemoryProvider, ProviderRegistry
from tests.conftest import Stores


class Recorder:
    def __init__(self, answer: str | None = "from the recorder") -> None:
        self.answer = answer
        self.written: list[str] = []
        self.compacted: list[Sequence[Mapping[str, Any]]] = []
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def prefetch(self, query: str, **context: Any) -> str | None:
        self.asked.append((query, context))
        return self.answer

    def on_pre_compact(self, messages: Sequence[Mapping[str, Any]], **context: Any) -> None:
        self.compacted.append(messages)

    def on_memory_write(self, memories: Sequence[Memory]) -> None:
        self.written.extend(m.content for m in memories)


class Broken:
    def prefetch(self, query: str, **context: Any) -> str:
        raise RuntimeError("down")

    def on_memory_write(self, memories: Sequence[Memory]) -> None:
        raise RuntimeError("down")


@pytest.fixture
def mem(stores: Stores) -> Iterator[GraphMemory]:
    m = stores.open("m1.db", embedder=None)
    yield m
    m.close()


def test_registry_creates_by_name_and_names_the_choices() -> None:
    reg = ProviderRegistry()
    reg.register("rec", Recorder)
    assert reg.names() == ["rec"]
    assert isinstance(reg.create("rec", answer="x"), Recorder)
    with pytest.raises(InvalidInput, match="already registered"):
        reg.register("rec", Recorder)
    reg.register("rec", lambda: Recorder("y"), replace=True)
    assert reg.create("rec").answer == "y"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="rec"):
        reg.create("nope")
    reg.register("empty", object)
    with pytest.raises(ConfigError, match="none of the hooks"):
        reg.create("empty")
    assert reg.unregister("rec") and not reg.unregister("rec")
    assert "graphmem" in REGISTRY.names()


def test_on_memory_write_hears_every_committed_write(mem: GraphMemory) -> None:
    rec = mem.lifecycle.add_provider(Recorder())
    mem.remember("Alice prefers tea")
    mem.runs.add_event("r1", "user_message", "hello")
    assert rec.written == ["Alice prefers tea", "hello"]  # type: ignore[attr-defined]
    assert mem.lifecycle.remove_provider(rec)
    mem.remember("not heard")
    assert "not heard" not in rec.written  # type: ignore[attr-defined]


def test_a_failing_hook_never_fails_the_write_or_the_turn(mem: GraphMemory) -> None:
    mem.lifecycle.add_provider(Broken())
    rec = mem.lifecycle.add_provider(Recorder())
    m = mem.remember("still written")
    assert mem.get(m.id).content == "still written"
    assert mem.lifecycle.prefetch("anything", run_id="r1") == ["from the recorder"]
    assert rec.asked == [("anything", {"run_id": "r1"})]  # type: ignore[attr-defined]


def test_provider_without_hooks_is_refused(mem: GraphMemory) -> None:
    with pytest.raises(InvalidInput, match="at least one"):
        mem.lifecycle.add_provider(object())


def test_graphmem_provider_prefetches_context(mem: GraphMemory) -> None:
    mem.lifecycle.add_provider(REGISTRY.create("graphmem", memory=mem, max_tokens=500))
    mem.remember("Alice moved to Bergen last spring", agent_id="assistant")
    [block] = mem.lifecycle.prefetch("where does Alice live now", agent_id="assistant")
    assert "Bergen" in block and "untrusted" in block
    assert mem.lifecycle.prefetch("quantum chromodynamics lattice") == []


def test_graphmem_provider_keeps_what_compaction_drops(mem: GraphMemory) -> None:
    provider = GraphMemoryProvider(mem)
    mem.lifecycle.add_provider(provider)
    messages = [
        {"role": "user", "content": "I work at Equinor."},
        {"role": "assistant", "content": "Noted, Equinor it is."},
        {"role": "user", "content": ""},
    ]
    mem.lifecycle.on_pre_compact(messages, run_id="s1", agent_id="assistant")
    events = mem.runs.events("s1", event_types=["user_message", "agent_response"])
    assert [e.content for e in events] == ["I work at Equinor.", "Noted, Equinor it is."]
    assert [e.event_type for e in events] == ["user_message", "agent_response"]
    assert [f.content for f in mem.list(run_id="s1", category="semantic")] == [
        "User works at Equinor."
    ]
