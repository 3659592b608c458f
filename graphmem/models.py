"""Pydantic models of graphmem's property graph: nodes, edges, filters, queries and results.

Nodes are frozen values; a change is a new value (``node.evolve(...)``) written back through
the backend. Every node serialises to a *flat* map of Neo4j-legal properties with
:meth:`GraphNode.to_props` (metadata keys become ``metadata.<key>`` properties; nested
metadata values are stored as JSON text) and is rebuilt with :meth:`GraphNode.from_props`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal, NamedTuple, Self, TypeAlias, TypeVar

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from graphmem.errors import InvalidInput

__all__ = [
    "MAX_CONTENT_CHARS",
    "Agent",
    "BackendStats",
    "Category",
    "Edge",
    "EdgeType",
    "Entity",
    "EntityType",
    "EventType",
    "Filter",
    "GraphNode",
    "Hit",
    "Memory",
    "Namespace",
    "NodeLabel",
    "NodeRef",
    "OrgFact",
    "Range",
    "RecallResult",
    "Run",
    "RunStatus",
    "Status",
    "Subgraph",
    "Tag",
    "TextQuery",
    "Tier",
    "VectorQuery",
    "Visibility",
    "audience_key",
    "content_hash",
    "new_id",
    "node_model",
    "utcnow",
    "validated",
]

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


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (graphmem never stores naive datetimes)."""
    return datetime.now(UTC)


_last_ns = 0


def new_id() -> str:
    """A new 32-hex-digit id that sorts by creation time (like UUIDv7)."""
    global _last_ns
    now = time.time_ns()
    if now <= _last_ns:  # strictly increasing inside the process, even within one ns
        now = _last_ns + 1
    _last_ns = now
    return f"{now:016x}{os.urandom(8).hex()}"


def content_hash(content: str) -> str:
    """SHA-256 of content with whitespace folded and case lowered (exact-duplicate key)."""
    norm = " ".join(content.split()).lower()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


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
    vis = Visibility(visibility)
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


def _check_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not _ID_RE.match(value) or value.strip() != value:
        raise ValueError(
            f"{what} must be 1-256 printable characters without surrounding whitespace"
        )
    return check_text(value, what)


def normalise_tag(tag: str) -> str:
    """Tags are case-insensitive: stored lowercased and stripped."""
    if not isinstance(tag, str):
        raise ValueError(f"tag must be a string, got {type(tag).__name__}")
    norm = tag.strip().lower()
    if not _TAG_RE.match(norm):
        raise ValueError(
            f"malformed tag {tag!r}: 1-64 chars of a-z 0-9 _ - : . / + #, "
            "starting with a letter or digit"
        )
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
    if isinstance(v, str) or not isinstance(v, Sequence | set | frozenset):
        raise ValueError("tags must be a list of strings")
    tags = tuple(dict.fromkeys(normalise_tag(t) for t in v))
    if len(tags) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags")
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


# ---------------------------------------------------------------------------------------
# nodes


class GraphNode(BaseModel):
    """Base of every node model: frozen, strict about unknown fields, flat-serialisable."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    label: ClassVar[NodeLabel]
    id: str

    @field_validator("*")
    @classmethod
    def _valid_time(cls, v: Any, info: ValidationInfo) -> Any:
        """Every datetime field of every node: timezone-aware, kept in UTC."""
        return _aware(v, info.field_name or "time") if isinstance(v, datetime) else v

    @field_validator("id")
    @classmethod
    def _valid_id(cls, v: str) -> str:
        return _check_id(v, "id")

    @property
    def ref(self) -> NodeRef:
        return NodeRef(self.label, self.id)

    def to_props(self) -> dict[str, PropValue]:
        """Flat, Neo4j-legal properties (datetimes stay aware ``datetime`` objects)."""
        props: dict[str, PropValue] = {}
        for name, value in self.__dict__.items():  # hot path: plain attribute walk
            if value is None:
                continue
            if name == "metadata":
                for k, v in value.items():
                    props[METADATA_PREFIX + k] = v
            elif isinstance(value, str):
                props[name] = str(value) if isinstance(value, StrEnum) else value
            elif isinstance(value, tuple):
                props[name] = list(value)
            else:
                props[name] = value
        return props

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> Self:
        """Rebuild a node from :meth:`to_props` output (as stored by any backend)."""
        data: dict[str, Any] = {}
        meta: dict[str, Any] = {}
        for k, v in props.items():
            if k.startswith(METADATA_PREFIX):
                meta[k[len(METADATA_PREFIX) :]] = v
            elif k in cls.model_fields:
                data[k] = v
        if meta or "metadata" in cls.model_fields:
            data["metadata"] = meta
        return cls.model_validate(data)

    @classmethod
    def from_trusted(cls, props: Mapping[str, Any]) -> Self:
        """Rebuild a node from properties this process validated when they were written
        (the embedded backend's in-memory graph): types are restored, validators skipped.
        Never use it for data from outside (files, servers, users): use :meth:`from_props`."""
        conv = _converters(cls)
        # to_props drops only None values, so a missing field is None (field order kept)
        data: dict[str, Any] = dict.fromkeys(_field_names(cls))
        meta: dict[str, Any] = {}
        for k, v in props.items():
            if k in data:
                c = conv.get(k)
                data[k] = c(v) if c is not None and v is not None else v
            elif k.startswith(METADATA_PREFIX):
                meta[k[len(METADATA_PREFIX) :]] = v
        if "metadata" in data:
            data["metadata"] = meta
        # what model_construct does, without its per-field default resolution
        obj = cls.__new__(cls)
        object.__setattr__(obj, "__dict__", data)
        object.__setattr__(obj, "__pydantic_fields_set__", set(data))
        object.__setattr__(obj, "__pydantic_extra__", None)
        object.__setattr__(obj, "__pydantic_private__", None)
        return obj

    def evolve(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` applied (``model_copy`` would skip validation)."""
        data = self.model_dump()
        data.update(changes)
        return validated(type(self), data)


_CONVERTERS: dict[type, dict[str, Callable[[Any], Any]]] = {}
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(model)
    if names is None:  # model_fields is a computed property in recent pydantic
        names = _FIELD_NAMES[model] = tuple(model.model_fields)
    return names


def _converters(model: type[BaseModel]) -> dict[str, Callable[[Any], Any]]:
    """Per field, how to restore the Python type from a stored property (enums, tuples)."""
    conv = _CONVERTERS.get(model)
    if conv is None:
        conv = {}
        for name, field in model.model_fields.items():
            ann = field.annotation
            for arg in (ann, *getattr(ann, "__args__", ())):
                if isinstance(arg, type) and issubclass(arg, StrEnum):
                    conv[name] = arg._value2member_map_.__getitem__  # Enum(v) is slow
                    break
                if getattr(arg, "__origin__", None) is tuple:
                    conv[name] = tuple
                    break
        _CONVERTERS[model] = conv
    return conv


#: metadata flag of a memory whose content is the canonical JSON text of a non-text value
CONTENT_JSON_KEY = "content_json"


class Memory(GraphNode):
    """One memory: a piece of content an agent stored, with its lifecycle state."""

    label: ClassVar[NodeLabel] = NodeLabel.MEMORY

    id: str = Field(default_factory=new_id)
    content: str
    category: Category = Category.SEMANTIC
    tier: Tier = Tier.LONG_TERM
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime | None = None
    last_accessed: datetime | None = None
    access_count: int = Field(default=0, ge=0)
    agent_id: str = "default"
    run_id: str | None = None
    namespace: str = "default"
    event_type: str | None = None
    seq: int | None = Field(default=None, ge=0)  # position of an event inside its run
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding: tuple[float, ...] | None = Field(default=None, repr=False)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    expires_at: datetime | None = None
    status: Status = Status.ACTIVE
    content_hash: str = ""
    visibility: Visibility = Visibility.PRIVATE
    audience: str = ""  # derived from visibility/agent_id/namespace; see audience_key

    @field_validator("content")
    @classmethod
    def _valid_content(cls, v: str) -> str:
        return check_content(v)

    @field_validator("agent_id", "namespace", "run_id")
    @classmethod
    def _valid_scope(cls, v: str | None) -> str | None:
        return None if v is None else _check_id(v, "agent_id/namespace/run_id")

    @field_validator("event_type")
    @classmethod
    def _valid_event(cls, v: str | None) -> str | None:
        if v is not None and not _EVENT_RE.match(v):
            raise ValueError(f"event_type {v!r} must be a lowercase identifier")
        return v

    @field_validator("tags", mode="before")
    @classmethod
    def _valid_tags(cls, v: Any) -> tuple[str, ...]:
        return check_tags(v)

    @field_validator("metadata", mode="before")
    @classmethod
    def _valid_metadata(cls, v: Any) -> dict[str, Any]:
        return _flat_metadata(v)

    @field_validator("embedding", mode="before")
    @classmethod
    def _valid_embedding(cls, v: Any) -> tuple[float, ...] | None:
        if v is None:
            return None
        try:
            # float32 precision, so that every backend stores the values losslessly
            arr = np.asarray(v, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise ValueError("embedding must be a sequence of numbers") from e
        if arr.ndim != 1 or arr.size == 0 or not np.isfinite(arr).all():
            raise ValueError("embedding must be a non-empty flat list of finite numbers")
        return tuple(arr.tolist())

    @model_validator(mode="after")
    def _derived(self) -> Self:
        # frozen model: fill derived fields through object.__setattr__ once, at validation
        if not self.content_hash:
            object.__setattr__(self, "content_hash", content_hash(self.content))
        # always recomputed, so a stored or evolved value can never widen who may read it
        object.__setattr__(
            self, "audience", audience_key(self.visibility, self.agent_id, self.namespace)
        )
        if self.updated_at is None:
            object.__setattr__(self, "updated_at", self.created_at)
        if self.valid_from is None:
            object.__setattr__(self, "valid_from", self.created_at)
        if self.valid_to is not None and self.valid_from and self.valid_to < self.valid_from:
            raise ValueError("valid_to must not be before valid_from")
        return self

    @property
    def value(self) -> Any:
        """The content as written: the JSON value of an event stored with non-text
        content (``metadata.content_json``), else the text."""
        if self.metadata.get(CONTENT_JSON_KEY) is True:
            return json.loads(self.content)
        return self.content


class Agent(GraphNode):
    label: ClassVar[NodeLabel] = NodeLabel.AGENT

    name: str = ""
    seniority: str = "junior"  # e.g. junior | mid | senior | lead | human (see org.py)
    autonomy: int = Field(default=1, ge=0, le=5)
    kind: str = "agent"  # agent type, used by importance scoring
    created_at: datetime = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata", mode="before")
    @classmethod
    def _valid_metadata(cls, v: Any) -> dict[str, Any]:
        return _flat_metadata(v)


class Run(GraphNode):
    """One agent session/execution; a conversation session is a run."""

    label: ClassVar[NodeLabel] = NodeLabel.RUN

    id: str = Field(default_factory=new_id)
    agent_id: str = "default"
    user_id: str | None = None
    app_name: str | None = None
    namespace: str = "default"
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None
    status: RunStatus = RunStatus.RUNNING
    event_count: int = Field(default=0, ge=0)
    last_event_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata", mode="before")
    @classmethod
    def _valid_metadata(cls, v: Any) -> dict[str, Any]:
        return _flat_metadata(v)

    @field_validator("agent_id", "user_id", "namespace")
    @classmethod
    def _valid_scope(cls, v: str | None) -> str | None:
        # the agent becomes an Agent node id (RUN_BY): the same rule as every node id
        return None if v is None else _check_id(v, "agent_id/user_id/namespace")


class Tag(GraphNode):
    """A tag node; its id is the normalised tag name."""

    label: ClassVar[NodeLabel] = NodeLabel.TAG

    @property
    def name(self) -> str:
        return self.id

    @field_validator("id")
    @classmethod
    def _valid_id(cls, v: str) -> str:
        return normalise_tag(v)


class OrgFact(GraphNode):
    """One version of an organisational fact; ``fact_id`` is the logical id."""

    label: ClassVar[NodeLabel] = NodeLabel.ORG_FACT

    id: str = Field(default_factory=new_id)
    fact_id: str
    version: int = Field(default=1, ge=1)
    content: str
    category: str = "policy"
    tags: tuple[str, ...] = ()
    author: str
    author_seniority: str = "human"
    created_at: datetime = Field(default_factory=utcnow)
    retracted_at: datetime | None = None
    status: Status = Status.ACTIVE
    core: bool = False
    embedding: tuple[float, ...] | None = Field(default=None, repr=False)

    @field_validator("content")
    @classmethod
    def _valid_content(cls, v: str) -> str:
        return check_content(v)

    @field_validator("tags", mode="before")
    @classmethod
    def _valid_tags(cls, v: Any) -> tuple[str, ...]:
        return check_tags(v)

    @field_validator("fact_id", "author")
    @classmethod
    def _valid_ids(cls, v: str) -> str:
        return _check_id(v, "fact_id/author")

    @field_validator("category")
    @classmethod
    def _valid_category(cls, v: str) -> str:
        if not _EVENT_RE.match(v):
            raise ValueError(f"category {v!r} must be a lowercase identifier")
        return v


class OrgOperation(GraphNode):
    """Append-only record of a publish/retract on an org fact."""

    label: ClassVar[NodeLabel] = NodeLabel.ORG_OPERATION

    id: str = Field(default_factory=new_id)
    fact_id: str
    operation: Literal["publish", "retract"]
    version: int = Field(ge=1)
    author: str
    at: datetime = Field(default_factory=utcnow)
    reason: str | None = None


class LogEntry(GraphNode):
    """One orchestration-log record; large payloads live in a shared :class:`Payload`."""

    label: ClassVar[NodeLabel] = NodeLabel.LOG_ENTRY

    id: str = Field(default_factory=new_id)
    agent_id: str
    event_type: str
    run_id: str | None = None
    step: int | None = Field(default=None, ge=0)
    parent_id: str | None = None
    at: datetime = Field(default_factory=utcnow)
    payload: str | None = None  # inline payload (JSON text) when small
    payload_ref: str | None = None  # Payload id (sha256) when large
    payload_size: int = Field(default=0, ge=0)

    @field_validator("agent_id", "run_id", "parent_id")
    @classmethod
    def _valid_ids(cls, v: str | None) -> str | None:
        return None if v is None else _check_id(v, "agent_id/run_id/parent_id")

    @field_validator("event_type")
    @classmethod
    def _valid_event(cls, v: str) -> str:
        if not _EVENT_RE.match(v):
            raise ValueError(f"event_type {v!r} must be a lowercase identifier")
        return v


class Payload(GraphNode):
    """A content-addressed payload blob (id = SHA-256 of the text), reference counted."""

    label: ClassVar[NodeLabel] = NodeLabel.PAYLOAD

    text: str
    size: int = Field(ge=0)
    refcount: int = Field(default=0, ge=0)


class Namespace(GraphNode):
    """A namespace shared by several agents; its id is the namespace name. Memories with
    visibility ``shared`` in it are readable by its members (see graphmem.scoping)."""

    label: ClassVar[NodeLabel] = NodeLabel.NAMESPACE

    owner: str
    members: tuple[str, ...] = ()
    created_at: datetime = Field(default_factory=utcnow)

    @field_validator("owner")
    @classmethod
    def _valid_owner(cls, v: str) -> str:
        return _check_id(v, "owner")

    @field_validator("members", mode="before")
    @classmethod
    def _valid_members(cls, v: Any) -> tuple[str, ...]:
        if v is None:
            return ()
        if isinstance(v, str) or not isinstance(v, Sequence | set | frozenset):
            raise ValueError("members must be a list of agent ids")
        return tuple(sorted({_check_id(m, "member") for m in v}))


class EntityType(StrEnum):
    PERSON = "person"
    PLACE = "place"
    ORGANISATION = "organisation"
    EVENT = "event"
    OBJECT = "object"  # things and activities
    OTHER = "other"


class Entity(GraphNode):
    """Something memories are about (a person, place, organisation, event, object or
    activity), scoped like the memories that mention it: its ``audience`` is theirs, so an
    agent's private memories never expose their entities to another agent. ``norm`` is the
    normalised name that resolution matches on; ``aliases`` are other names seen for it."""

    label: ClassVar[NodeLabel] = NodeLabel.ENTITY

    id: str = Field(default_factory=new_id)
    name: str
    norm: str
    type: EntityType = EntityType.OTHER
    aliases: tuple[str, ...] = ()
    first_seen: datetime = Field(default_factory=utcnow)
    last_seen: datetime = Field(default_factory=utcnow)
    mention_count: int = Field(default=0, ge=0)
    agent_id: str = "default"
    namespace: str = "default"
    visibility: Visibility = Visibility.PRIVATE
    audience: str = ""  # derived, as for Memory

    @field_validator("name", "norm")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not v.strip() or len(v) > 256:
            raise ValueError("entity names must be 1..256 non-blank characters")
        return v

    @field_validator("agent_id", "namespace")
    @classmethod
    def _valid_scope(cls, v: str) -> str:
        return _check_id(v, "agent_id/namespace")

    @model_validator(mode="after")
    def _derived(self) -> Self:
        object.__setattr__(
            self, "audience", audience_key(self.visibility, self.agent_id, self.namespace)
        )
        return self


_NODE_MODELS: dict[NodeLabel, type[GraphNode]] = {
    NodeLabel.MEMORY: Memory,
    NodeLabel.AGENT: Agent,
    NodeLabel.RUN: Run,
    NodeLabel.TAG: Tag,
    NodeLabel.ORG_FACT: OrgFact,
    NodeLabel.ORG_OPERATION: OrgOperation,
    NodeLabel.LOG_ENTRY: LogEntry,
    NodeLabel.PAYLOAD: Payload,
    NodeLabel.NAMESPACE: Namespace,
    NodeLabel.ENTITY: Entity,
}


def node_model(label: NodeLabel | str) -> type[GraphNode]:
    """The model class of a label; raises InvalidInput for labels outside the allowlist."""
    try:
        return _NODE_MODELS[NodeLabel(label)]
    except ValueError as e:
        raise InvalidInput(f"unknown node label {label!r}") from e


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


# ---------------------------------------------------------------------------------------
# edges


class NodeRef(NamedTuple):
    label: NodeLabel
    id: str

    @property
    def key(self) -> str:
        return f"{self.label.value}:{self.id}"


_EDGE_ENDPOINTS: dict[EdgeType, frozenset[tuple[NodeLabel, NodeLabel]]] = {
    EdgeType.SUPERSEDES: frozenset(
        {(NodeLabel.MEMORY, NodeLabel.MEMORY), (NodeLabel.ORG_FACT, NodeLabel.ORG_FACT)}
    ),
    EdgeType.DERIVED_FROM: frozenset(
        {
            (NodeLabel.MEMORY, NodeLabel.MEMORY),
            (NodeLabel.ORG_FACT, NodeLabel.MEMORY),
            (NodeLabel.MEMORY, NodeLabel.ORG_FACT),
        }
    ),
    EdgeType.AUTHORED_BY: frozenset(
        {(NodeLabel.MEMORY, NodeLabel.AGENT), (NodeLabel.ORG_FACT, NodeLabel.AGENT)}
    ),
    EdgeType.IN_RUN: frozenset(
        {(NodeLabel.MEMORY, NodeLabel.RUN), (NodeLabel.LOG_ENTRY, NodeLabel.RUN)}
    ),
    EdgeType.RUN_BY: frozenset({(NodeLabel.RUN, NodeLabel.AGENT)}),
    EdgeType.TAGGED: frozenset(
        {(NodeLabel.MEMORY, NodeLabel.TAG), (NodeLabel.ORG_FACT, NodeLabel.TAG)}
    ),
    EdgeType.NEXT: frozenset(
        {(NodeLabel.MEMORY, NodeLabel.MEMORY), (NodeLabel.LOG_ENTRY, NodeLabel.LOG_ENTRY)}
    ),
    EdgeType.RECORDS: frozenset({(NodeLabel.ORG_OPERATION, NodeLabel.ORG_FACT)}),
    EdgeType.REFERENCES: frozenset({(NodeLabel.LOG_ENTRY, NodeLabel.PAYLOAD)}),
    EdgeType.CHILD_OF: frozenset({(NodeLabel.LOG_ENTRY, NodeLabel.LOG_ENTRY)}),
    EdgeType.MENTIONS: frozenset({(NodeLabel.MEMORY, NodeLabel.ENTITY)}),
    EdgeType.RELATES: frozenset({(NodeLabel.ENTITY, NodeLabel.ENTITY)}),
}


class Edge(BaseModel):
    """A relationship. (type, src, dst) identifies it; upserting again merges props."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: EdgeType
    src: NodeRef
    dst: NodeRef
    props: dict[str, Any] = Field(default_factory=dict)

    @field_validator("src", "dst", mode="before")
    @classmethod
    def _ref(cls, v: Any) -> NodeRef:
        if isinstance(v, GraphNode):
            return v.ref
        label, ident = v
        return NodeRef(NodeLabel(label), _check_id(ident, "edge endpoint id"))

    @field_validator("props", mode="before")
    @classmethod
    def _valid_props(cls, v: Any) -> dict[str, Any]:
        if v is None:
            return {}
        props: dict[str, Any] = {}
        for k, val in dict(v).items():
            if not isinstance(k, str) or not _IDENT_RE.match(k):
                raise ValueError(f"edge property name {k!r} must be an identifier")
            if isinstance(val, datetime):
                props[k] = _aware(val, k)
            elif val is None:
                continue
            elif isinstance(val, str | int | float | bool):
                props[k] = val
            else:
                raise ValueError(f"edge property {k!r} must be a scalar or datetime")
        return props

    @model_validator(mode="after")
    def _endpoints(self) -> Self:
        allowed = _EDGE_ENDPOINTS[self.type]
        if (self.src.label, self.dst.label) not in allowed:
            raise ValueError(
                f"{self.type.value} cannot link {self.src.label.value} -> {self.dst.label.value}"
            )
        if self.src == self.dst:
            raise ValueError(f"{self.type.value} cannot link a node to itself")
        return self

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.src.key, self.type.value, self.dst.key)

    def to_row(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "src_label": self.src.label.value,
            "src": self.src.id,
            "dst_label": self.dst.label.value,
            "dst": self.dst.id,
            "props": dict(self.props),
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Edge:
        return validated(
            cls,
            {
                "type": row["type"],
                "src": (row["src_label"], row["src"]),
                "dst": (row["dst_label"], row["dst"]),
                "props": row.get("props") or {},
            },
        )


# ---------------------------------------------------------------------------------------
# filters and queries


_FILTERABLE_TYPES = (str, int, float, bool, datetime)


class Range(BaseModel):
    """``gte <= field <= lte`` (any bound may be omitted); ``or_missing`` also accepts nodes
    where the field is absent (e.g. ``valid_to`` of a current fact)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    gte: Any = None
    gt: Any = None
    lte: Any = None
    lt: Any = None
    or_missing: bool = False

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        for name in ("gte", "gt", "lte", "lt"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, _FILTERABLE_TYPES):
                raise ValueError(f"range bound {name} must be a scalar or datetime")
            if isinstance(v, datetime):
                object.__setattr__(self, name, _aware(v, f"{self.field}.{name}"))
        return self


class Filter(BaseModel):
    """A structured filter over one label. Backends compile it (Neo4j: parameterised
    Cypher; networkx: Python predicates); field names are checked against the label's model.

    ``equals`` with a ``None`` value means "property is absent".
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: NodeLabel = NodeLabel.MEMORY
    ids: tuple[str, ...] | None = None
    equals: dict[str, Any] = Field(default_factory=dict)
    any_of: dict[str, tuple[Any, ...]] = Field(default_factory=dict)
    ranges: tuple[Range, ...] = ()
    tags_all: tuple[str, ...] = ()

    @field_validator("tags_all", mode="before")
    @classmethod
    def _tags(cls, v: Any) -> tuple[str, ...]:
        if isinstance(v, str):
            v = [v]
        return tuple(normalise_tag(t) for t in (v or ()))

    @model_validator(mode="after")
    def _fields(self) -> Self:
        model = _NODE_MODELS[self.label]
        names = list(self.equals) + list(self.any_of) + [r.field for r in self.ranges]
        for name in names:
            check_field(model, name)
        enums = _enum_fields(model)
        for name, value in {**self.equals}.items():
            if value is not None and not isinstance(value, _FILTERABLE_TYPES):
                raise ValueError(f"filter value for {name!r} must be a scalar")
            if isinstance(value, StrEnum):
                self.equals[name] = value.value
            if name in enums and value is not None:
                _check_enum(name, value, enums[name])
        for name, values in self.any_of.items():
            if not all(isinstance(v, _FILTERABLE_TYPES) for v in values):
                raise ValueError(f"filter values for {name!r} must be scalars")
            self.any_of[name] = tuple(v.value if isinstance(v, StrEnum) else v for v in values)
            if name in enums:
                for v in values:
                    _check_enum(name, v, enums[name])
        if self.tags_all and "tags" not in model.model_fields:
            raise ValueError(f"{self.label.value} has no tags")
        return self

    def fields(self) -> set[str]:
        return set(self.equals) | set(self.any_of) | {r.field for r in self.ranges}

    @classmethod
    def for_memories(
        cls,
        *,
        ids: Sequence[str] | None = None,
        agent_id: str | Sequence[str] | None = None,
        run_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        category: str | Sequence[str] | None = None,
        tier: str | Sequence[str] | None = None,
        event_type: str | Sequence[str] | None = None,
        status: str | Sequence[str] | None = "active",
        tags: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        as_of: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Filter:
        """The usual memory filter from keyword arguments (a sequence means "any of").

        ``since``/``until`` bound created_at; ``as_of`` keeps what was valid at that time
        (valid_from <= t < valid_to) and then also admits superseded versions."""
        equals: dict[str, Any] = {}
        any_of: dict[str, tuple[Any, ...]] = {}
        for name, value in (
            ("agent_id", agent_id),
            ("run_id", run_id),
            ("namespace", namespace),
            ("category", category),
            ("tier", tier),
            ("event_type", event_type),
            ("status", status),
        ):
            if value is None:
                continue
            values = _filter_strings(name, value)
            if isinstance(value, str):
                equals[name] = value
            else:
                any_of[name] = values
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInput(f"metadata must be a mapping, got {type(metadata).__name__}")
        for key, value in (metadata or {}).items():
            if not isinstance(key, str) or not key:
                raise InvalidInput(f"metadata key {key!r} must be a non-empty string")
            _filter_strings("metadata key", key)
            if isinstance(value, str):
                _filter_strings(f"metadata[{key!r}]", value)
            equals[METADATA_PREFIX + key] = value
        if ids is not None:
            ids = _filter_strings("ids", ids, single=False)
        if isinstance(tags, str):
            tags = (tags,)
        elif tags is not None:
            tags = _filter_strings("tags", tags, single=False)
        for name, when in (("since", since), ("until", until), ("as_of", as_of)):
            if when is None:
                continue
            if not isinstance(when, datetime):
                raise InvalidInput(f"{name} must be a datetime, got {type(when).__name__}")
            try:
                _aware(when, name)
            except ValueError as e:
                raise InvalidInput(str(e)) from None
        ranges: list[Range] = []
        if since is not None or until is not None:
            ranges.append(validated(Range, {"field": "created_at", "gte": since, "lte": until}))
        if as_of is not None:
            if status == "active":
                equals.pop("status", None)
                any_of["status"] = ("active", "superseded")
            ranges.append(validated(Range, {"field": "valid_from", "lte": as_of}))
            ranges.append(validated(Range, {"field": "valid_to", "gt": as_of, "or_missing": True}))
        return validated(
            cls,
            {
                "ids": tuple(ids) if ids is not None else None,
                "equals": equals,
                "any_of": any_of,
                "ranges": tuple(ranges),
                "tags_all": tuple(tags or ()),
            },
        )


_ENUM_FIELDS: dict[type, dict[str, type[StrEnum]]] = {}


def _enum_fields(model: type[BaseModel]) -> dict[str, type[StrEnum]]:
    """The fields of a model whose values come from an enum (status, category, tier …)."""
    found = _ENUM_FIELDS.get(model)
    if found is None:
        found = {}
        for name, field in model.model_fields.items():
            ann = field.annotation
            for arg in (ann, *getattr(ann, "__args__", ())):
                if isinstance(arg, type) and issubclass(arg, StrEnum):
                    found[name] = arg
        _ENUM_FIELDS[model] = found
    return found


def _check_enum(name: str, value: Any, enum: type[StrEnum]) -> None:
    """A filter on an enum field with a value outside it is a mistake, not a filter that
    matches nothing."""
    if value not in enum._value2member_map_:
        raise ValueError(f"unknown {name} {value!r}; one of {sorted(enum._value2member_map_)}")


def _filter_strings(name: str, value: Any, *, single: bool = True) -> tuple[str, ...]:
    """A filter argument as a tuple of valid strings: one string (when ``single``) or a
    sequence of them; anything else is InvalidInput."""
    if isinstance(value, str) and single:
        values: tuple[Any, ...] = (value,)
    elif isinstance(value, Sequence | set | frozenset) and not isinstance(value, str | bytes):
        values = tuple(value)
    else:
        what = "a string or a list of strings" if single else "a list of strings"
        raise InvalidInput(f"{name} must be {what}, got {type(value).__name__}")
    for v in values:
        if not isinstance(v, str):
            raise InvalidInput(f"{name} must hold strings, got {type(v).__name__}")
        try:
            check_text(v, name)
        except ValueError as e:
            raise InvalidInput(str(e)) from None
    return tuple(v.value if isinstance(v, StrEnum) else v for v in values)


def check_page(
    model: type[GraphNode],
    *,
    limit: Any,
    offset: Any,
    order_by: Any,
    descending: Any,
) -> None:
    """Validate the paging arguments of a ``match`` (every backend calls it first)."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
        raise InvalidInput(f"limit must be an int or None, got {type(limit).__name__}")
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise InvalidInput(f"offset must be an int, got {type(offset).__name__}")
    if offset < 0 or (limit is not None and limit < 0):
        raise InvalidInput("limit and offset must not be negative")
    if not isinstance(descending, bool):
        raise InvalidInput(f"descending must be a bool, got {type(descending).__name__}")
    if not isinstance(order_by, str):
        raise InvalidInput(f"order_by must be a field name, got {type(order_by).__name__}")
    if order_by != "id":
        try:
            check_field(model, order_by)
        except ValueError as e:
            raise InvalidInput(str(e)) from None


def check_field(model: type[GraphNode], name: str) -> str:
    """Allow a filter/order field: a model field (not metadata/embedding) or metadata.<key>."""
    if name.startswith(METADATA_PREFIX) and "metadata" in model.model_fields:
        if len(name) > len(METADATA_PREFIX):
            return name
    elif name in model.model_fields and name not in ("metadata", "embedding"):
        return name
    raise ValueError(f"{name!r} is not a filterable field of {model.label.value}")


class TextQuery(BaseModel):
    """Lexical (BM25 / full-text) search over Memory content."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = Field(min_length=1, max_length=10_000)
    filter: Filter = Field(default_factory=Filter)
    k: int = Field(default=10, ge=1, le=10_000)


class VectorQuery(BaseModel):
    """Nearest neighbours by cosine similarity over Memory embeddings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vector: tuple[float, ...] = Field(min_length=1)
    filter: Filter = Field(default_factory=Filter)
    k: int = Field(default=10, ge=1, le=10_000)


class Hit(BaseModel):
    """One search result from a backend: the node and the backend's raw score."""

    model_config = ConfigDict(frozen=True)

    node: Memory
    score: float


class Subgraph(BaseModel):
    """Nodes and edges returned by a neighbourhood expansion."""

    model_config = ConfigDict(frozen=True)

    nodes: tuple[GraphNode, ...] = ()
    edges: tuple[Edge, ...] = ()


class RecallResult(BaseModel):
    """One recalled memory with its final score and the signals that made it."""

    model_config = ConfigDict(frozen=True)

    memory: Memory
    score: float
    breakdown: dict[str, float] = Field(default_factory=dict)


class BackendStats(BaseModel):
    model_config = ConfigDict(frozen=True)

    backend: str
    nodes: dict[str, int]
    edges: dict[str, int]
    location: str | None = None
    file_bytes: int | None = None
    embedding_dim: int | None = None
