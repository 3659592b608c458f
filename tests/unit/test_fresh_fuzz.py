"""Hostile batches large enough to be planned column-wise (graphmem.backends.embedded.
appends) are refused as the general plan refuses them, with a typed error and nothing
written, or stored exactly as the general plan stores them."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded.appends import FRESH_MIN
from graphmem.errors import GraphMemError
from graphmem.models import Memory
from tests.unit.test_fresh_memories import T0, _same_both_ways, _state

pytestmark = pytest.mark.embedded("compares the embedded store's in-memory state and its file")


class Text(str):
    """A str subclass, as a caller's own string type would be."""


class Items(Mapping[str, Any]):
    """A mapping that is not a dict."""

    def __init__(self, **kw: Any) -> None:
        self._d = kw

    def __getitem__(self, k: str) -> Any:
        return self._d[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)


def _nested(depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {"leaf": 1}
    for i in range(depth):
        out = {f"l{i}": out}
    return out


_LOOP: dict[str, Any] = {"a": 1}
_LOOP["self"] = _LOOP

#: (field, value) a good item is given: each is refused or stored alike by both plans
_ODD: list[tuple[str, Any]] = [
    ("content", Text("a str subclass")),
    ("content", "x" * 100_000),
    ("content", "x" * 1_000_000),
    ("content", "tab\tand\nnewline and emoji \U0001f600"),
    ("content", b"bytes"),
    ("content", None),
    ("content", "lone \udfff low surrogate"),
    ("agent_id", Text("agent")),
    ("agent_id", None),
    ("run_id", Text("run")),
    ("run_id", None),
    ("namespace", ""),
    ("namespace", Text("ns")),
    ("importance", float("inf")),
    ("importance", float("-inf")),
    ("importance", True),
    ("importance", 1),
    ("importance", "0.5"),
    ("importance", None),
    ("confidence", float("nan")),
    ("tags", ("a", "b")),
    ("tags", {"a", "b"}),
    ("tags", frozenset({"a"})),
    ("tags", ["a", "a"]),
    ("tags", [Text("sub")]),
    ("tags", {"a": 1}),
    ("tags", None),
    ("tags", [b"bytes"]),
    ("tags", []),
    ("metadata", _nested(50)),
    ("metadata", _nested(2_000)),
    ("metadata", {1: "int key"}),
    ("metadata", {"t": (1, 2)}),
    ("metadata", {"s": {1, 2}}),
    ("metadata", {"d": T0}),
    ("metadata", {"b": b"x"}),
    ("metadata", {"n": float("nan")}),
    ("metadata", {"big": 2**70}),
    ("metadata", _LOOP),
    ("metadata", {Text("k"): Text("v")}),
    ("metadata", OrderedDict(a=1)),
    ("metadata", MappingProxyType({"a": 1})),
    ("created_at", "2025-01-01T00:00:00+00:00"),
    ("created_at", 1_700_000_000),
    ("created_at", date(2025, 1, 1)),
    ("created_at", datetime(1, 1, 1, tzinfo=UTC)),
    ("created_at", datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
    ("created_at", datetime(2025, 1, 1, tzinfo=timezone(timedelta(hours=-13, minutes=-7)))),
    ("created_at", datetime(2025, 1, 1)),
    ("valid_from", datetime(2025, 1, 1)),
    ("expires_at", T0 - timedelta(days=1)),
    ("event_type", Text("turn")),
    ("event_type", ""),
    ("visibility", "shared"),
    ("visibility", "org"),
    ("seq", 3),
    ("seq", True),
    ("id", Text("subclass-id")),
    ("id", "x" * 10_000),
]


def _good(i: int) -> dict[str, Any]:
    return {
        "id": f"g{i}",
        "content": f"good memory {i}",
        "agent_id": "a",
        "run_id": "r",
        "tags": ["ok"],
        "created_at": T0 + timedelta(seconds=i),
    }


def _attempt(path: Path, batch: list[Any]) -> dict[str, Any]:
    with GraphMemory.open(path, embedder=None) as mem:
        mem.remember_many([_good(1000 + i) for i in range(FRESH_MIN)])
        before = _state(mem, path)
        try:
            mem.remember_many(batch)
        except GraphMemError as e:
            assert _state(mem, path) == before  # nothing written, in memory or in the file
            return {"error": (type(e).__name__, str(e))}
        state = _state(mem, path)
    with GraphMemory.open(path, embedder=None) as again:
        state["reopened"] = _state(again, path)["attrs"]
    return state


def _alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: list[Any]) -> None:
    fast = _same_both_ways(lambda p: _attempt(p, batch), tmp_path, monkeypatch)
    if "error" not in fast:  # stored: the column-wise plan was the one compared
        assert fast["taken"][-1] >= FRESH_MIN, fast["taken"]


def _batch(field: str, value: Any, at: int) -> list[Any]:
    batch: list[Any] = [_good(i) for i in range(FRESH_MIN + 4)]
    batch[at] = {**batch[at], field: value}
    return batch


@pytest.mark.parametrize("field,value", _ODD, ids=[f"{f}{i}" for i, (f, _v) in enumerate(_ODD)])
def test_an_odd_field_is_refused_or_stored_as_the_general_plan_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: Any
) -> None:
    _alike(tmp_path, monkeypatch, _batch(field, value, 7))


def _mixtures() -> list[list[Any]]:
    good = [_good(i) for i in range(FRESH_MIN + 4)]
    models = [Memory(**g) for g in good]
    return [
        [*good[:10], *models[10:]],  # dicts and models
        [*good, {**good[3]}],  # an id twice in the batch
        [*good, models[3]],  # an id twice, once a model
        [*good[:-1], {**good[-1], "id": "g1000"}],  # the id of a stored memory
        [*good[:-1], Memory(**{**good[-1], "id": "g1001"})],
        [Items(**g) for g in good],  # mappings that are not dicts
        [*good, [("content", "pairs")]],
        [*good, Memory],
        iter(good),  # type: ignore[list-item]
    ]


@pytest.mark.parametrize("n", range(9))
def test_a_mixed_batch_is_refused_or_stored_as_the_general_plan_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    _alike(tmp_path, monkeypatch, list(_mixtures()[n]))


@pytest.mark.parametrize("seed", range(8))
def test_random_odd_fields_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    batch: list[Any] = [_good(i) for i in range(FRESH_MIN * 3)]
    for at in rng.sample(range(len(batch)), 5):
        field, value = rng.choice(_ODD)
        batch[at] = {**batch[at], field: value}
    _alike(tmp_path, monkeypatch, batch)
