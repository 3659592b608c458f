"""A batch validated a field at a time over its items (graphmem.models.plain.plain_memories)
makes exactly the memories the items validated one by one make, and leaves every batch it
cannot vouch for to them: a bad value anywhere in a batch is refused with the error, and
the item number, the items one by one give."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.config import Settings
from graphmem.errors import InvalidInput
from graphmem.models import Category, Memory, Tier, Visibility
from graphmem.models.plain import plain_memories
from graphmem.models.values import new_ids
from tests.conftest import Stores
from tests.unit.test_plain_memory import _same

T = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
EAST = timezone(timedelta(hours=5))

#: per field: values the items one by one take as they are
GOOD: dict[str, list[Any]] = {
    "content": ["hello world", "Ünïcode ✓ text", "  padded\tand\nfolded  ", "ΑΣ final σ"],
    "agent_id": ["alice", "bob", "ns:team/1"],
    "namespace": ["default", "team"],
    "run_id": ["run1", "run2"],
    "importance": [0.0, 0.3, 0.7, 1.0],
    "confidence": [0.2, 1.0],
    "created_at": [T, T + timedelta(seconds=5), T.astimezone(EAST)],
    "expires_at": [T + timedelta(days=1), (T + timedelta(days=2)).astimezone(EAST)],
    "tags": [[], ["A", "b"], ("x", "x"), ["t1"]],
    "metadata": [{}, {"k": "v", "n": 1}, {"deep": {"a": [1, {"b": 2}]}}, {"x": None}],
    "category": ["semantic", Category.EPISODIC],
    "tier": ["short_term", Tier.LONG_TERM],
    "visibility": ["private", "shared", Visibility.ORG],
    "event_type": ["user_message", "success", "debug", "turn"],
    "user_id": ["u1", "u2"],
    "id": ["given-1", "given-2"],
}

#: per field: values the items one by one refuse, or convert (the model's to make)
BAD: dict[str, list[Any]] = {
    "content": ["", "   ", "x\x00y", "bad \ud800 text", 5, "x" * 100_001],
    "agent_id": ["", " bob", "a\x01", 3, "\ud800"],
    "namespace": ["", "x" * 300],
    "run_id": ["", "r\n", 3.5],
    "importance": [1, 0, 1.5, -0.1, math.nan, math.inf, True, "0.5"],
    "confidence": [2.0, 1, -0.0001],
    "created_at": [T.replace(tzinfo=None), "2025-01-01T00:00:00Z"],
    "expires_at": [T.replace(tzinfo=None), 5],
    "tags": [
        ["bad tag!"],
        "solo",
        [f"t{i}" for i in range(65)],
        ["t"] * 70,  # 70 alike: one tag
        [1],
        {"s"},
        [["x"]],
        ["ok", "no good"],
    ],
    "metadata": [{"": 1}, {"k": math.inf}, "text", {"k": "\ud800"}, {"k": 2**70}],
    "category": ["nope", 3, Tier.LONG_TERM],
    "tier": ["weird"],
    "visibility": ["public"],
    "event_type": ["Bad", "x" * 70, 5],
    "id": ["", "a\nb", 5, " padded"],
    "seq": [0, -1],
    "status": ["active"],
    "bogus": [1],
}


class _Str(str):
    pass


def _store(stores: Stores, kind: str) -> GraphMemory:
    lifecycle: dict[str, Any] = {}
    if kind == "expiry":
        lifecycle = {"default_expiry": {"short_term": "1h"}}
    elif kind == "expiry-all":
        lifecycle = {"default_expiry": {"short_term": "1h", "long_term": "30d"}}
    elif kind == "scorer":
        lifecycle = {
            "scorer": {
                "agent_boosts": {"agent": 0.3},
                "agent_match": "kind",
                "keyword_boosts": {"hello": 0.2},
                "signal_boosts": {"k": 0.1},
                "event_boosts": {"success": 0.2},
            }
        }
    return stores.open(embedder=None, settings=Settings(lifecycle=lifecycle))


def _both(mem: GraphMemory, items: list[Any]) -> tuple[Any, list[Memory] | None]:
    """The items one by one (their memories or their error) and the batch column-wise
    (None: left to the items one by one), with the same ids and time."""
    writes = mem.writes
    ids = new_ids(len(items))
    try:
        slow: Any = writes._validate_each(items, ids, T)
    except InvalidInput as e:
        slow = e
    return slow, plain_memories(items, ids, T, writes.classify_columns)


def _check(mem: GraphMemory, items: list[Any]) -> bool:
    """Whether the batch was made column-wise; asserts that it agrees either way."""
    slow, fast = _both(mem, items)
    if isinstance(slow, InvalidInput):
        assert fast is None, items  # a refused batch is the items' to report
        with pytest.raises(InvalidInput) as e:
            mem.writes._validate(items)
        assert str(e.value) == str(slow)
        return False
    if fast is None:
        return False
    assert len(fast) == len(slow)
    for f, s in zip(fast, slow, strict=True):
        _same(f, s)
    # each memory its own metadata and fields set
    assert len({id(m.metadata) for m in fast}) == len(fast)
    assert len({id(m.model_fields_set) for m in fast}) == len(fast)
    return True


@pytest.mark.parametrize("kind", ["default", "expiry", "expiry-all", "scorer"])
@pytest.mark.parametrize("seed", range(4))
def test_generated_batches_agree_with_the_items_one_by_one(
    stores: Stores, kind: str, seed: int
) -> None:
    rng = random.Random(seed)
    taken = refused = several = 0
    with _store(stores, kind) as mem:
        mem.agents.register("alice", kind="agent")
        for _ in range(150):
            shape = ["content", *rng.sample([f for f in GOOD if f != "content"], rng.randint(0, 8))]
            n = rng.randint(1, 30)
            items = [{f: rng.choice(GOOD[f]) for f in shape} for _ in range(n)]
            if "id" in shape:
                for i, item in enumerate(items):
                    item["id"] = f"{item['id']}-{i}"
            if rng.random() < 0.3:  # items of several shapes: a field left out, keys reordered
                for i, item in enumerate(items):
                    if rng.random() < 0.3 and len(shape) > 1:
                        del item[rng.choice(shape[1:])]
                    if rng.random() < 0.2:
                        items[i] = dict(reversed(item.items()))
            roll = rng.random()
            if roll < 0.3:  # one bad value somewhere
                field = rng.choice([f for f in BAD if f in shape or rng.random() < 0.2] or ["id"])
                value = rng.choice(BAD[field])
                if field not in shape:  # a field only one item has: a batch of two shapes
                    for item in items:
                        item[field] = rng.choice(GOOD.get(field, [None]))
                items[rng.randrange(n)][field] = value
            elif roll < 0.4:  # a field None in every item, or in one
                field = rng.choice(shape[1:] or ["run_id"])
                for item in items if rng.random() < 0.5 else items[:1]:
                    if field in item:
                        item[field] = None
            elif roll < 0.45:  # a str subclass
                items[rng.randrange(n)]["content"] = _Str("sub")
            if _check(mem, items):
                taken += 1
                several += len({tuple(item) for item in items}) > 1
            elif isinstance(_both(mem, items)[0], InvalidInput):
                refused += 1
    assert taken > 40 and refused > 10 and several > 10


def test_items_of_several_shapes_are_made_a_shape_at_a_time(stores: Stores) -> None:
    items: list[dict[str, Any]] = []
    for i in range(60):
        item: dict[str, Any] = {"content": f"memory {i}", "agent_id": "a"}
        if i % 3:
            item["run_id"] = "r"
        if i % 4 == 0:
            item["tags"] = ["t"]
        items.append(item if i % 5 else dict(reversed(item.items())))
    with _store(stores, "default") as mem:
        ids = new_ids(len(items))
        made = plain_memories(items, ids, T, mem.writes.classify_columns)
        assert made is not None
        assert [m.id for m in made] == ids and [m.content for m in made] == [
            i["content"] for i in items
        ]
        assert _check(mem, items)
        many = [{f"k{i}": None, "content": "x"} for i in range(9)]  # nine shapes: one by one
        assert plain_memories(many, new_ids(9), T, mem.writes.classify_columns) is None
        assert _check(mem, many) is False


@pytest.mark.parametrize(
    ("field", "value"), [(f, v) for f, values in BAD.items() for v in values], ids=repr
)
def test_one_bad_value_among_a_thousand_is_refused_as_item_by_item(
    stores: Stores, field: str, value: Any
) -> None:
    items = [
        {
            "content": f"memory {i}",
            "agent_id": "a",
            "namespace": "ns",
            "run_id": f"r{i % 7}",
            "tags": ["t"],
            "importance": 0.5,
            "created_at": T + timedelta(seconds=i),
        }
        for i in range(1000)
    ]
    with _store(stores, "default") as mem:
        assert _check(mem, items)  # the good batch is made column-wise
        items[637] = {**items[637], field: value}
        slow, fast = _both(mem, items)
        if not isinstance(slow, InvalidInput):
            # a value the model converts (an int importance) is the items' to make one by
            # one; a good one (70 alike tags are one) may be made column-wise, alike
            _check(mem, items)
            return
        assert fast is None
        assert str(slow).startswith("item 637: ")
        with pytest.raises(InvalidInput) as e:
            mem.remember_many(items)
        assert str(e.value) == str(slow) or "holds text that cannot be stored" in str(e.value)
        assert mem.count() == 0


def test_a_batch_of_one_shape_is_made_column_wise(stores: Stores) -> None:
    items = [
        {
            "content": f"memory {i}",
            "agent_id": "a",
            "run_id": "r",
            "tags": ["t"],
            "importance": 0.5,
            "metadata": {"k": i},
            "user_id": "u",
        }
        for i in range(50)
    ]
    with _store(stores, "default") as mem:
        made = plain_memories(items, new_ids(50), T, mem.writes.classify_columns)
        assert made is not None and [m.content for m in made] == [i["content"] for i in items]
        assert made[3].metadata == {"k": 3, "user_id": "u"}
        assert made[0].tier is Tier.LONG_TERM and made[0].created_at == T
        stored = mem.remember_many(items)
        assert [m.metadata for m in mem.get([m.id for m in stored])] == [m.metadata for m in stored]


def test_an_end_users_memory_with_metadata_that_is_no_mapping_is_refused(stores: Stores) -> None:
    with _store(stores, "default") as mem:
        for meta in ("text", [1], 5):
            with pytest.raises(InvalidInput, match=r"^item 1: invalid Memory: metadata"):
                mem.remember_many(
                    [{"content": "a"}, {"content": "b", "user_id": "u", "metadata": meta}]
                )
        assert mem.count() == 0


def test_a_batchs_ids_are_the_ids_made_one_after_the_other() -> None:
    """``new_ids`` makes a batch's ids at once: each the time in nanoseconds (16 hex
    digits, big-endian, one more for each id) and 8 random bytes (16 hex digits),
    strictly increasing within a batch and from one batch to the next."""
    import time

    from graphmem.models.values import new_id

    before = time.time_ns()
    made = [*new_ids(1000), new_id(), *new_ids(1), *new_ids(0), *new_ids(3)]
    assert len(made) == 1005
    assert all(len(i) == 32 and int(i, 16) >= 0 and i == i.lower() for i in made)
    assert made == sorted(made) and len(set(made)) == len(made)
    times = [int(i[:16], 16) for i in made]
    assert before <= times[0] <= time.time_ns()
    assert times[:1000] == list(range(times[0], times[0] + 1000))
    assert len({i[16:] for i in made}) == len(made)  # the random halves differ
