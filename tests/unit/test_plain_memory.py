"""The batch write path's fast Memory construction makes exactly what the model's validation
makes, and leaves every item it cannot vouch for to the model (which reports the error)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from graphmem.errors import InvalidInput
from graphmem.models import Category, Memory, Tier, Visibility, validated
from graphmem.models.plain import plain_memory
from graphmem.models.queries import RecallResult

T = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

# per field: values the model accepts and values it refuses or converts
CHOICES: dict[str, list[Any]] = {
    "id": ["m1", "a" * 256, "a" * 257, " padded", "tab\there", 7, "ok-id:1"],
    "content": ["hello world", "  ", "", "x\x00y", "bad \ud800 text", 5, "Ünïcode ✓"],
    "agent_id": ["alice", "", " bob", "a\x01", 3, "ns:team/1"],
    "namespace": ["default", "team", "", "x" * 300],
    "run_id": ["run1", "", "r\n"],
    "importance": [0.0, 0.7, 1.0, 1, 0, 1.5, -0.1, math.nan, math.inf, True, "0.5"],
    "confidence": [0.2, 1.0, 2.0, 1],
    "created_at": [
        T,
        T.replace(tzinfo=None),
        T.astimezone(timezone(timedelta(hours=5))),
        "2025-01-01T00:00:00Z",
        datetime(1, 1, 1, 1, tzinfo=timezone(timedelta(hours=3))),
    ],
    "expires_at": [T + timedelta(days=1), T.replace(tzinfo=None)],
    "tags": [[], ["A", "b"], ("x", "x"), ["bad tag!"], "solo", ["t"] * 70, [1], {"s"}],
    "metadata": [{}, {"k": "v", "n": 1}, {"deep": {"a": [1, {"b": 2}]}}, {"": 1}, {"x": None}],
    "category": ["semantic", Category.EPISODIC, "nope", 3],
    "tier": ["short_term", Tier.LONG_TERM, "weird"],
    "visibility": ["private", "shared", Visibility.ORG, "public"],
    "event_type": ["user_message", "Bad", "x" * 70],
    "seq": [0, 3],
    "status": ["active"],
    "unknown_key": [1],
}

FAST_FIELDS = [k for k in CHOICES if k not in ("seq", "status", "unknown_key")]


def _pydantic(item: dict[str, Any]) -> Memory | None:
    try:
        return validated(Memory, dict(item))
    except InvalidInput:
        return None


def _same(fast: Memory, slow: Memory) -> None:
    assert fast == slow
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_fields_set == slow.model_fields_set
    for name in Memory.model_fields:  # the same classes too (an enum is not its text)
        assert type(getattr(fast, name)) is type(getattr(slow, name)), name
    assert list(fast.__dict__) == list(slow.__dict__)
    assert hash(fast.content_hash) == hash(slow.content_hash)


@pytest.mark.parametrize("seed", range(6))
def test_generated_items_agree_with_the_model(seed: int) -> None:
    rng = random.Random(seed)
    fast_taken = 0
    for _ in range(400):
        item: dict[str, Any] = {"content": "a memory", "created_at": T, "id": f"id{rng.random()}"}
        for name in rng.sample(list(CHOICES), rng.randint(0, 6)):
            item[name] = rng.choice(CHOICES[name])
        slow = _pydantic(item)
        fast = plain_memory(dict(item))
        if slow is None:
            assert fast is None, item  # a refused item is the model's to report
            continue
        if fast is None:
            continue  # the model converted something: its own result stands
        fast_taken += 1
        _same(fast, slow)
    assert fast_taken > 40  # the common shapes do take the fast path


def test_every_field_of_a_typical_batch_item_takes_the_fast_path() -> None:
    item = {
        "content": "Carla is allergic to peanuts",
        "agent_id": "agent3",
        "namespace": "ns1",
        "run_id": "run9",
        "tags": ["Food", "health"],
        "importance": 0.4,
        "confidence": 0.9,
        "created_at": T,
        "metadata": {"user_id": "u1", "nested": {"a": 1}},
        "category": "episodic",
        "tier": Tier.SHORT_TERM,
        "visibility": "shared",
        "event_type": "user_message",
        "expires_at": T + timedelta(days=3),
    }
    fast = plain_memory(item)
    assert fast is not None
    slow = validated(Memory, {**item, "id": fast.id})
    # ids are made fresh on each side; with the same id the two are the same memory
    again = plain_memory({**item, "id": fast.id})
    assert again is not None
    _same(again, slow)
    assert fast.audience == "ns:ns1" and fast.valid_from == T and fast.updated_at == T


def test_defaults_follow_the_model() -> None:
    fast = plain_memory({"content": "only text"})
    assert fast is not None
    slow = validated(Memory, {"content": "only text", "id": fast.id, "created_at": fast.created_at})
    assert fast.model_dump() == slow.model_dump()
    # the model counts created_at as given in ``slow`` only
    assert fast.model_fields_set == {"content"}
    assert fast.created_at.tzinfo is UTC


def test_the_fast_memory_is_frozen_and_evolves_like_a_validated_one() -> None:
    fast = plain_memory({"content": "x", "tags": ["a"], "created_at": T})
    assert fast is not None
    with pytest.raises(ValidationError, match="frozen"):
        setattr(fast, "content", "y")  # noqa: B010 - mypy knows the field is frozen
    slow = validated(Memory, {"content": "x", "tags": ["a"], "created_at": T, "id": fast.id})
    _same(fast.evolve(content="y", agent_id="b"), slow.evolve(content="y", agent_id="b"))


def test_remember_many_refuses_what_the_model_refuses(store_mem: Any) -> None:
    with pytest.raises(InvalidInput, match="item 1: invalid Memory: importance"):
        store_mem.remember_many([{"content": "fine"}, {"content": "x", "importance": 1.5}])
    assert store_mem.count() == 0
    # an int importance is the model's to convert; both kinds of item in one batch
    stored = store_mem.remember_many([{"content": "a", "importance": 1}, {"content": "b"}])
    model = validated(Memory, {"content": "a", "importance": 1})
    assert type(stored[0].importance) is type(model.importance)
    assert [m.content for m in store_mem.list(limit=5)] == ["a", "b"] or store_mem.count() == 2


def test_a_trusted_recall_result_equals_a_validated_one() -> None:
    m = validated(Memory, {"content": "x", "created_at": T})
    fast = RecallResult.trusted(m, 0.5, {"relevance": 0.25, "score": 0.5})
    assert fast == RecallResult(memory=m, score=0.5, breakdown={"relevance": 0.25, "score": 0.5})
    assert fast.memory is m
    # values pydantic would convert still go through it
    odd = RecallResult.trusted(m, 1.0, {"hit": 1, "flag": True})
    assert odd.breakdown == {"hit": 1.0, "flag": 1.0}
    assert all(type(v) is float for v in odd.breakdown.values())
