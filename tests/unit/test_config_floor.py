"""The settings sit at the bottom of the house: graphmem/config imports nothing of graphmem
but graphmem.errors and graphmem.models (and its own modules).

Every import counts here, not only those run at import time: a lazy import inside a
function or one under ``TYPE_CHECKING`` is still an arrow from the settings up to what acts on
them, which is what the floor forbids.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_import_cycles import PKG

CONFIG = PKG / "config"
ALLOWED = ("graphmem.config", "graphmem.errors", "graphmem.models")


def graphmem_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of graphmem in the file, wherever it stands."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("graphmem")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # a relative import stays inside the config package
                continue
            module = node.module or ""
            if module == "graphmem":  # ``from graphmem import x``: x is a part of its own
                found += [(node.lineno, f"graphmem.{a.name}") for a in node.names]
            elif module.startswith("graphmem."):
                found.append((node.lineno, module))
    return found


def _allowed(module: str) -> bool:
    return any(module == a or module.startswith(a + ".") for a in ALLOWED)


def test_config_imports_only_errors_and_models() -> None:
    files = sorted(CONFIG.rglob("*.py"))
    assert files, "graphmem/config has no modules"
    wrong = [
        f"{path.relative_to(PKG.parent)}:{line} imports {module}"
        for path in files
        for line, module in graphmem_imports(path)
        if not _allowed(module)
    ]
    assert not wrong, "config reaches above errors/models:\n" + "\n".join(wrong)


def test_the_check_sees_lazy_and_annotation_only_imports(tmp_path: Path) -> None:
    # the check itself must be able to fail: an import in a function and one under
    # TYPE_CHECKING are found as well as one at the top
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "from graphmem.errors import ConfigError\n"
        "import graphmem.models.scoring\n"
        "if TYPE_CHECKING:\n"
        "    from graphmem.memory import GraphMemory\n"
        "def f():\n"
        "    from graphmem.llm import OfflineLLM\n"
        "    from graphmem import scoping\n"
        "    from . import store\n",
        encoding="utf-8",
    )
    found = graphmem_imports(src)
    assert sorted(m for _, m in found if not _allowed(m)) == [
        "graphmem.llm",
        "graphmem.memory",
        "graphmem.scoping",
    ]
