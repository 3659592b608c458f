"""The HTTP API's routes: memories, recall, runs and events, org facts, maintenance."""

from __future__ import annotations

import typing
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from graphmem.consolidation import ConsolidationReport
from graphmem.errors import (
    NotFound,
)
from graphmem.knowledge import About
from graphmem.lifecycle import MaintenanceReport
from graphmem.llm import Reflection
from graphmem.memory import ForgetReport
from graphmem.models import Entity, EntityType, Memory, OrgFact, OrgOperation, RecallResult, Run
from graphmem.server.principal import (
    _ERRORS,
    _LIST_NO_EMBEDDING,
    _NO_EMBEDDING,
    Limit,
    Mem,
    Offset,
    Principal,
    Who,
    _check_batch,
    _version,
)
from graphmem.server.schemas import (
    ContextRequest,
    ContextResponse,
    EventsAppend,
    EventsPage,
    Health,
    MaintenanceRequest,
    MemoryBatch,
    MemoryIn,
    MemoryPatch,
    PublishRequest,
    RecallRequest,
    ReflectRequest,
    RetractRequest,
    RunEnd,
    RunIn,
    SessionsPage,
)

# ---------------------------------------------------------------------------------------
# routes

router = APIRouter(responses=_ERRORS)


def _without_vectors(model: Any, tag: str, status_code: int | None = None) -> dict[str, Any]:
    """The options of a route that answers with memories or facts (one, or a list): sent
    without their embeddings."""
    many = typing.get_origin(model) is list
    exclude = _LIST_NO_EMBEDDING if many else _NO_EMBEDDING
    options = {"response_model": model, "response_model_exclude": exclude, "tags": [tag]}
    return options if status_code is None else {**options, "status_code": status_code}


@router.get("/health", response_model=Health, tags=["service"])
def health(mem: Mem) -> Health:
    """The store answers (else 503) and the backend in use (no authentication)."""
    return Health(status="ok", version=_version(), backend=mem.backend.stats().backend)


@router.get("/stats", tags=["service"])
def stats(mem: Mem, who: Who) -> dict[str, Any]:
    """Node and edge counts, memories per status and tier, store size."""
    who.check_admin()
    return mem.stats()


@router.post("/memories", **_without_vectors(Memory, "memories", status_code=201))
def create_memory(body: MemoryIn, mem: Mem, who: Who) -> Any:
    """Store one memory. The body is the memory as stored, with what reconciliation did:
    ``outcome`` (``created``, ``duplicate``: an existing memory kept the request's fields,
    ``superseded`` or ``linked``), ``duplicate_of`` (the existing memory's id, for a
    duplicate) and ``related_ids`` (the memories superseded or linked)."""
    data = body.model_dump(exclude_none=True)
    data["agent_id"] = who.agent(body.agent_id)
    data["namespace"] = who.namespace(body.namespace)
    _check_runs_named(mem, who, [body.run_id])
    result = mem.writes.reconcile(data.pop("content"), mode=data.pop("reconcile", None), **data)
    return JSONResponse(
        status_code=201,
        content={**jsonable_encoder(result.memory, exclude=_NO_EMBEDDING), **_outcome(result)},
    )


def _outcome(result: Any) -> dict[str, Any]:
    """What a reconciled write did, as every surface reports it."""
    return {
        "outcome": result.action,
        "duplicate_of": result.related_ids[0] if result.action == "duplicate" else None,
        "related_ids": list(result.related_ids),
    }


@router.post("/memories/batch", **_without_vectors(list[Memory], "memories", status_code=201))
def create_memories(body: MemoryBatch, request: Request, mem: Mem, who: Who) -> list[Memory]:
    """Store many memories atomically: one invalid item and nothing is written."""
    _check_batch(request, len(body.items))
    items = [
        {
            **m.model_dump(exclude_none=True),
            "agent_id": who.agent(m.agent_id),
            "namespace": who.namespace(m.namespace),
        }
        for m in body.items
    ]
    _check_runs_named(mem, who, [m.run_id for m in body.items])
    return mem.remember_many(items)


def _check_runs_named(mem: Mem, who: Principal, run_ids: list[str | None]) -> None:
    """A memory a key writes joins no stored run outside the key's namespaces (one not
    stored yet is started in the memory's, which the key's check of it allows)."""
    if not who.restricted:
        return
    for run_id in dict.fromkeys(r for r in run_ids if r):
        try:
            run = mem.runs.get(run_id)
        except NotFound:
            continue
        who.check_run(run)


@router.get("/memories", **_without_vectors(list[Memory], "memories"))
def list_memories(
    mem: Mem,
    who: Who,
    agent_id: str | None = None,
    run_id: str | None = None,
    namespace: str | None = None,
    category: str | None = None,
    tier: str | None = None,
    status: str = "active",
    tag: Annotated[list[str] | None, Query()] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> list[Memory]:
    """Memories matching the filters, newest first (``status=all``: every version; under
    auth: the key's own)."""
    return mem.list(
        run_id=run_id,
        category=category,
        tier=tier,
        status=None if status == "all" else status,
        tags=tag,
        limit=limit,
        offset=offset,
        **who.reading(agent_id, namespace),
    )


@router.get("/entities", response_model=list[Entity], tags=["knowledge"])
def list_entities(
    mem: Mem,
    who: Who,
    agent_id: str | None = None,
    namespace: str | None = None,
    type: EntityType | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[Entity]:
    """The entities (people, places, organisations, events, things) that memories the
    caller may read mention, most mentioned first."""
    return mem.knowledge.entities(type=type, limit=limit, **who.reading(agent_id, namespace))


@router.get(
    "/entities/{name}",
    response_model=About,
    response_model_exclude={"memories": {"__all__": {"embedding"}}},
    tags=["knowledge"],
)
def about_entity(
    name: str,
    mem: Mem,
    who: Who,
    agent_id: str | None = None,
    namespace: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 200,
) -> About:
    """What the caller's memories say about an entity (by name or alias): the memories that
    mention it, oldest first, and the relations they record; 404 when none does."""
    return mem.knowledge.about(name, limit=limit, **who.reading(agent_id, namespace))


@router.get("/memories/{memory_id}", **_without_vectors(Memory, "memories"))
def get_memory(memory_id: str, mem: Mem, who: Who) -> Memory:
    """One memory (any status)."""
    return who.check_read(mem, mem.get(memory_id))


@router.patch("/memories/{memory_id}", **_without_vectors(Memory, "memories"))
def update_memory(memory_id: str, body: MemoryPatch, mem: Mem, who: Who) -> Memory:
    """Write a new version that SUPERSEDES this one; returns the new version."""
    who.check_write(mem.get(memory_id))
    changes = body.model_dump(exclude_unset=True, exclude={"content", "reason"})
    if "namespace" in changes:
        who.namespace(changes["namespace"])
    return mem.update(memory_id, body.content, reason=body.reason, **changes)


@router.delete("/memories/{memory_id}", response_model=ForgetReport, tags=["memories"])
def delete_memory(
    memory_id: str, mem: Mem, who: Who, cascade: bool = True, dry_run: bool = False
) -> ForgetReport:
    """Forget a memory (with its versions and what was derived from it, by default).
    Under auth the report lists only the ids the key may read: a memory another agent
    derived from the forgotten one is deleted with it (it carries the forgotten content)
    but its id is not told."""
    who.check_write(mem.get(memory_id))
    plan = mem.forget(memory_id, cascade=cascade, dry_run=True)
    if who.restricted:
        visible = {
            m.id
            for m in who.readable(mem.get([*plan.deleted, *plan.restored], scope=who.read_scope))
        }
    report = plan if dry_run else mem.forget(memory_id, cascade=cascade)
    if not who.restricted:
        return report
    return report.model_copy(
        update={
            "deleted": tuple(i for i in report.deleted if i in visible),
            "restored": tuple(i for i in report.restored if i in visible),
        }
    )


@router.get("/memories/{memory_id}/history", **_without_vectors(list[Memory], "memories"))
def memory_history(memory_id: str, mem: Mem, who: Who) -> list[Memory]:
    """Every version of a memory, oldest first. Under auth: 403 when the key may not read
    this version; versions it may not read (e.g. from before a move out of another
    namespace) are left out."""
    who.check_read(mem, mem.get(memory_id))
    return who.readable(mem.history(memory_id, scope=who.read_scope))


def _recall_args(body: RecallRequest | ReflectRequest, who: Who) -> dict[str, Any]:
    args = body.model_dump(
        exclude_none=True, exclude={"query", "question", "scope", "max_tokens", "preset"}
    )
    if getattr(body, "preset", None) is not None:
        args["config"] = body.preset  # type: ignore[union-attr]
    args["namespace"] = who.namespace_filter(body.namespace)
    args["scope"] = who.scope(body.scope)
    return args


@router.post(
    "/recall",
    response_model=list[RecallResult],
    response_model_exclude={"__all__": {"memory": _NO_EMBEDDING}},
    tags=["recall"],
)
def recall(body: RecallRequest, mem: Mem, who: Who) -> list[RecallResult]:
    """The memories most relevant to a query, with score breakdowns."""
    return mem.recall(body.query, **_recall_args(body, who))


@router.post("/context", response_model=ContextResponse, tags=["recall"])
def context(body: ContextRequest, mem: Mem, who: Who) -> ContextResponse:
    """Recalled memories packed into one prompt block within ``max_tokens``."""
    args = _recall_args(body, who)
    return ContextResponse(context=mem.context(body.query, max_tokens=body.max_tokens, **args))


# -- runs and events --------------------------------------------------------------------


@router.post("/runs", response_model=Run, status_code=201, tags=["runs"])
def start_run(body: RunIn, mem: Mem, who: Who) -> Run:
    """Start a run (an agent session)."""
    data = body.model_dump(exclude_none=True, exclude={"agent_id", "namespace"})
    return mem.runs.start(who.agent(body.agent_id), namespace=who.namespace(body.namespace), **data)


@router.get("/runs", response_model=list[Run], tags=["runs"])
def list_runs(
    mem: Mem,
    who: Who,
    agent_id: str | None = None,
    user_id: str | None = None,
    status: str | None = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> list[Run]:
    """Runs, newest first."""
    agent = who.writer(agent_id)
    return mem.runs.list(
        agent_id=agent,
        user_id=user_id,
        status=status,
        namespace=who.namespace_filter(None),
        limit=limit,
        offset=offset,
    )


@router.get("/runs/{run_id}", response_model=Run, tags=["runs"])
def get_run(run_id: str, mem: Mem, who: Who) -> Run:
    return who.check_run(mem.runs.get(run_id))


@router.post("/runs/{run_id}/end", response_model=Run, tags=["runs"])
def end_run(run_id: str, body: RunEnd, mem: Mem, who: Who) -> Run:
    """Mark a run ended (``completed`` unless another status is given)."""
    who.check_run(mem.runs.get(run_id))
    return mem.runs.end(run_id, status=body.status)


@router.delete("/runs/{run_id}", tags=["runs"])
def delete_run(run_id: str, mem: Mem, who: Who) -> Any:
    """Delete a run with its events, what was derived from them, and its log entries."""
    who.check_run(mem.runs.get(run_id))
    return mem.runs.delete(run_id)


@router.post("/runs/{run_id}/events", **_without_vectors(list[Memory], "runs", status_code=201))
def add_events(
    run_id: str, body: EventsAppend, request: Request, mem: Mem, who: Who
) -> list[Memory]:
    """Append events to a run (started on the fly when it does not exist)."""
    _check_batch(request, len(body.events))
    fly: dict[str, str] = {}
    if who.restricted:
        try:
            who.check_run(mem.runs.get(run_id))
        except NotFound:
            # started on the fly by the key's agent, in the key's namespace (a run started
            # on the fly takes its first event's)
            fly = {"namespace": who.namespace(None)}
    events = [
        {**e.model_dump(exclude_none=True), "agent_id": who.writer(e.agent_id), **fly}
        for e in body.events
    ]
    return mem.runs.add_events(run_id, events)


@router.get("/runs/{run_id}/events", **_without_vectors(list[Memory], "runs"))
def run_events(
    run_id: str,
    mem: Mem,
    who: Who,
    event_type: Annotated[list[str] | None, Query()] = None,
    limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
) -> list[Memory]:
    """A run's events in order (optionally only some types; the last ``limit``). Under
    auth: only the events the key may read."""
    who.check_run(mem.runs.get(run_id))
    events = mem.runs.events(run_id, event_types=event_type, scope=who.read_scope)
    events = who.readable(events)
    return events if limit is None else events[-limit:]


@router.get(
    "/memory/events",
    response_model=EventsPage,
    response_model_exclude={"events": _LIST_NO_EMBEDDING},
    tags=["runs"],
)
def agent_events(
    mem: Mem,
    who: Who,
    agent_id: str | None = None,
    session_id: str | None = None,
    limit: Limit = 100,
) -> EventsPage:
    """An agent's latest events (of one session, or of all), oldest first, and the total."""
    agent = who.agent(agent_id)
    filters: dict[str, Any] = {
        "agent_id": agent,
        "run_id": session_id,
        "category": "episodic",
        "namespace": who.namespace_filter(None),
        "scope": who.read_scope,
    }
    newest = mem.list(**filters, limit=limit, order_by="created_at", descending=True)
    return EventsPage(agent=agent, events=newest[::-1], total=mem.count(**filters))


@router.get("/memory/sessions", response_model=SessionsPage, tags=["runs"])
def agent_sessions(
    mem: Mem, who: Who, agent_id: str | None = None, limit: Limit = 100, offset: Offset = 0
) -> SessionsPage:
    """An agent's sessions (runs), newest first, and the total."""
    agent = who.agent(agent_id)
    spaces = who.namespace_filter(None)
    runs = mem.runs.list(agent_id=agent, namespace=spaces, limit=limit, offset=offset)
    total = (
        mem.runs.stats(agent_id=agent).runs
        if spaces is None
        else len(mem.runs.list(agent_id=agent, namespace=spaces, limit=None))
    )
    return SessionsPage(agent=agent, sessions=runs, total=total)


# -- org facts ----------------------------------------------------------------------------


@router.get("/org/facts", **_without_vectors(list[OrgFact], "org"))
def list_facts(
    mem: Mem,
    who: Who,
    q: Annotated[str | None, Query(min_length=1, max_length=10_000)] = None,
    category: Annotated[list[str] | None, Query()] = None,
    tag: Annotated[list[str] | None, Query()] = None,
    include_retracted: bool = False,
    limit: Limit = 100,
    offset: Offset = 0,
) -> list[OrgFact]:
    """Current org facts; with ``q``, the best matches first."""
    if q is not None or tag:
        return mem.org.query(
            q, categories=category, tags=tag, include_retracted=include_retracted, limit=limit
        )
    return mem.org.list(
        categories=category, include_retracted=include_retracted, limit=limit, offset=offset
    )


@router.get("/org/policies", **_without_vectors(list[OrgFact], "org"))
def list_policies(mem: Mem, who: Who, limit: Limit = 100, offset: Offset = 0) -> list[OrgFact]:
    """Current policies: core ones first, in a stable order."""
    return mem.org.list_policies(limit=limit, offset=offset)


@router.post("/org/facts", **_without_vectors(OrgFact, "org", status_code=201))
def publish_fact(body: PublishRequest, mem: Mem, who: Who) -> OrgFact:
    """Publish a fact or a new version of one (write access by the author's seniority)."""
    data = body.model_dump(exclude_none=True, exclude={"content", "author"})
    return mem.org.publish(body.content, author=who.agent(body.author), **data)


@router.get("/org/facts/{fact_id}", **_without_vectors(OrgFact, "org"))
def get_fact(fact_id: str, mem: Mem, who: Who) -> OrgFact:
    return mem.org.get(fact_id)


@router.get("/org/facts/{fact_id}/versions", **_without_vectors(list[OrgFact], "org"))
def fact_versions(fact_id: str, mem: Mem, who: Who) -> list[OrgFact]:
    return mem.org.versions(fact_id)


@router.get("/org/facts/{fact_id}/history", response_model=list[OrgOperation], tags=["org"])
def fact_history(fact_id: str, mem: Mem, who: Who) -> list[OrgOperation]:
    """The append-only operations (publish / retract) on a fact."""
    return mem.org.history(fact_id)


@router.post("/org/facts/{fact_id}/retract", **_without_vectors(OrgFact, "org"))
def retract_fact(fact_id: str, body: RetractRequest, mem: Mem, who: Who) -> OrgFact:
    return mem.org.retract(fact_id, author=who.agent(body.author), reason=body.reason)


# -- maintenance ----------------------------------------------------------------------------


@router.post("/maintenance/consolidate", response_model=ConsolidationReport, tags=["maintenance"])
def consolidate(body: MaintenanceRequest, mem: Mem, who: Who) -> ConsolidationReport:
    """Merge near-duplicate memories with provenance; a dry run (the plan) by default."""
    who.check_admin()
    return mem.lifecycle.consolidate(
        dry_run=body.dry_run, agent_id=body.agent_id, namespace=body.namespace
    )


@router.post("/maintenance/run", response_model=MaintenanceReport, tags=["maintenance"])
def maintain(body: MaintenanceRequest, mem: Mem, who: Who) -> MaintenanceReport:
    """Expiry, retention, decay, staleness, limits and consolidation; a dry run by default.
    Removal archives (restorable) unless ``hard_delete``."""
    who.check_admin()
    return mem.lifecycle.maintain(
        dry_run=body.dry_run,
        hard_delete=body.hard_delete,
        agent_id=body.agent_id,
        namespace=body.namespace,
    )


@router.post("/reflect", response_model=Reflection, tags=["recall"])
def reflect(body: ReflectRequest, mem: Mem, who: Who) -> Reflection:
    """Answer a question from recalled memories, citing their ids (configured LLM)."""
    return mem.lifecycle.reflect(body.question, **_recall_args(body, who))
