"""A forget plans and checks from one snapshot: a version or a merge committed by another
handle while the forget is planning is either deleted with it or makes the forget plan
again; it never survives the forget as active text."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from graphmem.backends.base import GraphBackend
from graphmem.backends.embedded import NetworkXBackend
from graphmem.memory import GraphMemory
from graphmem.models import Status

Pair = tuple[GraphMemory, GraphMemory]


def _second_backend(
    backend: GraphBackend, request: pytest.FixtureRequest, tmp_path: Path
) -> GraphBackend:
    """Another handle on the store of ``backend``."""
    if isinstance(backend, NetworkXBackend):
        return NetworkXBackend(tmp_path / "store.db")
    from tests.neo4j_support import neo4j_target

    return neo4j_target(request).backend()


@pytest.fixture
def pair(backend: GraphBackend, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    """Two handles on one store (two file handles / two drivers), on each backend the
    switch chose."""
    a = GraphMemory(backend, embedder=None, owns_backend=False)
    b = GraphMemory(_second_backend(backend, request, tmp_path), embedder=None)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _after_expand(a: GraphMemory, n: int, action: Callable[[], Any]) -> None:
    """Run ``action`` once, right after ``a``'s backend answers its ``n``-th expand."""
    backend = a.backend
    real = backend.expand
    calls = 0

    def expand(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        out = real(*args, **kwargs)
        calls += 1
        if calls == n:
            action()
        return out

    backend.expand = expand  # type: ignore[method-assign]


def _active_texts(m: GraphMemory) -> list[str]:
    return [x.content for x in m.list(status="active")]


@pytest.mark.parametrize("window", [1, 2, 3])
def test_an_update_committed_while_a_forget_plans_never_survives_it(
    pair: Pair, window: int
) -> None:
    a, b = pair
    m = a.remember("my password is hunter2")
    v = a.update(m.id, "my password is hunter2 (v2)")
    _after_expand(a, window, lambda: b.update(v.id, "my password is hunter2 (v3)"))
    a.forget(m.id)
    assert not [t for t in _active_texts(b) if "hunter2" in t]
    assert not [t for t in _active_texts(a) if "hunter2" in t]


@pytest.mark.parametrize("window", [1, 2, 3])
def test_a_merge_committed_while_a_forget_plans_never_survives_it(pair: Pair, window: int) -> None:
    a, b = pair
    m = a.remember("the vault password is hunter2")
    other = a.remember("the vault code is 1234")

    def merge() -> None:
        olds = b.get([m.id, other.id])
        merged = olds[0].evolve(
            id="merged-1", content="the vault password is hunter2, code 1234", content_hash=""
        )
        b.writes.supersede(olds, merged, reason="merge", pass_name="consolidate")

    _after_expand(a, window, merge)
    a.forget(m.id)
    assert not [t for t in _active_texts(b) if "hunter2" in t]


@pytest.mark.parametrize("window", [1, 2, 3, 4])
def test_a_survivor_superseding_a_doomed_version_while_a_forget_plans(
    pair: Pair, window: int
) -> None:
    """An existing memory made the new version of a doomed one inside the window is a
    version of forgotten text: it goes with the forget (or the forget plans again); no
    chain is left without an active head and no forgotten text stays."""
    a, b = pair
    m = a.remember("the old door code is 4321")
    v = a.update(m.id, "the old door code is 4321, changed")
    s = a.remember("the door code is now 9999")

    def adopt() -> None:
        b.writes.supersede([v.id], s.id, reason="replaced")

    _after_expand(a, window, adopt)
    a.forget(m.id)
    for h in (a, b):
        everything = h.list(status=None, limit=None)
        assert not [x for x in everything if "4321" in x.content]
        for x in everything:  # every chain left has an active head
            assert [y for y in h.history(x.id) if y.status is Status.ACTIVE], x.content
