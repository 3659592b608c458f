"""Agents (``mem.agents``): register, read and list the agents that author memories.

>>> from graphmem import GraphMemory
>>> with GraphMemory.open("memory://", embedder=None) as mem:
...     _ = mem.agents.register("cto", name="Carla", seniority="executive")
...     mem.agents.get("cto").name
'Carla'
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from graphmem.backends.base import GraphBackend
from graphmem.errors import NotFound
from graphmem.models import Agent, Filter, NodeLabel, validated
from graphmem.writes import Writes

__all__ = ["Agents"]


class Agents:
    """The agents of a store, written through its write path."""

    def __init__(self, backend: GraphBackend, writes: Writes) -> None:
        self._backend = backend
        self._writes = writes

    def register(
        self,
        agent_id: str,
        *,
        name: str | None = None,
        seniority: str | None = None,
        autonomy: int | None = None,
        kind: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Agent:
        """Create or update an agent (fields not given keep their stored values)."""
        found = self._backend.get(NodeLabel.AGENT, [agent_id])
        base: dict[str, Any] = found[0].model_dump() if found else {"id": agent_id}
        for k, v in (
            ("name", name),
            ("seniority", seniority),
            ("autonomy", autonomy),
            ("kind", kind),
            ("metadata", metadata),
        ):
            if v is not None:
                base[k] = v
        agent: Agent = validated(Agent, base)
        self._writes.put([agent])
        return agent

    def get(self, agent_id: str) -> Agent:
        """The agent ``agent_id``; NotFound if it was never registered."""
        found = self._backend.get(NodeLabel.AGENT, [agent_id])
        if not found or not isinstance(found[0], Agent):
            raise NotFound(f"no agent {agent_id!r}")
        return found[0]

    def list(self, *, limit: int | None = None, offset: int = 0) -> builtins.list[Agent]:
        """The registered agents."""
        found = self._backend.match(Filter(label=NodeLabel.AGENT), limit=limit, offset=offset)
        return [a for a in found if isinstance(a, Agent)]
