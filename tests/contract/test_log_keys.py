"""The log store's Redis-style keys, hashes and sets, on every backend."""

from __future__ import annotations

import pytest

from graphmem.backends.base import GraphBackend
from graphmem.errors import InvalidInput
from graphmem.memory import GraphMemory
from tests.threads import run_threads


def test_strings_hold_any_json_value(mem: GraphMemory) -> None:
    log = mem.log
    assert log.get("cfg") is None and log.get("cfg", "none") == "none"
    assert log.set("cfg", {"model": "x", "limits": [1, 2]}) is True
    assert log.get("cfg") == {"model": "x", "limits": [1, 2]}
    log.set("cfg", 3)
    assert log.get("cfg") == 3
    log.set("nothing", None)
    assert log.get("nothing", "absent") is None  # a stored null is not an absent key
    assert log.delete("cfg", "nothing", "never") == 2
    assert log.get("cfg", "absent") == "absent"


def test_hashes(mem: GraphMemory) -> None:
    log = mem.log
    assert log.hset("agent:1", "status", "busy") == 1
    assert log.hset("agent:1", "status", "idle") == 0
    assert log.hset("agent:1", "load", 0.5) == 1
    assert log.hget("agent:1", "status") == "idle"
    assert log.hget("agent:1", "missing", "d") == "d"
    assert log.hkeys("agent:1") == ["load", "status"]
    assert log.hgetall("agent:1") == {"load": 0.5, "status": "idle"}
    assert log.hdel("agent:1", "status", "missing") == 1
    assert log.hdel("agent:1", "load") == 1
    assert log.hkeys("agent:1") == []  # the key went with its last field
    assert log.delete("agent:1") == 0


def test_sets(mem: GraphMemory) -> None:
    log = mem.log
    assert log.sadd("seen", "a", "b", "a", 7) == 3
    assert log.sadd("seen", "a") == 0
    assert log.smembers("seen") == {"a", "b", 7}
    assert log.srem("seen", "a", "zz") == 1
    assert log.srem("seen", "b", 7) == 2
    assert log.smembers("seen") == set()


def test_keys_are_typed_and_bad_input_changes_nothing(mem: GraphMemory) -> None:
    log = mem.log
    log.set("s", "text")
    log.sadd("members", "a")
    with pytest.raises(InvalidInput, match="holds a string"):
        log.hset("s", "f", 1)
    with pytest.raises(InvalidInput, match="holds a set"):
        log.get("members")
    with pytest.raises(InvalidInput, match="key"):
        log.set("", 1)
    with pytest.raises(InvalidInput):
        log.set("k", {"x": object()})
    with pytest.raises(InvalidInput, match="member"):
        log.sadd("members", "b", ["not", "hashable"])
    assert log.get("s") == "text" and log.smembers("members") == {"a"}
    assert log.get("k", "absent") == "absent"


def test_keys_do_not_show_in_the_log_or_its_stats(mem: GraphMemory) -> None:
    log = mem.log
    log.set("k", "v" * 5000)
    log.hset("h", "f", 1)
    assert log.count() == 0 and log.tail() == []
    assert log.stats().payloads == 0


def test_concurrent_writers_lose_nothing(mem: GraphMemory) -> None:
    log = mem.log

    def work(i: int) -> None:
        for j in range(5):
            log.sadd("all", f"{i}-{j}")
            log.hset("fields", f"{i}-{j}", j)

    run_threads(work, [(i,) for i in range(8)])
    assert len(log.smembers("all")) == 40
    assert len(log.hkeys("fields")) == 40


def test_two_handles_with_four_threads_each_lose_nothing(
    mem: GraphMemory, twin: GraphBackend
) -> None:
    """Writers of two handles (two file handles / two drivers) race on one key: a lost
    race is retried from a fresh read, so every acknowledged member and field is kept."""
    other = GraphMemory(twin, embedder=None, owns_backend=False)

    def work(m: GraphMemory, i: int) -> None:
        for j in range(5):
            m.log.sadd("all", f"{i}-{j}")
            m.log.hset("fields", f"{i}-{j}", j)

    try:
        run_threads(work, [(mem if i % 2 else other, i) for i in range(8)])
    finally:
        other.close()
    assert mem.log.smembers("all") == {f"{i}-{j}" for i in range(8) for j in range(5)}
    assert len(mem.log.hkeys("fields")) == 40
