"""graphmem: a graph-database knowledge memory for AI agents.

>>> from graphmem import GraphMemory
>>> mem = GraphMemory.open("memory://", embedder=None)
>>> mem.remember("Alice prefers tea", agent_id="assistant").content
'Alice prefers tea'

The public names are loaded on first use (PEP 562), so ``import graphmem`` and a command
line that needs only part of the package do not pay for the rest (pydantic models, numpy,
networkx, the LLM clients).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# public name -> the module that defines it
_WHERE: dict[str, str] = {
    "AsyncGraphMemory": "graphmem.aio",
    "LifecycleConfig": "graphmem.config",
    "OrgConfig": "graphmem.config",
    "PRESETS": "graphmem.config",
    "RankWeights": "graphmem.config",
    "RecallConfig": "graphmem.config",
    "RetentionPolicy": "graphmem.config",
    "RunLimits": "graphmem.config",
    "Settings": "graphmem.config",
    "WriteRule": "graphmem.config",
    "AccessDenied": "graphmem.errors",
    "BackendError": "graphmem.errors",
    "BackendUnavailable": "graphmem.errors",
    "ConfigError": "graphmem.errors",
    "Conflict": "graphmem.errors",
    "DimensionMismatch": "graphmem.errors",
    "GraphMemError": "graphmem.errors",
    "InvalidInput": "graphmem.errors",
    "LLMError": "graphmem.errors",
    "LLMResponseError": "graphmem.errors",
    "LLMUnavailable": "graphmem.errors",
    "NotFound": "graphmem.errors",
    "QueryFailed": "graphmem.errors",
    "AnthropicLLM": "graphmem.llm",
    "LLM": "graphmem.llm",
    "OfflineLLM": "graphmem.llm",
    "ForgetReport": "graphmem.memory",
    "GraphMemory": "graphmem.memory",
    "ImportReport": "graphmem.memory",
    "migrate": "graphmem.migrate",
    "Agent": "graphmem.models",
    "Category": "graphmem.models",
    "Edge": "graphmem.models",
    "EdgeType": "graphmem.models",
    "EventType": "graphmem.models",
    "Filter": "graphmem.models",
    "Memory": "graphmem.models",
    "NodeLabel": "graphmem.models",
    "OrgFact": "graphmem.models",
    "RecallResult": "graphmem.models",
    "Run": "graphmem.models",
    "RunStatus": "graphmem.models",
    "Status": "graphmem.models",
    "Tag": "graphmem.models",
    "Tier": "graphmem.models",
    "Visibility": "graphmem.models",
    "NullMemory": "graphmem.null",
    "Scope": "graphmem.scoping",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'graphmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
