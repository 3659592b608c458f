"""Sections for where memories live: the embedded store, Neo4j and its driver, vectors,
knowledge.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
)

log = logging.getLogger("graphmem.config")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


#: the id rule of agents and namespaces (graphmem.models), checked when settings load so
#: that a key of a malformed id fails at start, not on every request
_ID_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")


def check_setting_id(value: str, what: str) -> str:
    """``value`` when it is an agent or namespace id graphmem can store, else ValueError."""
    if not _ID_RE.match(value) or value.strip() != value:
        raise ValueError(f"{what} must be 1-256 printable characters without surrounding space")
    return value


class ApiKey(_Frozen):
    """One HTTP API key: the agent it acts as and the namespaces it may touch (at least
    one; the first is where its writes go by default).

    ``namespaces=("*",)`` allows every namespace.
    """

    key: SecretStr
    agent_id: str = "default"
    namespaces: tuple[str, ...] = Field(default=("default",), min_length=1)

    @field_validator("key")
    @classmethod
    def _long_enough(cls, v: SecretStr) -> SecretStr:
        if len(v.get_secret_value()) < 8:
            raise ValueError("an API key must have at least 8 characters")
        return v

    @field_validator("agent_id")
    @classmethod
    def _agent(cls, v: str) -> str:
        return check_setting_id(v, "agent_id")

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for ns in v:
            check_setting_id(ns, "namespaces")
        return v


# ---------------------------------------------------------------------------------------
# the store and its backends

StoreDurability = Literal["normal", "full", "off"]


class StoreSettings(_Frozen):
    """The embedded store (a file path or ``memory://``): ``durability`` is SQLite's
    synchronous level of the journal (``normal``: an acknowledged write survives a process
    crash; ``full``: also a power loss; ``off``: neither, for throwaway stores) and
    ``busy_timeout_ms`` how long a write waits for another process's lock."""

    durability: StoreDurability = "normal"
    busy_timeout_ms: int = Field(default=10_000, ge=0)


class Neo4jSettings(_Frozen):
    """The Neo4j backend (``neo4j://`` and ``bolt://`` URLs): its own options and
    ``driver_options``, passed to the official driver (e.g. ``max_connection_pool_size``,
    ``connection_acquisition_timeout``); ``cypher_dir`` overrides the bundled query files."""

    cypher_dir: str | None = None
    batch_rows: int = Field(default=5000, ge=1)
    exact_search_max: int = Field(default=5000, ge=0)
    index_timeout_s: int = Field(default=300, ge=1)
    connect_timeout_s: float = Field(default=3.0, gt=0.0)
    retry_s: float = Field(default=5.0, ge=0.0)
    vector_overfetch: int = Field(default=2, ge=1)
    touch_flush_s: float = Field(default=5.0, ge=0.0)
    touch_flush_rows: int = Field(default=1000, ge=1)
    fulltext_refresh: Literal["commit", "background"] = "commit"
    vector_quantization: bool = True
    driver_options: dict[str, Any] = Field(default_factory=dict)


VectorMode = Literal["auto", "background", "inline"]


class VectorSettings(_Frozen):
    """When vectors are computed: ``background`` acknowledges a write once durable and
    embeds it behind it; ``inline`` embeds before the write; ``auto`` is background for a
    model and inline for the hash embedder."""

    mode: VectorMode = "auto"


class KnowledgeSettings(_Frozen):
    """The knowledge layer: extract entities and relations from every memory written (no
    model, no LLM). Off by default: on LoCoMo it moved recall by under a point
    (benchmarks/RESULTS.md) and it costs one more transaction per write."""

    enabled: bool = False
