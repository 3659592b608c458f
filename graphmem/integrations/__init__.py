"""Adapters that put graphmem under agent frameworks, one module per framework.

Each module imports its framework when it is imported (install the matching extra) and uses
only graphmem's public API:

- :mod:`graphmem.integrations.langgraph` — ``GraphMemStore``, a LangGraph ``BaseStore``
  (extra ``langgraph``).
- :mod:`graphmem.integrations.langchain` — ``GraphMemRetriever`` and
  ``GraphMemChatMessageHistory`` (extra ``langchain``).
- :mod:`graphmem.integrations.llamaindex` — ``GraphMemRetriever`` and ``GraphMemMemoryBlock``
  (extra ``llamaindex``).
- :mod:`graphmem.integrations.openai_agents` — ``GraphMemSession`` and ``memory_tools``
  (extra ``openai-agents``).
- :mod:`graphmem.integrations.pydantic_ai` — ``memory_toolset`` (extra ``pydantic-ai``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise ImportError naming the graphmem extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"this graphmem adapter needs {module.split('.')[0]}: pip install 'graphmem[{extra}]'"
        ) from e
