"""AsyncGraphMemory: the same API as coroutines, run off the event loop, one implementation."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import threading

import pytest

from graphmem.aio import AsyncGraphMemory
from graphmem.errors import InvalidInput, NotFound
from graphmem.protocol import (
    AgentsAPI,
    KnowledgeAPI,
    LifecycleAPI,
    LogAPI,
    NamespacesAPI,
    OrgAPI,
    RunsAPI,
    VectorsAPI,
    WritesAPI,
)
from tests.conftest import Stores

PARTS = {
    "runs": RunsAPI,
    "agents": AgentsAPI,
    "org": OrgAPI,
    "namespaces": NamespacesAPI,
    "lifecycle": LifecycleAPI,
    "knowledge": KnowledgeAPI,
    "log": LogAPI,
    "vectors": VectorsAPI,
    "writes": WritesAPI,
}


def _protocol_methods(proto: type) -> set[str]:
    return {n for n, v in vars(proto).items() if not n.startswith("_") and inspect.isfunction(v)}


def _public_methods(obj: object) -> set[str]:
    return {
        name
        for name, value in inspect.getmembers(type(obj))
        if not name.startswith("_") and inspect.isfunction(value)
    }


def test_every_verb_of_the_face_is_a_coroutine_function(stores: Stores) -> None:
    mem = stores.open("a.db", embedder=None)
    amem = AsyncGraphMemory(mem)
    try:
        names = _public_methods(mem) - {"open", "close"}
        assert {"remember", "recall", "context", "forget", "history", "update"} <= names
        for name in names:
            assert inspect.iscoroutinefunction(getattr(amem, name)), name
        for part, proto in PARTS.items():
            for name in _protocol_methods(proto):
                fn = getattr(getattr(amem, part), name)
                assert inspect.iscoroutinefunction(fn), f"{part}.{name}"
        with pytest.raises(AttributeError):  # no pass-through: a typo is an error
            amem.remmeber  # type: ignore[attr-defined]  # noqa: B018
        with pytest.raises(AttributeError):
            amem.runs.strat  # type: ignore[attr-defined]  # noqa: B018
        assert amem.sync is mem
    finally:
        mem.close()


def test_open_is_awaitable_and_an_async_context_manager(stores: Stores) -> None:
    async def scenario() -> tuple[bool, str]:
        async with stores.open_async("o.db", embedder=None) as amem:
            await amem.remember("Alice lives in Oslo", agent_id="a")
            await amem.remember("Alice lives in Oslo", agent_id="a")
            outcome = amem.last_reconcile
            assert outcome is not None
            sync = amem.sync
        closed = sync._closed
        again = await stores.open_async("o.db", embedder=None)
        try:
            assert await again.count() == 1
        finally:
            await again.aclose()
        return closed, outcome.action

    assert asyncio.run(scenario()) == (True, "duplicate")


def test_same_results_as_the_sync_api(stores: Stores) -> None:
    async def scenario() -> tuple[str, list[str], int, str]:
        async with stores.open_async("b.db", embedder=None) as amem:
            m = await amem.remember("Alice prefers tea", agent_id="a", tags=["prefs"])
            new = await amem.update(m.id, "Alice prefers green tea")
            hits = await amem.recall("tea", agent_id="a")
            versions = await amem.history(new.id)
            ctx = await amem.context("tea", agent_id="a")
            run = await amem.runs.start("a", run_id="r1")
            await amem.runs.add_event(run.id, "user_message", "hello")
            assert [e.content for e in await amem.runs.events("r1")] == ["hello"]
            return new.id, [h.memory.content for h in hits], len(versions), ctx

    new_id, contents, n_versions, ctx = asyncio.run(scenario())
    assert contents == ["Alice prefers green tea"] and n_versions == 2
    assert "Alice prefers green tea" in ctx
    with stores.open("b.db", embedder=None) as mem:  # durable, closed
        assert mem.get(new_id).content == "Alice prefers green tea"
        # the same block but for its fence code, which is random per call
        again = mem.context("tea", agent_id="a")

        def unfenced(text: str) -> str:
            code = re.match(r"<memory-context-([0-9a-f]{8})>", text)
            assert code
            return text.replace(code.group(1), "CODE")

        assert again != ctx and unfenced(again) == unfenced(ctx)


def test_errors_are_the_same_typed_errors(stores: Stores) -> None:
    async def scenario() -> None:
        async with stores.open_async("c.db", embedder=None) as amem:
            with pytest.raises(NotFound):
                await amem.get("missing")
            with pytest.raises(InvalidInput):
                await amem.remember("")
            assert await amem.count() == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("ids", [None, 12, 2**70, {"k": "v"}, {"an-id"}], ids=repr)
def test_get_of_what_is_not_an_id_or_a_list_is_refused_as_the_sync_get_refuses_it(
    stores: Stores, ids: object
) -> None:
    """The facade made a list of anything that was not a str before the sync get checked
    it: an int was a TypeError, and a dict or set was read as a list of ids."""

    async def scenario() -> None:
        async with stores.open_async("g.db", embedder=None) as amem:
            await amem.remember("Alice prefers tea", agent_id="a")
            with pytest.raises(InvalidInput):
                await amem.get(ids)  # type: ignore[call-overload]
            with pytest.raises(InvalidInput):
                amem.sync.get(ids)  # type: ignore[call-overload]

    asyncio.run(scenario())


def test_work_runs_in_worker_threads_and_concurrently(stores: Stores) -> None:
    loop_thread = threading.get_ident()

    async def scenario() -> tuple[set[int], int, int]:
        async with stores.open_async("d.db", embedder=None) as amem:
            threads = set(await asyncio.gather(*(amem.run(threading.get_ident) for _ in range(8))))
            memories = await asyncio.gather(
                *(amem.remember(f"fact number {i}", agent_id="a") for i in range(50))
            )
            return threads, len({m.id for m in memories}), await amem.count(agent_id="a")

    threads, distinct, stored = asyncio.run(scenario())
    assert loop_thread not in threads
    assert distinct == stored == 50


def test_facade_does_not_close_a_memory_it_did_not_open(stores: Stores) -> None:
    mem = stores.open("e.db", embedder=None)

    async def scenario() -> None:
        async with AsyncGraphMemory(mem) as amem:
            await amem.remember("kept open")

    asyncio.run(scenario())
    assert mem.count() == 1  # still usable
    mem.close()


@pytest.mark.parametrize("fmt", ["bogus", None, 5], ids=repr)
def test_context_of_an_unknown_format_is_refused_as_the_sync_context_refuses_it(
    stores: Stores, fmt: object
) -> None:
    """The facade sent every format but "messages" to the sync context as "text": a
    misspelt format gave a text block where the sync API raised InvalidInput."""

    async def scenario() -> None:
        async with stores.open_async("f.db", embedder=None) as amem:
            await amem.remember("Alice prefers tea", agent_id="a")
            with pytest.raises(InvalidInput):
                amem.sync.context("tea", format=fmt)  # type: ignore[call-overload]
            with pytest.raises(InvalidInput):
                await amem.context("tea", format=fmt)  # type: ignore[call-overload]

    asyncio.run(scenario())


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.05])
def test_a_batch_cancelled_mid_write_and_closed_is_stored_whole_or_not_at_all(
    stores: Stores, delay: float
) -> None:
    """The worker thread goes on after the cancel (or has finished) and the store closes
    under it: the batch (of a size written on the writer thread) is all there, or none."""
    items = [{"content": f"step {i} of the job", "run_id": "r1"} for i in range(2000)]

    async def scenario() -> None:
        async with stores.open_async("k.db", embedder=None) as amem:
            task = asyncio.ensure_future(amem.remember_many(items))
            await asyncio.sleep(delay)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(scenario())
    with stores.open("k.db", embedder=None) as mem:
        n = mem.count()
        assert n in (0, len(items))
        assert len(mem.runs.events("r1", limit=5000)) == n
