"""The argument check of the public face (graphmem.boundary) on long batches: every item is
checked, and an annotation is read once, not once per item."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, Unpack

import pytest

from graphmem import GraphMemory
from graphmem.boundary import _checker, _fits, _hints, check_arguments, guard, unchecked
from graphmem.errors import InvalidInput
from graphmem.models import Memory
from graphmem.scoping import Scope
from tests.conftest import Stores


def test_a_wrong_item_deep_in_a_long_batch_is_refused_and_nothing_is_written(
    stores: Stores,
) -> None:
    items: list[Any] = [{"content": f"note {i}"} for i in range(20_000)]
    items[15_000] = 42
    with stores.open("b.db") as mem:
        with pytest.raises(InvalidInput):
            mem.remember_many(items)
        assert mem.count() == 0


def test_checks_are_built_once_per_annotation() -> None:
    tp = Iterable[Memory | Mapping[str, Any]]
    assert _checker(tp) is _checker(tp)
    assert _checker(list[str]) is _checker(list[str])


@pytest.mark.parametrize(
    ("value", "tp", "fits"),
    [
        (["a", "b"], list[str], True),
        ("ab", list[str], False),
        (["a", 1], list[str], False),
        ({"a": 1}, dict[str, Any], True),
        ({1: 1}, dict[str, Any], False),
        ({"a": "x"}, dict[str, int], False),
        ((1, "a"), tuple[int, str], True),
        ((1, 2), tuple[int, str], False),
        ((1, 2, 3), tuple[int, ...], True),
        (None, int | None, True),
        (True, int, False),
        (2**70, int, False),
        (float("nan"), float, False),
        ("a\ud800", str, False),
        ([{"content": "x"}, Memory(content="y")], Iterable[Memory | Mapping[str, Any]], True),
    ],
)
def test_values_fit_their_annotations(value: Any, tp: Any, fits: bool) -> None:
    assert _fits(value, tp) is fits


@pytest.mark.embedded("a pathlib.Path names a store file")
def test_a_path_object_opens_the_same_store_as_its_text(tmp_path: Any) -> None:
    with GraphMemory.open(tmp_path / "p.db") as mem:
        mem.remember("kept in a file named by a Path")
    with GraphMemory.open(str(tmp_path / "p.db")) as mem:
        assert mem.count() == 1


@pytest.mark.embedded("a bytes path is refused before any store is opened")
def test_bytes_are_not_a_path() -> None:
    with pytest.raises(InvalidInput):
        GraphMemory.open(b"x.db")  # type: ignore[arg-type]


class _Window(TypedDict, total=False):
    k: int
    tags: Sequence[str] | None
    scope: Scope | str | None


def _windowed(query: str, **options: Unpack[_Window]) -> int:
    return len(options)


def test_keywords_unpacked_from_a_typed_dict_are_checked_key_by_key() -> None:
    check = functools.partial(check_arguments, "w", inspect.signature(_windowed), _hints(_windowed))
    check(("q",), {"k": 3, "tags": ["a"], "scope": "agent"})
    check(("q",), {})
    with pytest.raises(InvalidInput, match="unexpected keyword argument 'kk'"):
        check(("q",), {"kk": 3})
    with pytest.raises(InvalidInput, match="k must be an int"):
        check(("q",), {"k": "3"})
    with pytest.raises(InvalidInput, match="tags must be"):
        check(("q",), {"tags": "a"})
    with pytest.raises(InvalidInput, match="scope must be"):
        check(("q",), {"scope": 3})


def test_the_store_s_filter_keywords_are_checked_before_anything_runs(stores: Stores) -> None:
    with stores.open("f.db", embedder=None) as mem:
        mem.remember("tea", agent_id="a")
        for verb in (mem.list, mem.count, functools.partial(mem.recall, "tea")):
            with pytest.raises(InvalidInput, match="agent_idd"):
                verb(agent_idd="a")
            with pytest.raises(InvalidInput, match="since must be"):
                verb(since="yesterday")
        assert [m.content for m in mem.list(agent_id="a", status=None)] == ["tea"]
        assert mem.count(agent_id="b") == 0


class _Counter:
    def add(self, n: int) -> int:
        return n + 1

    @classmethod
    def make(cls, n: int) -> int:
        return n * 2


def test_unchecked_runs_a_guarded_verb_without_its_check_and_leaves_others_alone() -> None:
    guarded = type("Guarded", (), dict(vars(_Counter)))
    guard(guarded, ["add", "make"])
    obj = guarded()
    with pytest.raises(InvalidInput, match="n must be an int"):
        obj.add(1.5)
    with pytest.raises(InvalidInput, match="n must be an int"):
        guarded.make(1.5)
    # graphmem's own calls pass on what a public verb checked: no second bind
    assert unchecked(obj.add)(1.5) == 2.5
    assert unchecked(guarded.make)(1.5) == 3.0
    plain = _Counter()
    assert unchecked(plain.add) == plain.add
    assert unchecked(_windowed) is _windowed


def _pick(text: str, n: int, x: float) -> None:
    return None


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("a\ud800b", 1, 0.5), "text that cannot be stored"),
        (("a", 10**30, 0.5), "outside the 64-bit range"),
        (("a", -(2**63) - 1, 0.5), "outside the 64-bit range"),
        (("a", 1, float("nan")), "not a finite number"),
        (("a", 1, float("inf")), "not a finite number"),
        (("a", 1, 10**400), "not a finite number"),
    ],
)
def test_a_value_of_the_right_type_refused_says_why(args: tuple[Any, ...], reason: str) -> None:
    # found by probing the HTTP API: "content must be a str, not str '\udfff'" and
    # "k must be an int, not int 1000…" named the type the value already had
    check = functools.partial(check_arguments, "p", inspect.signature(_pick), _hints(_pick))
    with pytest.raises(InvalidInput, match=reason) as refused:
        check(args, {})
    assert ", not str " not in str(refused.value) and ", not int " not in str(refused.value)
