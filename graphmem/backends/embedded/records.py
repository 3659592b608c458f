"""The in-memory graph's node attributes: the memories' as columns, the other nodes' as
dicts.

A memory held as a dict of its ~20 attributes cost ~1,100 bytes and a dozen Python objects
(strings, floats, datetimes, the dict itself) at 100k memories — the largest part of the
node side at 1M memories, and of the time an open spends making it. Here every memory is
a row of shared columns: its content in a list, its content hash as 32 raw bytes, its
numbers and times (microseconds since the epoch, UTC) in typed arrays, each repeated
string field (status, agent, namespace, …) as a code into the field's table of values,
and its tags as a code into a table of distinct tag tuples. The columns file and load as
a few byte strings instead of a million dicts.

:class:`NodeTable` is the mapping the graph's ``_node`` is (node key -> attributes): a
memory's attributes are a :class:`MemoryRow`, a read-only mapping over its row that reads
as the dict it was made from (same keys and values, so every reader — the filter
predicate, the index buckets, the write path's preconditions, networkx's view — reads it
unchanged). A memory whose attributes do not fit the columns exactly (a value of another
type, a time not in UTC, a hand-edited row) and every other node keep their dict.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, MutableMapping
from datetime import UTC, datetime, timedelta
from sys import intern
from typing import Any

import numpy as np

from graphmem.models import Memory
from graphmem.models.nodes import trusted_plan
from graphmem.models.values import METADATA_PREFIX, assembled, replaced

__all__ = ["MemoryRow", "NodeTable"]

MEMORY = "Memory"
_PREFIX = "Memory:"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: an integer or time column's mark for "not set" (the row's dict had no such key)
_NONE = -(1 << 63)
_NAN = float("nan")
_HASH = 32  # bytes of a SHA-256 content hash
_NO_HASH = b"\0" * _HASH
_INT_END = 1 << 63
#: times held are those from 1970 to 2112 (in microseconds below 2**52): there a float of
#: seconds names one microsecond, and ``datetime.fromtimestamp`` turns it back into the
#: same time at a fraction of the cost of datetime arithmetic
_TIME_END = 1 << 52
# how an attribute is held
_CODED, _FLOAT, _INT, _TIME, _TEXT, _TAGS, _HASHED, _KEY = range(8)
_from_ts = datetime.fromtimestamp
#: rows whose model fields :meth:`MemoryTable.memory` keeps (the first built goes first)
_BUILT_MAX = 4096

#: repeated text fields, held as a code into the field's value table (code 0: not set)
CODED = (
    "category",
    "tier",
    "status",
    "visibility",
    "agent_id",
    "namespace",
    "run_id",
    "event_type",
    "audience",
)
FLOATS = ("importance", "confidence")
INTS = ("access_count", "seq")
TIMES = ("created_at", "updated_at", "last_accessed", "valid_from", "valid_to", "expires_at")
#: every attribute a memory's columns hold
_COLUMNS = frozenset(
    (
        "label",
        "id",
        "content",
        "category",
        "tier",
        "importance",
        "confidence",
        "created_at",
        "updated_at",
        "last_accessed",
        "access_count",
        "agent_id",
        "run_id",
        "namespace",
        "event_type",
        "seq",
        "tags",
        "valid_from",
        "valid_to",
        "expires_at",
        "status",
        "content_hash",
        "visibility",
        "audience",
    )
)


class MemoryTable:
    """The columns of every memory held as a row (see the module docstring)."""

    __slots__ = (
        "_built",
        "_decoders",
        "_float_cols",
        "_int_cols",
        "_kinds",
        "_seen",
        "_template",
        "_time_cols",
        "_typed",
        "_unset_i",
        "_unset_q",
        "codes",
        "content",
        "extra",
        "floats",
        "free",
        "hashes",
        "ints",
        "keys",
        "row_of",
        "tag_code",
        "tags",
        "tagsets",
        "times",
        "value_code",
        "values",
    )

    def __init__(self) -> None:
        self.keys: list[str | None] = []
        self.row_of: dict[str, int] = {}
        self.free: list[int] = []
        self.content: list[str | None] = []
        self.hashes = bytearray()
        self.values: dict[str, list[str | None]] = {f: [None] for f in CODED}
        self.value_code: dict[str, dict[str, int]] = {f: {} for f in CODED}
        self.codes: dict[str, array[int]] = {f: array("i") for f in CODED}
        self.floats: dict[str, array[float]] = {f: array("d") for f in FLOATS}
        self.ints: dict[str, array[int]] = {f: array("q") for f in INTS}
        self.times: dict[str, array[int]] = {f: array("q") for f in TIMES}
        self.tagsets: list[tuple[str, ...] | None] = [None]
        self.tag_code: dict[tuple[str, ...], int] = {}
        self.tags = array("i")
        #: row -> the attributes the columns do not hold (``metadata.*``), in their order
        self.extra: dict[int, dict[str, Any]] = {}
        #: per coded field the model converts (enums), its values as the model holds them
        self._typed: dict[str, list[Any]] = {}
        #: row -> its model as :meth:`memory` built it: a recall builds a model for each
        #: of its ~50 hits, mostly rows that earlier recalls built too; a write to the row
        #: or an access counted drops its entry
        self._built: dict[int, Memory] = {}
        #: rows :meth:`memory` built once, the last ``4 * _BUILT_MAX``: a second build keeps
        self._seen: dict[int, None] = {}
        self._index_columns()

    def __len__(self) -> int:
        return len(self.row_of)

    # -- writing -----------------------------------------------------------------------

    def put(self, key: str, attrs: Mapping[str, Any]) -> bool:
        """Hold ``attrs`` as the row of ``key`` (its existing row, else a free or a new
        one); False when they do not fit the columns exactly: then ``key`` has no row
        (the caller keeps the dict)."""
        if key[:7] != _PREFIX:
            return False
        i = self.row_of.get(key)
        if i is None:
            i = self._new_row(key)  # every column "not set"
        else:
            self._unset(i)
        # each attribute written in one pass over the dict (a memory per write of a
        # batch: no second pass to check first)
        at = i * _HASH
        extra: dict[str, Any] | None = None
        last_dt: Any = None
        last_us = 0
        kinds = self._kinds
        fits = True
        for f, v in attrs.items():
            kind = kinds.get(f)
            if kind is None:
                if extra is None:
                    extra = {}
                extra[f] = v
                continue
            how, col, codes = kind
            if how == _CODED:
                c = codes.get(v) if v.__class__ is str else -1
                if c is None:
                    c = self._code(f, v)
                elif c < 0:
                    fits = False
                    break
                col[i] = c
            elif how == _TIME:
                if v is not last_dt:
                    if v.__class__ is not datetime or v.tzinfo is not UTC:
                        fits = False
                        break
                    last_us = (v - _EPOCH) // _US
                    if not 0 <= last_us < _TIME_END:
                        fits = False
                        break
                    last_dt = v
                col[i] = last_us
            elif how == _FLOAT:
                if v.__class__ is not float or v != v:
                    fits = False
                    break
                col[i] = v
            elif how == _INT:
                if v.__class__ is not int or not _NONE < v < _INT_END:
                    fits = False
                    break
                col[i] = v
            elif how == _KEY:  # label and id: checked after the pass
                continue
            elif how == _TEXT:  # the content
                if v.__class__ is not str:
                    fits = False
                    break
                self.content[i] = v
            elif how == _TAGS:
                try:
                    c = self.tag_code.get(v) if v.__class__ is tuple else None
                except TypeError:  # an unhashable item
                    c = None
                if c is None:
                    if v.__class__ is not tuple or any(t.__class__ is not str for t in v):
                        fits = False
                        break
                    c = self.tag_code[v] = len(self.tagsets)
                    self.tagsets.append(tuple([intern(t) for t in v]))
                col[i] = c
            elif how == _HASHED:
                raw = bytes.fromhex(v) if v.__class__ is str and len(v) == 2 * _HASH else b""
                if len(raw) != _HASH or raw == _NO_HASH or raw.hex() != v:
                    fits = False
                    break
                self.hashes[at : at + _HASH] = raw
        if not fits or attrs.get("label") != MEMORY or attrs.get("id") != key[7:]:
            self.drop(key)
            return False
        if extra:
            self.extra[i] = extra
        else:
            self.extra.pop(i, None)
        return True

    def _index_columns(self) -> None:
        """Per attribute, how it is held and its column (after the columns are made or
        replaced)."""
        kinds: dict[str, tuple[int, Any, Any]] = {}
        for f, col in self.codes.items():
            kinds[f] = (_CODED, col, self.value_code[f])
        for f, fcol in self.floats.items():
            kinds[f] = (_FLOAT, fcol, None)
        for f, icol in self.ints.items():
            kinds[f] = (_INT, icol, None)
        for f, tcol in self.times.items():
            kinds[f] = (_TIME, tcol, None)
        kinds["content"] = (_TEXT, None, None)
        kinds["label"] = kinds["id"] = (_KEY, None, None)
        kinds["tags"] = (_TAGS, self.tags, None)
        kinds["content_hash"] = (_HASHED, None, None)
        self._kinds = kinds
        self._unset_q = [*self.ints.values(), *self.times.values()]
        self._unset_i = [*self.codes.values(), self.tags]
        self._typed = {f: [None] for f, _c in trusted_plan(Memory)[2] if f in self.codes}
        self._template = trusted_plan(Memory)[0]
        self._float_cols = list(self.floats.items())
        self._int_cols = list(self.ints.items())
        self._time_cols = list(self.times.items())
        self._decoders = [
            (f, col, self.values[f], self._typed.get(f)) for f, col in self.codes.items()
        ]

    def _code(self, field: str, value: str) -> int:
        codes = self.value_code[field]
        c = codes.get(value)
        if c is None:
            values = self.values[field]
            c = codes[value] = len(values)
            values.append(intern(value))
        return c

    def _new_row(self, key: str) -> int:
        """A row for ``key`` with every column "not set" (a free one, else a new one)."""
        if not self.free:
            self._grow()
        i = self.free.pop()
        self.keys[i] = key
        self.row_of[key] = i
        return i

    def _grow(self) -> None:
        """Add free rows, every column "not set": an eighth more (at least 1,024), each
        column extended at once instead of twenty appends per memory written."""
        start = len(self.keys)
        n = max(1024, start // 8)
        self.keys += [None] * n
        self.content += [None] * n
        self.hashes += _NO_HASH * n
        unset_q = array("q", [_NONE]) * n
        for col in self._unset_q:
            col += unset_q
        unset_i = array("i", [0]) * n
        for col in self._unset_i:
            col += unset_i
        nan = array("d", [_NAN]) * n
        for fcol in self.floats.values():
            fcol += nan
        self.free += range(start + n - 1, start - 1, -1)  # the lowest taken first

    def _unset(self, i: int) -> None:
        """Every column of row ``i`` to "not set"."""
        self._built.pop(i, None)
        for col in self._unset_q:
            col[i] = _NONE
        for col in self._unset_i:
            col[i] = 0
        for fcol in self.floats.values():
            fcol[i] = _NAN
        self.content[i] = None
        self.hashes[i * _HASH : (i + 1) * _HASH] = _NO_HASH
        self.extra.pop(i, None)

    def drop(self, key: str) -> None:
        """Forget the row of ``key`` (KeyError if it has none); the row is reused."""
        i = self.row_of.pop(key)
        self.keys[i] = None
        self._unset(i)  # a free row is taken as it is; the text goes now
        self.free.append(i)

    def count_access(self, i: int, n: int, at: datetime) -> bool:
        """Add ``n`` accesses at ``at`` to row ``i``; False when ``at`` is not a UTC time
        the column holds (the caller then keeps the row as a dict)."""
        if at.__class__ is not datetime or at.tzinfo is not UTC:
            return False
        us = (at - _EPOCH) // _US
        if not 0 <= us < _TIME_END:
            return False
        count = self.ints["access_count"]
        count[i] = (0 if count[i] == _NONE else count[i]) + n
        last = self.times["last_accessed"]
        if last[i] == _NONE or last[i] < us:
            last[i] = us
        model = self._built.get(i)
        if model is not None:  # kept as a build would make it: recall touches what it finds
            at = _from_ts(last[i] / 1e6, UTC)
            self._built[i] = replaced(model, access_count=count[i], last_accessed=at)
        return True

    # -- reading -----------------------------------------------------------------------

    def get(self, i: int, field: str, default: Any = None) -> Any:
        """Attribute ``field`` of row ``i`` (``default`` when the row has none)."""
        codes = self.codes.get(field)
        if codes is not None:
            c = codes[i]
            return self.values[field][c] if c else default
        t = self.times.get(field)
        if t is not None:
            us = t[i]
            return default if us == _NONE else _from_ts(us / 1e6, UTC)
        if field == "label":
            return MEMORY
        if field == "id":
            key = self.keys[i]
            assert key is not None
            return key[7:]
        if field == "content":
            v = self.content[i]
            return default if v is None else v
        if field == "tags":
            c = self.tags[i]
            return self.tagsets[c] if c else default
        fl = self.floats.get(field)
        if fl is not None:
            x = fl[i]
            return default if x != x else x
        icol = self.ints.get(field)
        if icol is not None:
            n = icol[i]
            return default if n == _NONE else n
        if field == "content_hash":
            raw = self.hashes[i * _HASH : (i + 1) * _HASH]
            return default if raw == _NO_HASH else raw.hex()
        extra = self.extra.get(i)
        return default if extra is None else extra.get(field, default)

    def as_dict(self, i: int) -> dict[str, Any]:
        """Row ``i`` as the dict it was made from (the same keys and values)."""
        key = self.keys[i]
        assert key is not None
        out: dict[str, Any] = {"label": MEMORY, "id": key[7:]}
        content = self.content[i]
        if content is not None:
            out["content"] = content
        for f, col, values, _held in self._decoders:
            c = col[i]
            if c:
                out[f] = values[c]
        self._rest_into(i, out)
        extra = self.extra.get(i)
        if extra:
            out.update(extra)
        return out

    def _rest_into(self, i: int, out: dict[str, Any]) -> None:
        """Row ``i``'s numbers, times, tags and content hash (those set) into ``out``."""
        for f, fcol in self._float_cols:
            x = fcol[i]
            if x == x:
                out[f] = x
        for f, icol in self._int_cols:
            n = icol[i]
            if n != _NONE:
                out[f] = n
        last_us, dt = _NONE, None
        for f, tcol in self._time_cols:
            us = tcol[i]
            if us != _NONE:
                if us != last_us:  # created, updated and valid_from: mostly one time
                    last_us, dt = us, _from_ts(us / 1e6, UTC)
                out[f] = dt
        c = self.tags[i]
        if c:
            out["tags"] = self.tagsets[c]
        raw = self.hashes[i * _HASH : (i + 1) * _HASH]
        if raw != _NO_HASH:
            out["content_hash"] = raw.hex()

    def memory(self, i: int, *, shared: bool = False) -> Memory:
        """Row ``i`` as its model, built as :meth:`GraphNode.from_trusted` builds one from
        the row's dict (the same fields and values) without making the dict first: a
        search builds a model for each of its ~100 hits. Each call gives a new model
        with its own metadata dict (a caller may change it); with ``shared``, the table's
        own model of the row once it is kept (a row built a second time; the same object
        until the row changes): only for a caller that reads it and hands out copies
        (recall's searches)."""
        model = self._built.get(i)
        if model is None:
            model = assembled(Memory, self._fields_of(i))
            # kept only when the row was built before: a model kept lives on into the
            # collector's oldest generation, and on a large store most rows a query
            # builds are never built again, so keeping each first build made the full
            # collections that cost 100k recall its p95; the rows seen are plain ints,
            # which the collector does not track
            if i in self._seen:
                self._built[i] = model
                if len(self._built) > _BUILT_MAX:
                    del self._built[next(iter(self._built))]
            else:
                self._seen[i] = None
                if len(self._seen) > 4 * _BUILT_MAX:
                    del self._seen[next(iter(self._seen))]
                return model  # nobody else holds it: no copy needed
        if shared:
            return model
        return replaced(model, metadata=model.metadata.copy())

    def _fields_of(self, i: int) -> dict[str, Any]:
        """Row ``i``'s model fields (see :meth:`memory`)."""
        key = self.keys[i]
        assert key is not None
        data = self._template.copy()
        data["id"] = key[7:]
        data["content"] = self.content[i]
        for f, col, values, held in self._decoders:
            c = col[i]
            if c:
                if held is None:
                    data[f] = values[c]
                elif c < len(held):
                    data[f] = held[c]
                else:
                    data[f] = self._typed_value(f, held, c)
        self._rest_into(i, data)
        meta: dict[str, Any] = {}
        extra = self.extra.get(i)
        if extra:
            for k, v in extra.items():
                if k.startswith(METADATA_PREFIX):
                    meta[k[len(METADATA_PREFIX) :]] = v
        data["metadata"] = meta
        return data

    def check_coded(self) -> None:
        """ValueError when a coded field (status, category, tier, ...) holds a value its
        model does not know: a row written by another program, found when the rows are
        read instead of as a KeyError at every later read of that memory. One look per
        distinct value."""
        for field, conv in trusted_plan(Memory)[2]:
            for value in self.values.get(field, [None])[1:]:
                try:
                    conv(value)
                except (KeyError, TypeError):
                    raise ValueError(f"a memory's {field} is {value!r}") from None

    def _typed_value(self, field: str, held: list[Any], code: int) -> Any:
        """The model's value (an enum member) of ``field``'s value ``code``, converted
        once per value (KeyError for a value the model does not know, as from_trusted)."""
        if code >= len(held):
            conv = dict(trusted_plan(Memory)[2])[field]
            values = self.values[field]
            held.extend(conv(values[c]) for c in range(len(held), len(values)))
        return held[code]

    def fields(self, i: int) -> list[str]:
        """The attribute names row ``i`` holds, in its dict's order."""
        return list(self.as_dict(i))

    def keys_holding(self, field: str, value: Any) -> list[str]:
        """The keys of the rows whose ``field`` (a coded one, or ``tags``) is ``value``, or
        whose tags hold it — what the field's index bucket holds for ``value`` of the
        rows (None: the rows without the field). A pass over the field's codes in C."""
        n = len(self.keys)
        if field == "tags":
            if value is None:
                wanted = [0]
            else:
                try:
                    wanted = [c for c, s in enumerate(self.tagsets) if s is not None and value in s]
                except TypeError:  # an unhashable or incomparable value: held by no row
                    wanted = []
            if not wanted:
                return []
            col = np.frombuffer(self.tags, dtype=np.int32)[:n]
            rows = np.flatnonzero(np.isin(col, wanted) if len(wanted) > 1 else col == wanted[0])
        else:
            c = 0 if value is None else self.value_code[field].get(value)
            if c is None:
                return []
            rows = np.flatnonzero(np.frombuffer(self.codes[field], dtype=np.int32)[:n] == c)
        return self.keys_at(rows)

    def keys_at(self, rows: np.ndarray) -> list[str]:
        """The keys of the rows ``rows`` (row numbers), the free ones left out."""
        keys = self.keys
        return [k for k in map(keys.__getitem__, rows.tolist()) if k is not None]

    # -- the state file ----------------------------------------------------------------

    def to_file(self) -> dict[str, Any]:
        """The columns as plain values (lists, byte strings) for the state file, whose
        unpickler makes nothing but builtins and datetimes."""
        return {
            "keys": self.keys,
            "free": self.free,
            "content": self.content,
            "hashes": bytes(self.hashes),
            "values": self.values,
            "codes": {f: col.tobytes() for f, col in self.codes.items()},
            "floats": {f: col.tobytes() for f, col in self.floats.items()},
            "ints": {f: col.tobytes() for f, col in self.ints.items()},
            "times": {f: col.tobytes() for f, col in self.times.items()},
            "tagsets": self.tagsets,
            "tags": self.tags.tobytes(),
            "extra": self.extra,
        }

    @classmethod
    def from_file(cls, data: dict[str, Any]) -> MemoryTable:
        """The table :meth:`to_file` filed (KeyError, TypeError or ValueError when the data
        does not add up to one)."""
        t = cls()
        keys = data["keys"]
        n = len(keys)
        free = data["free"]
        if not isinstance(keys, list) or not isinstance(free, list):
            raise TypeError("malformed memory columns")
        if not set(map(type, keys)) <= {str, type(None)}:
            raise TypeError("a memory key that is not a string")
        # not interned (a million calls, a third of a second at 1M memories): the file
        # holds one string per key already, and later writes look that string up (own)
        t.keys = keys
        t.free = free
        rows: dict[str | None, int] = dict(zip(t.keys, range(n), strict=True))
        rows.pop(None, None)
        t.row_of = rows  # type: ignore[assignment]  # None, the free rows' key, taken out
        if len(t.row_of) + len(free) != n or any(
            i.__class__ is not int or not 0 <= i < n or t.keys[i] is not None for i in free
        ):
            raise ValueError("the memory columns' rows do not add up")
        t.content = data["content"]
        t.hashes = bytearray(data["hashes"])
        if len(t.content) != n or len(t.hashes) != n * _HASH:
            raise ValueError("a memory column is not as long as the others")
        for f in CODED:
            vals = data["values"][f]
            if not isinstance(vals, list) or vals[:1] != [None]:
                raise ValueError("malformed value table")
            t.values[f] = [None, *(intern(v) for v in vals[1:])]
            t.value_code[f] = {v: c for c, v in enumerate(t.values[f]) if v is not None}
        t.tagsets = [None, *(tuple([intern(x) for x in s]) for s in data["tagsets"][1:])]
        t.tag_code = {s: c for c, s in enumerate(t.tagsets) if s is not None}
        for src, dst, kind in (
            (data["codes"], t.codes, "i"),
            (data["floats"], t.floats, "d"),
            (data["ints"], t.ints, "q"),
            (data["times"], t.times, "q"),
        ):
            for f in dst:
                col = array(kind)
                col.frombytes(src[f])
                if len(col) != n:
                    raise ValueError("a memory column is not as long as the others")
                dst[f] = col  # type: ignore[assignment]
        t.tags.frombytes(data["tags"])
        if len(t.tags) != n:
            raise ValueError("a memory column is not as long as the others")
        tables: list[tuple[array[int], int]] = [(t.codes[f], len(t.values[f])) for f in CODED]
        for col, held in [*tables, (t.tags, len(t.tagsets))]:
            if n and not (0 <= _lowest(col) and _highest(col) < held):
                raise ValueError("a code outside its value table")
        t.extra = data["extra"]
        if not isinstance(t.extra, dict):
            raise TypeError("malformed memory columns")
        t._index_columns()
        return t


def _lowest(col: array[int]) -> int:
    return int(np.frombuffer(col, dtype=np.int32).min())


def _highest(col: array[int]) -> int:
    return int(np.frombuffer(col, dtype=np.int32).max())


class MemoryRow(Mapping[str, Any]):
    """A memory's attributes: a read-only mapping over its row of the columns, live (it
    shows later writes to the memory)."""

    __slots__ = ("_i", "_t")

    def __init__(self, table: MemoryTable, i: int) -> None:
        self._t = table
        self._i = i

    def __getitem__(self, field: str) -> Any:
        v = self._t.get(self._i, field, _MISSING)
        if v is _MISSING:
            raise KeyError(field)
        return v

    def get(self, field: str, default: Any = None) -> Any:
        return self._t.get(self._i, field, default)

    def __contains__(self, field: object) -> bool:
        return isinstance(field, str) and self._t.get(self._i, field, _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[str]:
        return iter(self._t.fields(self._i))

    def __len__(self) -> int:
        return len(self._t.fields(self._i))

    def __repr__(self) -> str:
        return repr(self._t.as_dict(self._i))

    def copy(self) -> dict[str, Any]:
        """The attributes as a new dict (what ``dict.copy`` gives for a dict)."""
        return self._t.as_dict(self._i)


_MISSING: Any = object()

#: a node's attributes as the graph holds them
Attrs = Mapping[str, Any]


class NodeTable(MutableMapping[str, Attrs]):
    """Node key -> attributes: memories as rows of a :class:`MemoryTable`, every other
    node (and a memory that does not fit the columns) as its dict. Setting a key stores
    the attributes given (a copy for a memory row); a dict already held for the key is
    updated in place, as networkx views hold on to it."""

    __slots__ = ("dicts", "memories")

    def __init__(self) -> None:
        self.dicts: dict[str, dict[str, Any]] = {}
        self.memories = MemoryTable()

    def __getitem__(self, key: str) -> Attrs:
        d = self.dicts.get(key)
        if d is not None:
            return d
        return MemoryRow(self.memories, self.memories.row_of[key])

    def get(self, key: str, default: Any = None) -> Any:
        d = self.dicts.get(key)
        if d is not None:
            return d
        i = self.memories.row_of.get(key)
        return default if i is None else MemoryRow(self.memories, i)

    def __contains__(self, key: object) -> bool:
        return key in self.dicts or key in self.memories.row_of

    def own(self, key: str) -> str:
        """The one string object this table holds for ``key`` (a memory's row key, read
        from a state file without interning), else the interned one (a node's dict is held
        under its interned key): what edges, buckets and the vector index keep, so that a
        node key is one object however many places hold it."""
        if key[:7] != _PREFIX:  # (only a memory has a row: a write's agents, runs, tags)
            return intern(key)
        i = self.memories.row_of.get(key)
        if i is None:
            return intern(key)
        held = self.memories.keys[i]
        assert held is not None
        return held

    def __iter__(self) -> Iterator[str]:
        yield from self.dicts
        yield from self.memories.row_of

    def __len__(self) -> int:
        return len(self.dicts) + len(self.memories.row_of)

    def __setitem__(self, key: str, attrs: Attrs) -> None:
        held = self.dicts.get(key)
        if self.memories.put(key, attrs):
            if held is not None:
                del self.dicts[key]
            return
        if key in self.memories.row_of:
            self.memories.drop(key)
        if held is None:
            self.dicts[key] = attrs if isinstance(attrs, dict) else dict(attrs)
        elif held is not attrs:
            held.clear()
            held.update(attrs)

    def __delitem__(self, key: str) -> None:
        if self.dicts.pop(key, None) is None:
            self.memories.drop(key)

    def attrs(self, key: str) -> dict[str, Any]:
        """The node's attributes as a dict (a memory row's: a new one, to read)."""
        d = self.dicts.get(key)
        if d is not None:
            return d
        return self.memories.as_dict(self.memories.row_of[key])

    def count_access(self, key: str, n: int, at: datetime) -> None:
        """Add ``n`` accesses at ``at`` to a memory's attributes (nothing for a key that is
        not held)."""
        i = self.memories.row_of.get(key)
        if i is not None and self.memories.count_access(i, n, at):
            return
        attrs = self.dicts.get(key) if i is None else self.memories.as_dict(i)
        if attrs is None:
            return
        attrs["access_count"] = int(attrs.get("access_count", 0)) + n
        last = attrs.get("last_accessed")
        attrs["last_accessed"] = at if last is None or last < at else last
        if i is not None:
            self[key] = attrs  # a time the columns cannot hold: the row becomes a dict

    def to_file(self) -> dict[str, Any]:
        """The table as plain values for the state file (see :meth:`MemoryTable.to_file`)."""
        return {"dicts": self.dicts, "memories": self.memories.to_file()}

    @classmethod
    def from_file(cls, data: dict[str, Any]) -> NodeTable:
        """The table :meth:`to_file` filed (KeyError, TypeError or ValueError when it does
        not add up); a node dict's key interned, a memory row's as the file holds it
        (see :meth:`own`)."""
        t = cls()
        dicts = data["dicts"]
        if not isinstance(dicts, dict):
            raise TypeError("malformed node table")
        t.dicts = {intern(k): v for k, v in dicts.items()}
        t.memories = MemoryTable.from_file(data["memories"])
        if not t.dicts.keys().isdisjoint(t.memories.row_of):
            raise ValueError("a node held twice")
        return t
