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

Tests of the API that open their own stores (options given to ``GraphMemory.open``, a store
reopened, an async facade, a server) take ``stores`` (:class:`Stores`) or ``store_mem``:
they run on Neo4j when the switch names it alone (``--backend neo4j``), else on the embedded
store. A test that is about the embedded store itself (its SQLite file, its journal, several
processes on one file) opens it directly and says so with ``@pytest.mark.embedded("why")``;
``tests/unit/test_store_switch.py`` holds every test to one or the other.
"""

from __future__ import annotations

import os
from collections import Counter
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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "embedded(reason): tests the embedded store itself (its file, its journal, processes "
        "on one file), so it runs there whatever --backend says",
    )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """Skips as one line per reason with its count: without a Neo4j server over a hundred
    tests skip for the same long reason. ``-rs`` (or ``-ra``) lists every place instead."""
    if set(config.option.reportchars or "") & set("saA"):
        return
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if reasons:
        terminalreporter.write_sep("-", "skipped, by reason (-rs lists each test)")
        for reason, count in reasons.most_common():
            terminalreporter.write_line(f"{count:5d}  {reason}")


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


def store_kind(config: pytest.Config) -> str:
    """The backend of the tests that open their own stores: Neo4j when the switch names it
    alone, else the embedded store (the contract suite covers both either way)."""
    return "neo4j" if _chosen(config) == ["neo4j"] else "networkx"


class Stores:
    """Opens a test's own stores on the switch's backend (:func:`store_kind`).

    ``open(name, **options)`` is ``GraphMemory.open`` on that backend: the embedded file
    ``tmp_path / name``, or the live Neo4j database (``auth``/``database`` from the
    environment, see tests/neo4j_support.py). Opening ``name`` again reopens the same store;
    another name is another, empty store — on Neo4j the one database emptied, so a test
    that holds two separate stores open at once fails there (mark it ``embedded``).
    Whatever a test leaves open is closed after it."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.kind = store_kind(request.config)
        self._request = request
        self._tmp = tmp_path
        self._name: str | None = None
        self._opened: list[GraphMemory] = []

    def url(self, name: str = "store.db") -> str:
        """Where store ``name`` lives: its file, or the Neo4j server's URL."""
        if self.kind == "networkx":
            return str(self._tmp / name)
        from tests.neo4j_support import neo4j_target

        target = neo4j_target(self._request)
        if name != self._name:
            if any(not m._closed for m in self._opened):
                pytest.fail(f"store {name!r} beside {self._name!r}: Neo4j has one database")
            target.wipe()
            self._name = name
        return target.uri

    def connection(self) -> dict[str, Any]:
        """The ``auth``/``database`` arguments of ``open`` for this backend."""
        if self.kind == "networkx":
            return {}
        from tests.neo4j_support import neo4j_target

        target = neo4j_target(self._request)
        return {"auth": target.auth, "database": target.database}

    def open(self, name: str = "store.db", **options: Any) -> GraphMemory:
        url = self.url(name)
        m = GraphMemory.open(url, **{**self.connection(), **options})
        self._opened.append(m)
        return m

    def open_async(self, name: str = "store.db", **options: Any) -> Any:
        """``AsyncGraphMemory.open`` of store ``name`` (await it, or ``async with`` it)."""
        from graphmem.aio import AsyncGraphMemory

        return AsyncGraphMemory.open(self.url(name), **{**self.connection(), **options})

    def close(self) -> None:
        for m in self._opened:
            m.close()


@pytest.fixture
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Opens the test's own stores on the backend the switch chose (see :class:`Stores`)."""
    s = Stores(request, tmp_path)
    yield s
    s.close()


@pytest.fixture
def store_mem(stores: Stores) -> GraphMemory:
    """A GraphMemory without embeddings on the switch's backend (see :class:`Stores`)."""
    return stores.open(embedder=None)
