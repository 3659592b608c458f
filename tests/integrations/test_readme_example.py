"""The README's framework-adapter example runs as printed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base", reason="langgraph is not installed")

README = Path(__file__).resolve().parents[2] / "README.md"


def test_adapter_example_runs_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Framework adapters\n") :]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRAPHMEM_EMBEDDER", "hash")
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "{'content': 'Alice is vegetarian'}"
