"""The embedded store's index buckets: a value held by one node maps to its key, by two
or more to their set, and the change between the two is exact both ways."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded.buckets import Bucket, index_into, index_out, keys_of
from graphmem.models import Filter

pytestmark = pytest.mark.embedded("the embedded store's in-memory index buckets")


def test_one_holder_is_a_key_more_are_a_set_and_back() -> None:
    bucket: Bucket = {}
    fields = [("tags", bucket)]
    index_into(fields, "M:1", {"tags": ["a", "b"]})
    index_into(fields, "M:1", {"tags": ["a"]})  # the same key again changes nothing
    assert bucket == {"a": "M:1", "b": "M:1"}
    index_into(fields, "M:2", {"tags": ["a"]})
    assert bucket == {"a": {"M:1", "M:2"}, "b": "M:1"}
    assert keys_of(bucket, "a") == {"M:1", "M:2"} and keys_of(bucket, "b") == {"M:1"}
    assert keys_of(bucket, "zzz") == set()
    index_out(fields, "M:1", {"tags": ["a", "b"]})
    assert bucket == {"a": "M:2"}
    index_out(fields, "M:3", {"tags": ["a"]})  # not there: nothing changes
    assert bucket == {"a": "M:2"}
    index_out(fields, "M:2", {"tags": ["a"]})
    assert bucket == {}


def test_a_store_indexes_unique_hashes_by_key_and_finds_duplicates(tmp_path: Path) -> None:
    with GraphMemory.open(str(tmp_path / "s.db"), embedder=None) as mem:
        made = mem.remember_many([{"content": f"note {i}", "tags": ["t"]} for i in range(4)])
        twin = mem.remember("note 0", agent_id="other")
        backend = mem.backend
        hashes = backend._index[next(k for k in backend._index if k[1] == "content_hash")]  # type: ignore[attr-defined]
        assert hashes[made[1].content_hash] == "Memory:" + made[1].id
        assert hashes[twin.content_hash] == {"Memory:" + made[0].id, "Memory:" + twin.id}
        same = Filter.for_memories(status=None).model_copy(
            update={"equals": {"content_hash": twin.content_hash}}
        )
        assert backend.count(same) == 2
        mem.forget(twin.id)
        assert hashes[twin.content_hash] == "Memory:" + made[0].id
        assert backend.count(same) == 1
