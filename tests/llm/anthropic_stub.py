"""A local HTTP stub of the Anthropic Messages API (``POST /v1/messages``).

It serves scripted replies first (canned answers, HTTP errors such as 429/529, malformed
bodies, answers sent a byte at a time) and otherwise answers automatically with a valid tool
call for graphmem's passes, so the real ``anthropic`` SDK can be exercised end to end over
real HTTP on 127.0.0.1. Used by the tests in this folder and by ``benchmarks/consolidation.py``.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Reply", "StubAnthropic", "auto_reply", "error_reply", "text_reply", "tool_reply"]


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict -> JSON; str/bytes -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    #: seconds between the bytes of the whole response, status line and headers included
    #: (a slow server whose every read arrives well within a read timeout); 0: at once
    drip: float = 0.0


def _message(content: list[dict[str, Any]], usage: tuple[int, int], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": "stub-model",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def tool_reply(
    name: str, data: Any, usage: tuple[int, int] = (100, 20), stop: str = "tool_use"
) -> Reply:
    """A successful answer that calls tool ``name`` with ``data`` as its input."""
    block = {"type": "tool_use", "id": "toolu_stub", "name": name, "input": data}
    return Reply(200, _message([block], usage, stop))


def text_reply(text: str, usage: tuple[int, int] = (100, 20), stop: str = "end_turn") -> Reply:
    """A successful answer with a text block only (no tool call)."""
    return Reply(200, _message([{"type": "text", "text": text}], usage, stop))


def error_reply(
    status: int, etype: str, message: str = "stub error", retry_after_ms: str | None = "1"
) -> Reply:
    """An API error in the Messages API error shape (retry-after-ms keeps retries fast)."""
    headers = {"retry-after-ms": retry_after_ms} if retry_after_ms is not None else {}
    return Reply(status, {"type": "error", "error": {"type": etype, "message": message}}, headers)


_ID_RE = re.compile(r'<memory id="([^"]+)"')


def auto_reply(body: dict[str, Any]) -> Reply:
    """A valid answer for whichever graphmem pass the request forces (by tool name);
    token usage is estimated from the sizes of request and answer (chars / 4)."""
    name = body.get("tool_choice", {}).get("name", "")
    user = "".join(
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in body.get("messages", [])
    )
    ids = _ID_RE.findall(user)
    data: dict[str, Any]
    if name == "record_summarize":
        data = {"summary": f"Synthesis of {len(ids)} memories."}
    elif name == "record_improve":
        data = {"rewrites": [], "contradictions": []}
    elif name == "record_extract_facts":
        data = {"facts": []}
    elif name == "record_reflect":
        data = {"answer": "Answer from the memories.", "cited_ids": ids[:1]}
    else:
        return error_reply(400, "invalid_request_error", f"unknown tool {name!r}", None)
    size_in = len(json.dumps(body)) // 4
    size_out = len(json.dumps(data)) // 4 + 10
    return tool_reply(name, data, usage=(size_in, size_out))


class StubAnthropic:
    """``with StubAnthropic() as stub: AnthropicLLM(base_url=stub.url, api_key="test")``."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply] = auto_reply) -> None:
        self.responder = responder
        self.script: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                with stub.lock:
                    stub.requests.append(
                        {
                            "path": self.path,
                            "json": body,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                        }
                    )
                    reply = stub.script.popleft() if stub.script else None
                if reply is None:
                    reply = stub.responder(body)
                payload = reply.body
                data = (
                    json.dumps(payload).encode()
                    if isinstance(payload, dict | list)
                    else payload.encode()
                    if isinstance(payload, str)
                    else payload or b""
                )
                headers = {
                    "content-type": "application/json",
                    "content-length": str(len(data)),
                    **reply.headers,
                }
                if reply.drip:
                    self._drip(reply, headers, data)
                    return
                self.send_response(reply.status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _drip(self, reply: Reply, headers: dict[str, str], data: bytes) -> None:
                head = f"HTTP/1.1 {reply.status} Stub\r\n" + "".join(
                    f"{k}: {v}\r\n" for k, v in headers.items()
                )
                raw = (head + "\r\n").encode() + data
                for i in range(len(raw)):
                    if stub.stopping.wait(reply.drip):
                        return  # the test is over: let the server stop now
                    try:
                        self.wfile.write(raw[i : i + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up
                        return
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *replies: Reply) -> None:
        """Queue replies served before the automatic ones, in order."""
        with self.lock:
            self.script.extend(replies)

    def start(self) -> StubAnthropic:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> StubAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
