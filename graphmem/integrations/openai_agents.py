"""OpenAI Agents SDK: a ``Session`` whose conversation history is a graphmem run, and memory
tools (remember / recall / forget) for an agent.

>>> from agents import Agent
>>> from graphmem import GraphMemory
>>> from graphmem.integrations.openai_agents import GraphMemSession, memory_tools
>>> mem = GraphMemory.open("memory://", embedder="hash")
>>> session = GraphMemSession("chat-1", mem, agent_id="assistant", user_id="alice")
>>> agent = Agent(name="assistant", tools=memory_tools(mem, agent_id="assistant"))

``Runner.run(agent, "...", session=session)`` then keeps the history in graphmem: every
input item is one event of run ``session_id`` (user messages, assistant messages, tool calls
and results as ``user_message``, ``agent_response``, ``tool_call``, ``tool_result``; other
items as their own type), readable text as content so recall finds the conversation, and the
item itself kept in the metadata so ``get_items`` gives back exactly what was added.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from graphmem.errors import NotFound
from graphmem.integrations import RunConversation, require

require("agents", "openai-agents")

from agents import FunctionTool, function_tool  # noqa: E402
from agents.memory import SessionABC  # noqa: E402

__all__ = ["GraphMemSession", "memory_tools"]

_ITEM = "openai_item"
_TYPES = {
    "function_call": "tool_call",
    "function_call_output": "tool_result",
    "custom_tool_call": "tool_call",
    "custom_tool_call_output": "tool_result",
}
_ROLE_TYPES = {
    "user": "user_message",
    "assistant": "agent_response",
    "system": "system_message",
    "developer": "system_message",
}


def _text(item: dict[str, Any]) -> str:
    """Readable text of an input item (what recall searches)."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") or p.get("refusal") for p in content if isinstance(p, dict)]
        text = "\n".join(p for p in parts if isinstance(p, str))
        if text.strip():
            return text
    if item.get("type") == "function_call":
        return f"{item.get('name')}({item.get('arguments', '')})"
    if isinstance(item.get("output"), str):
        return str(item["output"])
    summary = item.get("summary")
    if isinstance(summary, list):
        text = "\n".join(str(s.get("text", "")) for s in summary if isinstance(s, dict))
        if text.strip():
            return text
    return str(item.get("type") or item.get("role") or "item")


def _event_type(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind in _TYPES:
        return _TYPES[kind]
    role = item.get("role")
    if isinstance(role, str) and role in _ROLE_TYPES:
        return _ROLE_TYPES[role]
    name = re.sub(r"[^a-z0-9_]", "_", str(kind or "item").lower()).strip("_") or "item"
    return name if name[0].isalpha() else f"item_{name}"


class GraphMemSession(RunConversation, SessionABC):
    """The conversation history of one agent session, kept as graphmem run ``session_id``."""

    def __init__(
        self,
        session_id: str,
        mem: Any,
        *,
        agent_id: str = "default",
        user_id: str | None = None,
        namespace: str | None = None,
    ) -> None:
        super().__init__(mem, session_id, agent_id=agent_id, user_id=user_id, namespace=namespace)
        self.session_id = session_id

    def _events(self) -> list[Any]:
        return [e for e in self.run_events() if _ITEM in e.metadata]

    def _add(self, items: list[Any]) -> None:
        if not items:
            return
        self.mem.runs.get_or_create(
            self.session_id,
            agent_id=self.agent_id,
            user_id=self.user_id,
            **({"namespace": self.namespace} if self.namespace else {}),
        )
        events = []
        for raw in items:
            item = dict(raw)
            meta: dict[str, Any] = {_ITEM: json.dumps(item, ensure_ascii=False, default=str)}
            if self.user_id is not None:
                meta["user_id"] = self.user_id
            events.append(
                {"event_type": _event_type(item), "content": _text(item), "metadata": meta}
            )
        self.mem.runs.add_events(self.session_id, events)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        events = await asyncio.to_thread(self._events)
        if limit is not None:
            events = events[-limit:] if limit > 0 else []
        return [json.loads(e.metadata[_ITEM]) for e in events]

    async def add_items(self, items: list[Any]) -> None:
        await asyncio.to_thread(self._add, list(items))

    async def pop_item(self) -> Any | None:
        def pop() -> Any | None:
            events = self._events()
            if not events:
                return None
            last = events[-1]
            self.mem.forget(last.id, cascade=False)
            return json.loads(last.metadata[_ITEM])

        return await asyncio.to_thread(pop)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self.delete_run)


def memory_tools(
    mem: Any, *, agent_id: str = "default", user_id: str | None = None, k: int = 5
) -> list[FunctionTool]:
    """``remember``, ``recall`` and ``forget`` as function tools acting for ``agent_id``
    (and ``user_id``): the model never chooses whose memory it reads or writes."""

    @function_tool
    def remember(content: str, tags: list[str] | None = None) -> str:
        """Store a durable fact or preference worth remembering across conversations.

        Args:
            content: The fact, in one self-contained sentence.
            tags: Optional short labels.
        """
        m = mem.remember(content, agent_id=agent_id, user_id=user_id, tags=tags or ())
        return f"remembered {m.id}"

    @function_tool
    def recall(query: str) -> str:
        """Find remembered facts relevant to a question, best first, one per line as
        `id: text`.

        Args:
            query: What to look for.
        """
        hits = mem.recall(query, k=k, agent_id=agent_id, user_id=user_id)
        return "\n".join(f"{r.memory.id}: {r.memory.content}" for r in hits) or "nothing found"

    @function_tool
    def forget(memory_id: str) -> str:
        """Delete a remembered fact by its id (as `recall` shows it).

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

    return [remember, recall, forget]
