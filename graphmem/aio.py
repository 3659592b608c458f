"""AsyncGraphMemory: the GraphMemory face as coroutines, for asyncio applications.

Every coroutine runs the very same synchronous method in a worker thread
(``asyncio.to_thread``), so there is one implementation of every operation and the event
loop is never blocked by storage, embedding or LLM work. GraphMemory is thread-safe, so
concurrent coroutines are safe too. Cancelling a coroutine does not stop its operation: the
worker thread finishes it and the result is dropped. Each write is one transaction, so it
is stored whole or not at all (a store closed meanwhile refuses it: BackendUnavailable).

The facade has GraphMemory's core verbs and the same sub-objects (``runs``, ``agents``,
``org``, ``namespaces``, ``lifecycle``, ``knowledge``, ``log``, ``vectors``, ``transfer``,
``writes``),
each with the verbs of its :mod:`graphmem.protocol` Protocol as coroutines. Each coroutine
method is typed from the synchronous one it runs (same parameters, awaitable result), so a
misspelt name is an AttributeError and a wrong argument a type error.

>>> import asyncio
>>> async def main() -> list[str]:
...     async with AsyncGraphMemory.open("memory://", embedder=None) as mem:
...         await mem.remember("Alice prefers tea", agent_id="assistant")
...         return [r.memory.content for r in await mem.recall("tea", agent_id="assistant")]
>>> asyncio.run(main())
['Alice prefers tea']
"""

from __future__ import annotations

import asyncio
import builtins
import contextvars
import os
from collections.abc import Callable, Coroutine, Generator, Sequence
from types import TracebackType
from typing import (
    Any,
    Concatenate,
    Generic,
    Literal,
    ParamSpec,
    TypeVar,
    Unpack,
    overload,
)

from graphmem.agents import Agents
from graphmem.eventlog import EventLog
from graphmem.knowledge import About, Knowledge
from graphmem.lifecycle import Lifecycle, MaintenanceReport
from graphmem.llm import LLM, Reflection
from graphmem.memory import GraphMemory
from graphmem.models import Entity, EntityType, Memory
from graphmem.org import OrgMemory
from graphmem.protocol import ContextOptions
from graphmem.reconcile import ReconcileResult
from graphmem.reindex import Vectors
from graphmem.runs import Runs
from graphmem.scoping import Namespaces, Scope
from graphmem.transfer import Transfer
from graphmem.verbs import MemoryWrites

__all__ = ["AsyncGraphMemory"]

P = ParamSpec("P")
T = TypeVar("T")


_last_reconcile: contextvars.ContextVar[ReconcileResult | None] = contextvars.ContextVar(
    "graphmem_aio_last_reconcile", default=None
)


class _OffLoop(Generic[P, T]):
    """A coroutine method mirroring the synchronous method ``fn`` of the object the facade
    wraps (``self._sync``): same parameters, run in a worker thread."""

    def __init__(self, fn: Callable[Concatenate[Any, P], T]) -> None:
        self._name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _OffLoop[P, T]: ...

    @overload
    def __get__(self, obj: _Facade, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(
        self, obj: _Facade | None, owner: type
    ) -> _OffLoop[P, T] | Callable[P, Coroutine[Any, Any, T]]:
        if obj is None:
            return self
        target: Callable[P, T] = getattr(obj._sync, self._name)

        async def call(*args: P.args, **kwargs: P.kwargs) -> T:
            return await asyncio.to_thread(target, *args, **kwargs)

        call.__name__ = self._name
        call.__doc__ = self.__doc__
        return call


class _Remembering(_OffLoop[P, T]):
    """:meth:`GraphMemory.remember` off the loop, keeping what reconciliation did for
    :attr:`AsyncGraphMemory.last_reconcile` (the sync one is per thread, and the worker
    thread is not the caller's)."""

    @overload
    def __get__(self, obj: None, owner: type) -> _OffLoop[P, T]: ...

    @overload
    def __get__(self, obj: _Facade, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(
        self, obj: _Facade | None, owner: type
    ) -> _OffLoop[P, T] | Callable[P, Coroutine[Any, Any, T]]:
        if obj is None:
            return self
        sync = obj._sync
        target: Callable[P, T] = getattr(sync, self._name)

        def work(*args: P.args, **kwargs: P.kwargs) -> tuple[T, ReconcileResult | None]:
            return target(*args, **kwargs), sync.last_reconcile

        async def call(*args: P.args, **kwargs: P.kwargs) -> T:
            result, outcome = await asyncio.to_thread(work, *args, **kwargs)
            _last_reconcile.set(outcome)
            return result

        call.__name__ = self._name
        call.__doc__ = self.__doc__
        return call


class _Facade:
    """A coroutine view of one synchronous part (``self._sync``)."""

    def __init__(self, sync: Any) -> None:
        self._sync = sync

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._sync!r})"


class AsyncRuns(_Facade):
    """``mem.runs`` as coroutines (see :class:`graphmem.runs.Runs`)."""

    start = _OffLoop(Runs.start)
    get = _OffLoop(Runs.get)
    end = _OffLoop(Runs.end)
    list = _OffLoop(Runs.list)
    get_or_create = _OffLoop(Runs.get_or_create)
    add_event = _OffLoop(Runs.add_event)
    add_events = _OffLoop(Runs.add_events)
    events = _OffLoop(Runs.events)
    delete = _OffLoop(Runs.delete)
    cleanup = _OffLoop(Runs.cleanup)
    stats = _OffLoop(Runs.stats)
    conversation_context = _OffLoop(Runs.conversation_context)
    scratchpad = _OffLoop(Runs.scratchpad)


class AsyncAgents(_Facade):
    """``mem.agents`` as coroutines (see :class:`graphmem.agents.Agents`)."""

    register = _OffLoop(Agents.register)
    get = _OffLoop(Agents.get)
    list = _OffLoop(Agents.list)


class AsyncOrg(_Facade):
    """``mem.org`` as coroutines (see :class:`graphmem.org.OrgMemory`)."""

    publish = _OffLoop(OrgMemory.publish)
    retract = _OffLoop(OrgMemory.retract)
    get = _OffLoop(OrgMemory.get)
    versions = _OffLoop(OrgMemory.versions)
    query = _OffLoop(OrgMemory.query)
    list = _OffLoop(OrgMemory.list)
    core_policies = _OffLoop(OrgMemory.core_policies)


class AsyncNamespaces(_Facade):
    """``mem.namespaces`` as coroutines (see :class:`graphmem.scoping.Namespaces`)."""

    create = _OffLoop(Namespaces.create)
    get = _OffLoop(Namespaces.get)
    list = _OffLoop(Namespaces.list)
    add_members = _OffLoop(Namespaces.add_members)
    remove_members = _OffLoop(Namespaces.remove_members)


class AsyncLifecycle(_Facade):
    """``mem.lifecycle`` as coroutines (see :class:`graphmem.lifecycle.Lifecycle`)."""

    _sync: Lifecycle

    maintain = _OffLoop(Lifecycle.maintain)
    consolidate = _OffLoop(Lifecycle.consolidate)
    unmerge = _OffLoop(Lifecycle.unmerge)
    summarize = _OffLoop(Lifecycle.summarize)
    improve = _OffLoop(Lifecycle.improve)
    extract_facts = _OffLoop(Lifecycle.extract_facts)

    async def reflect(
        self, question: str, *, k: int = 10, llm: LLM | None = None, **recall_filters: Any
    ) -> Reflection:
        """:meth:`graphmem.lifecycle.Lifecycle.reflect`."""
        return await asyncio.to_thread(self._sync.reflect, question, k=k, llm=llm, **recall_filters)

    archive = _OffLoop(Lifecycle.archive)
    restore = _OffLoop(Lifecycle.restore)
    provenance = _OffLoop(Lifecycle.provenance)
    on_turn_end = _OffLoop(Lifecycle.on_turn_end)
    on_run_end = _OffLoop(Lifecycle.on_run_end)

    async def on_idle(self, *, dry_run: bool = False, **options: Any) -> MaintenanceReport:
        """:meth:`graphmem.lifecycle.Lifecycle.on_idle`."""
        return await asyncio.to_thread(self._sync.on_idle, dry_run=dry_run, **options)

    configure = _OffLoop(Lifecycle.configure)


class AsyncKnowledge(_Facade):
    """``mem.knowledge`` as coroutines (see :class:`graphmem.knowledge.Knowledge`)."""

    _sync: Knowledge

    async def entities(
        self, *, type: EntityType | str | None = None, limit: int = 100, **filters: Any
    ) -> builtins.list[Entity]:
        """:meth:`graphmem.knowledge.Knowledge.entities`."""
        return await asyncio.to_thread(self._sync.entities, type=type, limit=limit, **filters)

    async def about(self, name: str, *, limit: int = 200, **filters: Any) -> About:
        """:meth:`graphmem.knowledge.Knowledge.about`."""
        return await asyncio.to_thread(self._sync.about, name, limit=limit, **filters)


class _AsyncKeyValues(_Facade):
    """The log's keys, hashes and sets (``mem.log.set`` … ``smembers``) as coroutines."""

    set = _OffLoop(EventLog.set)
    get = _OffLoop(EventLog.get)
    delete = _OffLoop(EventLog.delete)
    hset = _OffLoop(EventLog.hset)
    hget = _OffLoop(EventLog.hget)
    hkeys = _OffLoop(EventLog.hkeys)
    hdel = _OffLoop(EventLog.hdel)
    sadd = _OffLoop(EventLog.sadd)
    srem = _OffLoop(EventLog.srem)
    smembers = _OffLoop(EventLog.smembers)


class AsyncLog(_AsyncKeyValues):
    """``mem.log`` as coroutines (see :class:`graphmem.eventlog.EventLog`): the entries
    here, the keys, hashes and sets from :class:`_AsyncKeyValues`."""

    log = _OffLoop(EventLog.log)
    tail = _OffLoop(EventLog.tail)
    count = _OffLoop(EventLog.count)


class AsyncVectors(_Facade):
    """``mem.vectors`` as coroutines (see :class:`graphmem.reindex.Vectors`)."""

    wait = _OffLoop(Vectors.wait)
    reindex = _OffLoop(Vectors.reindex)


class AsyncTransfer(_Facade):
    """``mem.transfer`` as coroutines (see :class:`graphmem.transfer.Transfer`)."""

    export = _OffLoop(Transfer.export)
    import_ = _OffLoop(Transfer.import_)


class AsyncWrites(_Facade):
    """``mem.writes`` as coroutines (see :class:`graphmem.verbs.MemoryWrites`)."""

    _sync: MemoryWrites

    async def reconcile(
        self, content: str, *, mode: str | None = None, **fields: Any
    ) -> ReconcileResult:
        """:meth:`graphmem.verbs.MemoryWrites.reconcile`."""
        return await asyncio.to_thread(self._sync.reconcile, content, mode=mode, **fields)

    supersede = _OffLoop(MemoryWrites.supersede)
    link = _OffLoop(MemoryWrites.link)
    set_status = _OffLoop(MemoryWrites.set_status)


class AsyncGraphMemory(_Facade):
    """Coroutine facade over one :class:`GraphMemory` (which it closes on :meth:`aclose`
    only when it opened it, i.e. when created through :meth:`open`).

    ``AsyncGraphMemory.open(...)`` is both awaitable and an async context manager:
    ``mem = await AsyncGraphMemory.open(...)`` or
    ``async with AsyncGraphMemory.open(...) as mem:``.
    """

    _sync: GraphMemory

    def __init__(self, mem: GraphMemory, *, owns: bool = False) -> None:
        super().__init__(mem)
        self._owns = owns
        self.runs = AsyncRuns(mem.runs)
        self.agents = AsyncAgents(mem.agents)
        self.org = AsyncOrg(mem.org)
        self.namespaces = AsyncNamespaces(mem.namespaces)
        self.lifecycle = AsyncLifecycle(mem.lifecycle)
        self.knowledge = AsyncKnowledge(mem.knowledge)
        self.log = AsyncLog(mem.log)
        self.vectors = AsyncVectors(mem.vectors)
        self.transfer = AsyncTransfer(mem.transfer)
        self.writes = AsyncWrites(mem.writes)

    @classmethod
    def open(cls, url: str | os.PathLike[str] | None = None, **options: Any) -> _Opening:
        """:meth:`GraphMemory.open` off the loop (opening may touch disk or network); await
        it, or use it with ``async with``."""
        return _Opening(cls, url, options)

    @property
    def sync(self) -> GraphMemory:
        """The underlying synchronous GraphMemory."""
        return self._sync

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run any synchronous callable in the worker thread pool, e.g.
        ``await amem.run(lambda: amem.sync.graph.number_of_nodes())``."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def aclose(self) -> None:
        """Close the underlying GraphMemory if this facade opened it."""
        if self._owns:
            await asyncio.to_thread(self._sync.close)

    async def __aenter__(self) -> AsyncGraphMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the core verbs ----------------------------------------------------------------

    #: :meth:`GraphMemory.remember`; :attr:`last_reconcile` then says what it did (in
    #: this task)
    remember = _Remembering(GraphMemory.remember)

    @property
    def last_reconcile(self) -> ReconcileResult | None:
        """What the last :meth:`remember` of this task (or of the task it was called
        from) did; ``await mem.writes.reconcile(...)`` returns it directly."""
        return _last_reconcile.get()

    remember_many = _OffLoop(GraphMemory.remember_many)
    add_messages = _OffLoop(GraphMemory.add_messages)

    async def update(
        self, memory_id: str, content: str | None = None, *, reason: str = "update", **changes: Any
    ) -> Memory:
        """:meth:`GraphMemory.update`."""
        return await asyncio.to_thread(
            self._sync.update, memory_id, content, reason=reason, **changes
        )

    forget = _OffLoop(GraphMemory.forget)
    history = _OffLoop(GraphMemory.history)

    async def count(self, *, scope: Scope | str | None = None, **filters: Any) -> int:
        """:meth:`GraphMemory.count`."""
        return await asyncio.to_thread(self._sync.count, scope=scope, **filters)

    recall = _OffLoop(GraphMemory.recall)
    relevance = _OffLoop(GraphMemory.relevance)
    stats = _OffLoop(GraphMemory.stats)

    @overload
    async def get(
        self, memory_id: str, *, scope: Scope | str | None = None, current: bool = False
    ) -> Memory: ...

    @overload
    async def get(
        self,
        memory_id: builtins.list[str] | tuple[str, ...],
        *,
        scope: Scope | str | None = None,
        current: bool = False,
    ) -> builtins.list[Memory]: ...

    async def get(
        self,
        memory_id: str | Sequence[str],
        *,
        scope: Scope | str | None = None,
        current: bool = False,
    ) -> Memory | builtins.list[Memory]:
        """:meth:`GraphMemory.get` (one id, or a list of ids)."""
        # a caller's list copied before another thread reads it; anything else goes as it
        # is, for the sync get's argument check to refuse what is not an id or a list
        ids: Any = builtins.list(memory_id) if isinstance(memory_id, builtins.list) else memory_id
        return await asyncio.to_thread(self._sync.get, ids, scope=scope, current=current)

    @overload
    async def context(
        self,
        query: str = "",
        *,
        format: Literal["text"] = "text",
        **options: Unpack[ContextOptions],
    ) -> str: ...

    @overload
    async def context(
        self, query: str = "", *, format: Literal["messages"], **options: Unpack[ContextOptions]
    ) -> builtins.list[dict[str, str]]: ...

    async def context(
        self, query: str = "", *, format: Literal["text", "messages"] = "text", **options: Any
    ) -> str | builtins.list[dict[str, str]]:
        """:meth:`GraphMemory.context` (a text block, or chat messages)."""
        sync = self._sync
        if format == "messages":
            return await asyncio.to_thread(
                lambda: sync.context(query, format="messages", **options)
            )
        if format == "text":
            return await asyncio.to_thread(lambda: sync.context(query, format="text", **options))
        # any other format goes as it is, for the sync context to refuse it
        return await asyncio.to_thread(lambda: sync.context(query, format=format, **options))

    def __repr__(self) -> str:
        return f"AsyncGraphMemory({self._sync!r})"

    # last in the class: mypy resolves ``list[...]`` after it to this attribute
    list = _OffLoop(GraphMemory.list)


class _Opening:
    """What :meth:`AsyncGraphMemory.open` returns: awaitable, and an async context manager
    that closes the memory on exit."""

    def __init__(
        self, cls: type[AsyncGraphMemory], url: str | os.PathLike[str] | None, options: Any
    ) -> None:
        self._cls = cls
        self._url = url
        self._options = options
        self._mem: AsyncGraphMemory | None = None

    async def _open(self) -> AsyncGraphMemory:
        mem = await asyncio.to_thread(GraphMemory.open, self._url, **self._options)
        return self._cls(mem, owns=True)

    def __await__(self) -> Generator[Any, None, AsyncGraphMemory]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncGraphMemory:
        self._mem = await self._open()
        return self._mem

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._mem is not None:
            await self._mem.aclose()
