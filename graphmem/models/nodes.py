"""The node models: one frozen pydantic class per label, flat Neo4j-legal properties."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, NamedTuple, Self

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from graphmem.errors import InvalidInput
from graphmem.models.values import (
    _CONVERTERS,
    _EVENT_RE,
    _FIELD_NAMES,
    CONTENT_JSON_KEY,
    METADATA_PREFIX,
    Category,
    NodeLabel,
    PropValue,
    RunStatus,
    Status,
    Tier,
    Visibility,
    _aware,
    _check_id,
    _flat_metadata,
    assembled,
    audience_key,
    check_content,
    check_tags,
    content_hash,
    new_id,
    normalise_tag,
    utcnow,
    validated,
)

# ---------------------------------------------------------------------------------------
# nodes

#: property values stored as they are (exact classes: a StrEnum is a str but stored as text)
_PLAIN_TYPES: frozenset[Any] = frozenset({str, float, int, bool, datetime})


def _utc(v: datetime | None, info: ValidationInfo) -> datetime | None:
    """Every datetime field of every node: timezone-aware, kept in UTC. Attached to the
    datetime fields only (a validator on every field cost a Python call per field)."""
    return _aware(v, info.field_name or "time")


# the validator wraps the whole annotation, so a field's annotation stays ``datetime`` or
# ``datetime | None`` for the code that reads it (the backends' datetime fields)
UtcTime = Annotated[datetime, AfterValidator(_utc)]
UtcTimeOrNone = Annotated[datetime | None, AfterValidator(_utc)]


class GraphNode(BaseModel):
    """Base of every node model: frozen, strict about unknown fields, flat-serialisable."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, defer_build=True)

    label: ClassVar[NodeLabel]
    id: str

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
        plain = _PLAIN_TYPES
        for name, value in self.__dict__.items():  # hot path: plain attribute walk
            if value is None:
                continue
            if value.__class__ in plain:  # most fields: stored as they are
                props[name] = value
            elif name == "metadata":
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
        Never use it for data from outside (files, users): use :meth:`from_props`. A server
        backend uses it only for rows of its own statements it has checked the shape of
        (:func:`graphmem.backends.neo4j.values.node_from_db`)."""
        template, fields, conv = trusted_plan(cls)
        # to_props drops only None values, so a missing field is None (field order kept)
        data = template.copy()
        meta: dict[str, Any] = {}
        for k, v in props.items():
            if k in fields:
                data[k] = v
            elif k.startswith(METADATA_PREFIX):
                meta[k[len(METADATA_PREFIX) :]] = v
        for k, c in conv:
            v = data[k]
            if v is not None:
                data[k] = c(v)
        if "metadata" in fields:
            data["metadata"] = meta
        return assembled(cls, data)

    def evolve(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` applied (``model_copy`` would skip validation)."""
        data = self.model_dump()
        data.update(changes)
        return validated(type(self), data)


def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(model)
    if names is None:  # model_fields is a computed property in recent pydantic
        names = _FIELD_NAMES[model] = tuple(model.model_fields)
    return names


_PLANS: dict[type, tuple[dict[str, Any], frozenset[str], tuple[tuple[str, Any], ...]]] = {}


def trusted_plan(
    model: type[BaseModel],
) -> tuple[dict[str, Any], frozenset[str], tuple[tuple[str, Any], ...]]:
    """What :meth:`GraphNode.from_trusted` needs of a class, worked out once: every field
    None in field order, the field names, and the fields whose stored value is converted
    back (enums, tuples) with their converter. A node is built on every read, ~100 per
    recall: looking these up per property cost more than the rest of the build."""
    plan = _PLANS.get(model)
    if plan is None:
        names = _field_names(model)
        plan = _PLANS[model] = (
            dict.fromkeys(names),
            frozenset(names),
            tuple(_converters(model).items()),
        )
    return plan


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


class Memory(GraphNode):
    """One memory: a piece of content an agent stored, with its lifecycle state."""

    label: ClassVar[NodeLabel] = NodeLabel.MEMORY

    id: str = Field(default_factory=new_id)
    content: str
    category: Category = Category.SEMANTIC
    tier: Tier = Tier.LONG_TERM
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    created_at: UtcTime = Field(default_factory=utcnow)
    updated_at: UtcTimeOrNone = None
    last_accessed: UtcTimeOrNone = None
    access_count: int = Field(default=0, ge=0)
    agent_id: str = "default"
    run_id: str | None = None
    namespace: str = "default"
    event_type: str | None = None
    seq: int | None = Field(default=None, ge=0)  # position of an event inside its run
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding: tuple[float, ...] | None = Field(default=None, repr=False)
    valid_from: UtcTimeOrNone = None
    valid_to: UtcTimeOrNone = None
    expires_at: UtcTimeOrNone = None
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
    created_at: UtcTime = Field(default_factory=utcnow)
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
    started_at: UtcTime = Field(default_factory=utcnow)
    ended_at: UtcTimeOrNone = None
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
    created_at: UtcTime = Field(default_factory=utcnow)
    retracted_at: UtcTimeOrNone = None
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
    at: UtcTime = Field(default_factory=utcnow)
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
    at: UtcTime = Field(default_factory=utcnow)
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
    created_at: UtcTime = Field(default_factory=utcnow)

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
    first_seen: UtcTime = Field(default_factory=utcnow)
    last_seen: UtcTime = Field(default_factory=utcnow)
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


# ---------------------------------------------------------------------------------------
# edges


class NodeRef(NamedTuple):
    label: NodeLabel
    id: str

    @property
    def key(self) -> str:
        # str(): a StrEnum's text without the enum's slow ``.value`` descriptor (hot path)
        return str(self.label) + ":" + self.id
