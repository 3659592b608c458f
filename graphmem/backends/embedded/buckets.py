"""The in-memory graph's index buckets: per label and indexed field, value -> the nodes
holding it; a filter's equality narrows to them before any predicate runs. Those of the
memory fields the columns code (agent, namespace, run, audience, tags) are worked out from
the columns when asked for (:class:`MemoryBucket`) instead of filed in the state file."""

from __future__ import annotations

from typing import Any

from graphmem.backends.embedded.records import _NO_HASH, MEMORY, Attrs, NodeTable

__all__ = [
    "FROM_COLUMNS",
    "Bucket",
    "MemoryBucket",
    "by_hash",
    "index_into",
    "index_out",
    "keys_of",
]


#: an index bucket: value -> the key of the one node holding it, or the set of keys of
#: the two or more holding it. Most values of some fields are held by one node (every
#: memory's ``content_hash``): a key instead of a one-key set is ~220 bytes and one
#: tracked object fewer per memory (a set is never left with fewer than two keys)
Bucket = dict[Any, "str | set[str]"]


def index_into(buckets: list[tuple[str, Bucket]], key: str, props: Attrs) -> None:
    """Add a node key to the index buckets of its indexed fields; a tuple (or list) value
    indexes each item, as for tags."""
    for f, bucket in buckets:
        v = props.get(f)
        lazy = bucket.__class__ is MemoryBucket
        for item in v if v.__class__ is tuple or v.__class__ is list else (v,):
            if lazy and not bucket.known(item):  # type: ignore[attr-defined]
                continue  # worked out from the columns when asked for
            _add(bucket, item, key)


def index_out(buckets: list[tuple[str, Bucket]], key: str, props: Attrs) -> None:
    """Remove a node key from the index buckets of its indexed fields (the reverse of
    :func:`index_into`)."""
    for f, bucket in buckets:
        v = props.get(f)
        lazy = bucket.__class__ is MemoryBucket
        for item in v if v.__class__ is tuple or v.__class__ is list else (v,):
            if lazy and not bucket.known(item):  # type: ignore[attr-defined]
                continue
            held = bucket.get(item)
            if held is None:
                continue
            if held.__class__ is str:
                if held == key:
                    del bucket[item]
                continue
            held.discard(key)  # type: ignore[union-attr]
            if len(held) == 1:
                bucket[item] = next(iter(held))


def keys_of(bucket: Bucket, value: Any) -> set[str]:
    """The keys of the nodes holding ``value`` (a set the caller may read, not change)."""
    held = bucket.get(value)
    if held is None:
        return set()
    return {held} if held.__class__ is str else held  # type: ignore[return-value]


#: the memory fields whose index buckets the columns answer (:class:`MemoryBucket`): coded
#: ones with many values, each held by a part of the memories (the status, category, tier
#: and event type, each value held by most memories, are kept whole), and the content
#: hash, each value held by about one memory (worked out whole: :func:`by_hash`)
FROM_COLUMNS = ("agent_id", "namespace", "run_id", "audience", "tags", "content_hash")


def by_hash(nodes: NodeTable) -> Bucket:
    """The memories' ``content_hash`` bucket worked out from the hash column: every value
    at once (one per memory, ~0.2 s at 1M; worked out a value at a time, each would be a
    pass over the column). In C but for repeats and rows without a hash."""
    table = nodes.memories
    step = 2 * len(_NO_HASH)
    hexed = bytes(table.hashes).hex()
    hexes = [hexed[i : i + step] for i in range(0, len(hexed), step)]
    # no tuple per row: a million new tracked objects bring on the collector's full pass
    # over the whole store (~1 s at 1M memories)
    out: dict[Any, Any] = dict(zip(hexes, table.keys, strict=True))
    for i in table.free:  # a free row's key is None (its hash may be a stale one)
        if out.get(hexes[i], out) is None:
            del out[hexes[i]]
    none = _NO_HASH.hex()
    if len(out) != len(table.keys) - len(table.free) or none in out:
        out = {}  # repeats (or rows without a hash): a set of keys, a key at a time
        for h, key in zip(hexes, table.keys, strict=True):
            if key is not None:
                _add(out, None if h == none else h, key)
    for key, attrs in nodes.dicts.items():  # memories that do not fit the columns
        if attrs.get("label") == MEMORY:
            _add(out, attrs.get("content_hash"), key)
    return out


def _add(bucket: Bucket, value: Any, key: str) -> None:
    """Add ``key`` to the nodes holding ``value`` (a key already there stays one)."""
    held = bucket.get(value)
    if held is None:
        bucket[value] = key
    elif held.__class__ is str:
        if held != key:
            bucket[value] = {held, key}
    else:
        held.add(key)  # type: ignore[union-attr]


class MemoryBucket(dict[Any, "str | set[str]"]):
    """The index bucket of a memory field in :data:`FROM_COLUMNS` (value -> the key of
    the one memory holding it, or the set of keys of the two or more): a value's entry is
    worked out from the field's column the first time :meth:`get` asks for it (a pass in C
    over a million codes and a set of the keys found: milliseconds; ~20 ms for a value held
    by 200k memories), not read from the state file at every open (five sets holding every
    memory, ~1.2 s of a 1M open). Writes keep the entries already worked out, as for any
    bucket, and skip the others (:meth:`known`): the columns have them.

    Its ``items()`` (and the other whole-dict views) show the entries worked out so far."""

    __slots__ = ("_all", "_done", "_field", "_nodes")

    def __init__(self, nodes: NodeTable, field: str):
        super().__init__()
        self._nodes = nodes
        self._field = field
        self._all = False
        self._done: set[Any] = set()

    @property
    def unasked(self) -> bool:
        """Whether no value's entry is worked out yet (writes have none to keep)."""
        return not (self._all or self._done)

    @property
    def whole(self) -> bool:
        """Whether every value's entry is worked out (as the content hash's is, at once)."""
        return self._all

    def known(self, value: Any) -> bool:
        """Whether ``value``'s entry is worked out (writes keep it up to date)."""
        return self._all or value in self._done

    def get(self, value: Any, default: Any = None) -> Any:
        if not (self._all or value in self._done):
            self._work_out(value)
        return super().get(value, default)

    def __getitem__(self, value: Any) -> str | set[str]:
        if not (self._all or value in self._done):
            self._work_out(value)
        return super().__getitem__(value)

    def __contains__(self, value: object) -> bool:
        return self.get(value) is not None

    def _work_out(self, value: Any) -> None:
        field = self._field
        if field == "content_hash":
            super().update(by_hash(self._nodes))
            self._all = True
            return
        keys = self._nodes.memories.keys_holding(field, value)
        for key, attrs in self._nodes.dicts.items():  # a memory that does not fit the columns
            if attrs.get("label") == MEMORY:
                v = attrs.get(field)
                if value in v if v.__class__ is tuple or v.__class__ is list else v == value:
                    keys.append(key)
        if len(keys) == 1:
            super().__setitem__(value, keys[0])
        elif keys:
            super().__setitem__(value, set(keys))
        self._done.add(value)

    def __reduce__(self) -> Any:  # never filed: the columns are
        raise TypeError("a memory bucket is worked out from the columns, not filed")
