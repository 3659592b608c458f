"""The OpenAI Agents SDK session and memory tools, against the real ``agents`` package: the
Session API directly, and the SDK's Runner driving a scripted model (no network)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("agents", reason="openai-agents is not installed")

from agents import Agent, ModelResponse, Runner, set_tracing_disabled
from agents.models.interface import Model
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from graphmem.integrations.openai_agents import GraphMemSession, memory_tools
from graphmem.memory import GraphMemory
from tests.conftest import Stores

set_tracing_disabled(True)  # the SDK would export traces over the network


@pytest.fixture
def mem(stores: Stores) -> GraphMemory:
    return stores.open(embedder="hash")


def test_session_round_trips_items_as_a_run(mem: GraphMemory) -> None:
    session = GraphMemSession("s1", mem, agent_id="assistant", user_id="alice")
    items: list[Any] = [
        {"role": "user", "content": "I'm vegetarian"},
        {
            "type": "message",
            "role": "assistant",
            "id": "m1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Noted.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "c1", "name": "book", "arguments": '{"n": 2}'},
        {"type": "function_call_output", "call_id": "c1", "output": "booked for two"},
    ]

    async def scenario() -> None:
        assert await session.get_items() == []
        await session.add_items(items[:2])
        await session.add_items(items[2:])
        assert await session.get_items() == items
        assert await session.get_items(limit=2) == items[2:]
        assert await session.pop_item() == items[-1]
        assert await session.get_items() == items[:3]
        await session.clear_session()
        assert await session.get_items() == [] and await session.pop_item() is None

    events_seen: list[str] = []
    orig = session._add

    def spy(batch: list[Any]) -> None:
        orig(batch)
        events_seen[:] = [e.event_type for e in mem.runs.events("s1")]

    session._add = spy  # type: ignore[method-assign]
    asyncio.run(scenario())
    assert events_seen == ["user_message", "agent_response", "tool_call", "tool_result"]
    assert mem.list(run_id="s1", status=None) == []


def _tool(tools: list[Any], name: str) -> Any:
    return next(t for t in tools if t.name == name)


def _call(tool: Any, **args: Any) -> str:
    ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id="t", tool_arguments="{}")
    return str(asyncio.run(tool.on_invoke_tool(ctx, json.dumps(args))))


def test_memory_tools_act_for_their_agent_only(mem: GraphMemory) -> None:
    tools = memory_tools(mem, agent_id="assistant", user_id="alice")
    assert [t.name for t in tools] == ["remember", "recall", "forget"]
    out = _call(_tool(tools, "remember"), content="Alice is allergic to peanuts")
    mid = out.split()[-1]
    assert mem.get(mid).agent_id == "assistant" and mem.get(mid).metadata["user_id"] == "alice"
    assert mid in _call(_tool(tools, "recall"), query="peanuts allergy")
    other = mem.remember("Bob likes peanuts", agent_id="bob")
    assert "Bob" not in _call(_tool(tools, "recall"), query="peanuts")
    assert _call(_tool(tools, "forget"), memory_id=other.id) == f"no memory {other.id}"
    assert mem.get(other.id).content == "Bob likes peanuts"
    assert _call(_tool(tools, "forget"), memory_id=mid) == f"forgot {mid}"
    assert _call(_tool(tools, "recall"), query="peanuts allergy") == "nothing found"


class ScriptedModel(Model):
    """Calls `recall` first, then answers with what the tool returned."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any) -> Any:
        self.inputs.append(input)
        outputs = [
            i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if not outputs:
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call-{len(self.inputs)}",
                name="recall",
                arguments=json.dumps({"query": "what does Alice drink"}),
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = str(outputs[-1]["output"]).splitlines()[0].split(": ", 1)[-1]  # the best hit
        msg = ResponseOutputMessage(
            id="msg",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[msg], usage=Usage(), response_id=None)

    def stream_response(self, *a: Any, **k: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def test_runner_keeps_the_conversation_in_graphmem(mem: GraphMemory) -> None:
    mem.remember("Alice drinks green tea", agent_id="assistant")
    model = ScriptedModel()
    agent = Agent(name="assistant", model=model, tools=memory_tools(mem, agent_id="assistant"))
    session = GraphMemSession("chat", mem, agent_id="assistant", user_id="alice")
    result = Runner.run_sync(agent, "What does Alice drink?", session=session)
    assert result.final_output == "Alice drinks green tea"
    types = [e.event_type for e in mem.runs.events("chat")]
    assert types == ["user_message", "tool_call", "tool_result", "agent_response"]
    # a second turn starts from the stored history
    Runner.run_sync(agent, "And in the evening?", session=session)
    second_input = model.inputs[2]
    assert second_input[0] == {"content": "What does Alice drink?", "role": "user"}
    assert mem.runs.get("chat").user_id == "alice"
