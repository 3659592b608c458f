"""Query values and results: filters, ranges, text/vector queries, hits, stats."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from graphmem.errors import InvalidInput
from graphmem.models.edges import Edge
from graphmem.models.nodes import _NODE_MODELS, GraphNode, Memory
from graphmem.models.values import (
    METADATA_PREFIX,
    NodeLabel,
    _aware,
    assembled,
    check_text,
    normalise_tag,
    validated,
)

# ---------------------------------------------------------------------------------------
# filters and queries


_FILTERABLE_TYPES = (str, int, float, bool, datetime)


class Range(BaseModel):
    """``gte <= field <= lte`` (any bound may be omitted); ``or_missing`` also accepts nodes
    where the field is absent (e.g. ``valid_to`` of a current fact)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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
        # every recall and list makes one, mostly of a few plain strings (an agent, the
        # status): those filters are made once (validating one costs ~35 µs); a filter
        # is a frozen value, so the same one serves every caller
        args: tuple[Any, ...] = (agent_id, run_id, namespace, category, tier, event_type, status)
        plain = (
            cls is Filter
            and ids is None
            and tags is None
            and since is None
            and until is None
            and as_of is None
            and metadata is None
            and all(v is None or v.__class__ is str for v in args)
        )
        if plain:
            made = _PLAIN_FILTERS.get(args)
            if made is not None:
                return made
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
        flt = validated(
            cls,
            {
                "ids": tuple(ids) if ids is not None else None,
                "equals": equals,
                "any_of": any_of,
                "ranges": tuple(ranges),
                "tags_all": tuple(tags or ()),
            },
        )
        if plain:
            if len(_PLAIN_FILTERS) >= _PLAIN_FILTERS_MAX:
                _PLAIN_FILTERS.clear()
            _PLAIN_FILTERS[args] = flt
        return flt


#: :meth:`Filter.for_memories`' filters of plain strings, by their arguments
_PLAIN_FILTERS: dict[tuple[Any, ...], Filter] = {}
_PLAIN_FILTERS_MAX = 1024

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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    text: str = Field(min_length=1, max_length=10_000)
    filter: Filter = Field(default_factory=Filter)
    k: int = Field(default=10, ge=1, le=10_000)


class VectorQuery(BaseModel):
    """Nearest neighbours by cosine similarity over Memory embeddings."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    vector: tuple[float, ...] = Field(min_length=1)
    filter: Filter = Field(default_factory=Filter)
    k: int = Field(default=10, ge=1, le=10_000)

    @classmethod
    def trusted(cls, vector: tuple[float, ...], filter: Filter, k: int) -> VectorQuery:
        """A query from a vector this process computed (``ndarray.tolist()``: Python
        floats) and a ``k`` it checked, without validating each of the ~384 floats again
        (~15 µs a query)."""
        if not vector or not 1 <= k <= 10_000 or vector[0].__class__ is not float:
            return cls(vector=vector, filter=filter, k=k)
        return assembled(cls, {"vector": vector, "filter": filter, "k": k})


class Hit(BaseModel):
    """One search result from a backend: the node and the backend's raw score."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    node: Memory
    score: float

    @classmethod
    def trusted(cls, node: Memory, score: float) -> Hit:
        """A hit on a memory this process built from validated state, without validating
        again (``Hit(node=...)`` re-runs Memory's after-validator)."""
        return assembled(cls, {"node": node, "score": score})


class Subgraph(BaseModel):
    """Nodes and edges returned by a neighbourhood expansion."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    nodes: tuple[GraphNode, ...] = ()
    edges: tuple[Edge, ...] = ()


class RecallResult(BaseModel):
    """One recalled memory with its final score and the signals that made it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    memory: Memory
    score: float
    breakdown: dict[str, float] = Field(default_factory=dict)

    @classmethod
    def trusted(cls, memory: Memory, score: float, breakdown: dict[str, float]) -> RecallResult:
        """A result from a memory this process built from validated state, without
        validating again: pydantic re-runs Memory's after-validator for an instance given
        as a field (~40 candidates per recall)."""
        if (
            memory.__class__ is not Memory
            or score.__class__ is not float
            or any(v.__class__ is not float for v in breakdown.values())
        ):  # something pydantic would check or convert (an int, a numpy float)
            return cls(memory=memory, score=score, breakdown=breakdown)
        return assembled(cls, {"memory": memory, "score": score, "breakdown": breakdown})


class BackendStats(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    backend: str
    nodes: dict[str, int]
    edges: dict[str, int]
    location: str | None = None
    file_bytes: int | None = None
    embedding_dim: int | None = None
