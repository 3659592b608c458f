"""The HTTP API once through a real uvicorn server on 127.0.0.1 (real sockets, real HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from graphmem.config import Settings
from graphmem.memory import GraphMemory
from tests.served import uvicorn_thread


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    settings = Settings(
        url=str(tmp_path / "served.db"), embedder="none", server={"max_body_bytes": 65536}
    )  # type: ignore[arg-type]
    with uvicorn_thread(settings, join_s=30) as (base, _stop):
        yield base


def test_real_server_round_trip(base_url: str, tmp_path: Path) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as http:
        assert http.get("/health").json()["backend"] == "networkx"
        created = http.post(
            "/memories", json={"content": "served over real HTTP", "agent_id": "web"}
        )
        assert created.status_code == 201
        mid = created.json()["id"]

        # concurrent clients over real connections
        def write(i: int) -> int:
            return http.post(
                "/memories", json={"content": f"parallel {i}", "agent_id": "web"}
            ).status_code

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(write, range(40))) == {201}

        hits = http.post("/recall", json={"query": "served", "agent_id": "web"}).json()
        assert [h["memory"]["id"] for h in hits] == [mid]
        listed = http.get("/memories", params={"agent_id": "web", "limit": 1000}).json()
        assert len(listed) == 41
        assert http.post("/memories", json={"content": ""}).status_code == 422
        assert (
            http.post(
                "/memories", content=b"x" * 70_000, headers={"content-type": "application/json"}
            ).status_code
            == 413
        )
        assert http.get(f"/memories/{mid}").json()["content"] == "served over real HTTP"
        assert "paths" in http.get("/openapi.json").json()


@pytest.mark.embedded("a uvicorn process serves a store file; the test reads the file after it")
def test_writes_survive_the_server(base_url: str, tmp_path: Path) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as http:
        http.post("/memories", json={"content": "durable through the API"})
    with GraphMemory.open(str(tmp_path / "served.db"), embedder=None) as mem:
        assert [m.content for m in mem.list()] == ["durable through the API"]
