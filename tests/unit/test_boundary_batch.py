"""The argument check of a batch at once (graphmem.boundary): a list of mappings checked by
their shapes, and every string of a batch checked joined, answer what the check item by
item and the walk answer — a bad key or a lone surrogate anywhere is still found, and
refused with the same message."""

from __future__ import annotations

import inspect
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
    _hints,
    _walk_text_storable,
    batch_columns,
    check_arguments,
    guard,
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


def _check_remember_many(mem: Any, items: Any) -> None:
    """The store's argument check of ``mem.remember_many(items)``, alone."""
    fn = type(mem).remember_many.__wrapped__
    sig = inspect.signature(fn)
    sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    check_arguments("mem.remember_many", sig, _hints(fn), (items,), {})


def test_the_checks_columns_of_a_batch_are_its_items_values_for_its_verb_only(
    stores: Stores,
) -> None:
    """The check of a batch of one shape hands its columns (key -> each item's value, in
    the items' key order) to the verb's validation of that very list, once; a batch of
    several shapes, another list, a later check or the end of the verb forget them."""
    items: list[Any] = [_item(i) for i in range(300)]
    with stores.open(embedder=None) as mem:
        _check_remember_many(mem, items)
        assert batch_columns(list(items)) is None  # another list (and forgotten)
        _check_remember_many(mem, items)
        read = batch_columns(items)
        assert read is not None and list(read) == list(items[0])
        assert read == {k: [item[k] for item in items] for k in items[0]}
        assert batch_columns(items) is None  # once
        _check_remember_many(mem, items)
        _check_remember_many(mem, [{"content": "other"}])
        assert batch_columns(items) is None
        several = [*items[:10], dict(reversed(items[10].items()))]  # two shapes
        _check_remember_many(mem, several)
        assert batch_columns(several) is None
        # the verb forgets them: its items changed afterwards are read again
        made = mem.remember_many(items)
        assert batch_columns(items) is None
        for i, item in enumerate(items):
            item["content"] = f"changed {i}"
        again = mem.writes.remember_many(items)  # an unchecked verb
        assert [m.content for m in again] == [f"changed {i}" for i in range(300)]
        assert [m.content for m in made] == [f"memory {i}" for i in range(300)]


def test_a_verb_that_fails_forgets_the_columns_of_its_check(stores: Stores) -> None:
    items: list[Any] = [_item(i) for i in range(40)]
    items[7] = {**items[7], "importance": 5.0}  # refused by the validation
    with stores.open(embedder=None) as mem:
        with pytest.raises(InvalidInput, match=r"^item 7: "):
            mem.remember_many(items)
        assert mem.count() == 0
        items[7]["importance"] = 0.25
        assert batch_columns(items) is None
        assert mem.writes.remember_many(items)[7].importance == 0.25


class _Verbs:
    """A face of two verbs taking a batch: one reads what its check read, one does not."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def reads(self, items: list[Mapping[str, Any]]) -> None:
        self.seen.append(batch_columns(items))

    def ignores(self, items: list[Mapping[str, Any]], fail: bool = False) -> None:
        if fail:
            raise InvalidInput("refused")


guard(_Verbs, prefix="verbs")


def test_what_a_check_read_lives_as_long_as_its_verb() -> None:
    items = [_item(i) for i in range(20)]
    verbs = _Verbs()
    verbs.reads(items)
    assert verbs.seen[-1] == {k: [item[k] for item in items] for k in items[0]}
    verbs.ignores(items)
    assert batch_columns(items) is None
    with pytest.raises(InvalidInput):
        verbs.ignores(items, fail=True)
    assert batch_columns(items) is None
    verbs.reads([*items, {"content": "another shape"}])  # not read column by column
    assert verbs.seen[-1] is None
