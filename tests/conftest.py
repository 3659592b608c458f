"""Shared fixtures: one test runs once per backend through the ``backend`` fixture.

networkx always runs (a fresh SQLite file per test). neo4j runs when a server is reachable
(GRAPHMEM_URL, else NEO4J_URI, else a testcontainer when Docker answers) and skips with the
reason otherwise — see tests/neo4j_support.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from graphmem.backends.base import GraphBackend
from graphmem.backends.embedded import NetworkXBackend
from graphmem.memory import GraphMemory

BACKENDS = ["networkx", "neo4j"]


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


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphBackend]:
    b = make_backend(request.param, request, tmp_path)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def mem(backend: GraphBackend) -> Iterator[GraphMemory]:
    """A GraphMemory without embeddings over each backend."""
    m = GraphMemory(backend, embedder=None, owns_backend=False)
    yield m
    m.close()


@pytest.fixture
def nxmem(tmp_path: Path) -> Iterator[GraphMemory]:
    """A GraphMemory on a fresh embedded file, without embeddings."""
    m = GraphMemory.open(str(tmp_path / "mem.db"), embedder=None)
    yield m
    m.close()
