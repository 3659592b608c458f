"""Request and response bodies of the HTTP API.

Request models only type and bound the wire format (unknown fields are refused); the rules
about values (content length, tag syntax, 0..1 ranges, aware datetimes …) stay in
:mod:`graphmem.models` and reach the client as 422 errors from GraphMemory itself.
Responses are graphmem's own models (Memory, Run, OrgFact …) without embeddings.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from graphmem.config import PRESETS
from graphmem.models import Memory, Run

__all__ = [
    "ContextRequest",
    "ContextResponse",
    "ErrorBody",
    "EventIn",
    "EventsAppend",
    "EventsPage",
    "Health",
    "MaintenanceRequest",
    "MemoryBatch",
    "MemoryIn",
    "MemoryPatch",
    "PublishRequest",
    "RecallRequest",
    "ReflectRequest",
    "RetractRequest",
    "RunEnd",
    "RunIn",
    "SessionsPage",
]

_ID = Field(default=None, min_length=1, max_length=256)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: the error type and a human-readable message."""

    error: str
    detail: str
    errors: list[dict[str, Any]] | None = None


class Health(BaseModel):
    status: str
    version: str
    backend: str


class MemoryIn(_Body):
    """A memory to store (``agent_id`` defaults to the API key's agent, else ``default``)."""

    content: str
    agent_id: str | None = _ID
    run_id: str | None = _ID
    namespace: str | None = _ID
    category: str = "semantic"
    tier: str | None = None  # None: the lifecycle's classification rules decide
    importance: float | None = None  # None: the lifecycle's importance scorer decides
    confidence: float = 1.0
    tags: list[str] = Field(default_factory=list, max_length=64)
    metadata: dict[str, Any] | None = None
    event_type: str | None = None
    visibility: str = "private"
    user_id: str | None = _ID  # the end user the memory is about (metadata.user_id)
    created_at: datetime | None = None
    valid_from: datetime | None = None
    expires_at: datetime | None = None


class MemoryBatch(_Body):
    items: list[MemoryIn] = Field(min_length=1)


class MemoryPatch(_Body):
    """Changes for a new version of a memory; fields left out keep their values."""

    content: str | None = None
    reason: str = Field(default="update", min_length=1, max_length=1000)
    importance: float | None = None
    confidence: float | None = None
    tags: list[str] | None = Field(default=None, max_length=64)
    metadata: dict[str, Any] | None = None
    category: str | None = None
    tier: str | None = None
    namespace: str | None = _ID
    event_type: str | None = None
    valid_from: datetime | None = None
    expires_at: datetime | None = None


class RecallRequest(_Body):
    """A recall query with optional filters. ``scope``: an agent id whose read scope (own,
    shared namespaces, org) limits the results; forced to the key's agent under auth."""

    query: str = Field(min_length=1, max_length=10_000)
    k: int = Field(default=10, ge=1, le=1000)
    agent_id: str | None = _ID
    run_id: str | None = _ID
    namespace: str | None = _ID
    category: str | None = None
    tier: str | None = None
    tags: list[str] | None = Field(default=None, max_length=64)
    since: datetime | None = None
    until: datetime | None = None
    as_of: datetime | None = None
    scope: str | None = _ID
    user_id: str | None = _ID  # only memories of this end user
    preset: str | None = Field(default=None, description=f"A recall preset: {sorted(PRESETS)}")

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str | None) -> str | None:
        if v is not None and v not in PRESETS:
            raise ValueError(f"unknown recall preset {v!r}; choose from {sorted(PRESETS)}")
        return v


class ContextRequest(RecallRequest):
    max_tokens: int = Field(default=2000, ge=1, le=200_000)


class ReflectRequest(_Body):
    """A question answered from recalled memories (same filters as a recall)."""

    question: str = Field(min_length=1, max_length=10_000)
    k: int = Field(default=10, ge=1, le=100)
    agent_id: str | None = _ID
    namespace: str | None = _ID
    scope: str | None = _ID


class ContextResponse(BaseModel):
    context: str


class RunIn(_Body):
    run_id: str | None = _ID
    agent_id: str | None = _ID
    user_id: str | None = _ID
    app_name: str | None = Field(default=None, max_length=256)
    namespace: str | None = _ID
    metadata: dict[str, Any] | None = None


class RunEnd(_Body):
    status: str = "completed"


class EventIn(_Body):
    event_type: str
    content: str
    agent_id: str | None = _ID
    importance: float | None = None  # None: scored and classified by the lifecycle rules
    tier: str | None = None
    tags: list[str] = Field(default_factory=list, max_length=64)
    metadata: dict[str, Any] | None = None
    created_at: datetime | None = None


class EventsAppend(_Body):
    events: list[EventIn] = Field(min_length=1)


class EventsPage(BaseModel):
    """``GET /memory/events``: an agent's latest events, oldest first."""

    agent: str
    events: list[Memory]
    total: int


class SessionsPage(BaseModel):
    """``GET /memory/sessions``: an agent's runs, newest first."""

    agent: str
    sessions: list[Run]
    total: int


class PublishRequest(_Body):
    """Publish an org fact (a new fact, or a new version when ``fact_id`` exists)."""

    content: str
    fact_id: str | None = _ID
    category: str | None = None
    tags: list[str] | None = Field(default=None, max_length=64)
    core: bool | None = None
    reason: str | None = Field(default=None, max_length=1000)
    expected_version: int | None = Field(default=None, ge=0)
    author: str | None = _ID


class RetractRequest(_Body):
    reason: str | None = Field(default=None, max_length=1000)
    author: str | None = _ID


class MaintenanceRequest(_Body):
    """Consolidation or the maintenance cycle: a dry run unless ``dry_run`` is false."""

    dry_run: bool = True
    hard_delete: bool = False
    agent_id: str | None = _ID
    namespace: str | None = _ID
