"""What a new user meets first on the command line: --version, --config anywhere, JSON
without embeddings, ``python -m graphmem``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem.cli.app import _config_first
from graphmem.memory import GraphMemory

pytestmark = pytest.mark.embedded(
    "a new user's first commands on the default store file and a config file"
)


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRAPHMEM_EMBEDDER": "hash"}
    env.pop("GRAPHMEM_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "graphmem", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_version_and_python_dash_m(tmp_path: Path) -> None:
    done = _run("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("graphmem ") and len(done.stdout.split()) == 2


def test_config_works_before_and_after_the_command(tmp_path: Path) -> None:
    db = tmp_path / "elsewhere.db"
    with GraphMemory.open(str(db), embedder="hash") as mem:
        mem.remember("Alice drinks green tea", agent_id="a")
    cfg = tmp_path / "graphmem.toml"
    cfg.write_text(f'url = "{db}"\nembedder = "hash"\n')
    for args in (("--config", str(cfg), "list"), ("list", "--config", str(cfg))):
        done = _run(*args, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        assert "Alice drinks green tea" in done.stdout, args
    assert not (tmp_path / "graphmem.db").exists()  # the default store was never opened


def test_json_output_carries_no_embeddings(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with GraphMemory.open(str(db), embedder="hash") as mem:
        mem.remember("Alice drinks green tea", agent_id="a")
        mem.vectors.wait()
        assert mem.list()[0].embedding is not None  # there is one to leave out
    done = _run("recall", "green tea", "--db", str(db), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data and data[0]["memory"]["content"] == "Alice drinks green tea"
    assert "embedding" not in done.stdout


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["list", "--config", "c.toml"], ["--config", "c.toml", "list"]),
        (["list", "--config=c.toml", "-k"], ["--config=c.toml", "list", "-k"]),
        (["remember", "--", "--config", "x"], ["remember", "--", "--config", "x"]),
        (["--config", "c.toml", "list"], ["--config", "c.toml", "list"]),
    ],
)
def test_config_is_moved_before_the_command(argv: list[str], want: list[str]) -> None:
    assert _config_first(argv) == want
