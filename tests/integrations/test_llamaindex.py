"""The LlamaIndex retriever and memory block, against the real llama-index-core ``Memory``."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core", reason="llama-index-core is not installed")

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from graphmem.integrations.llamaindex import GraphMemMemoryBlock, GraphMemRetriever
from graphmem.memory import GraphMemory
from tests.conftest import Stores


@pytest.fixture
def mem(stores: Stores) -> GraphMemory:
    return stores.open(embedder="hash")


def _words(text: str) -> list[str]:
    # a tokenizer that needs no download (LlamaIndex's default fetches tiktoken's tables)
    return text.split()


def test_retriever_returns_scored_nodes(mem: GraphMemory) -> None:
    mem.remember("Alice drinks green tea", agent_id="assistant")
    mem.remember("Bob fixed the build server", agent_id="assistant")
    mem.remember("Alice drinks only water at night", agent_id="someone-else")
    nodes = GraphMemRetriever(mem, agent_id="assistant", k=2).retrieve("what does Alice drink?")
    assert nodes[0].node.get_content() == "Alice drinks green tea"
    assert nodes[0].node.node_id == mem.list(agent_id="assistant", limit=None)[-1].id
    assert nodes[0].score is not None and all(
        n.node.metadata["agent_id"] == "assistant" for n in nodes
    )


def test_memory_block_stores_flushed_turns_and_recalls_them(mem: GraphMemory) -> None:
    block = GraphMemMemoryBlock(mem=mem, agent_id="assistant", user_id="alice")
    memory = Memory.from_defaults(
        session_id="session-1",
        memory_blocks=[block],
        token_limit=60,
        chat_history_token_ratio=0.5,
        token_flush_size=10,
        tokenizer_fn=_words,
    )
    turns = [
        ChatMessage(role="user", content="I am vegetarian and I never eat peanuts at all"),
        ChatMessage(role="assistant", content="Noted, no meat and no peanuts for you then"),
        ChatMessage(role="user", content="Also I live in Lisbon near the river since last year"),
        ChatMessage(role="assistant", content="Lisbon noted as your home city from now on"),
        ChatMessage(role="user", content="Remind me, what do I never eat?"),
    ]
    memory.put_messages(turns)
    # the oldest turns went out of the short-term window into graphmem, as run events
    stored = mem.runs.events("session-1")
    assert stored and stored[0].content.startswith("I am vegetarian")
    assert mem.runs.get("session-1").user_id == "alice"
    # and come back as a memory block in the system message for the latest question
    messages = memory.get()
    system = [m for m in messages if m.role.value == "system"]
    assert system and "vegetarian" in (system[0].content or "")
    assert messages[-1].content == "Remind me, what do I never eat?"


def test_memory_block_is_empty_when_nothing_is_relevant(mem: GraphMemory) -> None:
    block = GraphMemMemoryBlock(mem=mem, agent_id="assistant")
    got = asyncio.run(block.aget([ChatMessage(role="user", content="anything at all?")]))
    assert got == ""
    assert asyncio.run(block.aget([])) == ""
