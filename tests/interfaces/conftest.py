"""Fixtures of the interface tests: a fresh embedded store and an HTTP client over it."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from graphmem.config import ApiKey, ServerSettings, Settings
from graphmem.memory import GraphMemory
from graphmem.server.http import create_app
from tests.conftest import Stores

KEYS = {
    "alice-key-123": ("alice", ("default",)),
    "bob-key-4567": ("bob", ("default", "team")),
    "admin-key-89": ("admin", ("*",)),
}


def snapshot(mem: GraphMemory) -> str:
    """The whole store as text (an export), to prove a failed request changed nothing."""
    buf = io.StringIO()
    mem.transfer.export(buf)
    return buf.getvalue()


@pytest.fixture
def store(stores: Stores) -> GraphMemory:
    """A GraphMemory without embeddings on the switch's backend (tests/conftest.py)."""
    return stores.open("api.db", embedder=None)


@pytest.fixture
def client(store: GraphMemory) -> Iterator[TestClient]:
    """An open HTTP API (no keys) over ``store``."""
    with TestClient(create_app(store)) as c:
        yield c


def keyed_settings(**server: object) -> Settings:
    keys = tuple(ApiKey(key=k, agent_id=a, namespaces=ns) for k, (a, ns) in KEYS.items())
    return Settings(embedder="none", server=ServerSettings(api_keys=keys, **server))  # type: ignore[arg-type]


@pytest.fixture
def keyed(store: GraphMemory) -> Iterator[TestClient]:
    """An HTTP API over ``store`` that requires one of KEYS."""
    with TestClient(create_app(store, settings=keyed_settings())) as c:
        yield c


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
