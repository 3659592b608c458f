"""The HTTP API: a FastAPI app whose handlers are a few lines each over GraphMemory.

>>> from fastapi.testclient import TestClient
>>> from graphmem import GraphMemory
>>> with GraphMemory.open("memory://", embedder=None) as mem:
...     client = TestClient(create_app(mem))
...     r = client.post("/memories", json={"content": "Alice prefers tea"})
...     (r.status_code, client.get(f"/memories/{r.json()['id']}").json()["content"])
(201, 'Alice prefers tea')

Errors are JSON bodies ``{"error": <type>, "detail": <message>}`` with these statuses:
InvalidInput and malformed requests 422, a missing or unknown API key 401, AccessDenied
(outside the key's agent or namespaces) 403, NotFound 404, Conflict 409, a body over
``server.max_body_bytes`` 413, BackendUnavailable / LLMUnavailable 503, LLMResponseError 502.

Authentication is optional: with ``server.api_keys`` configured every route but ``/health``
and the OpenAPI documents needs ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``. A key
acts as one agent: writes are attributed to it, reads are limited to what it may read
(:mod:`graphmem.scoping`) in its allowed namespaces, and store-wide operations (stats,
consolidation) need a key whose namespaces include ``"*"``. A read of one memory it may not
read is 403; a read that returns several (a history, a run's events, a list) leaves out
those it may not read — e.g. the versions of a memory from before it was moved, with new
content, out of a namespace the key cannot see.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graphmem.config import Settings
from graphmem.errors import (
    AccessDenied,
    BackendUnavailable,
    Conflict,
    GraphMemError,
    InvalidInput,
    LLMResponseError,
    LLMUnavailable,
    NotFound,
)
from graphmem.memory import GraphMemory
from graphmem.opening import open_memory
from graphmem.server.auth import check_bind
from graphmem.server.principal import Principal, _version
from graphmem.server.routes import router
from graphmem.server.schemas import (
    ErrorBody,
)

__all__ = ["Principal", "create_app", "serve"]

log = logging.getLogger("graphmem.server.http")

# typed errors -> HTTP status, most specific first
_STATUS: tuple[tuple[type[GraphMemError], int], ...] = (
    (InvalidInput, 422),
    (NotFound, 404),
    (Conflict, 409),
    (AccessDenied, 403),
    (BackendUnavailable, 503),
    (LLMUnavailable, 503),
    (LLMResponseError, 502),
)


def _error(status_code: int, error: str, detail: str, **extra: Any) -> JSONResponse:
    body = ErrorBody(error=error, detail=detail, **extra).model_dump(exclude_none=True)
    return JSONResponse(body, status_code=status_code)


async def _on_graphmem_error(request: Request, exc: Exception) -> JSONResponse:
    code = next((c for t, c in _STATUS if isinstance(exc, t)), 500)
    if code >= 500:
        log.warning(
            "request failed: %s %s -> %s", request.method, request.url.path, type(exc).__name__
        )
    return _error(code, type(exc).__name__, str(exc))


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in exc.errors()]
    summary = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:5])
    return _error(
        422, "InvalidInput", summary or "invalid request", errors=jsonable_encoder(errors)
    )


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400:
        # FastAPI's answer to a body its JSON parser gave up on (nested too deeply, not
        # UTF-8, a number too long to convert): malformed JSON, as every other is
        return _error(
            422,
            "InvalidInput",
            "the body is not JSON that can be read (nested too deeply, not UTF-8, or a "
            "number too long)",
        )
    names = {
        401: "Unauthorized",
        404: "NotFound",
        405: "MethodNotAllowed",
        413: "ContentTooLarge",
        501: "NotImplemented",
    }
    resp = _error(exc.status_code, names.get(exc.status_code, "HTTPError"), str(exc.detail))
    for k, v in (exc.headers or {}).items():
        resp.headers[k] = v
    return resp


class _TooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


class _BodyLimit:
    """Refuse request bodies over ``limit`` bytes with the JSON 413 of every other error:
    at once when Content-Length says so, else as soon as the streamed body passes it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await _send_too_large(send, self.limit)
            return
        seen = 0
        started = False

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:  # inside a route: the app's 413 handler answers
                    raise _TooLarge(self.limit)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, tracked)
        except _TooLarge:
            if started:
                raise
            await _send_too_large(send, self.limit)


async def _send_too_large(send: Send, limit: int) -> None:
    response = _error(413, "ContentTooLarge", _TooLarge(limit).detail)
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(response.body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": response.body})


def create_app(
    target: GraphMemory | Settings | None = None, *, settings: Settings | None = None
) -> FastAPI:
    """The HTTP API over a GraphMemory (which the caller keeps and closes), or over the store
    that ``Settings`` describe (opened when the app starts, closed when it stops; default:
    ``Settings()``, the embedded ``./graphmem.db``). Auth and limits come from ``settings``
    (default: the GraphMemory's own settings, if it has some)."""
    mem = target if isinstance(target, GraphMemory) else None
    if settings is None:
        if isinstance(target, Settings):
            settings = target
        elif mem is not None and isinstance(mem.settings, Settings):
            settings = mem.settings
        else:
            settings = Settings()
    cfg = settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if app.state.graphmem is not None:
            yield
            return
        import anyio.to_thread

        opened = await anyio.to_thread.run_sync(open_memory, cfg)
        app.state.graphmem = opened
        # scheduled maintenance of the store the server opened (settings.maintenance)
        scheduler = opened.lifecycle.scheduled(cfg)
        app.state.maintenance = scheduler.start() if scheduler is not None else None
        try:
            yield
        finally:
            if scheduler is not None:
                await anyio.to_thread.run_sync(scheduler.stop)
            app.state.graphmem = None
            await anyio.to_thread.run_sync(opened.close)

    app = FastAPI(
        title="graphmem",
        version=_version(),
        description="Graph-database knowledge memory for AI agents.",
        lifespan=lifespan,
    )
    app.state.graphmem = mem
    app.state.settings = cfg
    app.add_exception_handler(GraphMemError, _on_graphmem_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(HTTPException, _on_http_error)
    app.include_router(router)
    app.add_middleware(_BodyLimit, limit=cfg.server.max_body_bytes)
    return app


def serve(
    settings: Settings | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    log_level: str = "info",
    allow_open: bool = False,
) -> None:
    """Run the HTTP API with uvicorn until interrupted (``graphmem serve``). Without API
    keys it refuses a non-loopback ``host`` unless ``allow_open``."""
    import copy

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    cfg = settings or Settings()
    check_bind(host or cfg.server.host, cfg.server.api_keys, allow_open=allow_open, what="HTTP API")
    # graphmem's own records (what scheduled maintenance did or, dry, would do) go to the
    # server's log next to uvicorn's
    log_config = copy.deepcopy(LOGGING_CONFIG)
    log_config["loggers"]["graphmem"] = {
        "handlers": ["default"],
        "level": log_level.upper(),
        "propagate": False,
    }
    uvicorn.run(
        create_app(cfg),
        host=host or cfg.server.host,
        port=port or cfg.server.port,
        log_level=log_level,
        log_config=log_config,
    )
