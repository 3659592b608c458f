"""Shared fixtures: one test runs once per backend through the ``backend`` fixture.

networkx always runs (a fresh SQLite file per test). neo4j runs when a server is reachable
(GRAPHMEM_URL, else NEO4J_URI, else a testcontainer when Docker answers) and skips with the
reason otherwise — see tests/neo4j_support.py. When none can be reachable (no Neo4j URL in
the environment, no Docker), the neo4j variants are not generated and one test,
``test_neo4j_variants``, skips with the one reason.

The switch: ``pytest --backend neo4j`` (or ``GRAPHMEM_TEST_BACKEND=neo4j``) runs the
``backend``-fixture suite on Neo4j only; ``--backend networkx`` on the embedded store only;
the default, ``all``, both.

``mem`` (a GraphMemory over ``backend``) is defined here only; a module that needs other
options (a fixed clock, no reconciliation, no knowledge layer) overrides ``mem_options``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from graphmem.backends.base import GraphBackend
from graphmem.backends.embedded import NetworkXBackend
from graphmem.memory import GraphMemory

BACKENDS = ["networkx", "neo4j"]
BACKEND_ENV = "GRAPHMEM_TEST_BACKEND"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=["all", *BACKENDS],
        default=None,
        help=f"backends of the backend-fixture suite (default: ${BACKEND_ENV}, else all)",
    )


def _chosen(config: pytest.Config) -> list[str]:
    choice = config.getoption("--backend") or os.environ.get(BACKEND_ENV) or "all"
    if choice not in ("all", *BACKENDS):
        raise pytest.UsageError(f"{BACKEND_ENV} must be all, networkx or neo4j, not {choice!r}")
    return list(BACKENDS) if choice == "all" else [choice]


def _neo4j_possible() -> bool:
    """Whether a Neo4j server could be found, without connecting (the fixture probes it)."""
    from graphmem.config import neo4j_from_env
    from tests.neo4j_support import docker_answers

    return neo4j_from_env() is not None or docker_answers()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    kinds = _chosen(metafunc.config)
    explicit = metafunc.config.getoption("--backend") or os.environ.get(BACKEND_ENV)
    if "neo4j" in kinds and not explicit and not _cached_possible(metafunc.config):
        kinds = [k for k in kinds if k != "neo4j"]  # said once, by test_neo4j_variants
    metafunc.parametrize("backend", kinds, indirect=True)


def _cached_possible(config: pytest.Config) -> bool:
    cache = config.stash.setdefault(_POSSIBLE, [])
    if not cache:
        cache.append(_neo4j_possible())
    return bool(cache[0])


_POSSIBLE = pytest.StashKey[list[bool]]()


@pytest.fixture(autouse=True, scope="session")
def _model_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """An ONNX export of the embedding model made by a test goes to a temporary directory,
    never to the user's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRAPHMEM_CACHE_DIR", str(tmp_path_factory.mktemp("model-cache")))
        yield


def make_backend(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> GraphBackend:
    if kind == "networkx":
        return NetworkXBackend(tmp_path / "store.db")
    from tests.neo4j_support import neo4j_backend

    return neo4j_backend(request)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphBackend]:
    b = make_backend(request.param, request, tmp_path)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def twin(
    backend: GraphBackend, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[GraphBackend]:
    """A second handle on ``backend``'s store (its own file handle / its own driver)."""
    if request.node.callspec.params["backend"] == "networkx":
        b: GraphBackend = NetworkXBackend(tmp_path / "store.db")
    else:
        from tests.neo4j_support import neo4j_target

        b = neo4j_target(request).backend()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def mem_options() -> dict[str, Any]:
    """Extra GraphMemory arguments of ``mem`` (a module overrides this fixture)."""
    return {}


@pytest.fixture
def mem(backend: GraphBackend, mem_options: dict[str, Any]) -> Iterator[GraphMemory]:
    """A GraphMemory without embeddings over each backend (``mem_options`` added)."""
    m = GraphMemory(backend, **{"embedder": None, "owns_backend": False, **mem_options})
    yield m
    m.close()


@pytest.fixture
def nxmem(tmp_path: Path) -> Iterator[GraphMemory]:
    """A GraphMemory on a fresh embedded file, without embeddings."""
    m = GraphMemory.open(str(tmp_path / "mem.db"), embedder=None)
    yield m
    m.close()
