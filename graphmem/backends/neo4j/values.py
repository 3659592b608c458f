"""Value conversion at the driver boundary: what Neo4j returns -> graphmem values, and
the values Neo4j cannot store refused before they are sent."""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Union, get_args, get_origin

from graphmem.errors import BackendError, InvalidInput
from graphmem.models import (
    METADATA_PREFIX,
    GraphNode,
    Memory,
    NodeLabel,
    audience_key,
    node_model,
)

_INT64 = (-(2**63), 2**63 - 1)


_PLAIN = frozenset({str, float, int, bool, type(None)})


def _from_db(value: Any) -> Any:
    """A value read from Neo4j as graphmem stores it (temporal values -> aware UTC)."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, list):
        # a stored list is homogeneous: an embedding is hundreds of floats, none to convert
        if value and type(value[0]) in _PLAIN:
            return value
        return [_from_db(v) for v in value]
    to_native = getattr(value, "to_native", None)
    if to_native is not None and type(value).__module__.startswith("neo4j"):
        native = to_native()
        if isinstance(native, datetime) and native.tzinfo is not None:
            return native.astimezone(UTC)
        return native
    return value


def props_from_db(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _from_db(v) for k, v in props.items()}


_UNCHECKED = frozenset({str, float, bool, type(None)})
"""Value types Neo4j stores whatever their value (most of a node's properties, and every
element of an embedding): looked up by class, so a batch's thousands of them cost one set
lookup each."""


def check_value(key: str, value: Any) -> Any:
    """Refuse values Neo4j cannot store (integers beyond 64 bits)."""
    if value.__class__ in _UNCHECKED:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidInput(f"property {key!r} is outside the 64-bit integer range")
    elif isinstance(value, list) and not _UNCHECKED.issuperset(map(type, value)):
        for v in value:  # the types looked at in one pass in C first (an embedding's floats)
            check_value(key, v)
    return value


def check_props(props: Mapping[str, Any]) -> None:
    """:func:`check_value` of every property."""
    for k, v in props.items():
        if v.__class__ not in _UNCHECKED:
            check_value(k, v)


def vanished(props: Mapping[str, Any] | None) -> bool:
    """Whether a node row is of a node another transaction deleted while this statement
    read it. Neo4j reads are read committed: a statement can match a node, and a delete
    committed before the statement reads its properties leaves it reading every one as
    null (its id too). The node is gone, so a read leaves it out, as it would have had it
    begun a moment later; decoding it would fail (every node has an id)."""
    return props is None or props.get("id") is None


def node_from_db(label: str, props: Mapping[str, Any]) -> GraphNode:
    """A node read from the server. A memory row of the shape graphmem's own writes give it
    (every field that has a default present, times as ISO text or temporal values, enum
    values known, derived fields as the model derives them) is rebuilt without running the
    model's validators again: they ran when the node
    was written, and running them for each of the ~100 memories a recall reads cost more
    than the recall's statements. Any other row is validated in full (BackendError when it
    is not a valid node)."""
    model = node_model(label)
    props = unpacked(props)
    if model is Memory:
        fast = _rebuilt_memory(props)
        if fast is not None:
            return fast
    try:
        return model.from_props(props_from_db(props))
    except (InvalidInput, ValueError) as e:
        raise BackendError(f"stored {label} node {props.get('id')!r} is not valid: {e}") from e


_SCALARS: dict[Any, tuple[type, ...]] = {str: (str,), float: (float, int), int: (int,)}


@dataclass(frozen=True)
class _Shape:
    """What a stored row must hold to be rebuilt without the validators (see
    :func:`_rebuilt_memory`)."""

    needed: frozenset[str]
    """Fields with a default a missing value would not get."""
    known: frozenset[str]
    times: tuple[str, ...]
    scalars: tuple[tuple[str, tuple[type, ...], Any, Any], ...]
    """Plain fields: name, the stored types, the model's bounds."""


@lru_cache(maxsize=8)
def _shape(model: type[GraphNode]) -> _Shape:
    scalars = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        args = get_args(ann) if get_origin(ann) in (Union, types.UnionType) else (ann,)
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) == 1 and kinds[0] in _SCALARS:
            lo = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
            hi = next((m.le for m in info.metadata if hasattr(m, "le")), None)
            scalars.append((name, _SCALARS[kinds[0]], lo, hi))
    return _Shape(
        needed=frozenset(
            name
            for name, info in model.model_fields.items()
            if name != "metadata" and (info.is_required() or info.get_default() is not None)
        ),
        known=frozenset(model.model_fields),
        times=temporal_fields(model.label),
        scalars=tuple(scalars),
    )


def _plain_fields_hold(data: Mapping[str, Any], shape: _Shape) -> bool:
    for name, kinds, lo, hi in shape.scalars:
        value: Any = data.get(name)
        if value is None:
            continue
        if type(value) is bool or not isinstance(value, kinds):
            return False
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return False
    return True


def _time(value: Any) -> datetime:
    if isinstance(value, str):  # as the search statements return times (toString)
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValueError("not an aware datetime")
    return value.astimezone(UTC)


def _rebuilt_memory(props: Mapping[str, Any]) -> Memory | None:
    """``props`` as a Memory without its validators, or None when the row is not of the
    shape graphmem writes (the caller then validates it in full). What the model derives
    must hold as stored: the audience (who may read it) is recomputed and compared, the
    times it fills from ``created_at`` must be there."""
    shape = _shape(Memory)
    if not props.get("id") or not shape.needed.issubset(props):
        return None
    data = {k: v if type(v) in _PLAIN else _from_db(v) for k, v in props.items()}
    try:
        for field in shape.times:
            value = data.get(field)
            if value is not None:
                data[field] = _time(value)
        if not _plain_fields_hold(data, shape) or not all(
            k in shape.known or k.startswith(METADATA_PREFIX) for k in data
        ):
            return None
        memory = Memory.from_trusted(data)
        if (
            memory.updated_at is None
            or memory.valid_from is None
            or (memory.valid_to is not None and memory.valid_to < memory.valid_from)
            or memory.audience != audience_key(memory.visibility, memory.agent_id, memory.namespace)
        ):
            return None
        return memory
    except (KeyError, ValueError, TypeError, AttributeError):
        return None  # an unknown enum value, a malformed time ...


@lru_cache(maxsize=64)
def temporal_fields(label: NodeLabel) -> tuple[str, ...]:
    """The fields of ``label``'s model that hold a datetime."""
    out = []
    for name, info in node_model(label).model_fields.items():
        ann = info.annotation
        args = get_args(ann) if get_origin(ann) in (Union, types.UnionType) else (ann,)
        if datetime in args:
            out.append(name)
    return tuple(out)


def props_projection(var: str, label: NodeLabel, *, lean: bool = False) -> str:
    """The Cypher expression of a ``label`` node's properties as graphmem reads them: its
    datetimes as ISO text (``toString``), which the model's validation parses in one pass.
    The driver builds a Python datetime from each temporal value one at a time, and that
    cost more than the statement (0.8 s for 960 values at load 20, 0.08 s as text).

    ``lean``: without the embedding (it stays on the server; a 384-float list is most of a
    memory's bytes on the wire and most of the client's decoding time), each field named
    instead of ``.*``, which reads every property, the embedding too, before the map drops
    it (measured at 100,000 memories, load 9: projecting 60 memories cost the server 2.1 ms
    with ``.*``, 1.2 ms named); the metadata keys come as ``[key, value]`` pairs under
    :data:`META_PAIRS` and a field not stored as null (see :func:`unpacked`)."""
    fields = temporal_fields(label)
    if lean:
        named = []
        for name in node_model(label).model_fields:
            if name == "embedding" or name == "metadata":
                continue
            named.append(f"{name}: toString({var}.{name})" if name in fields else f".{name}")
        if "metadata" in node_model(label).model_fields:
            named.append(
                f"{META_PAIRS}: [k IN keys({var}) WHERE k STARTS WITH '{METADATA_PREFIX}'"
                f" | [k, {var}[k]]]"
            )
        return f"{var} {{" + ", ".join(named) + "}"
    extra = [f"{f}: toString({var}.{f})" for f in fields]
    if not extra:
        return f"properties({var})"
    return f"{var} {{.*, " + ", ".join(extra) + "}"


META_PAIRS = "_metadata_pairs"
"""The key of a lean projection's list of ``[metadata key, value]`` pairs (see
:func:`props_projection`): Cypher builds no map with keys read from the data."""


def unpacked(props: Mapping[str, Any]) -> Mapping[str, Any]:
    """A lean projection's row as the node's stored properties (those of ``properties(n)``
    without the embedding): its fields not stored (null) dropped, its metadata pairs
    spread back into ``metadata.<key>`` properties. Any other row is returned as it is."""
    pairs = props.get(META_PAIRS)
    if pairs is None:
        return props
    out = {k: v for k, v in props.items() if v is not None and k != META_PAIRS}
    for key, value in pairs:
        out[key] = value
    return out
