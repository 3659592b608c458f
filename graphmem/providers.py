"""Memory providers and their hooks: what an agent loop calls around a turn.

A provider is any object with some of three hooks (each optional):

- ``prefetch(query, **context) -> str | None``: before the model is called, the memory the
  turn needs, as prompt text;
- ``on_pre_compact(messages, **context) -> None``: before the loop compacts (drops or
  summarises) old messages, keep what should outlive them;
- ``on_memory_write(memories) -> None``: after memories were written to the store.

Providers are created by name from a registry (:data:`REGISTRY`; ``graphmem`` is built
in: :class:`GraphMemoryProvider`) and attached to a store's lifecycle
(``mem.lifecycle.add_provider(p)``), which then calls them: ``mem.lifecycle.prefetch``,
``mem.lifecycle.on_pre_compact`` and, after every committed write, each provider's
``on_memory_write``. A failing hook is logged and skipped: it never fails the write or
the turn that triggered it.

>>> from graphmem import GraphMemory
>>> mem = GraphMemory.open("memory://", embedder=None)
>>> p = mem.lifecycle.add_provider(REGISTRY.create("graphmem", memory=mem))
>>> _ = mem.remember("Alice moved to Bergen", agent_id="assistant")
>>> "Bergen" in mem.lifecycle.prefetch("where does Alice live?")[0]
True
>>> mem.close()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from graphmem.errors import ConfigError, InvalidInput
from graphmem.models import Memory

if TYPE_CHECKING:
    from graphmem.memory import GraphMemory

__all__ = [
    "REGISTRY",
    "GraphMemoryProvider",
    "MemoryProvider",
    "ProviderRegistry",
]

log = logging.getLogger("graphmem.providers")

HOOKS = ("prefetch", "on_pre_compact", "on_memory_write")


@runtime_checkable
class MemoryProvider(Protocol):
    """The full set of hooks (a provider may implement only some of them)."""

    def prefetch(self, query: str, **context: Any) -> str | None: ...

    def on_pre_compact(self, messages: Sequence[Mapping[str, Any]], **context: Any) -> None: ...

    def on_memory_write(self, memories: Sequence[Memory]) -> None: ...


class ProviderRegistry:
    """Provider factories by name. ``create(name, **options)`` builds one."""

    def __init__(self) -> None:
        self._factories: dict[str, Callable[..., object]] = {}
        self._lock = threading.Lock()

    def register(self, name: str, factory: Callable[..., object], *, replace: bool = False) -> None:
        """Register ``factory`` under ``name`` (InvalidInput when taken, unless
        ``replace``)."""
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput("a provider name is a non-empty string")
        if not callable(factory):
            raise InvalidInput("a provider factory must be callable")
        with self._lock:
            if name in self._factories and not replace:
                raise InvalidInput(f"a provider called {name!r} is already registered")
            self._factories[name] = factory

    def unregister(self, name: str) -> bool:
        with self._lock:
            return self._factories.pop(name, None) is not None

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._factories)

    def create(self, name: str, **options: Any) -> object:
        """A new provider from the factory ``name``; ConfigError names the choices."""
        with self._lock:
            factory = self._factories.get(name)
        if factory is None:
            raise ConfigError(f"unknown memory provider {name!r}; registered: {self.names()}")
        provider = factory(**options)
        if not any(callable(getattr(provider, h, None)) for h in HOOKS):
            raise ConfigError(f"provider {name!r} implements none of the hooks {HOOKS}")
        return provider


class GraphMemoryProvider:
    """graphmem itself as a provider: ``prefetch`` is :meth:`GraphMemory.context` for the
    query; ``on_pre_compact`` stores the messages about to be compacted as events of
    ``run_id`` (so nothing compacted away is lost to recall) and their durable facts as
    long-term memories; ``on_memory_write`` has nothing to add (the store is this one)."""

    def __init__(
        self,
        memory: GraphMemory,
        *,
        max_tokens: int = 1000,
        agent_id: str = "default",
        extract_facts: bool = True,
    ) -> None:
        self.memory = memory
        self.max_tokens = max_tokens
        self.agent_id = agent_id
        self.extract_facts = extract_facts

    def prefetch(self, query: str, **context: Any) -> str | None:
        filters = {k: v for k, v in context.items() if k in ("agent_id", "run_id", "namespace")}
        if not self.memory.recall(query, k=1, touch=False, **filters):
            return None  # nothing relevant: no empty block in the prompt
        block = self.memory.context(query, max_tokens=self.max_tokens, **filters)
        return block or None

    def on_pre_compact(self, messages: Sequence[Mapping[str, Any]], **context: Any) -> None:
        run_id = context.get("run_id") or "compacted"
        agent_id = context.get("agent_id") or self.agent_id
        roles = {"user": "user_message", "assistant": "agent_response"}
        events = [
            {"event_type": roles.get(str(m.get("role")), "message"), "content": m.get("content")}
            for m in messages
            if m.get("content") not in (None, "")
        ]
        if not events:
            return
        for ev in events:
            ev["agent_id"] = agent_id
        written = self.memory.runs.add_events(run_id, events)
        if self.extract_facts:
            for m, ev in zip(written, events, strict=True):
                if ev["event_type"] == "user_message" and isinstance(ev["content"], str):
                    self.memory.lifecycle.on_turn_end(
                        run_id,
                        turn=ev["content"],
                        agent_id=agent_id,
                        source_ids=[m.id],
                        extract_facts=True,
                    )

    def on_memory_write(self, memories: Sequence[Memory]) -> None:
        return None


#: the process-wide registry (``graphmem`` built in)
REGISTRY = ProviderRegistry()
REGISTRY.register("graphmem", GraphMemoryProvider)


class Hooks:
    """The providers attached to one store and the calls to their hooks (owned by its
    :class:`~graphmem.lifecycle.Lifecycle`)."""

    def __init__(self) -> None:
        self._providers: list[object] = []
        self._lock = threading.Lock()
        self._inside = threading.local()  # a hook that writes does not call itself again

    def add(self, provider: object) -> object:
        if not any(callable(getattr(provider, h, None)) for h in HOOKS):
            raise InvalidInput(f"a provider implements at least one of {HOOKS}")
        with self._lock:
            self._providers.append(provider)
        return provider

    def remove(self, provider: object) -> bool:
        with self._lock:
            try:
                self._providers.remove(provider)
                return True
            except ValueError:
                return False

    @property
    def providers(self) -> list[object]:
        with self._lock:
            return list(self._providers)

    def _call(self, hook: str, *args: Any, **kwargs: Any) -> list[Any]:
        out = []
        for p in self.providers:
            fn = getattr(p, hook, None)
            if not callable(fn):
                continue
            try:
                out.append(fn(*args, **kwargs))
            except Exception as e:  # a provider's failure is its own, not the caller's
                log.warning("provider %s: %s failed: %s", type(p).__name__, hook, type(e).__name__)
        return out

    def prefetch(self, query: str, **context: Any) -> list[str]:
        return [r for r in self._call("prefetch", query, **context) if r]

    def on_pre_compact(self, messages: Sequence[Mapping[str, Any]], **context: Any) -> None:
        self._call("on_pre_compact", messages, **context)

    def on_memory_write(self, memories: Sequence[Memory]) -> None:
        if not memories or getattr(self._inside, "active", False):
            return
        self._inside.active = True
        try:
            self._call("on_memory_write", memories)
        finally:
            self._inside.active = False
