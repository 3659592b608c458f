"""First-run polish of the command line: help without value hints on flags, a plain install
asking for the server extras in one line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from graphmem.cli import app


def _command_paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, sub in getattr(command, "commands", {}).items():
        paths += _command_paths(sub, (*prefix, name))
    return paths


def test_help_shows_no_value_hint_on_flags() -> None:
    runner = CliRunner()
    paths = _command_paths(get_command(app))
    assert ("forget",) in paths and ("org", "publish") in paths
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], terminal_width=100)
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, path
    forget = runner.invoke(app, ["forget", "--help"], terminal_width=100).output
    assert "--dry-run" in forget and "<str>" in forget  # options with values keep theirs


def test_the_command_list_shows_each_summary_as_one_paragraph() -> None:
    """A docstring's first paragraph is wrapped at 100 columns in the source; in the list of
    ``graphmem --help`` those line breaks made ragged rows."""
    listing = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "400"}).output
    rows = [line for line in listing.splitlines() if line.startswith("│ mcp ")]
    assert len(rows) == 1 and "reflect" in rows[0] and "key's agent" in rows[0], listing


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_servers_on_a_plain_install_name_the_extra(command: str) -> None:
    # a plain install: the server libraries cannot be imported
    code = textwrap.dedent(f"""
        import sys
        for name in ("fastapi", "uvicorn", "mcp", "starlette"):
            sys.modules[name] = None
        sys.argv = ["graphmem", "{command}", "--db", "memory://", "--embedder", "none"]
        from graphmem.cli import main
        main()
    """)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    # graphmem is installed from a clone (README), not from a package index
    assert len(lines) == 1 and "pip install -e '.[server]'" in lines[0], done.stderr
