"""The servers' doors: MCP over streamable HTTP asks for the HTTP API's keys and acts as
the key's agent; neither server listens beyond this machine without keys unless told to;
another agent's key cannot add to a run over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from graphmem.config import Settings
from graphmem.errors import InvalidInput
from graphmem.memory import GraphMemory
from graphmem.server.auth import check_bind, is_loopback
from graphmem.server.mcp import run_mcp
from tests.interfaces.conftest import auth, snapshot

ROOT = Path(__file__).resolve().parents[2]
MCP_KEYS = [
    {"key": "alice-mcp-key-1", "agent_id": "alice", "namespaces": ["default"]},
    {"key": "bob-mcp-key-22", "agent_id": "bob", "namespaces": ["default"]},
    {"key": "alice-team-key-333", "agent_id": "alice", "namespaces": ["team"]},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def keyed_mcp(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A real ``graphmem mcp --transport streamable-http`` with two API keys."""
    port = _free_port()
    db = str(tmp_path / "mcp.db")
    # only the settings the test gives (a NEO4J_ variable would name a server store)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHMEM_", "NEO4J_"))}
    env["GRAPHMEM_SERVER__API_KEYS"] = json.dumps(MCP_KEYS)
    # the graphmem of this tree, not the installed one (a worktree's tests)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    cmd = [sys.executable, "-m", "graphmem.cli", "mcp", "--transport", "streamable-http"]
    cmd += ["--port", str(port), "--db", db, "--embedder", "none", "--agent", "server"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(600):  # bounded wait until the port answers
            if proc.poll() is not None:
                break
            try:
                httpx.get(url, timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        yield url, db
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _as(url: str, key: str) -> Client:
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return Client(streamable_http_client(url, http_client=client), read_timeout_seconds=60)


@pytest.mark.embedded("the server is another process, started on a store file by its path")
def test_mcp_over_http_needs_a_key_and_acts_as_its_agent(keyed_mcp: tuple[str, str]) -> None:
    url, db = keyed_mcp
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    for extra in ({}, {"Authorization": "Bearer wrong-key-000"}, {"X-API-Key": "nope-nope"}):
        r = httpx.post(url, json=init, headers={**headers, **extra}, timeout=30)
        assert r.status_code == 401, (extra, r.status_code)

    async def session() -> tuple[Any, Any, Any]:
        async with _as(url, "alice-mcp-key-1") as alice:
            stored = await alice.call_tool("remember", {"content": "alice's vault code 4411"})
        async with _as(url, "bob-mcp-key-22") as bob:
            seen = await bob.call_tool("recall", {"query": "vault code", "k": 10})
            denied = await bob.call_tool("forget", {"memory_id": stored.structured_content["id"]})
        return stored, seen, denied

    stored, seen, denied = asyncio.run(session())
    assert not stored.is_error
    assert "4411" not in json.dumps(seen.structured_content)
    assert denied.is_error
    with GraphMemory.open(db, embedder=None) as mem:
        assert [(m.content, m.agent_id) for m in mem.list()] == [
            ("alice's vault code 4411", "alice")
        ]


@pytest.mark.embedded("the server is another process, started on a store file by its path")
def test_mcp_over_http_keeps_to_the_keys_namespaces(keyed_mcp: tuple[str, str]) -> None:
    # found by probing: the tools checked the key's agent but not its namespaces, so a key
    # of alice limited to 'team' recalled, read the history of and forgot her memories in
    # 'default' (the same key over the HTTP API gets 403)
    url, db = keyed_mcp

    async def session() -> tuple[str, list[Any], list[Any], Any]:
        async with _as(url, "alice-mcp-key-1") as alice:
            stored = await alice.call_tool(
                "remember", {"content": "Alice plans a trip to Zanzibar, default-only"}
            )
        mid = stored.structured_content["id"]
        async with _as(url, "alice-team-key-333") as team:
            seen = [
                await team.call_tool("recall", {"query": "Zanzibar trip", "k": 10}),
                await team.call_tool("context", {"query": "Zanzibar trip"}),
                await team.call_tool("entities", {}),
            ]
            refused = [
                await team.call_tool("history", {"memory_id": mid}),
                await team.call_tool("forget", {"memory_id": mid}),
                await team.call_tool("about", {"name": "Zanzibar"}),
            ]
            wrote = await team.call_tool("remember", {"content": "team-only note"})
        return mid, seen, refused, wrote

    mid, seen, refused, wrote = asyncio.run(session())
    assert not any(out.is_error for out in seen)
    for out in seen:
        text = json.dumps(out.structured_content) + str(out.content)
        assert "default-only" not in text and "Zanzibar" not in text, text
    assert [out.is_error for out in refused] == [True, True, True]
    assert not wrote.is_error and wrote.structured_content["content"] == "team-only note"
    with GraphMemory.open(db, embedder=None) as mem:
        assert sorted((m.content, m.namespace) for m in mem.list()) == [
            ("Alice plans a trip to Zanzibar, default-only", "default"),
            ("team-only note", "team"),
        ]
        assert mem.get(mid).status.value == "active"


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.org", "::"])
def test_open_servers_refuse_a_non_loopback_address(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(InvalidInput, match="--allow-open"):
        check_bind(host, (), allow_open=False, what="HTTP API")
    check_bind(host, (), allow_open=True, what="HTTP API")  # explicitly open: allowed
    settings = Settings(embedder="none", url="memory://")
    with pytest.raises(InvalidInput, match="without API keys"):
        run_mcp(settings, transport="streamable-http", host=host, port=1)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_addresses_need_no_keys(host: str) -> None:
    assert is_loopback(host)
    check_bind(host, (), allow_open=False, what="HTTP API")


def test_serve_on_every_address_without_keys_exits_with_the_reason(tmp_path: Path) -> None:
    # only the settings the test gives (a NEO4J_ variable would name a server store)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHMEM_", "NEO4J_"))}
    for cmd in (["serve"], ["mcp", "--transport", "streamable-http"]):
        out = subprocess.run(
            [
                *(sys.executable, "-m", "graphmem.cli", *cmd, "--host", "0.0.0.0"),
                *("--port", "1", "--db", str(tmp_path / "x.db"), "--embedder", "none"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 2, (cmd, out.stderr)
        assert "--allow-open" in out.stderr, out.stderr
        # the reason, as every other refused command says it: one line, no traceback
        assert out.stderr.startswith("error: InvalidInput: refusing to serve"), out.stderr
        assert "Traceback" not in out.stderr, out.stderr


def test_another_agents_key_cannot_add_to_a_run_over_http(
    store: GraphMemory, keyed: TestClient
) -> None:
    run = store.runs.start(agent_id="alice")
    store.remember("alice's step", agent_id="alice", run_id=run.id)
    before = snapshot(store)
    r = keyed.post(
        "/memories",
        json={"content": "bob's private text", "run_id": run.id},
        headers=auth("bob-key-4567"),
    )
    assert r.status_code == 403, r.text
    assert snapshot(store) == before
    ok = keyed.post(
        "/memories",
        json={"content": "alice's second step", "run_id": run.id},
        headers=auth("alice-key-123"),
    )
    assert ok.status_code == 201, ok.text


def _call(server: Any, tool: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, args)

    return asyncio.run(go())


def test_mcp_rejects_unknown_arguments_and_writes_nothing(store_mem: GraphMemory) -> None:
    from graphmem.server.mcp import create_mcp_server

    server = create_mcp_server(store_mem, agent_id="alice")
    out = _call(server, "remember", {"content": "written as bob?", "agent_id": "bob"})
    assert out.is_error and "agent_id" in "".join(getattr(c, "text", "") for c in out.content)
    assert store_mem.count(status=None) == 0
    assert not _call(server, "remember", {"content": "plain"}).is_error


def test_mcp_answers_unreadable_and_missing_ids_the_same(store_mem: GraphMemory) -> None:
    from graphmem.server.mcp import create_mcp_server

    theirs = store_mem.remember("bob's private plan", agent_id="bob")
    server = create_mcp_server(store_mem, agent_id="alice")

    def text(tool: str, memory_id: str) -> str:
        out = _call(server, tool, {"memory_id": memory_id})
        assert out.is_error
        return "".join(getattr(c, "text", "") for c in out.content).replace(memory_id, "<id>")

    for tool in ("forget", "history"):
        assert text(tool, theirs.id) == text(tool, "0" * 32)


@pytest.mark.parametrize(
    "args",
    [
        ["recall", "x"],
        ["list"],
        ["stats"],
        ["history", "0" * 32],
        ["context", "x"],
        ["runs", "list"],
    ],
)
def test_read_commands_never_create_a_store(tmp_path: Path, args: list[str]) -> None:
    from typer.testing import CliRunner

    from graphmem.cli import app

    db = tmp_path / "nonexistent" / "dir" / "x.db"
    env = {"GRAPHMEM_EMBEDDER": "none", "GRAPHMEM_CONFIG": ""}
    result = CliRunner().invoke(app, [*args, "--db", str(db)], env=env)
    assert not (tmp_path / "nonexistent").exists()
    assert result.exit_code == 2, result.output
    assert "no store at" in result.output
