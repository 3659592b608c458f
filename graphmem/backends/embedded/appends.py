"""New memories written column-wise: the memories a write creates (a ``remember_many`` of
1,000, a ``remember``) planned, journalled and applied per field over the batch instead of
per memory.

The general plan turns each node into its property dict, its structural edges into a list
of pairs and writes both into the in-memory graph one attribute at a time: ~60 µs of
Python a memory of a batch at 100k memories, for a node kind whose shape is always the
same. A memory that is new (its key held by no node and no row), comes without a vector,
and heads the batch's nodes with at least :data:`FRESH_MIN` - 1 others like it (the write
path puts them first, so the rows' ids and the graph's orders are those the general plan
gives) is taken here instead: its row's JSON
from the model's fields, its columns filled field by field for the whole batch, its index
buckets updated once per value, its structural edges paired from its agent, run and tags.
Every result is the general plan's (``tests/unit/test_fresh_memories.py`` compares the two
stores, in memory and in the file).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import chain, filterfalse
from operator import attrgetter, is_, itemgetter
from sys import intern
from typing import Any

from graphmem.backends.embedded.buckets import Bucket, MemoryBucket
from graphmem.backends.embedded.memory_rows import memory_row
from graphmem.backends.embedded.records import (
    _EPOCH,
    _HASH,
    _INT_END,
    _NO_HASH,
    _NONE,
    _TIME_END,
    _US,
    TIMES,
    MemoryTable,
    NodeTable,
)
from graphmem.models import GraphNode, Memory
from graphmem.models.values import METADATA_PREFIX

__all__ = ["Fresh", "add_to_buckets", "fresh_memories", "fresh_rows", "put_rows"]

_AGENT_ID, _RUN_ID, _TAGS = itemgetter("agent_id"), itemgetter("run_id"), itemgetter("tags")
_ID, _CONTENT = itemgetter("id"), itemgetter("content")

#: fewer new memories than this take the general plan: the column-wise one costs a few
#: dozen list and set passes a batch whatever its size (a single ``remember`` paid ~40 µs
#: more through it), and wins from about this many memories on
FRESH_MIN = 16


class Fresh:
    """The new memories of one write, in batch order (see the module docstring)."""

    __slots__ = ("by_key", "keys", "models", "rids")

    def __init__(self, keys: list[str], models: list[Memory]) -> None:
        self.keys = keys
        self.models = models
        self.by_key = dict(zip(keys, models, strict=True))
        #: row ids in the file, given when the journal writes them
        self.rids: list[int] = []

    def __len__(self) -> int:
        return len(self.keys)

    def with_keys(self, rest: dict[str, Any]) -> dict[str, Any]:
        """The new memories' keys followed by ``rest``'s, as one dict."""
        return {**dict.fromkeys(self.keys), **rest}

    def rows(self) -> list[str]:
        """Each memory's row JSON, as :func:`memory_row` writes its ``to_props``."""
        out = []
        for m in self.models:
            d = m.__dict__
            # from the fields themselves (``memory_row`` leaves out what ``to_props`` would
            # change: metadata, the vector, unset values; orjson writes a StrEnum as its
            # text and a tuple as a list)
            out.append(memory_row(m.to_props() if d["metadata"] else d))
        return out

    def missing(self, *known: Any) -> set[str]:
        """The keys of the nodes the memories' structural edges go to that none of
        ``known`` (dicts or sets of keys) holds."""
        dicts = [m.__dict__ for m in self.models]
        runs = set(map(_RUN_ID, dicts))
        runs.discard(None)
        runs.discard("")
        out = set(map("Agent:".__add__, set(map(_AGENT_ID, dicts))))
        out.update(map("Run:".__add__, runs))
        out.update(map("Tag:".__add__, set(chain.from_iterable(map(_TAGS, dicts)))))
        # looked up in each (``set.difference`` would walk every key of a store's dict)
        for held in known:
            out = set(filterfalse(held.__contains__, out))
        return out


def fresh_rows(fresh: Fresh, next_rid: int) -> tuple[list[Sequence[Any]], list[Sequence[Any]]]:
    """The file's node rows and full-text rows of the new memories, a column at a time
    (see ``Pending.insert_columns``), their row ids given from ``next_rid`` on."""
    n = len(fresh)
    fresh.rids = rids = list(range(next_rid, next_rid + n))
    dicts = [m.__dict__ for m in fresh.models]
    nodes: list[Sequence[Any]] = [rids, ["Memory"] * n, list(map(_ID, dicts)), fresh.rows()]
    return nodes, [rids, list(map(_CONTENT, dicts))]


def fresh_memories(
    nodes: Sequence[GraphNode],
    held: NodeTable,
    rid_of: dict[str, int],
    absent: Sequence[str] = (),
) -> tuple[Fresh | None, Sequence[GraphNode]]:
    """The leading new memories of ``nodes`` (see the module docstring) and the rest.
    ``absent``: the keys of the leading nodes the caller found held by no node already,
    interned, in their order (a batch's ``new_memories``): not made nor looked up again."""
    keys: list[str] = []
    models: list[Memory] = []
    # a NodeTable's two dicts, looked in directly (its ``in`` is a Python call a memory)
    dicts, rows = held.dicts, held.memories.row_of
    known = len(absent)
    for j, n in enumerate(nodes):
        d = n.__dict__
        if n.__class__ is not Memory or d["embedding"] is not None:
            break
        ident = d["id"]
        if j < known and (key := absent[j]).endswith(ident) and len(key) == len(ident) + 7:
            pass  # "Memory:" + ident, found absent
        else:
            # interned now: the node's own key string once applied (see the graph's _link)
            key = intern("Memory:" + ident)
            if key in rid_of or key in rows or key in dicts:
                break
        keys.append(key)
        models.append(n)
    if len(keys) < FRESH_MIN:
        return None, nodes
    fresh = Fresh(keys, models)
    if len(fresh.by_key) != len(keys):  # one id twice: the general plan keeps the last
        return None, nodes
    return fresh, nodes[len(keys) :]


def put_rows(
    table: MemoryTable, keys: list[str], models: list[Memory]
) -> tuple[list[int], dict[str, Any] | None]:
    """Hold each memory as a new row of ``table``, column by column (what
    :meth:`MemoryTable.put` does one attribute at a time); returns the positions of the
    memories whose values the columns cannot hold exactly (a time before 1970 or after
    2112, text of a subclass of str, a content hash given by hand), which get no row: the
    caller keeps their dicts, as ``put`` refuses them; and, when there is none, the
    memories' columns (see :func:`_columns`) for the caller to read."""
    dicts = [m.__dict__ for m in models]
    cols = _columns(dicts)
    if cols is None:  # some memory does not fit: found one by one, the others held
        misfits = [j for j, d in enumerate(dicts) if _columns([d]) is None]
        skip = set(misfits)
        fit = [j for j in range(len(dicts)) if j not in skip]
        if fit:
            put_rows(table, [keys[j] for j in fit], [models[j] for j in fit])
        return misfits, None
    rows = _take_rows(table, keys)
    lo = rows[0] if _follow(rows) else -1  # the first of consecutive rows, else -1
    if lo >= 0:
        table.keys[lo : lo + len(rows)] = keys
    else:
        held = table.keys
        for i, key in zip(rows, keys, strict=True):
            held[i] = key
    for f, col in table.codes.items():
        codes = table.value_code[f]
        vals = cols[f]
        got = list(map(codes.get, vals))
        if None in got:
            for j, c in enumerate(got):
                if c is None:
                    v = vals[j]
                    # an enum member (the model's) is held by its text; None is code 0
                    got[j] = 0 if v is None else table._code(f, str(v))
        _assign(col, rows, lo, got)
    for f, fcol in table.floats.items():
        _assign(fcol, rows, lo, cols[f])
    for f, icol in table.ints.items():
        vals = cols[f]
        _assign(icol, rows, lo, [_NONE if v is None else v for v in vals] if None in vals else vals)
    for f, tcol in table.times.items():
        _assign(tcol, rows, lo, cols[f])
    tag_code = table.tag_code
    tags = list(map(tag_code.get, cols["tags"]))
    if None in tags:
        for j, c in enumerate(tags):
            if c is None:
                t = cols["tags"][j]
                c = tag_code.get(t)  # an earlier memory of the batch may have coded it
                if c is None:
                    c = tag_code[t] = len(table.tagsets)
                    table.tagsets.append(tuple([intern(x) for x in t]))
                tags[j] = c
    _assign(table.tags, rows, lo, tags)
    content, hashes = table.content, table.hashes
    raws: bytes = cols["content_hash"]  # the batch's, one after the other
    n = len(rows)
    if lo >= 0:
        content[lo : lo + n] = cols["content"]
        hashes[lo * _HASH : (lo + n) * _HASH] = raws
    else:
        for j, (i, text) in enumerate(zip(rows, cols["content"], strict=True)):
            content[i] = text
            hashes[i * _HASH : (i + 1) * _HASH] = raws[j * _HASH : (j + 1) * _HASH]
    if any(cols["metadata"]):
        for i, meta in zip(rows, cols["metadata"], strict=True):
            if meta:
                table.extra[i] = {METADATA_PREFIX + k: v for k, v in meta.items()}
    return [], cols


#: a memory's text fields the columns hold by code (the enums' are members or text)
_TEXTS = ("agent_id", "namespace", "run_id", "event_type", "audience", "content")
_TEXT_CLASSES = frozenset({str, type(None)})
_INT_CLASSES = frozenset({int, type(None)})


#: the model fields the columns are filled from, read from each memory in one go
_FIELDS = (
    *_TEXTS,
    "category",
    "tier",
    "status",
    "visibility",
    "importance",
    "confidence",
    "access_count",
    "seq",
    "tags",
    "content_hash",
    "metadata",
    *TIMES,
)
_READ = itemgetter(*_FIELDS)
_TZ = attrgetter("tzinfo")


def _columns(dicts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The memories' values per field as the columns hold them (times in microseconds,
    the content hashes as their raw bytes one after the other, ``None`` for "not set" in
    integer and time columns), or None when one of them does not fit (as
    :meth:`MemoryTable.put` decides). Each field's values are a tuple (the model's dicts
    read and turned into columns in C), checked a whole column at a time."""
    n = len(dicts)
    cols: dict[str, Any] = dict(zip(_FIELDS, zip(*map(_READ, dicts), strict=True), strict=True))
    if not n:
        cols = dict.fromkeys(_FIELDS, ())
    for f in _TEXTS:
        if not set(map(type, cols[f])) <= _TEXT_CLASSES:
            return None
    for f in ("importance", "confidence"):
        vals = cols[f]
        if set(map(type, vals)) - {float} or ((s := sum(vals)) != s and any(v != v for v in vals)):
            return None  # (a sum is NaN for a NaN, or for infinities of both signs)
    for f in ("access_count", "seq"):
        vals = cols[f]
        if not set(map(type, vals)) <= _INT_CLASSES:
            return None
        held = [v for v in vals if v is not None] if None in vals else vals
        if held and not (_NONE < min(held) and max(held) < _INT_END):
            return None
    tags = cols["tags"]
    if set(map(type, tags)) - {tuple} or set(map(type, chain.from_iterable(tags))) - {str}:
        return None
    hexes = cols["content_hash"]
    if set(map(type, hexes)) - {str} or set(map(len, hexes)) - {2 * _HASH}:
        return None
    joined = "".join(hexes)
    try:
        raws = cols["content_hash"] = bytes.fromhex(joined)
    except ValueError:
        return None
    if raws.hex() != joined:  # upper case or spaces, which fromhex takes
        return None
    if _NO_HASH in raws and any(raws[j * _HASH : (j + 1) * _HASH] == _NO_HASH for j in range(n)):
        return None
    # created, updated and valid_from are mostly the same objects: converted once
    done: list[tuple[tuple[Any, ...], list[int]]] = []
    for f in TIMES:
        vals = cols[f]
        if vals.count(None) == n:
            cols[f] = [_NONE] * n
            continue
        same = next((us for seen, us in done if all(map(is_, vals, seen))), None)
        if same is not None:
            cols[f] = same
            continue
        known = [v for v in vals if v is not None] if None in vals else vals
        if set(map(type, known)) - {datetime} or set(map(_TZ, known)) - {UTC}:
            return None
        if len(set(map(id, known))) < len(known) // 2:  # few objects: each converted once
            us_of: dict[int, int] = {}
            for v in known:
                if id(v) not in us_of:
                    us_of[id(v)] = (v - _EPOCH) // _US
            held = [us_of[id(v)] for v in known]
        else:
            held = [(v - _EPOCH) // _US for v in known]
        if not (0 <= min(held) and max(held) < _TIME_END):
            return None
        if len(held) < n:
            it = iter(held)
            held = [_NONE if v is None else next(it) for v in vals]
        cols[f] = held
        done.append((vals, held))
    return cols


def _follow(rows: list[int]) -> bool:
    """Whether ``rows`` are consecutive, lowest first."""
    lo = rows[0]
    return rows[-1] - lo == len(rows) - 1 and rows == list(range(lo, lo + len(rows)))


def _take_rows(table: MemoryTable, keys: list[str]) -> list[int]:
    """Rows for ``keys`` as :meth:`MemoryTable._new_row` gives them one by one."""
    free = table.free
    rows: list[int] = []
    while len(rows) < len(keys):
        if not free:  # grown only once the free rows are taken, as one by one
            table._grow()
        take = min(len(free), len(keys) - len(rows))
        rows += free[len(free) - take :][::-1]
        del free[len(free) - take :]
    table.row_of.update(zip(keys, rows, strict=True))
    return rows


def _assign(col: Any, rows: list[int], lo: int, values: list[Any]) -> None:
    """``col[rows[j]] = values[j]``; one slice when the rows are consecutive from ``lo``
    (the free rows are taken lowest first, so a batch's usually are; -1: they are not)."""
    if lo >= 0:
        col[lo : lo + len(rows)] = array(col.typecode, values)
        return
    for i, v in zip(rows, values, strict=True):
        col[i] = v


def add_to_buckets(
    buckets: list[tuple[str, Bucket]],
    keys: list[str],
    fresh: Fresh,
    cols: dict[str, Any] | None = None,
) -> None:
    """Add the new memories' keys to the index buckets of their fields, once per value
    (what ``index_into`` does per memory and field); ``cols``: their columns as
    :func:`put_rows` returns them, read instead of the models."""
    dicts = [m.__dict__ for m in fresh.models]
    n = len(keys)
    for f, bucket in buckets:
        lazy = bucket.__class__ is MemoryBucket
        if lazy and bucket.unasked:  # type: ignore[attr-defined]
            continue  # no value worked out: the columns answer every one
        groups: dict[Any, list[str]] = {}
        if f == "tags":
            for key, d in zip(keys, dicts, strict=True):
                for t in d["tags"]:
                    groups.setdefault(t, []).append(key)
        else:
            # (a column's content hashes are bytes)
            vals = cols[f] if cols is not None and f != "content_hash" else [d[f] for d in dicts]
            if vals.count(vals[0]) == n:  # one value for the batch (a status, a tier)
                groups[vals[0]] = keys
            elif (
                f == "content_hash"
                and (not lazy or bucket.whole)  # type: ignore[attr-defined]
                and len(set(vals)) == n
                and bucket.keys().isdisjoint(vals)
            ):
                bucket.update(zip(vals, keys, strict=True))  # each held by one memory
                continue
            else:
                for key, v in zip(keys, vals, strict=True):
                    groups.setdefault(v, []).append(key)
        for v, ks in groups.items():
            if v is not None and v.__class__ is not str:
                v = str(v)  # an enum member: held by its text, as the general plan's
            if lazy and not bucket.known(v):  # type: ignore[attr-defined]
                continue  # worked out from the columns when asked for
            held = dict.get(bucket, v)
            if held is None:
                bucket[v] = ks[0] if len(ks) == 1 else set(ks)
            elif held.__class__ is str:
                both = {held, *ks}
                bucket[v] = held if len(both) == 1 else both
            else:
                held.update(ks)  # type: ignore[union-attr]
