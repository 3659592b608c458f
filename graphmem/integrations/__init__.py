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
from typing import Any

from graphmem.errors import NotFound

__all__ = ["RunConversation", "require"]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise ImportError naming the graphmem extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"this graphmem adapter needs {module.split('.')[0]}: "
            f"pip install -e '.[{extra}]' in the graphmem folder"
        ) from e


class RunConversation:
    """A conversation kept as the events of one graphmem run (``run_id``), written for
    ``agent_id`` and ``user_id`` in ``namespace``: what the chat histories and sessions of
    the adapters share. A run that does not exist yet is an empty conversation."""

    def __init__(
        self,
        mem: Any,
        run_id: str,
        *,
        agent_id: str = "default",
        user_id: str | None = None,
        namespace: str | None = None,
    ) -> None:
        self.mem = mem
        self.run_id = run_id
        self.agent_id = agent_id
        self.user_id = user_id
        self.namespace = namespace

    def run_events(self) -> list[Any]:
        """The run's active events in order ([] while the run does not exist)."""
        try:
            return list(self.mem.runs.events(self.run_id, status="active"))
        except NotFound:
            return []

    def delete_run(self) -> None:
        """Delete the run with its events (graphmem's cascade); nothing if there is none."""
        try:
            self.mem.runs.delete(self.run_id)
        except NotFound:
            pass
