"""The command line through Typer's CliRunner (text and --json), and the servers it starts."""

from __future__ import annotations

import json
import os
import re
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
import typer.main
from typer.testing import CliRunner

from graphmem.cli import app
from graphmem.memory import GraphMemory

pytestmark = pytest.mark.embedded(
    "the CLI is run on store files named by path, read back by reopening them"
)

ROOT = Path(__file__).resolve().parents[2]
ENV = {"GRAPHMEM_EMBEDDER": "none", "GRAPHMEM_CONFIG": ""}


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "cli.db")


def run(*args: str, env: dict[str, str | None] | None = None, code: int = 0) -> Any:
    result = CliRunner().invoke(app, list(args), env={**ENV, **(env or {})})
    assert result.exit_code == code, (args, result.output, result.stderr)
    return result


def run_json(*args: str, env: dict[str, str | None] | None = None) -> Any:
    return json.loads(run(*args, "--json", env=env).stdout)


def test_memory_commands(db: str) -> None:
    mid = run(
        "remember",
        "Alice prefers tea",
        "--db",
        db,
        "--tag",
        "prefs",
        "--agent",
        "bot",
        "--metadata",
        '{"source": "chat"}',
    ).stdout.strip()
    shown = run_json("show", mid, "--db", db)
    assert shown["content"] == "Alice prefers tea" and shown["metadata"] == {"source": "chat"}
    assert "embedding" not in shown

    hits = run_json("recall", "tea", "--db", db, "--agent", "bot")
    assert [h["memory"]["id"] for h in hits] == [mid]
    assert "Alice prefers tea" in run("recall", "tea", "--db", db).stdout
    assert run("recall", "zebra", "--db", db).stdout.strip() == "(nothing relevant)"
    lexical = run_json("recall", "tea", "--db", db, "--preset", "lexical")
    assert [h["memory"]["id"] for h in lexical] == [mid]
    assert (
        "unknown recall preset"
        in run("recall", "tea", "--db", db, "--preset", "nope", code=1).stderr
    )
    assert "Alice prefers tea" in run_json("context", "tea", "--db", db)["context"]

    new = run_json("update", mid, "Alice prefers green tea", "--db", db, "--reason", "fix")
    assert new["id"] != mid
    versions = run_json("history", new["id"], "--db", db)
    assert [v["status"] for v in versions] == ["superseded", "active"]
    assert "[superseded]" in run("history", mid, "--db", db).stdout
    assert [m["id"] for m in run_json("list", "--db", db)] == [new["id"]]
    assert len(run_json("list", "--db", db, "--status", "all")) == 2

    report = run_json("forget", new["id"], "--db", db, "--dry-run")
    assert report["dry_run"] and len(report["deleted"]) == 2
    assert "deleted 2 memories" in run("forget", new["id"], "--db", db).stdout
    with GraphMemory.open(db, embedder=None) as mem:
        assert mem.count(status=None) == 0


def test_errors_are_helpful_and_change_nothing(db: str) -> None:
    GraphMemory.open(db, embedder=None).close()  # a read command needs an existing store
    out = run("show", "nope", "--db", db, code=1)
    assert "NotFound" in out.stderr and "nope" in out.stderr
    bad = run("remember", "x", "--db", db, "--importance", "3", code=1)
    assert "InvalidInput" in bad.stderr and "importance" in bad.stderr
    assert "not JSON" in run("remember", "x", "--db", db, "--metadata", "{", code=2).stderr
    cfg = run("stats", "--db", db, env={"GRAPHMEM_SERVER__PORT": "many"}, code=2)
    assert "server.port" in cfg.stderr
    with GraphMemory.open(db, embedder=None) as mem:
        assert mem.count(status=None) == 0


def test_settings_file_and_config_show(tmp_path: Path) -> None:
    conf = tmp_path / "g.toml"
    conf.write_text(
        f'url = "{tmp_path / "fromfile.db"}"\npassword = "s3cret-pw"\n[server]\nport = 9999\n'
    )
    # the file's url counts only when no environment setting names a store (the environment
    # wins: a live-server run of the suite sets GRAPHMEM_URL or NEO4J_URI)
    no_server: dict[str, str | None] = {
        k: None for k in ("GRAPHMEM_URL", "NEO4J_URI", "GRAPHMEM_DB") if k in os.environ
    }
    mid = run("--config", str(conf), "remember", "configured", env=no_server).stdout.strip()
    with GraphMemory.open(str(tmp_path / "fromfile.db"), embedder=None) as mem:
        assert mem.get(mid).content == "configured"
    shown = run(
        "--config", str(conf), "config", "show", env={"GRAPHMEM_ANTHROPIC_API_KEY": "sk-ant-xyz"}
    ).stdout
    assert "port = 9999" in shown and "s3cret-pw" not in shown and "sk-ant-xyz" not in shown
    as_json = run_json("--config", str(conf), "config", "show", "--db", "memory://")
    assert as_json["url"] == "memory://" and as_json["password"] == "**********"
    assert "does not exist" in run("--config", str(tmp_path / "none.toml"), "stats", code=2).stderr


def test_maintenance_and_llm_commands(db: str) -> None:
    for text in (
        "Alice drinks tea with milk every morning",  # an exact repeat would be
        "Alice drinks tea with milk each morning",
    ):  # reconciled, not stored twice
        run("remember", text, "--db", db)
    plan = run_json("consolidate", "--db", db)
    assert plan["dry_run"] and len(plan["groups"]) == 1
    assert "would merge 1 groups" in run("consolidate", "--db", db).stdout
    done = run_json("consolidate", "--apply", "--db", db)
    merged = done["groups"][0]["merged_id"]
    assert run_json("list", "--db", db)[0]["id"] == merged
    assert len(run_json("unmerge", merged, "--db", db)["restored_ids"]) == 2

    assert run_json("maintain", "--db", db)["dry_run"] is True
    answer = run_json("reflect", "What does Alice drink?", "--db", db, "--llm", "offline")
    assert "tea" in answer["answer"] and answer["cited_ids"]
    assert run_json("improve", "--db", db)["dry_run"] is True
    facts = run_json(
        "extract-facts", "I am vegetarian and I live in Lisbon", "--db", db, "--dry-run"
    )
    assert facts["dry_run"] and facts["facts"]

    ids = [m["id"] for m in run_json("list", "--db", db)]
    assert "archived 1" in run("archive", ids[0], "--db", db).stdout
    assert len(run_json("list", "--db", db)) == len(ids) - 1
    run("restore", ids[0], "--db", db)
    assert len(run_json("list", "--db", db)) == len(ids)


def test_runs_events_log_and_summaries(db: str) -> None:
    with GraphMemory.open(db, embedder=None) as mem:
        mem.runs.start("bot", run_id="s1", user_id="u")
        for i, t in enumerate(["user_message", "agent_response", "user_message"]):
            mem.runs.add_event("s1", t, f"I like hiking in the Alps, turn {i}")
        mem.log.log("bot", "tool_call", {"tool": "search"}, run_id="s1")
    assert [r["id"] for r in run_json("runs", "list", "--db", db, "--agent", "bot")] == ["s1"]
    assert run_json("runs", "show", "s1", "--db", db)["event_count"] == 3
    events = run_json("runs", "events", "s1", "--db", db, "--type", "user_message")
    assert [e["seq"] for e in events] == [0, 2]
    assert "agent_response" in run("runs", "events", "s1", "--db", db).stdout
    assert run_json("tail", "--db", db, "--run", "s1")
    summary = run_json("summarize", "--run", "s1", "--db", db)
    assert summary["category"] == "summary"
    assert run_json("runs", "end", "s1", "--db", db)["status"] == "completed"
    run("runs", "delete", "s1", "--db", db)
    assert "NotFound" in run("runs", "show", "s1", "--db", db, code=1).stderr


def test_org_and_sharing_commands(db: str) -> None:
    with GraphMemory.open(db, embedder=None) as mem:
        mem.agents.register("cto", seniority="lead")
        mem.agents.register("intern", seniority="junior")
    fact = run_json(
        "org",
        "publish",
        "Two reviewers per deploy",
        "--author",
        "cto",
        "--fact-id",
        "deploys",
        "--db",
        db,
    )
    assert fact["version"] == 1
    denied = run(
        "org",
        "publish",
        "No reviews",
        "--author",
        "intern",
        "--fact-id",
        "deploys",
        "--db",
        db,
        code=1,
    )
    assert "AccessDenied" in denied.stderr
    run(
        "org",
        "publish",
        "One reviewer per deploy",
        "--author",
        "cto",
        "--fact-id",
        "deploys",
        "--db",
        db,
    )
    assert "deploys v2" in run("org", "list", "--db", db).stdout
    assert run_json("org", "list", "--query", "reviewer", "--db", db)[0]["version"] == 2
    run("org", "retract", "deploys", "--author", "cto", "--db", db)
    ops = run_json("org", "history", "deploys", "--db", db)
    assert [o["operation"] for o in ops] == ["publish", "publish", "retract"]
    assert run_json("share", "team", "--owner", "a", "--member", "b", "--db", db)["members"] == [
        "a",
        "b",
    ]


def test_export_import_and_migrate(db: str, tmp_path: Path) -> None:
    run("remember", "portable fact", "--db", db, "--tag", "x")
    dump = tmp_path / "dump.jsonl"
    assert "exported" in run("export", str(dump), "--db", db).stdout
    other = str(tmp_path / "other.db")
    assert "imported" in run("import", str(dump), "--db", other).stdout
    copied = str(tmp_path / "copied.db")
    report = run_json("migrate", db, copied)
    assert report["verified"] and report["nodes_copied"] >= 1
    for path in (other, copied):
        with GraphMemory.open(path, embedder=None) as mem:
            assert [m.content for m in mem.list()] == ["portable fact"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not an export\n")
    assert "InvalidInput" in run("import", str(bad), "--db", other, code=1).stderr


# -- every command is documented --------------------------------------------------------


def _command_paths(group: Any, prefix: str = "graphmem") -> Iterator[str]:
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (typer may vendor its own click)
            yield from _command_paths(cmd, f"{prefix} {name}")
        else:
            yield f"{prefix} {name}"


def test_every_command_is_documented_in_the_readme() -> None:
    readme = (ROOT / "docs" / "cli-http-mcp.md").read_text(encoding="utf-8")
    match = re.search(r"^## Command line, HTTP and MCP\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    assert match, "docs/cli-http-mcp.md has no '## Command line, HTTP and MCP' section"
    section = match.group(1)
    documented = set(re.findall(r"`(graphmem(?: [a-z][a-z-]*)+)", section))
    group = typer.main.get_command(app)
    commands = set(_command_paths(group))
    assert len(commands) > 20
    missing = sorted(
        c for c in commands if not any(d == c or d.startswith(c + " ") for d in documented)
    )
    assert not missing, f"undocumented commands: {missing}"
    stale = sorted(
        d
        for d in documented
        if not any(d == c or d.startswith(c + " ") for c in commands)
        and d.split()[1] not in {"--config", "--json"}
    )
    assert not stale, f"README documents commands that do not exist: {stale}"


# -- the servers start on the embedded default with no setup --------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["serve", "--port", "70000"], "--port"),
        (["serve", "--port", "-1"], "--port"),
        (["mcp", "--transport", "streamable-http", "--port", "65536"], "--port"),
        (["mcp", "--agent", ""], "agent"),
        (["mcp", "--agent", " padded "], "agent"),
    ],
)
def test_servers_refuse_a_bad_port_or_agent_before_starting(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    # found by probing the CLI: a port out of range ended in uvicorn's traceback after the
    # store was opened, `--agent ""` served the default agent, and a padded agent id
    # started a server whose every write failed
    db = tmp_path / "never.db"
    result = run(*args, "--db", str(db), code=2)
    assert needle in result.output, result.output
    assert "Traceback" not in result.output
    assert not db.exists()


def test_serve_starts_on_the_embedded_default(tmp_path: Path) -> None:
    port = _free_port()
    # no GRAPHMEM_ (nor NEO4J_, a server store) setting: the default store
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHMEM_", "NEO4J_"))}
    env["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphmem.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        health = None
        for _ in range(300):  # bounded wait for startup
            if proc.poll() is not None:
                break
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert health is not None, proc.stderr.read().decode() if proc.stderr else ""
        assert health.json()["status"] == "ok"
        assert httpx.get(f"http://127.0.0.1:{port}/stats").json()["location"] == "graphmem.db"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert (tmp_path / "graphmem.db").exists()


def test_mcp_starts_on_the_embedded_default(tmp_path: Path) -> None:
    import asyncio

    from mcp import Client, StdioServerParameters

    # no GRAPHMEM_ (nor NEO4J_, a server store) setting: the default store
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHMEM_", "NEO4J_"))}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "graphmem.cli", "mcp"],
        cwd=str(tmp_path),
        env={**env, "HF_HUB_OFFLINE": "1"},
    )

    async def session() -> tuple[set[str], bool]:
        async with Client(params, read_timeout_seconds=60) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            missing = await client.call_tool("history", {"memory_id": "nope"})
            return names, missing.is_error

    names, is_error = asyncio.run(session())
    assert {"remember", "recall", "forget", "reflect", "context", "history"} <= names
    assert is_error and (tmp_path / "graphmem.db").exists()


def test_entities_and_about(db: str) -> None:
    on = {"GRAPHMEM_KNOWLEDGE__ENABLED": "true"}  # the knowledge layer is opt-in
    run("remember", "Jon came by", "--db", db)  # written with the layer off: no entity
    assert "Jon" not in run("entities", "--db", db).stdout
    for text in ("Yesterday I walked with Jon around Lisbon", "We met Jon at the market"):
        run("remember", text, "--db", db, env=on)
    out = run("entities", "--db", db).stdout
    assert "Jon" in out and "Lisbon" in out
    assert run("about", "jon", "--db", db).stdout.splitlines()[0] == "Jon (person), 2 memories"
    assert run_json("about", "jon", "--db", db)["entity"]["name"] == "Jon"
    run("about", "nobody", "--db", db, code=1)
