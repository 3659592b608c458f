"""A real uvicorn server on 127.0.0.1 in a thread of the test process (real sockets, real
HTTP), for the tests that go through the network stack."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import uvicorn

from graphmem.config import Settings
from graphmem.server.http import create_app


@contextmanager
def uvicorn_thread(
    settings: Settings, *, join_s: float
) -> Iterator[tuple[str, Callable[[], None]]]:
    """The served app of ``settings``: its base URL and a function that stops it (once or
    more; the server is stopped on the way out anyway, within ``join_s`` seconds)."""
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

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=join_s)
        assert not thread.is_alive()

    try:
        yield f"http://127.0.0.1:{port}", stop
    finally:
        stop()
        sock.close()
