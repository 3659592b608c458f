"""A new :class:`~graphmem.models.Memory` from a plain mapping without pydantic's walk, for
batch writes: the same rules (the helpers the model's validators call), applied only where
every value already has its field's exact type. Anything else — a missing required field, a
value pydantic would convert (an int for a float, text for a datetime, a str subclass), an
unknown key, a value a rule refuses — returns None, and the caller validates with the model,
which then says what is wrong. ``tests/unit/test_plain_memory.py`` compares the two on
generated items."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from itertools import chain, repeat
from operator import attrgetter, itemgetter, setitem
from typing import Any

from pydantic_core import PydanticUndefined

from graphmem.models.nodes import Memory
from graphmem.models.values import (
    _EVENT_RE,
    MAX_CONTENT_CHARS,
    Category,
    Tier,
    Visibility,
    _aware,
    _check_id,
    _flat_metadata,
    assembled,
    assembled_many,
    audience_key,
    check_content,
    check_tags,
    content_hash,
    content_hashes,
    new_id,
)

#: field -> the enum whose members or values it takes
_ENUMS: dict[str, type[StrEnum]] = {"category": Category, "tier": Tier, "visibility": Visibility}
_SCOPES = ("agent_id", "namespace", "run_id")
_KEYS = frozenset(
    {
        "id",
        "content",
        "importance",
        "confidence",
        "created_at",
        "tags",
        "metadata",
        "event_type",
        "expires_at",
        *_ENUMS,
        *_SCOPES,
    }
)

_defaults: list[dict[str, Any]] = []


def _template() -> dict[str, Any]:
    """Every field of Memory at its declared default (factories left as None: the fast path
    fills ``id``, ``created_at`` and ``metadata`` itself), in field order."""
    if not _defaults:
        out: dict[str, Any] = {}
        for name, field in Memory.model_fields.items():
            default = field.default
            out[name] = None if default is PydanticUndefined else default
        _defaults.append(out)
    return _defaults[0]


class _Fields:
    """Holds a memory's fields as attributes, once: its instance dict is then a dict of
    shared keys, whose copies hold only their values (~300 bytes a memory, ~830 for a
    plain dict of the same fields; a batch's allocations are most of its cost)."""


_shared: list[dict[str, Any]] = []


def _shared_template() -> dict[str, Any]:
    """:func:`_template` as a dict of shared keys (see :class:`_Fields`)."""
    if not _shared:
        holder = _Fields()
        for name, value in _template().items():
            setattr(holder, name, value)
        _shared.append(vars(holder))
    return _shared[0]


def _unit(value: Any) -> bool:
    return value.__class__ is float and 0.0 <= value <= 1.0


def plain_memory(item: Mapping[str, Any], ident: str | None = None) -> Memory | None:
    """The Memory ``Memory.model_validate(item)`` would make, or None when ``item`` needs
    the model's own validation (see the module docstring). ``item`` holds no None values;
    ``ident``: the new id to give it when it has none (a batch makes its ids at once)."""
    if not _KEYS.issuperset(item):
        return None
    content = item.get("content")
    if content.__class__ is not str:
        return None
    data = dict(_template())
    try:
        data["content"] = check_content(content)
        given = item.get("id")
        if given is None:
            data["id"] = new_id() if ident is None else ident
        elif given.__class__ is str:
            data["id"] = _check_id(given, "id")
        else:
            return None
        for name in _SCOPES:
            value = item.get(name)
            if value is not None:
                if value.__class__ is not str:
                    return None
                data[name] = _check_id(value, name)
        for name, enum in _ENUMS.items():
            value = item.get(name)
            if value is not None:
                if value.__class__ is enum:
                    data[name] = value
                elif value.__class__ is str and value in enum._value2member_map_:
                    data[name] = enum._value2member_map_[value]
                else:
                    return None
        for name in ("importance", "confidence"):
            value = item.get(name)
            if value is not None:
                if not _unit(value):
                    return None
                data[name] = value
        event = item.get("event_type")
        if event is not None:
            if event.__class__ is not str or not _EVENT_RE.match(event):
                return None
            data["event_type"] = event
        tags = item.get("tags")
        if tags is not None:
            if tags.__class__ not in (list, tuple) or any(t.__class__ is not str for t in tags):
                return None
            data["tags"] = check_tags(tags)
        meta = item.get("metadata")
        if meta is not None and meta.__class__ is not dict:
            return None
        data["metadata"] = _flat_metadata(meta)
        created = item.get("created_at")
        if created is None:
            created = datetime.now(UTC)
        elif created.__class__ is not datetime:
            return None
        created = _aware(created, "created_at")
        expires = item.get("expires_at")
        if expires is not None:
            if expires.__class__ is not datetime:
                return None
            data["expires_at"] = _aware(expires, "expires_at")
    except ValueError:
        return None
    data["created_at"] = data["updated_at"] = data["valid_from"] = created
    data["content_hash"] = content_hash(data["content"])
    data["audience"] = audience_key(data["visibility"], data["agent_id"], data["namespace"])
    return _construct(data, set(item))


def _construct(data: dict[str, Any], fields_set: set[str]) -> Memory:
    """What pydantic's validation leaves behind, without running it (as ``from_trusted``)."""
    return assembled(Memory, data, fields_set)


_NONE = type(None)
_STR = frozenset({str})
#: the classes a field of a batch's items may hold for the batch to be made column-wise
#: (what plain_memory takes as it is)
_PLAIN_TYPES: dict[str, frozenset[type]] = {
    "id": frozenset({str}),
    "content": frozenset({str}),
    **{name: frozenset({str}) for name in (*_SCOPES, "event_type")},
    **{name: frozenset({str, enum}) for name, enum in _ENUMS.items()},
    "importance": frozenset({float}),
    "confidence": frozenset({float}),
    "tags": frozenset({list, tuple}),
    "metadata": frozenset({dict}),
    "created_at": frozenset({datetime}),
    "expires_at": frozenset({datetime}),
}

Columns = dict[str, list[Any]]
ClassifyColumns = Callable[[Columns, int], None]


class _Unplain(Exception):
    """A batch holds something :func:`plain_memory` would leave to the model."""


#: at most this many shapes (key sets) in a batch made column-wise, a shape at a time
MAX_SHAPES = 8


def plain_memories(
    items: Sequence[Any],
    ids: Sequence[str],
    now: datetime,
    classify: ClassifyColumns | None = None,
    read: Columns | None = None,
) -> list[Memory] | None:
    """The memories ``remember_many`` makes of ``items`` (each given ``now`` as its
    ``created_at`` when it has none, ``ids[i]`` as its id when it has none, completed by
    ``classify``, the lifecycle's rules over the batch's columns), made a field at a time
    over the items of each shape (their keys, in order): one pass per field instead of one
    :func:`plain_memory` per item, the same rules. None — the caller then takes the items
    one by one — unless every item is a dict whose every value :func:`plain_memory` takes
    as it is (a None only where all the items of its shape have None) and the batch has
    at most :data:`MAX_SHAPES` shapes: a refused or converted value is then reported, or
    converted, exactly as for a single item. ``read``: the items' values by key (each
    item's, in their key order) when they are dicts of one shape and the caller has read
    them so already (the argument check: ``boundary.batch_columns``)."""
    n = len(items)
    if read is not None and n:
        return _one_shape(items, ids, now, classify, read)
    if not n or set(map(type, items)) != {dict}:
        return None
    shapes = list(map(tuple, items))
    distinct = set(shapes)
    if len(distinct) == 1:
        return _one_shape(items, ids, now, classify)
    if len(distinct) > MAX_SHAPES:
        return None
    where: dict[tuple[str, ...], list[int]] = {shape: [] for shape in distinct}
    for i, shape in enumerate(shapes):
        where[shape].append(i)
    out: list[Memory] = [None] * n  # type: ignore[list-item]  # every place is filled below
    for places in where.values():
        made = _one_shape([items[i] for i in places], [ids[i] for i in places], now, classify)
        if made is None:
            return None
        for i, memory in zip(places, made, strict=True):
            out[i] = memory
    return out


def _one_shape(
    items: Sequence[dict[str, Any]],
    ids: Sequence[str],
    now: datetime,
    classify: ClassifyColumns | None,
    read: Columns | None = None,
) -> list[Memory] | None:
    """:func:`plain_memories` of items of one shape (``read``: their values by key)."""
    n = len(items)
    cols: Columns = {}
    for key in items[0] if read is None else read:
        col = list(map(itemgetter(key), items)) if read is None else read[key]
        types = set(map(type, col))
        if _NONE in types:
            if len(types) > 1:
                return None  # None here and not there: items of different shapes
            continue  # a None is a field not given
        if key != "user_id" and not types.issubset(_PLAIN_TYPES.get(key, ())):
            return None
        cols[key] = col
    if "content" not in cols:
        return None
    given = set(cols)
    if "user_id" in cols:  # an end user's memory: kept as metadata.user_id
        users = cols.pop("user_id")
        try:  # an id like a run's user_id (the items one by one say which is not)
            for u in users:
                _check_id(u, "user_id")
        except ValueError:
            return None
        metas = cols.get("metadata") or [{}] * n
        cols["metadata"] = [{**m, "user_id": u} for m, u in zip(metas, users, strict=True)]
        given.discard("user_id")
        given.add("metadata")
    if "created_at" not in cols:
        cols["created_at"] = [now] * n
        given.add("created_at")
    if classify is not None:
        added = set(cols)
        try:
            classify(cols, n)
        except Exception:  # the items one by one say which and how
            return None
        added = set(cols) - added
        given |= added
        for key in added:
            if not set(map(type, cols[key])).issubset(_PLAIN_TYPES[key]):
                return None
    try:
        return _construct_many(_fields(cols, n, ids), given)
    except (_Unplain, ValueError):
        return None


def _fields(cols: Columns, n: int, ids: Sequence[str]) -> Columns:
    """The fields of Memory the batch's memories differ in, as columns (the others take
    their defaults), checked as :func:`plain_memory` checks one item's fields: ValueError
    or _Unplain where it would return None."""
    out: Columns = {}
    contents = cols["content"]
    joined = "".join(contents)
    if (
        not all(map(str.strip, contents))
        or max(map(len, contents)) > MAX_CONTENT_CHARS
        or "\x00" in joined
        or not (joined.isascii() or _encodable(joined))
    ):
        raise _Unplain  # check_content refuses one of them
    out["content"] = contents
    out["content_hash"] = content_hashes(contents)
    given = cols.get("id")
    if given is not None:
        for ident in given:
            _check_id(ident, "id")
    out["id"] = list(ids) if given is None else given
    for name in _SCOPES:
        col = cols.get(name)
        if col is not None:
            for value in set(col):
                _check_id(value, name)
            out[name] = col
    for name, enum in _ENUMS.items():
        col = cols.get(name)
        if col is not None:
            members = enum._value2member_map_
            # a member and its text are one key: both map to the member
            found = {value: members.get(value) for value in set(col)}
            if None in found.values():
                raise _Unplain
            out[name] = list(map(found.__getitem__, col))
    for name in ("importance", "confidence"):
        col = cols.get(name)
        if col is not None:
            if not (all(map((0.0).__le__, col)) and all(map((1.0).__ge__, col))):
                raise _Unplain  # out of range, or NaN
            out[name] = col
    events = cols.get("event_type")
    if events is not None:
        if not all(map(_EVENT_RE.match, set(events))):
            raise _Unplain
        out["event_type"] = events
    tags = cols.get("tags")
    if tags is not None:
        if not set(map(type, chain.from_iterable(tags))).issubset(_STR):
            raise _Unplain
        keys = list(map(tuple, tags))
        checked = {key: check_tags(key) for key in set(keys)}
        out["tags"] = list(map(checked.__getitem__, keys))
    metas = cols.get("metadata")
    # a dict of its own for each memory
    out["metadata"] = list(map(_flat_metadata, metas) if metas is not None else map(dict, [()] * n))
    created = _aware_column(cols["created_at"], "created_at")
    out["created_at"] = out["updated_at"] = out["valid_from"] = created
    expires = cols.get("expires_at")
    if expires is not None:
        out["expires_at"] = _aware_column(expires, "expires_at")
    out["audience"] = _audiences(out, cols, n)
    return out


def _audiences(out: Columns, cols: Columns, n: int) -> list[str]:
    """``audience_key`` of each memory, asked once per distinct (visibility, agent,
    namespace)."""
    defaults = _template()
    visibility, agents, spaces = (
        out[name] if name in cols else [defaults[name]] * n
        for name in ("visibility", "agent_id", "namespace")
    )
    seen = visibility[0]
    if (seen is Visibility.PRIVATE or seen is Visibility.SHARED) and visibility.count(seen) == n:
        # one visibility (mostly the default): the audience is the agent's or the
        # namespace's alone, asked once per distinct one (no key made a memory)
        whose = agents if seen is Visibility.PRIVATE else spaces
        alone = {v: audience_key(seen, v, v) for v in set(whose)}
        return list(map(alone.__getitem__, whose))
    keys = list(zip(visibility, agents, spaces, strict=True))
    found = {key: audience_key(*key) for key in set(keys)}
    return list(map(found.__getitem__, keys))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _aware_column(col: list[datetime], what: str) -> list[datetime]:
    """``_aware`` of each time (a batch's times are mostly UTC already: kept as they are,
    which is what converting them gives)."""
    if set(map(attrgetter("tzinfo"), col)) == {UTC}:
        return col
    return [_aware(value, what) for value in col]  # type: ignore[misc]


def _construct_many(fields: Columns, given: set[str]) -> list[Memory]:
    """Memories of ``fields`` (field -> its values over the batch; the others at their
    defaults), each with ``given`` as its fields set."""
    n = len(fields["id"])
    # each memory's fields a copy of the defaults (in the model's order) then its own, set
    # a field at a time (a key of them all: the order stays the model's)
    datas = list(map(dict.copy, repeat(_shared_template(), n)))
    for name, col in fields.items():
        if len(col) != n:
            raise ValueError(f"{name}: {len(col)} values for {n} memories")
        deque(map(setitem, datas, repeat(name, n), col), 0)
    return assembled_many(Memory, datas, given)
