"""The filter compiler: a :class:`~graphmem.models.Filter` -> parameterised Cypher. Labels
and field names are allowlisted; every value travels as a parameter."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from graphmem.backends.neo4j.values import props_projection
from graphmem.errors import InvalidInput, QueryFailed
from graphmem.models import (
    METADATA_PREFIX,
    Filter,
    GraphNode,
    NodeLabel,
    Range,
    check_field,
    check_page,
    node_model,
)

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def allowed_label(label: NodeLabel | str) -> str:
    """An allowlisted label, safe to place in Cypher text."""
    try:
        value = NodeLabel(label).value
    except ValueError as e:
        raise InvalidInput(f"unknown node label {label!r}") from e
    if not _IDENT_RE.match(value):  # allowlist values are identifiers; belt and braces
        raise InvalidInput(f"label {value!r} is not an identifier")
    return value


class _Params:
    """Collects parameters under generated names (``$f0``, ``$f1`` ...)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.values: dict[str, Any] = {}

    def __call__(self, value: Any) -> str:
        name = f"{self.prefix}{len(self.values)}"
        self.values[name] = param_value(value)
        return "$" + name


def param_value(value: Any) -> Any:
    if isinstance(value, str):
        return str(value)  # StrEnum -> its value
    if isinstance(value, tuple | list):
        return [param_value(v) for v in value]
    return value


def _property(model: type[GraphNode], field: str, var: str, param: _Params) -> str:
    """The Cypher expression of a filter field: ``n.field`` for a model field (a fixed
    identifier), ``n[$fN]`` for ``metadata.<key>`` (any characters, passed as a parameter)."""
    try:
        check_field(model, field)
    except ValueError as e:
        raise InvalidInput(str(e)) from e
    if field.startswith(METADATA_PREFIX):
        return f"{var}[{param(field)}]"
    if not _IDENT_RE.match(field):
        raise InvalidInput(f"{field!r} is not a filterable field")
    return f"{var}.{field}"


def compile_where(
    flt: Filter, *, var: str = "n", prefix: str = "f"
) -> tuple[list[str], dict[str, Any]]:
    """The conditions of ``flt`` on variable ``var`` (to be AND-ed) and their parameters.

    Field names are re-checked against the label's model; values are always parameters.
    """
    if not _IDENT_RE.match(var) or not _IDENT_RE.match(prefix):
        raise InvalidInput("variable and parameter prefix must be identifiers")
    if set(type(flt).model_fields) != _FILTER_FIELDS or set(Range.model_fields) != _RANGE_FIELDS:
        # a new kind of condition must be compiled here, never silently ignored
        raise QueryFailed("internal error: Filter has fields the Neo4j compiler does not know")
    model = node_model(flt.label)
    param = _Params(prefix)
    clauses: list[str] = []
    if flt.ids is not None:
        clauses.append(f"{var}.id IN {param(list(flt.ids))}")
    for field, value in flt.equals.items():
        prop = _property(model, field, var, param)
        clauses.append(f"{prop} IS NULL" if value is None else f"{prop} = {param(value)}")
    for field, values in flt.any_of.items():
        prop = _property(model, field, var, param)
        clauses.append(f"{prop} IN {param(list(values))}")
    for rng in flt.ranges:
        prop = _property(model, rng.field, var, param)
        bounds = [
            f"{prop} {op} {param(bound)}"
            for op, bound in ((">=", rng.gte), (">", rng.gt), ("<=", rng.lte), ("<", rng.lt))
            if bound is not None
        ]
        if rng.or_missing:
            if bounds:
                clauses.append(f"({prop} IS NULL OR ({' AND '.join(bounds)}))")
        else:
            clauses.extend(bounds or [f"{prop} IS NOT NULL"])
    if flt.tags_all:
        if "tags" not in model.model_fields:
            raise InvalidInput(f"{model.label.value} has no tags")
        clauses.append(f"all(tag IN {param(list(flt.tags_all))} WHERE tag IN {var}.tags)")
    return clauses, param.values


_FILTER_FIELDS = {"label", "ids", "equals", "any_of", "ranges", "tags_all"}


_RANGE_FIELDS = {"field", "gte", "gt", "lte", "lt", "or_missing"}


def where_clause(clauses: Sequence[str]) -> str:
    return ("\nWHERE " + "\n  AND ".join(clauses)) if clauses else ""


def compile_match(
    flt: Filter,
    *,
    limit: int | None = None,
    offset: int = 0,
    order_by: str = "id",
    descending: bool = False,
) -> tuple[str, dict[str, Any]]:
    """Cypher and parameters returning ``properties(n) AS props`` for ``match``.

    Ordered by ``order_by`` (missing values last in both directions), ties by id in the
    same direction; paged with ``SKIP $skip LIMIT $limit``.
    """
    label = allowed_label(flt.label)
    check_page(
        node_model(flt.label), limit=limit, offset=offset, order_by=order_by, descending=descending
    )
    clauses, params = compile_where(flt)
    direction = "DESC" if descending else "ASC"
    if order_by == "id":
        order = f"n.id {direction}"
    else:
        order_param = _Params("o")
        key = _property(node_model(flt.label), order_by, "n", order_param)
        params.update(order_param.values)
        order = f"{key} IS NULL, {key} {direction}, n.id {direction}"
    text = (
        f"MATCH (n:{label}){where_clause(clauses)}\n"
        f"RETURN {props_projection('n', flt.label)} AS props\nORDER BY {order}"
    )
    if offset:
        text += "\nSKIP $skip"
        params["skip"] = offset
    if limit is not None:
        text += "\nLIMIT $limit"
        params["limit"] = limit
    return text, params


def compile_count(flt: Filter) -> tuple[str, dict[str, Any]]:
    """Cypher and parameters returning ``count`` of the nodes matching ``flt``."""
    clauses, params = compile_where(flt)
    return (
        f"MATCH (n:{allowed_label(flt.label)}){where_clause(clauses)}\nRETURN count(n) AS count",
        params,
    )


def has_conditions(flt: Filter) -> bool:
    """Whether ``flt`` restricts anything beyond its label."""
    return bool(flt.ids is not None or flt.equals or flt.any_of or flt.ranges or flt.tags_all)


def narrows_beyond_status(flt: Filter) -> bool:
    """Whether ``flt`` narrows the memories beyond their status."""
    return bool(set(flt.equals) - {"status"} or flt.any_of or flt.ranges or flt.tags_all or flt.ids)


def require_memory(flt: Filter, what: str) -> None:
    if flt.label is not NodeLabel.MEMORY:
        raise InvalidInput(f"{what} runs over Memory nodes")
