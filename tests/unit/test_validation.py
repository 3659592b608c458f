"""Every kind of bad input raises a typed error and leaves the store unchanged."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from graphmem.errors import GraphMemError, InvalidInput
from graphmem.memory import GraphMemory
from graphmem.models import (
    MAX_CONTENT_CHARS,
    Edge,
    EdgeType,
    Filter,
    Memory,
    NodeLabel,
    TextQuery,
    VectorQuery,
    check_page,
)

NAIVE = datetime(2025, 1, 1)

BAD_MEMORIES: list[tuple[str, dict[str, Any]]] = [
    ("empty content", {"content": ""}),
    ("blank content", {"content": "   \n\t"}),
    ("oversized content", {"content": "x" * (MAX_CONTENT_CHARS + 1)}),
    ("NUL in content", {"content": "a\x00b"}),
    ("importance > 1", {"content": "x", "importance": 1.5}),
    ("importance < 0", {"content": "x", "importance": -0.1}),
    ("confidence > 1", {"content": "x", "confidence": 2}),
    ("malformed tag", {"content": "x", "tags": ["has space"]}),
    ("empty tag", {"content": "x", "tags": [""]}),
    ("tags as a string", {"content": "x", "tags": "prefs"}),
    ("non-JSON metadata", {"content": "x", "metadata": {"obj": object()}}),
    ("NaN metadata", {"content": "x", "metadata": {"v": float("nan")}}),
    ("metadata not a map", {"content": "x", "metadata": ["a"]}),
    ("metadata int over 64 bits", {"content": "x", "metadata": {"big": 2**70}}),
    ("unknown category", {"content": "x", "category": "gossip"}),
    ("unknown tier", {"content": "x", "tier": "fleeting"}),
    ("unknown status", {"content": "x", "status": "deleted"}),
    ("naive created_at", {"content": "x", "created_at": NAIVE}),
    ("naive expires_at", {"content": "x", "expires_at": NAIVE}),
    ("unknown field", {"content": "x", "colour": "red"}),
    ("bad agent id", {"content": "x", "agent_id": " padded "}),
    ("control chars in agent id", {"content": "x", "agent_id": "a\nb"}),
    ("bad event type", {"content": "x", "event_type": "Not An Identifier"}),
    ("NaN embedding", {"content": "x", "embedding": [0.1, float("nan")]}),
    ("empty embedding", {"content": "x", "embedding": []}),
    (
        "valid_to before valid_from",
        {
            "content": "x",
            "valid_from": datetime(2025, 2, 1, tzinfo=UTC),
            "valid_to": datetime(2025, 1, 1, tzinfo=UTC),
        },
    ),
]


@pytest.mark.parametrize(("why", "item"), BAD_MEMORIES, ids=[b[0] for b in BAD_MEMORIES])
def test_bad_memory_is_rejected_and_store_unchanged(
    store_mem: GraphMemory, why: str, item: dict[str, Any]
) -> None:
    keep = store_mem.remember("already here")
    before = store_mem.backend.stats()
    with pytest.raises(InvalidInput) as info:
        store_mem.remember_many([item])
    assert isinstance(info.value, GraphMemError) and isinstance(info.value, ValueError)
    assert str(info.value)  # a message a person can read
    assert store_mem.backend.stats() == before
    assert store_mem.get(keep.id) == keep


def test_messages_name_the_field(store_mem: GraphMemory) -> None:
    with pytest.raises(InvalidInput, match="importance"):
        store_mem.remember("x", importance=7)
    with pytest.raises(InvalidInput, match="timezone-aware"):
        store_mem.remember("x", created_at=NAIVE)
    with pytest.raises(InvalidInput, match="malformed tag"):
        store_mem.remember("x", tags=["a b"])
    with pytest.raises(InvalidInput, match="content must not be empty"):
        store_mem.remember("")


def test_bad_edges_and_filters() -> None:
    with pytest.raises(ValueError, match="cannot link"):
        Edge(type=EdgeType.RUN_BY, src=(NodeLabel.MEMORY, "a"), dst=(NodeLabel.AGENT, "b"))
    with pytest.raises(ValueError, match="itself"):
        Edge(type=EdgeType.NEXT, src=(NodeLabel.MEMORY, "a"), dst=(NodeLabel.MEMORY, "a"))
    with pytest.raises(ValueError):
        Edge(type="EVIL` DETACH DELETE", src=(NodeLabel.MEMORY, "a"), dst=(NodeLabel.MEMORY, "b"))
    with pytest.raises(ValueError):
        Edge(type=EdgeType.NEXT, src=("Evil", "a"), dst=(NodeLabel.MEMORY, "b"))
    with pytest.raises(ValueError):
        Edge(
            type=EdgeType.NEXT,
            src=(NodeLabel.MEMORY, "a"),
            dst=(NodeLabel.MEMORY, "b"),
            props={"bad key": 1},
        )
    with pytest.raises(ValueError):
        Filter(equals={"content) DETACH DELETE n //": 1})
    with pytest.raises(ValueError):
        Filter(equals={"agent_id": {"$ne": 1}})
    with pytest.raises(InvalidInput):
        Filter.for_memories(since=NAIVE)


def test_update_with_bad_values_changes_nothing(store_mem: GraphMemory) -> None:
    m = store_mem.remember("original")
    before = store_mem.backend.stats()
    with pytest.raises(InvalidInput):
        store_mem.update(m.id, "")
    with pytest.raises(InvalidInput):
        store_mem.update(m.id, importance=5)
    assert store_mem.backend.stats() == before
    assert store_mem.get(m.id) == m


def test_models_are_frozen_values() -> None:
    m = Memory(content="x")
    with pytest.raises(Exception):  # noqa: B017  pydantic's frozen-instance error
        m.content = "y"  # type: ignore[misc]
    assert m.evolve(content="y").content == "y" and m.content == "x"
    with pytest.raises(InvalidInput):
        m.evolve(importance=2)


@pytest.mark.embedded("a URL of no backend is refused before any store opens")
def test_unknown_backend_scheme() -> None:
    with pytest.raises(InvalidInput, match="scheme"):
        GraphMemory.open("redis://localhost", embedder=None)


@pytest.mark.embedded("a URL the embedded store cannot take is refused before any file is made")
@pytest.mark.parametrize("url", ["memory://extra", "memory://x/y.db", "memory:///tmp/a.db"])
def test_memory_url_with_a_path_is_refused_not_made_a_folder(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # found by probing the CLI: `--db memory://extra` made a folder 'memory:' holding a
    # store file 'extra' in the working directory instead of saying the URL is wrong
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="memory://"):
        GraphMemory.open(url, embedder=None)
    assert list(tmp_path.iterdir()) == []


# past 9999-12-31 / before 0001-01-01 once converted to UTC
TOO_LATE = datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))
TOO_EARLY = datetime.min.replace(tzinfo=timezone(timedelta(hours=5)))


def _nested(depth: int) -> list[Any]:
    root: list[Any] = []
    cur = root
    for _ in range(depth):
        cur.append([])
        cur = cur[0]
    return root


Call = Callable[[GraphMemory], object]
# each once raised a builtin or pydantic error (or silently did something else)
UNTYPED: list[tuple[str, Call]] = [
    ("created_at past 9999 in UTC", lambda m: m.remember("x", created_at=TOO_LATE)),
    ("created_at before year 1 in UTC", lambda m: m.remember("x", created_at=TOO_EARLY)),
    ("valid_from past 9999 in UTC", lambda m: m.remember("x", valid_from=TOO_LATE)),
    ("expires_at past 9999 in UTC", lambda m: m.remember("x", expires_at=TOO_LATE)),
    ("update valid_from past 9999", lambda m: m.update(m.list()[0].id, "y", valid_from=TOO_LATE)),
    ("recall as_of past 9999", lambda m: m.recall("tea", as_of=TOO_LATE)),
    ("list since past 9999", lambda m: m.list(since=TOO_LATE)),
    ("list until before year 1", lambda m: m.list(until=TOO_EARLY)),
    ("count since past 9999", lambda m: m.count(since=TOO_LATE)),
    ("metadata int over 64 bits in a list", lambda m: m.remember("x", metadata={"k": [2**64]})),
    (
        "metadata int under 64 bits in a list",
        lambda m: m.remember("x", metadata={"k": [1, -(2**63) - 1]}),
    ),
    ("NaN in a metadata list", lambda m: m.remember("x", metadata={"k": [float("nan")]})),
    ("inf in a metadata list", lambda m: m.remember("x", metadata={"k": [1.0, float("inf")]})),
    ("lone surrogate in agent_id", lambda m: m.remember("x", agent_id="a\ud800")),
    ("lone surrogate in namespace", lambda m: m.remember("x", namespace="a\ud800")),
    ("lone surrogate in run_id", lambda m: m.remember("x", run_id="a\ud800")),
    ("lone surrogate in metadata", lambda m: m.remember("x", metadata={"k": "a\udfff"})),
    ("lone surrogate in a metadata key", lambda m: m.remember("x", metadata={"k\ud800": 1})),
    (
        "lone surrogate in nested metadata",
        lambda m: m.remember("x", metadata={"k": {"a": ["\ud800"]}}),
    ),
    ("lone surrogate in a metadata list", lambda m: m.remember("x", metadata={"k": ["\ud800"]})),
    ("metadata nested 5000 deep", lambda m: m.remember("x", metadata={"k": _nested(5000)})),
    ("lone surrogate in a query", lambda m: m.recall("tea \ud800")),
    ("lone surrogate in a context query", lambda m: m.context("tea \ud800")),
    ("lone surrogate in a filter", lambda m: m.list(agent_id="a\ud800")),
    ("list order_by None", lambda m: m.list(order_by=None)),  # type: ignore[arg-type]
    ("list offset None", lambda m: m.list(offset=None)),  # type: ignore[arg-type]
    ("list limit 2.5", lambda m: m.list(limit=2.5)),  # type: ignore[arg-type]
    ("list descending 'yes'", lambda m: m.list(descending="yes")),  # type: ignore[arg-type]
    ("list metadata with an int key", lambda m: m.list(metadata={1: 2})),  # type: ignore[dict-item]
    ("list category 1", lambda m: m.list(category=1)),  # type: ignore[arg-type]
    ("list tags 1", lambda m: m.list(tags=1)),  # type: ignore[arg-type]
    ("list agent_id 1", lambda m: m.list(agent_id=1)),  # type: ignore[arg-type]
    ("count status 7", lambda m: m.count(status=7)),
    ("list status bogus", lambda m: m.list(status="bogus")),
    ("list category bogus", lambda m: m.list(category="bogus")),
    ("count tier bogus among good", lambda m: m.count(tier=["long_term", "bogus"])),
    ("recall category bogus", lambda m: m.recall("tea", category="bogus")),
    ("log payload nested 5000 deep", lambda m: m.log.log("a", "tool_call", _nested(5000))),
    (
        "lone surrogate in a log payload",
        lambda m: m.log.log("a", "tool_call", {"x": "\ud800"}),
    ),
]


@pytest.mark.parametrize(
    ("why", "call"), [pytest.param(why, call, id=why) for why, call in UNTYPED]
)
def test_bad_arguments_raise_invalid_input(store_mem: GraphMemory, why: str, call: Call) -> None:
    store_mem.remember("tea at noon")
    before = store_mem.backend.stats()
    with pytest.raises(InvalidInput) as info:
        call(store_mem)
    assert str(info.value)
    assert store_mem.backend.stats() == before


def test_errors_name_the_argument(store_mem: GraphMemory) -> None:
    with pytest.raises(InvalidInput, match=r"as_of .* outside years 1-9999"):
        store_mem.recall("tea", as_of=TOO_LATE)
    with pytest.raises(InvalidInput, match="since must be a datetime"):
        store_mem.list(since="yesterday")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="unknown status 'bogus'"):
        store_mem.list(status="bogus")


def test_extreme_but_valid_values_are_kept(store_mem: GraphMemory) -> None:
    edge = datetime.max.replace(tzinfo=UTC)
    m = store_mem.remember(
        "x", created_at=edge, metadata={"k": [2**63 - 1, -(2**63)], "deep": _nested(60)}
    )
    got = store_mem.get(m.id)
    assert got.created_at == edge and got.metadata["k"] == [2**63 - 1, -(2**63)]
    assert store_mem.list(category=["semantic", "episodic"], status=None, limit=None) == [got]


@pytest.mark.parametrize(
    "page",
    [
        {"order_by": None},
        {"offset": None},
        {"limit": 2.5},
        {"descending": "yes"},
        {"limit": True},
        {"offset": -1},
        {"order_by": "bogus"},
        {"order_by": "embedding"},
    ],
)
def test_check_page_refuses_bad_paging(page: dict[str, Any]) -> None:
    args: dict[str, Any] = {
        "limit": 10,
        "offset": 0,
        "order_by": "created_at",
        "descending": True,
        **page,
    }
    with pytest.raises(InvalidInput):
        check_page(Memory, **args)
    check_page(Memory, limit=None, offset=5, order_by="id", descending=False)


def test_a_trusted_text_query_is_the_validated_one_and_bad_input_is_still_refused() -> None:
    flt = Filter.for_memories(agent_id="a")
    trusted = TextQuery.trusted("where is the blue house", flt, 30)
    checked = TextQuery(text="where is the blue house", filter=flt, k=30)
    assert trusted == checked
    assert trusted.model_dump() == checked.model_dump()
    assert trusted.model_fields_set == checked.model_fields_set
    for bad in (("x", 0), ("", 30), ("x" * 10_001, 30), ("x", "30x"), (3, 30)):
        with pytest.raises(ValueError):
            TextQuery.trusted(bad[0], flt, bad[1])  # type: ignore[arg-type]


def test_a_trusted_vector_query_is_the_validated_one_and_bad_input_is_still_refused() -> None:
    flt = Filter.for_memories(agent_id="a")
    vector = tuple(float(x) / 10 for x in range(384))
    trusted = VectorQuery.trusted(vector, flt, 30)
    checked = VectorQuery(vector=vector, filter=flt, k=30)
    assert trusted == checked
    assert trusted.model_dump() == checked.model_dump()
    assert trusted.model_fields_set == checked.model_fields_set
    for bad in ((vector, 0), ((), 30), (("x",) * 3, 30)):
        with pytest.raises(ValueError):
            VectorQuery.trusted(bad[0], flt, bad[1])  # type: ignore[arg-type]
