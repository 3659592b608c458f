"""The public names are pinned: removing or renaming one must be a conscious change."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

import graphmem

PUBLIC = {
    "LLM",
    "PRESETS",
    "AccessDenied",
    "Agent",
    "AnthropicLLM",
    "AsyncGraphMemory",
    "BackendError",
    "BackendUnavailable",
    "Category",
    "ConfigError",
    "Conflict",
    "DimensionMismatch",
    "Edge",
    "EdgeType",
    "EventType",
    "Filter",
    "ForgetReport",
    "GraphMemError",
    "GraphMemory",
    "ImportReport",
    "InvalidInput",
    "LLMError",
    "LLMResponseError",
    "LLMUnavailable",
    "LifecycleConfig",
    "Memory",
    "NodeLabel",
    "NotFound",
    "NullMemory",
    "OfflineLLM",
    "OrgConfig",
    "OrgFact",
    "QueryFailed",
    "RankWeights",
    "RecallConfig",
    "RecallResult",
    "RetentionPolicy",
    "Run",
    "RunLimits",
    "RunStatus",
    "Scope",
    "Settings",
    "Status",
    "Tag",
    "Tier",
    "Visibility",
    "WriteRule",
    "__version__",
    "migrate",
}


def test_all_is_pinned_and_importable() -> None:
    assert set(graphmem.__all__) == PUBLIC
    for name in graphmem.__all__:
        assert getattr(graphmem, name) is not None


def test_every_error_derives_from_the_root() -> None:
    from graphmem import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.GraphMemError)


def test_import_is_light_and_offline() -> None:
    """Importing graphmem loads no model, SDK client or server framework."""
    code = (
        "import sys, graphmem; heavy = [m for m in ('torch', 'sentence_transformers', "
        "'anthropic', 'neo4j', 'fastapi', 'mcp', 'uvicorn') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _loaded_after(statement: str, modules: tuple[str, ...]) -> list[str]:
    code = f"import sys; {statement}; print([m for m in {modules!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(ast.literal_eval(out.stdout.strip()))


def test_import_graphmem_is_lazy() -> None:
    """``import graphmem`` defines the public names without loading them; the first use of
    a name loads its module (and only what that module needs)."""
    heavy = ("pydantic", "numpy", "networkx", "graphmem.memory", "graphmem.models", "asyncio")
    assert _loaded_after("import graphmem", heavy) == []
    assert _loaded_after("import graphmem; graphmem.NotFound", heavy) == []
    loaded = _loaded_after("from graphmem import Memory", heavy)
    assert loaded == ["pydantic", "numpy", "graphmem.models"]
    assert "graphmem.memory" in _loaded_after("from graphmem import GraphMemory", heavy)
    assert sorted(dir(graphmem)) == sorted(set(dir(graphmem)) | PUBLIC)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        graphmem.nothing_here  # noqa: B018


def test_migrate_is_the_function_whichever_is_imported_first() -> None:
    code = (
        "import graphmem.migrate, graphmem; from graphmem.migrate import migrate; "
        "print(type(graphmem.migrate('memory://', 'memory://')).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "MigrationReport"
    assert graphmem.migrate is not None and callable(graphmem.migrate)


def test_docstring_examples_run() -> None:
    import doctest

    import graphmem.memory
    import graphmem.opening

    for module in (graphmem, graphmem.memory, graphmem.opening):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
