"""Edges and the structural-edge rule: which relationship may join which labels."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from graphmem.models.nodes import GraphNode, NodeRef
from graphmem.models.values import (
    _IDENT_RE,
    EdgeType,
    NodeLabel,
    _aware,
    _check_id,
    assembled,
    validated,
)

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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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

    @classmethod
    def trusted(cls, etype: EdgeType, src: NodeRef, dst: NodeRef, props: dict[str, Any]) -> Edge:
        """An edge from parts this process has validated already (a stored edge, the next
        link of a run between two validated memories): validators skipped. It is what
        ``model_construct`` does, several times faster (it resolves every field's default).
        Never for data from outside: use :func:`graphmem.models.validated`."""
        return assembled(cls, {"type": etype, "src": src, "dst": dst, "props": props})

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
