"""PydanticAI: a toolset of remember / recall / forget with the agent's scope bound.

>>> from pydantic_ai import Agent
>>> from graphmem import GraphMemory
>>> from graphmem.integrations.pydantic_ai import memory_toolset
>>> mem = GraphMemory.open("memory://", embedder="hash")
>>> agent = Agent("test", toolsets=[memory_toolset(mem, agent_id="assistant")])

The model chooses what to remember and what to look for, never whose memory: ``agent_id``
(and ``user_id``) are fixed when the toolset is made, and ``forget`` deletes only a memory
that this agent (and user) may read.
"""

from __future__ import annotations

from typing import Any

from graphmem.errors import NotFound
from graphmem.integrations import require

require("pydantic_ai", "pydantic-ai")

from pydantic_ai import FunctionToolset  # noqa: E402

__all__ = ["memory_toolset"]


def memory_toolset(
    mem: Any, *, agent_id: str = "default", user_id: str | None = None, k: int = 5
) -> FunctionToolset[Any]:
    """A FunctionToolset with ``remember``, ``recall`` and ``forget`` for ``agent_id``."""

    def remember(content: str, tags: list[str] | None = None) -> str:
        """Store a durable fact or preference worth remembering across conversations.

        Args:
            content: The fact, in one self-contained sentence.
            tags: Optional short labels.
        """
        m = mem.remember(content, agent_id=agent_id, user_id=user_id, tags=tags or ())
        return f"remembered {m.id}"

    def recall(query: str) -> list[dict[str, Any]]:
        """Find remembered facts relevant to a question, best first.

        Args:
            query: What to look for.
        """
        hits = mem.recall(query, k=k, agent_id=agent_id, user_id=user_id)
        return [
            {"id": r.memory.id, "content": r.memory.content, "score": round(float(r.score), 4)}
            for r in hits
        ]

    def forget(memory_id: str) -> str:
        """Delete a remembered fact by its id (as `recall` returns it).

        Args:
            memory_id: The id of the memory to delete.
        """
        try:
            found = mem.get(memory_id, scope=agent_id)
        except NotFound:
            return f"no memory {memory_id}"
        if user_id is not None and found.metadata.get("user_id") != user_id:
            return f"no memory {memory_id}"
        mem.forget(found.id)
        return f"forgot {memory_id}"

    return FunctionToolset([remember, recall, forget], id=f"graphmem-{agent_id}")
