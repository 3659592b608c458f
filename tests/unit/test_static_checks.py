"""ruff and mypy (strict on the package) are part of the test suite, so CI runs them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_is_clean() -> None:
    out = _run("ruff", "check", "graphmem", "tests", "benchmarks")
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_is_clean() -> None:
    out = _run("ruff", "format", "--check", "graphmem", "tests", "benchmarks")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_on_the_package_is_clean() -> None:
    out = _run("mypy", "graphmem")
    assert out.returncode == 0, out.stdout + out.stderr
