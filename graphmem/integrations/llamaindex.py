"""LlamaIndex: a retriever over graphmem recall and a memory block for ``llama_index.core``
agents' ``Memory``.

>>> from graphmem import GraphMemory
>>> from graphmem.integrations.llamaindex import GraphMemMemoryBlock, GraphMemRetriever
>>> from llama_index.core.memory import Memory
>>> mem = GraphMemory.open("memory://", embedder="hash")
>>> _ = mem.remember("Alice drinks green tea", agent_id="assistant")
>>> GraphMemRetriever(mem, agent_id="assistant").retrieve("what does Alice drink?")[0].text
'Alice drinks green tea'
>>> memory = Memory.from_defaults(
...     session_id="s1", memory_blocks=[GraphMemMemoryBlock(mem=mem, agent_id="assistant")]
... )

- :class:`GraphMemRetriever` — ``retrieve(query)`` is ``mem.recall``; nodes carry the memory
  id, its score and provenance.
- :class:`GraphMemMemoryBlock` — what ``Memory`` puts into the prompt is graphmem's fenced
  context block for the latest user message; the messages ``Memory`` flushes out of its
  short-term window are stored as events of the run ``run_id`` (default: the session id).
"""

from __future__ import annotations

from typing import Any

from graphmem.integrations import require

require("llama_index.core", "llamaindex")

from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.memory import BaseMemoryBlock  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from pydantic import Field  # noqa: E402

__all__ = ["GraphMemMemoryBlock", "GraphMemRetriever"]

# LlamaIndex roles that graphmem's message roles do not name
_ROLES = {"chatbot": "assistant", "model": "assistant"}


def _as_message(m: ChatMessage) -> dict[str, Any] | None:
    role = getattr(m.role, "value", str(m.role))
    text = m.content or ""
    if not text.strip():
        return None
    return {"role": _ROLES.get(role, role), "content": text}


class GraphMemRetriever(BaseRetriever):
    """Nodes from graphmem's hybrid recall (``filters``: agent_id, namespace, user_id, tags,
    scope ... as :meth:`GraphMemory.recall` takes them)."""

    def __init__(self, mem: Any, *, k: int = 4, **filters: Any) -> None:
        super().__init__()
        self.mem = mem
        self.k = k
        self.filters = {key: v for key, v in filters.items() if v is not None}

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = self.mem.recall(query_bundle.query_str, k=self.k, **self.filters)
        return [
            NodeWithScore(
                node=TextNode(
                    id_=r.memory.id,
                    text=r.memory.content,
                    metadata={
                        "agent_id": r.memory.agent_id,
                        "namespace": r.memory.namespace,
                        "run_id": r.memory.run_id,
                        "created_at": r.memory.created_at.isoformat(),
                        "tags": list(r.memory.tags),
                    },
                ),
                score=float(r.score),
            )
            for r in results
        ]


class GraphMemMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for a LlamaIndex ``Memory``, kept in graphmem.

    ``aget`` returns ``mem.context(<latest user message>, max_tokens=max_tokens, ...)``
    (empty when nothing is relevant); ``aput`` stores the flushed messages as events of
    ``run_id`` (else the session id LlamaIndex passes, else a run per block).
    """

    name: str = "graphmem"
    description: str | None = "Long-term memories recalled by graphmem"
    mem: Any = Field(exclude=True)
    agent_id: str = "default"
    user_id: str | None = None
    namespace: str | None = None
    run_id: str | None = None
    max_tokens: int = 500

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = ""
        for m in reversed(messages or []):
            if getattr(m.role, "value", m.role) == "user" and (m.content or "").strip():
                query = m.content or ""
                break
        if not query:
            return ""
        given = {"agent_id": self.agent_id, "namespace": self.namespace, "user_id": self.user_id}
        filters = {k: v for k, v in given.items() if v is not None}
        # nothing relevant: no block at all, rather than a header with nothing under it
        if not self.mem.recall(query, k=1, touch=False, **filters):
            return ""
        text: str = self.mem.context(query, max_tokens=self.max_tokens, **filters)
        return text

    async def _aput(self, messages: list[ChatMessage]) -> None:
        converted = [c for c in (_as_message(m) for m in messages) if c is not None]
        if not converted:
            return
        session = next(
            (m.additional_kwargs.get("session_id") for m in messages if m.additional_kwargs),
            None,
        )
        self.mem.add_messages(
            converted,
            agent_id=self.agent_id,
            user_id=self.user_id,
            namespace=self.namespace,
            run_id=self.run_id or session,
        )
