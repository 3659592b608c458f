"""graphmem: a graph-database knowledge memory for AI agents.

>>> from graphmem import GraphMemory
>>> mem = GraphMemory.open("memory://", embedder=None)
>>> mem.remember("Alice prefers tea", agent_id="assistant").content
'Alice prefers tea'
"""

from graphmem.aio import AsyncGraphMemory
from graphmem.config import (
    PRESETS,
    LifecycleConfig,
    OrgConfig,
    RankWeights,
    RecallConfig,
    RetentionPolicy,
    RunLimits,
    Settings,
    WriteRule,
)
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
    LLMResponseError,
    LLMUnavailable,
    NotFound,
    QueryFailed,
)
from graphmem.llm import LLM, AnthropicLLM, OfflineLLM
from graphmem.memory import ForgetReport, GraphMemory, ImportReport
from graphmem.migrate import migrate
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
    RecallResult,
    Run,
    RunStatus,
    Status,
    Tag,
    Tier,
    Visibility,
)
from graphmem.null import NullMemory
from graphmem.scoping import Scope

__version__ = "0.1.0"

__all__ = [
    "LLM",
    "PRESETS",
    "AccessDenied",
    "Agent",
    "AnthropicLLM",
    "AsyncGraphMemory",
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
    "GraphMemError",
    "GraphMemory",
    "ImportReport",
    "InvalidInput",
    "LLMError",
    "LLMResponseError",
    "LLMUnavailable",
    "LifecycleConfig",
    "Memory",
    "NodeLabel",
    "NotFound",
    "NullMemory",
    "OfflineLLM",
    "OrgConfig",
    "OrgFact",
    "QueryFailed",
    "RankWeights",
    "RecallConfig",
    "RecallResult",
    "RetentionPolicy",
    "Run",
    "RunLimits",
    "RunStatus",
    "Scope",
    "Settings",
    "Status",
    "Tag",
    "Tier",
    "Visibility",
    "WriteRule",
    "__version__",
    "migrate",
]
