"""The one switch that runs the backend-fixture suite on Neo4j, and the one skip line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem.config import neo4j_from_env
from tests.neo4j_support import docker_answers

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/contract/test_backend_contract.py::test_protocol_is_implemented"


def _collected(*args: str, env: dict[str, str] | None = None) -> list[str]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            TEST,
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    return [line for line in out.stdout.splitlines() if line.startswith(TEST)]


def test_the_switch_chooses_the_backends_of_the_contract_suite() -> None:
    assert _collected("--backend", "networkx") == [f"{TEST}[networkx]"]
    assert _collected("--backend", "neo4j") == [f"{TEST}[neo4j]"]
    assert _collected(env={"GRAPHMEM_TEST_BACKEND": "neo4j"}) == [f"{TEST}[neo4j]"]


def test_neo4j_variants() -> None:
    """Stands for the neo4j variants of the contract suite when none can run: one skip
    line instead of one per test."""
    if neo4j_from_env() is None and not docker_answers():
        pytest.skip(
            "no Neo4j server: the contract suite ran on networkx only; set GRAPHMEM_URL "
            "(or NEO4J_URI) and run pytest --backend neo4j"
        )
    assert f"{TEST}[neo4j]" in _collected()
