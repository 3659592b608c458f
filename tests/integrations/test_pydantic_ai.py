"""The PydanticAI memory toolset, driven by a real pydantic-ai Agent on a FunctionModel."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from graphmem.integrations.pydantic_ai import memory_toolset
from graphmem.memory import GraphMemory
from tests.conftest import Stores


@pytest.fixture
def mem(stores: Stores) -> GraphMemory:
    return stores.open(embedder="hash")


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def test_agent_remembers_recalls_and_forgets_in_its_scope(mem: GraphMemory) -> None:
    other = mem.remember("Bob's peanut note", agent_id="bob")
    script: list[list[Any]] = [
        [ToolCallPart("remember", {"content": "Alice is allergic to peanuts"})],
        [ToolCallPart("recall", {"query": "peanuts"})],
        [ToolCallPart("forget", {"memory_id": other.id})],
        [TextPart("done")],
    ]
    seen: list[list[ToolReturnPart]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert {t.name for t in info.function_tools} == {"remember", "recall", "forget"}
        seen.append(_returns(messages))
        return ModelResponse(parts=script[len(seen) - 1])

    agent = Agent(
        FunctionModel(model),
        toolsets=[memory_toolset(mem, agent_id="assistant", user_id="alice")],
    )
    result = agent.run_sync("remember my allergy")
    assert result.output == "done"
    stored = mem.list(agent_id="assistant")
    assert [m.content for m in stored] == ["Alice is allergic to peanuts"]
    assert stored[0].metadata["user_id"] == "alice"
    recalled = seen[2][-1].content
    assert [r["content"] for r in recalled] == ["Alice is allergic to peanuts"]  # not Bob's
    assert seen[3][-1].content == f"no memory {other.id}"
    assert mem.get(other.id).content == "Bob's peanut note"

    forget_script = [[ToolCallPart("forget", {"memory_id": stored[0].id})], [TextPart("ok")]]
    calls = iter(forget_script)
    agent2 = Agent(
        FunctionModel(lambda m, i: ModelResponse(parts=next(calls))),
        toolsets=[memory_toolset(mem, agent_id="assistant", user_id="alice")],
    )
    assert agent2.run_sync("forget it").output == "ok"
    assert mem.count(agent_id="assistant") == 0
