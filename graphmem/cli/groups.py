"""The org, runs and log command groups."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from graphmem.cli.app import (
    AgentOpt,
    DbOpt,
    JsonOpt,
    LimitOpt,
    TagOpt,
    _emit,
    _fields,
    _jsonable,
    _open,
    app,
    org_app,
    runs_app,
)

# ---------------------------------------------------------------------------------------
# org facts


AuthorOpt = Annotated[str, typer.Option("--author", help="Agent id or human author.")]


@org_app.command("publish")
def org_publish(
    content: Annotated[str, typer.Argument(help="The fact's text.")],
    author: AuthorOpt,
    fact_id: Annotated[str | None, typer.Option(help="Publish a new version of this fact.")] = None,
    category: Annotated[str | None, typer.Option(help="policy|adr|procedure|convention…")] = None,
    tag: TagOpt = None,
    core: Annotated[bool | None, typer.Option(help="Lead every context() block.")] = None,
    reason: Annotated[str | None, typer.Option(help="Why (for the history).")] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Publish an org fact, or a new version of one; prints fact id and version."""
    with _open(db, "none") as mem:
        fact = mem.org.publish(
            content,
            author=author,
            fact_id=fact_id,
            category=category,
            tags=tag,
            core=core,
            reason=reason,
        )
        _emit(as_json, fact, f"{fact.fact_id} v{fact.version}")


@org_app.command("retract")
def org_retract(
    fact_id: Annotated[str, typer.Argument(help="Fact id.")],
    author: AuthorOpt,
    reason: Annotated[str | None, typer.Option(help="Why.")] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Retract the current version of an org fact."""
    with _open(db, "none") as mem:
        fact = mem.org.retract(fact_id, author=author, reason=reason)
        _emit(as_json, fact, f"retracted {fact.fact_id} v{fact.version}")


@org_app.command("list")
def org_list(
    query: Annotated[
        str | None, typer.Option("--query", help="Best matches for this text.")
    ] = None,
    category: Annotated[list[str] | None, typer.Option(help="Only these categories.")] = None,
    include_retracted: Annotated[bool, typer.Option(help="Also retracted facts.")] = False,
    limit: LimitOpt = 100,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List current org facts (or search them with --query)."""
    with _open(db, "none", read=True) as mem:
        if query is not None:
            facts = mem.org.query(
                query, categories=category, include_retracted=include_retracted, limit=limit
            )
        else:
            facts = mem.org.list(
                categories=category, include_retracted=include_retracted, limit=limit
            )
        text = "\n".join(f"{f.fact_id} v{f.version} [{f.category}] {f.content}" for f in facts)
        _emit(as_json, facts, text or "(none)")


@org_app.command("history")
def org_history(
    fact_id: Annotated[str, typer.Argument(help="Fact id.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the publish/retract operations on an org fact."""
    with _open(db, "none", read=True) as mem:
        ops = mem.org.history(fact_id)
        text = "\n".join(
            f"{o.at:%Y-%m-%d %H:%M} {o.operation} v{o.version} by {o.author}" for o in ops
        )
        _emit(as_json, ops, text)


# ---------------------------------------------------------------------------------------
# runs, events and the orchestration log


@runs_app.command("list")
def runs_list(
    agent: AgentOpt = None,
    user: Annotated[str | None, typer.Option(help="Only this user's runs.")] = None,
    status: Annotated[str | None, typer.Option(help="running|completed|failed|archived")] = None,
    limit: LimitOpt = 20,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List runs, newest first."""
    with _open(db, "none", read=True) as mem:
        runs = mem.runs.list(agent_id=agent, user_id=user, status=status, limit=limit)
        text = "\n".join(
            f"{r.id}  {r.agent_id}  {r.status.value}  {r.event_count} events  "
            f"{r.started_at:%Y-%m-%d %H:%M}"
            for r in runs
        )
        _emit(as_json, runs, text or "(none)")


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one run."""
    with _open(db, "none", read=True) as mem:
        run = mem.runs.get(run_id)
        _emit(as_json, run, _fields(run))


@runs_app.command("events")
def runs_events(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    event_type: Annotated[list[str] | None, typer.Option("--type", help="Only this type.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the last N.")] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a run's events in order."""
    with _open(db, "none", read=True) as mem:
        events = mem.runs.events(run_id, event_types=event_type, limit=limit)
        text = "\n".join(f"{e.seq:4d} {e.event_type:<20} {e.content}" for e in events)
        _emit(as_json, events, text or "(none)")


@runs_app.command("end")
def runs_end(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    status: Annotated[str, typer.Option(help="completed|failed")] = "completed",
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mark a run ended."""
    with _open(db, "none") as mem:
        run = mem.runs.end(run_id, status=status)
        _emit(as_json, run, f"{run.id} {run.status.value}")


@runs_app.command("delete")
def runs_delete(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a run with its events, what was derived from them, and its log entries."""
    with _open(db, "none") as mem:
        report = mem.runs.delete(run_id)
        _emit(as_json, report, _fields(report))


@app.command()
def tail(
    n: Annotated[int, typer.Option("-n", min=1, help="How many entries.")] = 20,
    run: Annotated[str | None, typer.Option(help="Only this run.")] = None,
    agent: AgentOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the newest orchestration-log entries."""
    with _open(db, "none", read=True) as mem:
        records = mem.log.tail(n, run_id=run, agent_id=agent)
        _emit(as_json, records, "\n".join(_log_line(r) for r in records) or "(empty)")


def _log_line(record: Any) -> str:
    data = _jsonable(record)
    entry = data.get("entry", data) if isinstance(data, dict) else data
    if isinstance(entry, dict):
        return f"{entry.get('at', '')} {entry.get('agent_id', '')} {entry.get('event_type', '')}"
    return str(entry)
