"""The argument check of a batch at once (graphmem.boundary): a list of mappings checked by
their shapes, and every string of a batch checked joined, answer what the check item by
item and the walk answer — a bad key or a lone surrogate anywhere is still found, and
refused with the same message."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from graphmem.boundary import (
    _MAX_DEPTH,
    _all_text_storable,
    _every_text_storable,
    _fits,
    _walk_text_storable,
)
from graphmem.errors import InvalidInput
from graphmem.models import Memory
from tests.conftest import Stores

BAD = "bad \ud800 text"
T = datetime(2025, 1, 1, tzinfo=UTC)
ITEMS = Iterable[Memory | Mapping[str, Any]]


def _item(i: int) -> dict[str, Any]:
    return {
        "content": f"memory {i}",
        "agent_id": "a",
        "run_id": f"r{i % 3}",
        "tags": ["t", "u"],
        "importance": 0.5,
        "created_at": T,
        "metadata": {"k": [1, {"deep": "x"}], "n": None},
    }


def _has_bad_text(value: Any) -> bool:
    """Whether any string anywhere inside ``value`` cannot be stored (no budget, no depth)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, Mapping):
        return any(_has_bad_text(k) or _has_bad_text(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(_has_bad_text(v) for v in value)
    return False


def _nested(depth: int, leaf: Any) -> Any:
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"k": leaf}
    return leaf


#: where a bad string can sit in an item (item -> the item with it there)
PLACES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "content": lambda item: {**item, "content": BAD},
    "tag": lambda item: {**item, "tags": ["t", BAD]},
    "metadata key": lambda item: {**item, "metadata": {BAD: 1}},
    "metadata deep": lambda item: {**item, "metadata": {"k": _nested(4, BAD)}},
    "past the walk's depth": lambda item: {**item, "metadata": _nested(_MAX_DEPTH + 3, BAD)},
    "key of the item": lambda item: {**item, BAD: 1},
    "a tuple": lambda item: {**item, "tags": ("t", BAD)},
    "a set": lambda item: {**item, "tags": {"t", BAD}},
    "a mapping of another class": lambda item: {**item, "metadata": OrderedDict(k=BAD)},
    "an item of another shape": lambda item: {"content": BAD},
}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("at", [0, 1, 499, 999])
def test_a_bad_string_anywhere_is_found_as_the_walk_finds_it(place: str, at: int) -> None:
    items: list[Any] = [_item(i) for i in range(1000)]
    assert _every_text_storable(items)
    items[at] = PLACES[place](items[at])
    assert not _every_text_storable(items)  # never sure of a batch holding one
    assert _all_text_storable(items) == _walk_text_storable(items)
    assert _all_text_storable(items[:1] + items[at : at + 1]) is False or place.startswith("past")


@pytest.mark.parametrize("seed", range(20))
def test_generated_values_are_answered_as_the_walk_answers(seed: int) -> None:
    rng = random.Random(seed)
    leaves: list[Any] = ["ok", "Ünï", BAD, 1, 2.5, None, True, T, b"bytes", object()]

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth > 9 or roll < 0.4:
            return rng.choice(leaves)
        n = rng.randint(0, 4)
        if roll < 0.6:
            return [value(depth + 1) for _ in range(n)]
        if roll < 0.7:
            return tuple(value(depth + 1) for _ in range(n))
        if roll < 0.75:
            return OrderedDict((f"k{i}", value(depth + 1)) for i in range(n))
        keys = rng.sample(["a", "b", "c", BAD, 3, ("t", "u")], k=min(n, 6))
        return {k: value(depth + 1) for k in keys}

    for _ in range(300):
        v = [value(1) for _ in range(rng.randint(0, 5))]
        if _every_text_storable(v):
            assert not _has_bad_text(v), v
        assert _all_text_storable(v) == _walk_text_storable(v), v


def test_a_batch_of_mappings_fits_by_its_shapes() -> None:
    items: list[Any] = [_item(i) for i in range(1000)]
    assert _fits(items, ITEMS)
    items[500] = {**items[500], 7: "a key that is no text"}
    assert not _fits(items, ITEMS)
    items[500] = OrderedDict(content="x")  # another mapping: checked by itself, fits
    assert _fits(items, ITEMS)
    items[500] = OrderedDict({7: "x"})
    assert not _fits(items, ITEMS)
    items[500] = Memory(content="whole")
    assert _fits(items, ITEMS)
    items[500] = 42
    assert not _fits(items, ITEMS)
    assert _fits((_item(1), _item(2)), ITEMS) and not _fits([{1: 2}], ITEMS)


@pytest.mark.parametrize("at", [3, 999])
def test_a_batch_with_a_bad_key_or_text_is_refused_with_the_same_words(
    stores: Stores, at: int
) -> None:
    with stores.open(embedder=None) as mem:
        items: list[Any] = [_item(i) for i in range(1000)]
        items[at] = {**items[at], 7: "x"}
        with pytest.raises(InvalidInput, match=r"^mem\.remember_many\(\): items must be "):
            mem.remember_many(items)
        items[at] = {**_item(at), "content": BAD}
        with pytest.raises(InvalidInput) as e:
            mem.remember_many(items)
        if _walk_text_storable(items):  # past the walk's budget: the item's own check
            assert str(e.value).startswith(f"item {at}: ")
        else:
            assert str(e.value) == "mem.remember_many(): items holds text that cannot be stored"
        assert mem.count() == 0
