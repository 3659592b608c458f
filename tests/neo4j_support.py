"""A Neo4j server for the test suite, or a skip that says how to get one.

Where the server comes from, in order:

1. the Neo4j server the environment names: ``GRAPHMEM_URL`` (with ``GRAPHMEM_USERNAME`` /
   ``GRAPHMEM_PASSWORD`` and optionally ``GRAPHMEM_DATABASE``), else ``NEO4J_URI`` (with
   ``NEO4J_USER`` / ``NEO4J_PASSWORD`` / ``NEO4J_DATABASE``) — graphmem's one convention
   (:func:`graphmem.config.neo4j_from_env`);
2. a throwaway ``neo4j:5`` container started with testcontainers when a Docker engine answers;
3. otherwise every Neo4j test is skipped with :data:`ENABLE_HELP` as the reason.

Isolation: each test starts from an empty database (nodes deleted, the vector index dropped
so each test can choose its embedding dimension). Because that destroys data, it is only
done when the database was empty when the session first looked at it, when it is a fresh
container, or when ``GRAPHMEM_NEO4J_ALLOW_WIPE=1`` (a test-only switch graphmem's settings
recognise and ignore) says the database is disposable; any
other database makes the tests skip with the reason instead of touching it.

The test helper talks to the server with the driver directly for the wipe (test-only
statements, not part of graphmem's query files).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest

from graphmem.backends.neo4j import Neo4jBackend
from graphmem.backends.neo4j.queries import VECTOR_INDEX
from graphmem.config import neo4j_from_env

ENABLE_HELP = (
    "set GRAPHMEM_URL=bolt://HOST:7687 with GRAPHMEM_USERNAME/GRAPHMEM_PASSWORD "
    "(or NEO4J_URI/NEO4J_USER/NEO4J_PASSWORD), or run Docker for a neo4j:5 container"
)
WIPE_OPT_IN = "GRAPHMEM_NEO4J_ALLOW_WIPE"
CONTAINER_IMAGE = "neo4j:5"
CONTAINER_PASSWORD = "graphmem-test-password"


@dataclass
class Neo4jTarget:
    """Where the session's Neo4j tests run."""

    uri: str
    auth: tuple[str, str] | None
    database: str | None
    source: str
    driver: Any = field(default=None, repr=False)

    def backend(self, **options: Any) -> Neo4jBackend:
        """A new backend on this server (the caller closes it)."""
        return Neo4jBackend(self.uri, auth=self.auth, database=self.database, **options)

    def wipe(self) -> None:
        """Empty the database and drop the vector index (its dimension is per test)."""
        self.driver.execute_query("MATCH (n) DETACH DELETE n", database_=self.database)
        self.driver.execute_query(f"DROP INDEX {VECTOR_INDEX} IF EXISTS", database_=self.database)

    def node_count(self) -> int:
        records, _summary, _keys = self.driver.execute_query(
            "MATCH (n) RETURN count(n) AS n", database_=self.database
        )
        return int(records[0]["n"])


_target: Neo4jTarget | None = None
_skip_reason: str | None = None


def docker_answers() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no SDK, no socket, no permission: all mean "no Docker here"
        return False


def _start_container(request: pytest.FixtureRequest) -> tuple[str, tuple[str, str]]:
    from testcontainers.community.neo4j import Neo4jContainer

    container = Neo4jContainer(CONTAINER_IMAGE, password=CONTAINER_PASSWORD)
    container.start()
    request.config.add_cleanup(container.stop)
    return container.get_connection_url(), ("neo4j", CONTAINER_PASSWORD)


def neo4j_target(request: pytest.FixtureRequest) -> Neo4jTarget:
    """The session's Neo4j server (found once), or ``pytest.skip`` with the reason."""
    global _target, _skip_reason
    if _skip_reason is not None:
        pytest.skip(_skip_reason)
    if _target is not None:
        return _target
    import neo4j

    env = os.environ
    found = neo4j_from_env(env)
    database: str | None = None
    auth: tuple[str, str] | None
    if found is not None:
        uri, auth, database = found
        source = "environment"
    elif docker_answers():
        try:
            uri, auth = _start_container(request)
        except Exception as e:
            _skip_reason = f"could not start a {CONTAINER_IMAGE} container ({e}). {ENABLE_HELP}"
            pytest.skip(_skip_reason)
        source = "testcontainers"
    else:
        _skip_reason = f"no Neo4j server: {ENABLE_HELP}"
        pytest.skip(_skip_reason)

    probe = Neo4jBackend(uri, auth=auth, database=database)
    health = probe.health()
    probe.close()
    if not health["ok"]:
        _skip_reason = f"Neo4j at {uri} did not answer: {health['error']}. {ENABLE_HELP}"
        pytest.skip(_skip_reason)
    driver = neo4j.GraphDatabase.driver(uri, auth=auth)
    target = Neo4jTarget(uri, auth, database, source, driver=driver)
    request.config.add_cleanup(target.driver.close)
    existing = target.node_count()
    if existing and source != "testcontainers" and env.get(WIPE_OPT_IN) != "1":
        _skip_reason = (
            f"the database {database or '(default)'} at {uri} holds {existing} nodes that this "
            "test session did not write, and graphmem's Neo4j tests empty the database before "
            f"each test. Point GRAPHMEM_DATABASE at an empty database, or set {WIPE_OPT_IN}=1 if "
            "its data may be deleted"
        )
        pytest.skip(_skip_reason)
    _target = target
    return target


def neo4j_backend(request: pytest.FixtureRequest, **options: Any) -> Neo4jBackend:
    """A backend on an emptied database (see the module docstring); skips without a server."""
    target = neo4j_target(request)
    target.wipe()
    return target.backend(**options)
