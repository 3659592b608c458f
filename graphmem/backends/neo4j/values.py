"""Value conversion at the driver boundary: what Neo4j returns -> graphmem values, and
the values Neo4j cannot store refused before they are sent."""

from __future__ import annotations

import types
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Union, get_args, get_origin

from graphmem.errors import BackendError, InvalidInput
from graphmem.models import GraphNode, NodeLabel, node_model

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


def check_value(key: str, value: Any) -> Any:
    """Refuse values Neo4j cannot store (integers beyond 64 bits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidInput(f"property {key!r} is outside the 64-bit integer range")
    elif isinstance(value, list):
        for v in value:
            check_value(key, v)
    return value


def node_from_db(label: str, props: Mapping[str, Any]) -> GraphNode:
    model = node_model(label)
    try:
        return model.from_props(props_from_db(props))
    except (InvalidInput, ValueError) as e:
        raise BackendError(f"stored {label} node {props.get('id')!r} is not valid: {e}") from e


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
    memory's bytes on the wire and most of the client's decoding time)."""
    fields = temporal_fields(label)
    extra = [f"{f}: toString({var}.{f})" for f in fields]
    if lean:
        extra.append("embedding: null")
    if not extra:
        return f"properties({var})"
    return f"{var} {{.*, " + ", ".join(extra) + "}"
