"""graphmem: a graph-database knowledge memory for AI agents."""

from graphmem.errors import (
    AccessDenied,
    BackendError,
    BackendUnavailable,
    ConfigError,
    Conflict,
    DimensionMismatch,
    GraphMemError,
    InvalidInput,
    LLMError,
    NotFound,
    QueryFailed,
)
from graphmem.memory import ForgetReport, GraphMemory
from graphmem.models import (
    Agent,
    Category,
    Edge,
    EdgeType,
    EventType,
    Filter,
    Memory,
    NodeLabel,
    OrgFact,
    Run,
    Status,
    Tag,
    Tier,
)

__version__ = "0.1.0"

__all__ = [
    "AccessDenied",
    "Agent",
    "BackendError",
    "BackendUnavailable",
    "Category",
    "ConfigError",
    "Conflict",
    "DimensionMismatch",
    "Edge",
    "EdgeType",
    "EventType",
    "Filter",
    "ForgetReport",
    "GraphMemory",
    "GraphMemError",
    "InvalidInput",
    "LLMError",
    "Memory",
    "NodeLabel",
    "NotFound",
    "OrgFact",
    "QueryFailed",
    "Run",
    "Status",
    "Tag",
    "Tier",
    "__version__",
]
