"""The MCP server through the SDK's own client: over stdio (a real `graphmem mcp` process)
and in process for the detailed behaviour."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters

from graphmem.memory import GraphMemory
from graphmem.server.mcp import TOOLS, create_mcp_server
from tests.conftest import Stores
from tests.interfaces.conftest import snapshot


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.embedded("the server is another process, started on a store file by its path")
def test_stdio_server_end_to_end(tmp_path: Path) -> None:
    db = str(tmp_path / "mcp.db")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "graphmem.cli", "mcp", "--db", db, "--embedder", "none", "--agent", "bot"],
        cwd=str(tmp_path),
        # the stdio client passes only a few variables by default: the server must import
        # the graphmem under test (PYTHONPATH), not whatever is installed
        env=dict(os.environ),
    )

    async def session() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(TOOLS) <= set(tools)
            assert tools["remember"].input_schema["required"] == ["content"]
            stored = await client.call_tool(
                "remember", {"content": "Alice prefers tea", "tags": ["prefs"]}
            )
            assert not stored.is_error
            mid = stored.structured_content["id"]  # type: ignore[index]
            hits = await client.call_tool("recall", {"query": "tea"})
            assert hits.structured_content["result"][0]["id"] == mid  # type: ignore[index]
            bad = await client.call_tool("remember", {"content": "x", "importance": 7})
            assert bad.is_error and "importance" in _text(bad)
            missing = await client.call_tool("history", {"memory_id": "nope"})
            assert missing.is_error and "NotFound" in _text(missing)

    asyncio.run(session())
    with GraphMemory.open(db, embedder=None) as mem:
        [m] = mem.list()
        assert (m.content, m.agent_id, m.tags) == ("Alice prefers tea", "bot", ("prefs",))


@pytest.fixture
def shared(stores: Stores) -> Any:
    # with the knowledge layer (opt-in), so the entity tools have entities to show
    return stores.open("inproc.db", embedder=None, knowledge=True)


def _call(server: Any, tool: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, args)

    return asyncio.run(go())


def test_tools_act_for_the_configured_agent_only(shared: GraphMemory) -> None:
    theirs = shared.remember("bob's private plan", agent_id="bob")
    mine_server = create_mcp_server(shared, agent_id="alice", namespace="home")

    stored = _call(mine_server, "remember", {"content": "alice likes plans"})
    assert stored.structured_content["id"]
    assert shared.get(stored.structured_content["id"]).namespace == "home"
    hits = _call(mine_server, "recall", {"query": "plan", "k": 10})
    assert "bob's private plan" not in _text(hits) and "alice likes plans" in _text(hits)
    assert "bob's private plan" not in _text(_call(mine_server, "context", {"query": "plan"}))

    before = snapshot(shared)
    denied = _call(mine_server, "forget", {"memory_id": theirs.id})
    assert denied.is_error and "NotFound" in _text(denied)
    assert _call(mine_server, "history", {"memory_id": theirs.id}).is_error
    assert snapshot(shared) == before

    mine = stored.structured_content["id"]
    dry = _call(mine_server, "forget", {"memory_id": mine, "dry_run": True})
    assert dry.structured_content["deleted"] == [mine] and shared.count() == 2
    assert not _call(mine_server, "forget", {"memory_id": mine}).is_error
    assert shared.count() == 1


def test_history_shows_versions(shared: GraphMemory) -> None:
    m = shared.remember("trip in May", agent_id="alice")
    new = shared.update(m.id, "trip in June")
    out = _call(create_mcp_server(shared, agent_id="alice"), "history", {"memory_id": m.id})
    versions = out.structured_content["result"]
    assert [v["content"] for v in versions] == ["trip in May", "trip in June"]
    assert versions[-1]["id"] == new.id and versions[0]["status"] == "superseded"


def test_reflect_cites_the_agents_memories(shared: GraphMemory) -> None:
    mine = shared.remember("Carla is allergic to peanuts", agent_id="alice")
    shared.remember("Carla is allergic to cats", agent_id="bob")
    out = _call(
        create_mcp_server(shared, agent_id="alice"),
        "reflect",
        {"question": "What is Carla allergic to?"},
    )
    assert not out.is_error
    assert "peanuts" in out.structured_content["answer"]
    assert out.structured_content["cited_ids"] == [mine.id]  # never bob's private memory


@pytest.mark.embedded("the server is another process, started on a store file by its path")
def test_streamable_http_transport(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = str(tmp_path / "http-mcp.db")
    # no GRAPHMEM_ (nor NEO4J_, a server store) setting: the default store
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHMEM_", "NEO4J_"))}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "graphmem.cli",
            "mcp",
            "--transport",
            "streamable-http",
            "--port",
            str(port),
            "--db",
            db,
            "--embedder",
            "none",
            "--agent",
            "web",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(300):  # bounded wait until the port answers
            if proc.poll() is not None:
                break
            try:
                httpx.get(url, timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""

        async def session() -> Any:
            async with Client(url, read_timeout_seconds=60) as client:
                await client.call_tool("remember", {"content": "over streamable http"})
                return await client.call_tool("recall", {"query": "streamable"})

        hits = asyncio.run(session())
        assert hits.structured_content["result"][0]["content"] == "over streamable http"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with GraphMemory.open(db, embedder=None) as mem:
        assert [m.agent_id for m in mem.list()] == ["web"]


def test_history_tool_leaves_out_versions_the_agent_may_not_read(shared: GraphMemory) -> None:
    shared.namespaces.create("secret", owner="alice")
    shared.namespaces.create("team", owner="alice", members=["bob"])
    v1 = shared.remember(
        "the launch code is 0451", agent_id="alice", namespace="secret", visibility="shared"
    )
    v2 = shared.update(v1.id, "launch moved to May", namespace="team")
    bob = create_mcp_server(shared, agent_id="bob")
    out = _call(bob, "history", {"memory_id": v2.id})
    assert not out.is_error and "0451" not in _text(out)
    assert [v["id"] for v in out.structured_content["result"]] == [v2.id]
    assert _call(bob, "history", {"memory_id": v1.id}).is_error
    alice = _call(create_mcp_server(shared, agent_id="alice"), "history", {"memory_id": v2.id})
    assert [v["id"] for v in alice.structured_content["result"]] == [v1.id, v2.id]


def test_entity_tools_show_only_what_the_agent_may_read(shared: GraphMemory) -> None:
    shared.remember("Yesterday I walked with Jon around Lisbon", agent_id="alice")
    shared.remember("Meeting Carla in Oslo next week about the secret deal", agent_id="bob")
    server = create_mcp_server(shared, agent_id="alice")
    names = {e["name"] for e in _call(server, "entities", {}).structured_content["result"]}
    assert {"Jon", "Lisbon"} <= names and not names & {"Carla", "Oslo"}
    about = _call(server, "about", {"name": "lisbon"}).structured_content
    assert about["entity"]["name"] == "Lisbon" and len(about["memories"]) == 1
    denied = _call(server, "about", {"name": "Oslo"})  # bob's, not alice's
    assert denied.is_error and "NotFound" in _text(denied)


def test_forget_report_names_only_what_the_agent_may_read(shared: GraphMemory) -> None:
    # found by probing: the HTTP API leaves another agent's derived memory out of the
    # report (it is deleted with the source, unnamed); the MCP tool listed its id
    mine = shared.remember("bob's note about the launch", agent_id="bob")
    theirs = shared.lifecycle.summarize([mine.id])  # another agent's memory derived from it
    shared.writes.change([theirs.evolve(agent_id="alice")])
    server = create_mcp_server(shared, agent_id="bob")
    for dry_run in (True, False):
        out = _call(server, "forget", {"memory_id": mine.id, "dry_run": dry_run})
        assert not out.is_error, _text(out)
        assert out.structured_content["deleted"] == [mine.id]
        assert theirs.id not in _text(out)
    assert shared.get([mine.id, theirs.id]) == []
