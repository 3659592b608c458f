"""Who is calling: the principal of a request (its key's agent and namespaces), and the
dependencies every route takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from starlette.exceptions import HTTPException

from graphmem.config import Settings
from graphmem.errors import (
    AccessDenied,
    BackendUnavailable,
    InvalidInput,
)
from graphmem.memory import GraphMemory
from graphmem.models import Memory, Run
from graphmem.server.schemas import (
    ErrorBody,
)

_NO_EMBEDDING = {"embedding"}
_LIST_NO_EMBEDDING = {"__all__": {"embedding"}}
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (401, 403, 404, 409, 413, 422, 503)
}


# ---------------------------------------------------------------------------------------
# who is calling


@dataclass(frozen=True)
class Principal:
    """The caller: an agent and its namespaces under API-key auth, or anyone (open API)."""

    agent_id: str | None = None  # None: no keys configured
    namespaces: tuple[str, ...] = ("*",)

    @property
    def restricted(self) -> bool:
        return self.agent_id is not None

    def all_namespaces(self) -> bool:
        return "*" in self.namespaces

    def agent(self, requested: str | None) -> str:
        """The agent a write is attributed to; AccessDenied when acting as another."""
        if self.agent_id is None:
            return requested or "default"
        if requested is not None and requested != self.agent_id:
            raise AccessDenied(f"this API key acts as agent {self.agent_id!r} only")
        return self.agent_id

    def writer(self, requested: str | None) -> str | None:
        """Like :meth:`agent`, but None stays None on the open API (GraphMemory's default,
        e.g. the run's agent for events, applies)."""
        return self.agent(requested) if self.restricted else requested

    def namespace(self, requested: str | None) -> str:
        """The namespace of a write; AccessDenied outside the key's namespaces."""
        if requested is None:
            return "default" if self.all_namespaces() else self.namespaces[0]
        if not self.all_namespaces() and requested not in self.namespaces:
            raise AccessDenied(f"this API key may not use namespace {requested!r}")
        return requested

    def namespace_filter(self, requested: str | None) -> str | list[str] | None:
        """The namespace filter of a read: as requested, within the key's namespaces."""
        if requested is not None or self.all_namespaces():
            return None if requested is None else self.namespace(requested)
        return list(self.namespaces)

    def scope(self, requested: str | None) -> str | None:
        """The agent whose read scope limits a recall (forced to the key's agent)."""
        return self.writer(requested)

    def check_read(self, mem: GraphMemory, memory: Memory) -> Memory:
        # one message whatever the reason: it must not tell which namespace the memory is in
        if self.restricted:
            assert self.agent_id is not None
            if not (self.all_namespaces() or memory.namespace in self.namespaces) or (
                not mem.namespaces.can_read(self.agent_id, memory)
            ):
                raise AccessDenied("this API key may not read that memory")
        return memory

    @property
    def read_scope(self) -> str | None:
        """The scope GraphMemory's reads take for this caller (None: unrestricted)."""
        return self.agent_id

    def reading(self, agent_id: str | None, namespace: str | None) -> dict[str, Any]:
        """The who-may-read part of a read's filters (``agent_id``, ``namespace``, ``scope``)
        for the agent and namespace a caller asked for."""
        return {
            "agent_id": self.writer(agent_id),
            "namespace": self.namespace_filter(namespace),
            "scope": self.read_scope,
        }

    def readable(self, memories: list[Memory]) -> list[Memory]:
        """Of memories already limited to :attr:`read_scope`, those in the key's
        namespaces (a read path that returns several memories never leaks one)."""
        if not self.restricted or self.all_namespaces():
            return memories
        return [m for m in memories if m.namespace in self.namespaces]

    def check_write(self, memory: Memory) -> Memory:
        if self.restricted:
            self.namespace(memory.namespace)
            self.agent(memory.agent_id)
        return memory

    def check_run(self, run: Run) -> Run:
        """The run, when it is the key's agent's and in the key's namespaces (its events
        are there too); else AccessDenied."""
        if self.restricted:
            self.agent(run.agent_id)
            self.namespace(run.namespace)
        return run

    def check_admin(self) -> None:
        if self.restricted and not self.all_namespaces():
            raise AccessDenied("this operation needs an API key with namespaces ['*']")


def _memory(request: Request) -> GraphMemory:
    mem: GraphMemory | None = request.app.state.graphmem
    if mem is None:
        raise BackendUnavailable("the store is not open (the app's lifespan has not started)")
    return mem


def _principal(request: Request) -> Principal:
    settings: Settings = request.app.state.settings
    if not settings.server.api_keys:
        return Principal()
    secret = request.headers.get("x-api-key")
    auth = request.headers.get("authorization")
    if secret is None and auth is not None:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer":
            secret = value.strip()
    if not secret:
        raise HTTPException(401, "an API key is required", {"WWW-Authenticate": "Bearer"})
    key = settings.server.key_for(secret)
    if key is None:
        raise HTTPException(401, "unknown API key", {"WWW-Authenticate": "Bearer"})
    return Principal(agent_id=key.agent_id, namespaces=key.namespaces)


Mem = Annotated[GraphMemory, Depends(_memory)]
Who = Annotated[Principal, Depends(_principal)]
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=1_000_000)]


def _check_batch(request: Request, n: int) -> None:
    most: int = request.app.state.settings.server.max_batch
    if n > most:
        raise InvalidInput(f"{n} items in one request; at most {most}")


# ---------------------------------------------------------------------------------------
# the app


def _version() -> str:
    from graphmem import __version__

    return __version__
