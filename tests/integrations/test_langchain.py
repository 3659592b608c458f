"""The LangChain retriever (with langchain-tests' standard retriever suite) and the chat
message history, against the real langchain-core."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="langchain-core is not installed")

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from graphmem.integrations.langchain import GraphMemChatMessageHistory, GraphMemRetriever
from graphmem.memory import GraphMemory
from tests.conftest import Stores

FACTS = [
    "Alice drinks green tea every morning",
    "Alice's sister Carla is allergic to peanuts",
    "The team moved the release to June",
    "Bob prefers window seats on trains",
    "Alice is travelling to Lisbon in June",
]


def _filled(mem: GraphMemory) -> GraphMemory:
    for fact in FACTS:
        mem.remember(fact, agent_id="assistant")
    mem.remember("a private note of another agent about Alice", agent_id="other")
    return mem


try:
    from langchain_tests.integration_tests import RetrieversIntegrationTests
except ImportError:  # the standard suite is a dev dependency
    RetrieversIntegrationTests = None  # type: ignore[assignment,misc]


if RetrieversIntegrationTests is not None:

    class TestStandardRetrieverSuite(RetrieversIntegrationTests):
        """langchain-tests' own checks: k in the constructor and in invoke, Documents back."""

        # langchain-tests builds the retriever from the class: one embedded store for it
        _mem = _filled(GraphMemory.open("memory://", embedder="hash"))

        @property
        def retriever_constructor(self) -> type[GraphMemRetriever]:
            return GraphMemRetriever

        @property
        def retriever_constructor_params(self) -> dict[str, Any]:
            return {"mem": self._mem, "agent_id": "assistant"}

        @property
        def retriever_query_example(self) -> str:
            return "what does Alice like?"

else:

    def test_standard_retriever_suite() -> None:
        pytest.skip("langchain-tests is not installed (pip install -e '.[dev]')")


@pytest.fixture
def mem(stores: Stores) -> GraphMemory:
    return _filled(stores.open(embedder="hash"))


def test_documents_carry_id_score_and_scope(mem: GraphMemory) -> None:
    docs = GraphMemRetriever(mem=mem, agent_id="assistant", k=2).invoke("what does Alice drink?")
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)
    top = docs[0]
    assert top.page_content == "Alice drinks green tea every morning"
    assert top.id == top.metadata["id"] and mem.get(top.id).content == top.page_content
    assert top.metadata["score"] >= docs[1].metadata["score"]
    assert top.metadata["agent_id"] == "assistant" and "breakdown" in top.metadata
    everyone = GraphMemRetriever(mem=mem, k=10).invoke("Alice")
    mine = GraphMemRetriever(mem=mem, agent_id="assistant", k=10).invoke("Alice")
    assert any(d.metadata["agent_id"] == "other" for d in everyone)
    assert all(d.metadata["agent_id"] == "assistant" for d in mine)
    scoped = GraphMemRetriever(mem=mem, scope="other", k=10).invoke("Alice")
    assert {d.metadata["agent_id"] for d in scoped} == {"other"}


def test_chat_history_is_a_run(mem: GraphMemory) -> None:
    history = GraphMemChatMessageHistory(mem, "chat-1", agent_id="assistant", user_id="alice")
    assert history.messages == []
    history.add_messages(
        [
            SystemMessage("be brief"),
            HumanMessage("I'm vegetarian"),
            AIMessage("", tool_calls=[{"name": "save", "args": {"diet": "veg"}, "id": "t1"}]),
            ToolMessage("saved", tool_call_id="t1"),
            AIMessage("Noted."),
        ]
    )
    history.add_user_message("Any restaurant tips?")
    msgs = history.messages
    assert [type(m).__name__ for m in msgs] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert msgs[2].tool_calls[0]["name"] == "save"  # type: ignore[attr-defined]
    assert msgs[2].tool_calls[0]["args"] == {"diet": "veg"}  # type: ignore[attr-defined]
    assert msgs[3].tool_call_id == "t1"  # type: ignore[attr-defined]
    run = mem.runs.get("chat-1")
    assert (run.agent_id, run.user_id, run.event_count) == ("assistant", "alice", 6)
    # the conversation is memory: recall finds it, scoped to the user
    hits = mem.recall("vegetarian", user_id="alice", k=1)
    assert hits and hits[0].memory.run_id == "chat-1"
    # a second history object on the same run sees the same messages
    again = GraphMemChatMessageHistory(mem, "chat-1", agent_id="assistant")
    assert [m.content for m in again.messages] == [m.content for m in msgs]
    history.clear()
    assert history.messages == [] and mem.list(run_id="chat-1", status=None) == []
    history.clear()  # clearing an empty history is fine
