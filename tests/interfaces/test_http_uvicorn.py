"""The HTTP API once through a real uvicorn server on 127.0.0.1 (real sockets, real HTTP)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import uvicorn

from graphmem.config import Settings
from graphmem.memory import GraphMemory
from graphmem.server.http import create_app


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    settings = Settings(
        url=str(tmp_path / "served.db"), embedder="none", server={"max_body_bytes": 65536}
    )  # type: ignore[arg-type]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(400):  # bounded wait for startup (not a timing assertion)
        if server.started or not thread.is_alive():
            break
        time.sleep(0.025)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
    assert not thread.is_alive()


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
