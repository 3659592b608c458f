"""New memories written column-wise: the memories a write creates (a ``remember_many`` of
1,000, a ``remember``) planned, journalled and applied per field over the batch instead of
per memory.

The general plan turns each node into its property dict, its structural edges into a list
of pairs and writes both into the in-memory graph one attribute at a time: ~60 µs of
Python a memory of a batch at 100k memories, for a node kind whose shape is always the
same. A memory that is new (its key held by no node and no row), comes without a vector,
and heads the batch's nodes (the write path puts them first, so the rows' ids and the
graph's orders are those the general plan gives) is taken here instead: its row's JSON
from the model's fields, its columns filled field by field for the whole batch, its index
buckets updated once per value, its structural edges paired from its agent, run and tags.
Every result is the general plan's (``tests/unit/test_fresh_memories.py`` compares the two
stores, in memory and in the file).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from datetime import UTC, datetime
from sys import intern
from typing import Any

import orjson

from graphmem.backends.embedded.buckets import Bucket, MemoryBucket
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
)
from graphmem.models import GraphNode, Memory
from graphmem.models.values import METADATA_PREFIX

__all__ = ["Fresh", "add_to_buckets", "fresh_memories", "fresh_rows", "put_rows"]

_TIME_FIELDS = TIMES

_AUTHORED, _IN_RUN, _TAGGED = "AUTHORED_BY", "IN_RUN", "TAGGED"
#: a memory's model fields its row's JSON leaves out (as ``to_props`` does, with None)
_NOT_PROPS = frozenset({"metadata", "embedding"})


class Fresh:
    """The new memories of one write, in batch order (see the module docstring)."""

    __slots__ = ("keys", "models", "rids")

    def __init__(self, keys: list[str], models: list[Memory]) -> None:
        self.keys = keys
        self.models = models
        #: row ids in the file, given when the journal writes them
        self.rids: list[int] = []

    def __len__(self) -> int:
        return len(self.keys)

    def with_keys(self, rest: dict[str, Any]) -> dict[str, Any]:
        """The new memories' keys followed by ``rest``'s, as one dict."""
        return {**dict.fromkeys(self.keys), **rest}

    def props(self) -> list[dict[str, Any]]:
        """Each memory's properties as ``to_props`` gives them (its row's JSON)."""
        out = []
        for m in self.models:
            d = m.__dict__
            if d["metadata"]:
                out.append(m.to_props())
            else:  # orjson writes a StrEnum as its text and a tuple as a list: same JSON
                out.append({k: v for k, v in d.items() if v is not None and k not in _NOT_PROPS})
        return out

    def pairs(self, i: int) -> list[tuple[str, str]]:
        """The structural edges memory ``i`` implies, as (type, target key) pairs in the
        order ``structural_targets`` gives them."""
        d = self.models[i].__dict__
        out = [(_AUTHORED, "Agent:" + d["agent_id"])]
        if d["run_id"]:
            out.append((_IN_RUN, "Run:" + d["run_id"]))
        out.extend((_TAGGED, "Tag:" + t) for t in d["tags"])
        return out


def fresh_rows(
    fresh: Fresh | None, next_rid: int
) -> tuple[list[tuple[Any, ...]], list[tuple[int, str]], int]:
    """The file's node rows and full-text rows of the new memories, their row ids given
    from ``next_rid`` on (the next free one returned)."""
    if fresh is None:
        return [], [], next_rid
    fresh.rids = rids = list(range(next_rid, next_rid + len(fresh)))
    nodes = [
        (rid, "Memory", m.__dict__["id"], orjson.dumps(props).decode())
        for rid, m, props in zip(rids, fresh.models, fresh.props(), strict=True)
    ]
    fts = [(rid, m.__dict__["content"]) for rid, m in zip(rids, fresh.models, strict=True)]
    return nodes, fts, next_rid + len(rids)


def fresh_memories(
    nodes: Sequence[GraphNode], held: Any, rid_of: dict[str, int]
) -> tuple[Fresh | None, Sequence[GraphNode]]:
    """The leading new memories of ``nodes`` (see the module docstring) and the rest."""
    keys: list[str] = []
    models: list[Memory] = []
    for n in nodes:
        if n.__class__ is not Memory or n.__dict__["embedding"] is not None:
            break
        key = "Memory:" + n.__dict__["id"]
        if key in held or key in rid_of:
            break
        keys.append(key)
        models.append(n)
    if not keys:
        return None, nodes
    if len(set(keys)) != len(keys):  # one id twice: the general plan keeps the last
        return None, nodes
    return Fresh(keys, models), nodes[len(keys) :]


def put_rows(table: MemoryTable, keys: list[str], models: list[Memory]) -> list[int]:
    """Hold each memory as a new row of ``table``, column by column (what
    :meth:`MemoryTable.put` does one attribute at a time); returns the positions of the
    memories whose values the columns cannot hold exactly (a time before 1970 or after
    2112, text of a subclass of str, a content hash given by hand), which get no row: the
    caller keeps their dicts, as ``put`` refuses them."""
    misfits = []
    times: list[list[int]] = []
    raws: list[bytes] = []
    for j, m in enumerate(models):
        row = _fitting(m.__dict__)
        if row is None:
            misfits.append(j)
            continue
        raws.append(row.pop())  # type: ignore[arg-type]
        times.append(row)  # type: ignore[arg-type]
    if misfits:
        skip = set(misfits)
        keys = [k for j, k in enumerate(keys) if j not in skip]
        models = [m for j, m in enumerate(models) if j not in skip]
    rows = _take_rows(table, keys)
    dicts = [m.__dict__ for m in models]
    for f, col in table.codes.items():
        codes = table.value_code[f]
        vals = [d[f] for d in dicts]
        got = [codes.get(v) for v in vals]
        for j, c in enumerate(got):
            if c is None:
                v = vals[j]
                # an enum member (the model's) is held by its text; None is code 0
                got[j] = 0 if v is None else table._code(f, str(v))
        _assign(col, rows, got)
    for f, fcol in table.floats.items():
        _assign(fcol, rows, [d[f] for d in dicts])
    for f, icol in table.ints.items():
        _assign(icol, rows, [_NONE if (v := d[f]) is None else v for d in dicts])
    for k, tcol in enumerate(table.times.values()):
        _assign(tcol, rows, [t[k] for t in times])
    content = table.content
    tag_code = table.tag_code
    tags = []
    for i, d in zip(rows, dicts, strict=True):
        content[i] = d["content"]
        t = d["tags"]
        c = tag_code.get(t)
        if c is None:
            c = tag_code[t] = len(table.tagsets)
            table.tagsets.append(tuple([intern(x) for x in t]))
        tags.append(c)
    _assign(table.tags, rows, tags)
    hashes = table.hashes
    for i, d, raw in zip(rows, dicts, raws, strict=True):
        hashes[i * _HASH : (i + 1) * _HASH] = raw
        meta = d["metadata"]
        if meta:
            table.extra[i] = {METADATA_PREFIX + k: v for k, v in meta.items()}
    return misfits


#: a memory's text fields the columns hold by code (the enums' are members or text)
_TEXTS = ("agent_id", "namespace", "run_id", "event_type", "audience", "content")
_FLOATS = ("importance", "confidence")
_INTS = ("access_count", "seq")


def _fitting(d: dict[str, Any]) -> list[int | bytes] | None:
    """A memory's times in microseconds (the columns' order) and its content hash's raw
    bytes, last; None when a value does not fit the columns as ``MemoryTable.put``
    decides."""
    for f in _TEXTS:
        v = d[f]
        if v is not None and v.__class__ is not str:
            return None
    for f in _FLOATS:
        v = d[f]
        if v.__class__ is not float or v != v:
            return None
    for f in _INTS:
        v = d[f]
        if v is not None and (v.__class__ is not int or not _NONE < v < _INT_END):
            return None
    tags = d["tags"]
    if tags.__class__ is not tuple or any(t.__class__ is not str for t in tags):
        return None
    h = d["content_hash"]
    raw = bytes.fromhex(h) if h.__class__ is str and len(h) == 2 * _HASH else b""
    if len(raw) != _HASH or raw == _NO_HASH or raw.hex() != h:
        return None
    row: list[int | bytes] = []
    last_dt: Any = None
    us = 0
    for f in _TIME_FIELDS:
        v = d[f]
        if v is None:
            row.append(_NONE)
            continue
        if v is not last_dt:
            if v.__class__ is not datetime or v.tzinfo is not UTC:
                return None
            us = (v - _EPOCH) // _US
            if not 0 <= us < _TIME_END:
                return None
            last_dt = v
        row.append(us)
    row.append(raw)
    return row


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
    row_of, held = table.row_of, table.keys
    for i, key in zip(rows, keys, strict=True):
        held[i] = key
        row_of[key] = i
    return rows


def _assign(col: Any, rows: list[int], values: list[Any]) -> None:
    """``col[rows[j]] = values[j]``; one slice when the rows follow each other (the free
    rows are taken lowest first, so a batch's usually do)."""
    if not rows:
        return
    lo = rows[0]
    if rows[-1] - lo == len(rows) - 1 and rows == list(range(lo, lo + len(rows))):
        col[lo : lo + len(rows)] = array(col.typecode, values)
        return
    for i, v in zip(rows, values, strict=True):
        col[i] = v


def add_to_buckets(buckets: list[tuple[str, Bucket]], keys: list[str], fresh: Fresh) -> None:
    """Add the new memories' keys to the index buckets of their fields, once per value
    (what ``index_into`` does per memory and field)."""
    dicts = [m.__dict__ for m in fresh.models]
    for f, bucket in buckets:
        groups: dict[Any, list[str]] = {}
        if f == "tags":
            for key, d in zip(keys, dicts, strict=True):
                for t in d["tags"]:
                    groups.setdefault(t, []).append(key)
        else:
            for key, d in zip(keys, dicts, strict=True):
                v = d[f]
                groups.setdefault(v if v is None or v.__class__ is str else str(v), []).append(key)
        lazy = bucket.__class__ is MemoryBucket
        for v, ks in groups.items():
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
