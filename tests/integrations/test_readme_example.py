"""Every framework-adapter example (README's section and docs/integrations.md) runs as printed.

Each ```python block is taken from the file as it stands and executed in a fresh namespace;
what it prints must equal the ``# -> …`` comments it carries, in order (the README's LangGraph
block prints the value its text shows). A block is skipped, with the reason, only when the
framework its ``graphmem.integrations`` import needs is not installed.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs" / "integrations.md"

# adapter module -> (the framework module it imports, the extra that installs it)
FRAMEWORKS = {
    "langgraph": ("langgraph.store.base", "langgraph"),
    "langchain": ("langchain_core", "langchain"),
    "llamaindex": ("llama_index.core", "llamaindex"),
    "openai_agents": ("agents", "openai-agents"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
}
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_ADAPTER = re.compile(r"graphmem\.integrations\.(\w+)")
_EXPECTED = re.compile(r"#\s*->\s*(.*)$", re.M)


def _blocks(path: Path, start: str = "") -> list[tuple[str, str]]:
    text = path.read_text(encoding="utf-8")
    if start:  # only that section: from its heading to the next one
        text = text[text.index(start) + len(start) :].split("\n## ", 1)[0]
    found = []
    for code in _BLOCK.findall(text):
        adapters = set(_ADAPTER.findall(code))
        assert len(adapters) == 1, f"a block in {path.name} imports {adapters or 'no adapter'}"
        found.append((adapters.pop(), code))
    return found


README_BLOCKS = _blocks(README, "\n## Framework adapters\n")
DOC_BLOCKS = _blocks(DOCS)


def _run(code: str, origin: str, adapter: str) -> None:
    module, extra = FRAMEWORKS[adapter]
    try:
        found = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # its parent package is absent
        found = None
    if found is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[{extra}]')")
    exec(compile(code, origin, "exec"), {"__name__": "__example__"})


def test_every_adapter_has_an_example() -> None:
    shown = {adapter for adapter, _ in README_BLOCKS + DOC_BLOCKS}
    assert shown == set(FRAMEWORKS)
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250
    assert "docs/integrations.md" in README.read_text(encoding="utf-8")


@pytest.fixture
def example_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # the hash embedder keeps each example fast and free of model files; the printed
    # lines do not depend on which embedder ranks a store of one or two memories
    monkeypatch.setenv("GRAPHMEM_EMBEDDER", "hash")


@pytest.mark.usefixtures("example_env")
def test_readme_langgraph_example_runs_as_printed(capsys: pytest.CaptureFixture[str]) -> None:
    (adapter, code), *_ = README_BLOCKS
    _run(code, "README.md", adapter)
    assert capsys.readouterr().out.strip() == "{'content': 'Alice is vegetarian'}"


@pytest.mark.usefixtures("example_env")
@pytest.mark.parametrize(("adapter", "code"), DOC_BLOCKS, ids=[a for a, _ in DOC_BLOCKS])
def test_docs_example_runs_as_printed(
    adapter: str, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = [line.strip() for line in _EXPECTED.findall(code)]
    assert expected, "the example shows what it prints"
    _run(code, "docs/integrations.md", adapter)
    assert capsys.readouterr().out.strip().splitlines() == expected
