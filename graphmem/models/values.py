"""Shared value rules of the graph: ids, time, enums, text/tag/metadata checks."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import time
from array import array
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from itertools import repeat
from typing import Any, TypeAlias, TypeVar

from pydantic import (
    BaseModel,
    ValidationError,
)

from graphmem.errors import InvalidInput

MAX_CONTENT_CHARS = 100_000
MAX_TAGS = 64
MAX_METADATA_KEYS = 128
_TAG_RE = re.compile(r"^[a-z0-9][a-z0-9_\-:./+#]{0,63}$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_ID_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")
_EVENT_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
METADATA_PREFIX = "metadata."

Scalar: TypeAlias = str | int | float | bool
PropValue: TypeAlias = Scalar | datetime | list[Any] | None


_B = TypeVar("_B", bound=BaseModel)


def assembled(cls: type[_B], data: dict[str, Any], fields_set: set[str] | None = None) -> _B:
    """An instance of ``cls`` holding ``data`` as its fields, as pydantic's validation
    leaves one behind, without running it (``model_construct`` also resolves every
    field's default, several times slower). Only for values this process built or
    validated itself: never for data from outside."""
    obj = cls.__new__(cls)
    setter: Callable[[object, str, Any], None] = object.__setattr__
    setter(obj, "__dict__", data)
    setter(obj, "__pydantic_fields_set__", set(data) if fields_set is None else fields_set)
    setter(obj, "__pydantic_extra__", None)
    setter(obj, "__pydantic_private__", None)
    return obj


def assembled_many(cls: type[_B], datas: list[dict[str, Any]], fields_set: set[str]) -> list[_B]:
    """:func:`assembled` of each of ``datas``, each with its own copy of ``fields_set``
    (a batch's new memories: the same calls, none of them made per item in Python)."""
    n = len(datas)
    objs: list[_B] = list(map(cls.__new__, repeat(cls, n)))
    setter: Callable[[object, str, Any], None] = object.__setattr__
    deque(map(setter, objs, repeat("__dict__"), datas), 0)
    deque(map(setter, objs, repeat("__pydantic_fields_set__"), map(set, repeat(fields_set, n))), 0)
    deque(map(setter, objs, repeat("__pydantic_extra__"), repeat(None, n)), 0)
    deque(map(setter, objs, repeat("__pydantic_private__"), repeat(None, n)), 0)
    return objs


def replaced(obj: _B, **changes: Any) -> _B:
    """A copy of ``obj`` with ``changes`` as its fields, without validation (what
    ``model_copy(update=...)`` does, at half its cost): only for values this process
    computed from validated ones (a run's next count and last memory id)."""
    fields_set = obj.__pydantic_fields_set__ | changes.keys()
    return assembled(type(obj), {**obj.__dict__, **changes}, fields_set)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (graphmem never stores naive datetimes)."""
    return datetime.now(UTC)


_last_ns = 0


def new_id() -> str:
    """A new 32-hex-digit id that sorts by creation time (like UUIDv7)."""
    return new_ids(1)[0]


def new_ids(n: int) -> list[str]:
    """``n`` new ids as :func:`new_id` makes them one after the other (the time in
    nanoseconds, then 8 random bytes, as 32 hex digits), all at once: the times and one
    read of the system's random bytes laid out as 64-bit words, written as hex by one
    call and cut every 16 bytes (formatting each id cost ~0.5 µs)."""
    global _last_ns
    now = time.time_ns()
    if now <= _last_ns:  # strictly increasing inside the process, even within one ns
        now = _last_ns + 1
    _last_ns = now + n - 1
    if not n:
        return []
    words = array("Q", bytes(16 * n))
    words[0::2] = array("Q", range(now, now + n))
    words[1::2] = array("Q", os.urandom(8 * n))
    if sys.byteorder == "little":  # the times' hex reads big-endian (random bytes stay so)
        words.byteswap()
    return words.tobytes().hex(" ", 16).split(" ")


#: the words :func:`new_ids` lays out are 64 bits
assert array("Q").itemsize == 8


def content_hash(content: str) -> str:
    """SHA-256 of content with whitespace folded and case lowered (exact-duplicate key)."""
    norm = " ".join(content.split()).lower()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


_hexdigest = type(hashlib.sha256()).hexdigest


def content_hashes(contents: Sequence[str]) -> list[str]:
    """:func:`content_hash` of each of ``contents`` (a batch's: the same steps over the
    whole batch at once where that gives the same texts, else each a map over the batch;
    no Python call per text)."""
    joined = "\x00".join(contents)
    if (
        joined.isascii()
        and joined.count("\x00") == len(contents) - 1
        and "  " not in joined
        and not any(map(joined.__contains__, _FOLDED))
    ):
        # a single space is the only whitespace: folding only strips each text's ends
        # (NUL is no whitespace and, counted, in none of the texts: their ends stay marked)
        texts = joined.lower().encode().split(b"\x00")
        digests = map(hashlib.sha256, map(bytes.strip, texts, repeat(b" ")))
        return list(map(_hexdigest, digests))
    folded = map(str.lower, map(" ".join, map(str.split, contents)))
    return list(map(_hexdigest, map(hashlib.sha256, map(str.encode, folded))))


#: the ASCII whitespace ``str.split`` folds besides the space
_FOLDED = tuple("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")


class NodeLabel(StrEnum):
    """The node labels graphmem writes; the allowlist for every backend."""

    MEMORY = "Memory"
    AGENT = "Agent"
    RUN = "Run"
    TAG = "Tag"
    ORG_FACT = "OrgFact"
    ORG_OPERATION = "OrgOperation"
    LOG_ENTRY = "LogEntry"
    PAYLOAD = "Payload"
    NAMESPACE = "Namespace"  # a namespace shared by several agents (scoping.py)
    ENTITY = "Entity"  # what memories are about (graphmem.knowledge)


class EdgeType(StrEnum):
    """The relationship types graphmem writes; the allowlist for every backend."""

    SUPERSEDES = "SUPERSEDES"
    DERIVED_FROM = "DERIVED_FROM"
    AUTHORED_BY = "AUTHORED_BY"
    IN_RUN = "IN_RUN"
    RUN_BY = "RUN_BY"
    TAGGED = "TAGGED"
    NEXT = "NEXT"  # (earlier)-[:NEXT]->(later) inside one run
    RECORDS = "RECORDS"  # (OrgOperation)-[:RECORDS]->(OrgFact)
    REFERENCES = "REFERENCES"  # (LogEntry)-[:REFERENCES]->(Payload)
    CHILD_OF = "CHILD_OF"  # (LogEntry)-[:CHILD_OF]->(parent LogEntry)
    MENTIONS = "MENTIONS"  # (Memory)-[:MENTIONS {role}]->(Entity)
    RELATES = "RELATES"  # (Entity)-[:RELATES {predicate, memory_id, valid_from}]->(Entity)


class Category(StrEnum):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    SUMMARY = "summary"


class Tier(StrEnum):
    """Persisted tiers. The fleeting per-turn tier lives only in process (lifecycle)."""

    SHORT_TERM = "short_term"
    LONG_TERM = "long_term"


class Status(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"


class Visibility(StrEnum):
    """Who may read a memory: its author, the members of its namespace, or every agent."""

    PRIVATE = "private"
    SHARED = "shared"
    ORG = "org"


def audience_key(visibility: Visibility | str, agent_id: str, namespace: str) -> str:
    """The one scalar a scoped filter matches on: ``agent:<id>`` | ``ns:<name>`` | ``org``."""
    # a member as it is: Visibility(...) costs an enum lookup per memory built
    vis = visibility if visibility.__class__ is Visibility else Visibility(visibility)
    if vis is Visibility.PRIVATE:
        return f"agent:{agent_id}"
    if vis is Visibility.SHARED:
        return f"ns:{namespace}"
    return "org"


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    ARCHIVED = "archived"


class EventType(StrEnum):
    """Standard episodic event types; other lowercase identifiers are accepted too."""

    USER_MESSAGE = "user_message"
    AGENT_RESPONSE = "agent_response"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    DELEGATION_REQUEST = "delegation_request"
    DELEGATION_RESPONSE = "delegation_response"
    ERROR = "error"
    OBSERVATION = "observation"


# ---------------------------------------------------------------------------------------
# validation helpers


def _aware(value: datetime | None, field: str) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field} must be timezone-aware (got naive {value.isoformat()})")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"{field} {value.isoformat()} is outside years 1-9999 once converted to UTC"
        ) from None


def check_text(value: str, what: str) -> str:
    """``value`` unless it cannot be encoded as UTF-8 (a lone surrogate): no store, JSON
    encoder or HTTP response can carry such a string."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"{what} is not valid Unicode text (lone surrogate at position {e.start})"
        ) from None
    return value


#: ids (agents, namespaces, runs) and tags already found good: a batch repeats the same few
#: (a str is immutable, so a good one stays good); cleared when full
_GOOD_IDS: set[str] = set()
_NORMAL_TAGS: dict[str, str] = {}
#: lists of tags (as tuples of exact strings) already checked -> their checked tuple
_TAG_SETS: dict[tuple[str, ...], tuple[str, ...]] = {}
_REMEMBERED = 4096


def _check_id(value: str, what: str) -> str:
    if value.__class__ is str and value in _GOOD_IDS:
        return value
    if not isinstance(value, str) or not _ID_RE.match(value) or value.strip() != value:
        raise ValueError(
            f"{what} must be 1-256 printable characters without surrounding whitespace"
        )
    check_text(value, what)
    if value.__class__ is str:
        if len(_GOOD_IDS) >= _REMEMBERED:
            _GOOD_IDS.clear()
        _GOOD_IDS.add(value)
    return value


def normalise_tag(tag: str) -> str:
    """Tags are case-insensitive: stored lowercased and stripped."""
    if tag.__class__ is str:
        known = _NORMAL_TAGS.get(tag)
        if known is not None:
            return known
    if not isinstance(tag, str):
        raise ValueError(f"tag must be a string, got {type(tag).__name__}")
    norm = tag.strip().lower()
    if not _TAG_RE.match(norm):
        raise ValueError(
            f"malformed tag {tag!r}: 1-64 chars of a-z 0-9 _ - : . / + #, "
            "starting with a letter or digit"
        )
    if tag.__class__ is str:
        if len(_NORMAL_TAGS) >= _REMEMBERED:
            _NORMAL_TAGS.clear()
        _NORMAL_TAGS[tag] = norm
    return norm


def check_content(v: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ValueError("content must not be empty")
    if len(v) > MAX_CONTENT_CHARS:
        raise ValueError(f"content has {len(v)} characters; at most {MAX_CONTENT_CHARS}")
    if "\x00" in v:
        raise ValueError("content must not contain NUL characters")
    return check_text(v, "content")


def check_tags(v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    if v.__class__ is list or v.__class__ is tuple:
        given = tuple(v)
        try:
            known = _TAG_SETS.get(given)
        except TypeError:  # an unhashable item: refused below
            known = None
        if known is not None:
            return known
    if isinstance(v, str) or not isinstance(v, Sequence | set | frozenset):
        raise ValueError("tags must be a list of strings")
    tags = tuple(dict.fromkeys(normalise_tag(t) for t in v))
    if len(tags) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags")
    if (v.__class__ is list or v.__class__ is tuple) and all(t.__class__ is str for t in v):
        if len(_TAG_SETS) >= _REMEMBERED:
            _TAG_SETS.clear()
        _TAG_SETS[tuple(v)] = tags
    return tags


MAX_METADATA_DEPTH = 64
_INT64 = range(-(2**63), 2**63)


def _check_metadata_value(value: Any, where: str, depth: int = 0) -> None:
    """Text is valid Unicode, numbers are finite, nesting is bounded (nested values are
    stored as JSON text, which a store and every client must be able to parse back)."""
    if depth > MAX_METADATA_DEPTH:
        raise ValueError(f"{where} is nested more than {MAX_METADATA_DEPTH} levels deep")
    if isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where} must hold finite numbers only")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                check_text(k, where)
            _check_metadata_value(v, where, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            _check_metadata_value(v, where, depth + 1)


def _flat_metadata(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate metadata into a flat map of scalars / lists of scalars.

    Nested values (maps, lists holding maps or lists) become JSON text; ``None`` values are
    dropped (Neo4j cannot store a null property); anything not JSON-serialisable is refused.
    Integers must fit in 64 bits where they are stored as numbers (scalars, flat lists).
    """
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise ValueError(f"metadata must be a mapping, got {type(meta).__name__}")
    if len(meta) > MAX_METADATA_KEYS:
        raise ValueError(f"metadata has {len(meta)} keys; at most {MAX_METADATA_KEYS}")
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if not isinstance(key, str) or not key or len(key) > 128 or "\x00" in key:
            raise ValueError(f"metadata key {key!r} must be a non-empty string of <= 128 chars")
        check_text(key, "metadata key")
        if value is None:
            continue
        where = f"metadata[{key!r}]"
        _check_metadata_value(value, where)
        if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
            raise ValueError(f"{where} does not fit in a 64-bit integer")
        if isinstance(value, bool | int | str | float):
            out[key] = value
        elif (
            isinstance(value, list | tuple)
            and all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value)
            and len({type(v) for v in value}) <= 1
        ):
            if any(isinstance(v, int) and v not in _INT64 for v in value):
                raise ValueError(f"{where} holds an integer that does not fit in 64 bits")
            out[key] = list(value)
        else:
            try:
                out[key] = json.dumps(value, sort_keys=True, allow_nan=False)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{where} is not JSON-serialisable: {type(value).__name__}") from e
    return out


def _to_prop(value: Any) -> PropValue:
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    plain: PropValue = value  # validated by the model's fields: a JSON-like value
    return plain


_CONVERTERS: dict[type, dict[str, Callable[[Any], Any]]] = {}
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


#: metadata flag of a memory whose content is the canonical JSON text of a non-text value
CONTENT_JSON_KEY = "content_json"


_M = TypeVar("_M", bound=BaseModel)


def validated(model: type[_M], data: Any) -> _M:
    """``model.model_validate(data)`` with pydantic's error turned into InvalidInput."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise InvalidInput(_describe(e, model.__name__)) from e


def _describe(e: ValidationError, what: str) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"]) or what
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    return f"invalid {what}: " + "; ".join(parts)
