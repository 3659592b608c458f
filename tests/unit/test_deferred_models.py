"""graphmem's pydantic models build their validators on first use (``defer_build``).

Building the ~85 models' validators at import was the largest part of a cold ``graphmem
recall`` that a recall never uses (it validates ~10 of them). pydantic 2.14 builds a
deferred model under one lock, so a first use from many threads at once is safe; these
tests hold both halves: every model defers, and eight threads' first uses agree.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pydantic
from pydantic import BaseModel

import graphmem

#: network surfaces build their models when the server starts; adapters subclass the
#: frameworks' own models
_NOT_IN_THE_CORE = ("graphmem.server", "graphmem.integrations")


def _graphmem_models() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for info in pkgutil.walk_packages(graphmem.__path__, "graphmem."):
        if info.name.startswith(_NOT_IN_THE_CORE) or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseModel) and obj.__module__.startswith("graphmem."):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def test_every_core_model_defers_its_build() -> None:
    models = _graphmem_models()
    assert len(models) > 60
    eager = [m.__qualname__ for m in models if not m.model_config.get("defer_build")]
    assert eager == []


def test_the_pydantic_in_use_builds_deferred_models_under_a_lock() -> None:
    major, minor = (int(x) for x in pydantic.VERSION.split(".")[:2])
    assert (major, minor) >= (2, 14), pydantic.VERSION


def test_a_cold_cli_import_leaves_the_models_it_does_not_use_unbuilt() -> None:
    code = (
        "import graphmem.cli\n"
        "from graphmem.consolidation import ConsolidationReport\n"
        "from graphmem.models import Memory, Edge\n"
        "from graphmem.llm import Summary\n"
        "print([m.__pydantic_complete__ for m in (ConsolidationReport, Memory, Edge, Summary)])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "[False, False, False, False]"


def test_eight_threads_first_using_the_same_models_all_validate() -> None:
    """A new interpreter: eight threads released together each build and use deferred
    models (a node, settings with nested sections, a filter); every one gets the same,
    validated result and bad input still fails with pydantic's error."""
    code = """
import threading
from pydantic import ValidationError
from graphmem.config import Settings
from graphmem.models import Filter, Memory

barrier = threading.Barrier(8)
results, errors = [], []

def use(i):
    try:
        barrier.wait()
        m = Memory(content="Alice prefers tea", agent_id="a", importance=0.5)
        s = Settings(url="memory://", lifecycle={"decay": {"half_life_days": 5.0}})
        f = Filter(equals={"agent_id": "a"}, tags_all=["X"])
        try:
            Memory(content="x", importance=7)
            bad = "accepted"
        except ValidationError:
            bad = "refused"
        half_life = s.lifecycle.decay.half_life_days
        results.append((m.content, m.importance, half_life, f.equals["agent_id"], f.tags_all, bad))
    except BaseException as e:
        errors.append(repr(e))

threads = [threading.Thread(target=use, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
assert len(set(results)) == 1 and len(results) == 8, results
print(results[0])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "('Alice prefers tea', 0.5, 5.0, 'a', ('x',), 'refused')"
