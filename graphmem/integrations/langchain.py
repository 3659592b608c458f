"""LangChain: a retriever over graphmem recall and a chat message history kept as a run.

>>> from graphmem import GraphMemory
>>> from graphmem.integrations.langchain import GraphMemRetriever
>>> mem = GraphMemory.open("memory://", embedder="hash")
>>> _ = mem.remember("Alice drinks green tea", agent_id="assistant")
>>> docs = GraphMemRetriever(mem=mem, agent_id="assistant", k=3).invoke("what does Alice drink?")
>>> docs[0].page_content
'Alice drinks green tea'

- :class:`GraphMemRetriever` — ``invoke(query)`` is ``mem.recall(query, k=k, ...)``; each
  Document carries the memory id (``Document.id``), its score and breakdown, agent,
  namespace, tags and time in ``metadata``. ``k`` can be passed to ``invoke`` too.
- :class:`GraphMemChatMessageHistory` — the messages of run ``run_id`` (events in order,
  stored with :meth:`GraphMemory.add_messages`); ``clear()`` deletes the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphmem.integrations import RunConversation, require
from graphmem.messages import message_from_event

require("langchain_core", "langchain")

from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    BaseMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict  # noqa: E402

__all__ = ["GraphMemChatMessageHistory", "GraphMemRetriever", "document_of"]


def document_of(result: Any) -> Document:
    """A recall result as a LangChain Document (id, score and provenance in metadata)."""
    m = result.memory
    return Document(
        id=m.id,
        page_content=m.content,
        metadata={
            "id": m.id,
            "score": float(result.score),
            "breakdown": dict(result.breakdown),
            "agent_id": m.agent_id,
            "namespace": m.namespace,
            "run_id": m.run_id,
            "tags": list(m.tags),
            "created_at": m.created_at.isoformat(),
            "category": m.category.value,
        },
    )


class GraphMemRetriever(BaseRetriever):
    """Documents from graphmem's hybrid recall.

    ``mem`` is an open GraphMemory; ``agent_id``, ``namespace``, ``user_id``, ``tags`` and
    ``scope`` narrow what is recalled (``scope``: an agent id or Scope — only what that agent
    may read). ``touch=False`` leaves access counts alone.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    mem: Any
    k: int = 4
    agent_id: str | None = None
    namespace: str | None = None
    user_id: str | None = None
    tags: list[str] | None = None
    scope: Any = None
    touch: bool = True

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        options: dict[str, Any] = {
            "k": self.k,
            "agent_id": self.agent_id,
            "namespace": self.namespace,
            "user_id": self.user_id,
            "tags": self.tags,
            "scope": self.scope,
            "touch": self.touch,
        }
        options.update(kwargs)
        options = {k: v for k, v in options.items() if v is not None}
        return [document_of(r) for r in self.mem.recall(query, **options)]


class GraphMemChatMessageHistory(RunConversation, BaseChatMessageHistory):
    """The chat messages of one graphmem run (a session of ``agent_id`` with ``user_id``):
    ``GraphMemChatMessageHistory(mem, run_id, agent_id=..., user_id=..., namespace=...)``.

    Messages are stored as run events in order (``user_message``, ``agent_response``,
    ``tool_call``, ``tool_result``, ``system_message``), so graphmem's lifecycle (promotion,
    summaries, fact extraction) sees the conversation.
    """

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        events = self.run_events()
        return list(convert_to_messages([message_from_event(e) for e in events]))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        if not messages:
            return
        self.mem.add_messages(
            convert_to_openai_messages(list(messages)),
            agent_id=self.agent_id,
            user_id=self.user_id,
            run_id=self.run_id,
            namespace=self.namespace,
        )

    def clear(self) -> None:
        """Delete the run with its events (graphmem's cascade)."""
        self.delete_run()
