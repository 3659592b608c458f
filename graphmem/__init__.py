"""graphmem: a graph-database knowledge memory for AI agents.

>>> from graphmem import GraphMemory
>>> mem = GraphMemory.open("memory://", embedder=None)
>>> mem.remember("Alice prefers tea", agent_id="assistant").content
'Alice prefers tea'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphmem.aio import AsyncGraphMemory
    from graphmem.config import Settings
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
    from graphmem.lifecycle import LifecycleConfig, RetentionPolicy
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
    from graphmem.org import OrgConfig, WriteRule
    from graphmem.retrieval import PRESETS, RankWeights, RecallConfig
    from graphmem.runs import RunLimits
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


# Names are imported on first use: `import graphmem` (and a CLI command, which imports only
# what it runs) does not pay for every module up front.
_LAZY: dict[str, str] = {
    "AccessDenied": "graphmem.errors",
    "Agent": "graphmem.models",
    "AnthropicLLM": "graphmem.llm",
    "AsyncGraphMemory": "graphmem.aio",
    "BackendError": "graphmem.errors",
    "BackendUnavailable": "graphmem.errors",
    "Category": "graphmem.models",
    "ConfigError": "graphmem.errors",
    "Conflict": "graphmem.errors",
    "DimensionMismatch": "graphmem.errors",
    "Edge": "graphmem.models",
    "EdgeType": "graphmem.models",
    "EventType": "graphmem.models",
    "Filter": "graphmem.models",
    "ForgetReport": "graphmem.memory",
    "GraphMemError": "graphmem.errors",
    "GraphMemory": "graphmem.memory",
    "ImportReport": "graphmem.memory",
    "InvalidInput": "graphmem.errors",
    "LLM": "graphmem.llm",
    "LLMError": "graphmem.errors",
    "LLMResponseError": "graphmem.errors",
    "LLMUnavailable": "graphmem.errors",
    "LifecycleConfig": "graphmem.lifecycle",
    "Memory": "graphmem.models",
    "NodeLabel": "graphmem.models",
    "NotFound": "graphmem.errors",
    "NullMemory": "graphmem.null",
    "OfflineLLM": "graphmem.llm",
    "OrgConfig": "graphmem.org",
    "OrgFact": "graphmem.models",
    "PRESETS": "graphmem.retrieval",
    "QueryFailed": "graphmem.errors",
    "RankWeights": "graphmem.retrieval",
    "RecallConfig": "graphmem.retrieval",
    "RecallResult": "graphmem.models",
    "RetentionPolicy": "graphmem.lifecycle",
    "Run": "graphmem.models",
    "RunLimits": "graphmem.runs",
    "RunStatus": "graphmem.models",
    "Scope": "graphmem.scoping",
    "Settings": "graphmem.config",
    "Status": "graphmem.models",
    "Tag": "graphmem.models",
    "Tier": "graphmem.models",
    "Visibility": "graphmem.models",
    "WriteRule": "graphmem.org",
    "migrate": "graphmem.migrate",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'graphmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
