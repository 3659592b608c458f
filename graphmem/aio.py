"""AsyncGraphMemory: the GraphMemory API as coroutines, for asyncio applications.

Every coroutine runs the very same synchronous :class:`~graphmem.memory.GraphMemory` method in
a worker thread (``asyncio.to_thread``), so there is one implementation of every operation and
the event loop is never blocked by storage, embedding or LLM work. GraphMemory is thread-safe,
so concurrent coroutines are safe too.

The common methods are spelled out below with their return types; every other public method
of GraphMemory (including ones added later, e.g. ``consolidate`` or ``reflect``) is reachable
under the same name as a coroutine function too. Component objects (``org``, ``runs``,
``lifecycle`` …) are the synchronous ones; call them off the loop with
:meth:`~AsyncGraphMemory.run`, e.g. ``await amem.run(amem.sync.org.publish, "text", author="cto")``.

>>> import asyncio
>>> async def main() -> list[str]:
...     async with await AsyncGraphMemory.open("memory://", embedder=None) as mem:
...         await mem.remember("Alice prefers tea", agent_id="assistant")
...         return [r.memory.content for r in await mem.recall("tea", agent_id="assistant")]
>>> asyncio.run(main())
['Alice prefers tea']
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from graphmem.memory import ForgetReport, GraphMemory, ImportReport
from graphmem.models import Agent, Memory, RecallResult, Run, Subgraph

__all__ = ["AsyncGraphMemory"]

P = ParamSpec("P")
T = TypeVar("T")


class AsyncGraphMemory:
    """Coroutine facade over one :class:`GraphMemory` (which it closes on ``aclose``
    only when it opened it, i.e. when created through :meth:`open`)."""

    def __init__(self, mem: GraphMemory, *, owns: bool = False) -> None:
        self._mem = mem
        self._owns = owns

    @classmethod
    async def open(cls, url: str | None = None, **options: Any) -> AsyncGraphMemory:
        """Coroutine form of :meth:`GraphMemory.open` (opening may touch disk or network)."""
        mem = await asyncio.to_thread(GraphMemory.open, url, **options)
        return cls(mem, owns=True)

    @property
    def sync(self) -> GraphMemory:
        """The underlying synchronous GraphMemory."""
        return self._mem

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run any synchronous callable in the worker thread pool, e.g.
        ``await amem.run(lambda: amem.sync.graph.number_of_nodes())``."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def aclose(self) -> None:
        """Close the underlying GraphMemory if this facade opened it."""
        if self._owns:
            await asyncio.to_thread(self._mem.close)

    async def __aenter__(self) -> AsyncGraphMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        """Any other public GraphMemory method, as a coroutine function."""
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._mem, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(attr, *args, **kwargs)

        return call

    def __repr__(self) -> str:
        return f"AsyncGraphMemory({self._mem!r})"

    # -- the common methods, typed (each is the sync method in a worker thread) --------

    async def remember(self, content: str, **kwargs: Any) -> Memory:
        """See :meth:`GraphMemory.remember`."""
        return await self.run(self._mem.remember, content, **kwargs)

    async def remember_many(
        self, items: Iterable[Memory | Mapping[str, Any]]
    ) -> builtins.list[Memory]:
        """See :meth:`GraphMemory.remember_many`."""
        return await self.run(self._mem.remember_many, list(items))

    async def get(self, memory_id: str) -> Memory:
        """See :meth:`GraphMemory.get`."""
        return await self.run(self._mem.get, memory_id)

    async def get_many(self, memory_ids: Sequence[str]) -> builtins.list[Memory]:
        """See :meth:`GraphMemory.get_many`."""
        return await self.run(self._mem.get_many, memory_ids)

    async def update(self, memory_id: str, content: str | None = None, **kwargs: Any) -> Memory:
        """See :meth:`GraphMemory.update`."""
        return await self.run(self._mem.update, memory_id, content, **kwargs)

    async def forget(self, memory_id: str, **kwargs: Any) -> ForgetReport:
        """See :meth:`GraphMemory.forget`."""
        return await self.run(self._mem.forget, memory_id, **kwargs)

    async def list(self, **filters: Any) -> builtins.list[Memory]:
        """See :meth:`GraphMemory.list`."""
        return await self.run(self._mem.list, **filters)

    async def count(self, **filters: Any) -> int:
        """See :meth:`GraphMemory.count`."""
        return await self.run(self._mem.count, **filters)

    async def history(self, memory_id: str) -> builtins.list[Memory]:
        """See :meth:`GraphMemory.history`."""
        return await self.run(self._mem.history, memory_id)

    async def provenance(self, memory_id: str, **kwargs: Any) -> Subgraph:
        """See :meth:`GraphMemory.provenance`."""
        return await self.run(self._mem.provenance, memory_id, **kwargs)

    async def recall(self, query: str, **kwargs: Any) -> builtins.list[RecallResult]:
        """See :meth:`GraphMemory.recall`."""
        return await self.run(self._mem.recall, query, **kwargs)

    async def context(self, query: str, **kwargs: Any) -> str:
        """See :meth:`GraphMemory.context`."""
        return await self.run(self._mem.context, query, **kwargs)

    async def register_agent(self, agent_id: str, **kwargs: Any) -> Agent:
        """See :meth:`GraphMemory.register_agent`."""
        return await self.run(self._mem.register_agent, agent_id, **kwargs)

    async def start_run(self, agent_id: str = "default", **kwargs: Any) -> Run:
        """See :meth:`GraphMemory.start_run`."""
        return await self.run(self._mem.start_run, agent_id, **kwargs)

    async def end_run(self, run_id: str, **kwargs: Any) -> Run:
        """See :meth:`GraphMemory.end_run`."""
        return await self.run(self._mem.end_run, run_id, **kwargs)

    async def add_event(self, run_id: str, event_type: str, content: str, **kwargs: Any) -> Memory:
        """See :meth:`GraphMemory.add_event`."""
        return await self.run(self._mem.add_event, run_id, event_type, content, **kwargs)

    async def events(self, run_id: str, **kwargs: Any) -> builtins.list[Memory]:
        """See :meth:`GraphMemory.events`."""
        return await self.run(self._mem.events, run_id, **kwargs)

    async def stats(self) -> dict[str, Any]:
        """See :meth:`GraphMemory.stats`."""
        return await self.run(self._mem.stats)

    async def export(self, dest: Any) -> ImportReport:
        """See :meth:`GraphMemory.export`."""
        return await self.run(self._mem.export, dest)

    async def import_(self, src: Any, **kwargs: Any) -> ImportReport:
        """See :meth:`GraphMemory.import_`."""
        return await self.run(self._mem.import_, src, **kwargs)
