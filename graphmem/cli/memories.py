"""Commands on memories: demo, remember, recall, context, list, show, update, history,
entities, about, forget.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from graphmem.cli.app import (
    DbOpt,
    EmbedOpt,
    JsonOpt,
    LimitOpt,
    ScopeOpt,
    TagOpt,
    _emit,
    _fields,
    _memory_line,
    _metadata,
    _open,
    app,
)

# ---------------------------------------------------------------------------------------
# memories


@app.command()
def demo(db: DbOpt = None, embedder: EmbedOpt = None) -> None:
    """Ingest a short multi-session conversation, recall from it, show a fact's history."""
    from graphmem.demo import DemoClock, run_demo

    clock = DemoClock()  # the store records the conversation's dates, not today's
    with _open(db, embedder, knowledge=True, clock=clock) as mem:  # it shows its entities too
        run_demo(mem, clock=clock)


@app.command()
def remember(
    content: Annotated[str, typer.Argument(help="The text to remember.")],
    agent: Annotated[str, typer.Option(help="Agent id.")] = "default",
    run: Annotated[str | None, typer.Option(help="Run id.")] = None,
    namespace: Annotated[str, typer.Option(help="Namespace.")] = "default",
    category: Annotated[
        str, typer.Option(help="episodic|semantic|procedural|summary")
    ] = "semantic",
    tier: Annotated[
        str | None, typer.Option(help="short_term|long_term (default: the lifecycle rules)")
    ] = None,
    importance: Annotated[
        float | None, typer.Option(help="0..1 (default: the lifecycle's scorer)")
    ] = None,
    visibility: Annotated[str, typer.Option(help="private|shared|org")] = "private",
    tag: TagOpt = None,
    metadata: Annotated[str | None, typer.Option(help="A JSON object.")] = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Store one memory; prints its id."""
    meta = _metadata(metadata)
    with _open(db, embedder) as mem:
        m = mem.remember(
            content,
            agent_id=agent,
            run_id=run,
            namespace=namespace,
            category=category,
            tier=tier,
            importance=importance,
            visibility=visibility,
            tags=tag or [],
            metadata=meta,
        )
        _emit(as_json, m, m.id)


def _recall_filters(
    agent: str | None,
    namespace: str | None,
    scope: str | None,
    tag: list[str] | None,
    category: str | None,
) -> dict[str, Any]:
    return {
        "agent_id": agent,
        "namespace": namespace,
        "scope": scope,
        "tags": tag or None,
        "category": category,
    }


CategoryOpt = Annotated[str | None, typer.Option("--category", help="Only this category.")]
PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset",
        help="Recall preset: balanced, lexical, semantic, linear, diverse, precise, recent.",
    ),
]


@app.command()
def recall(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option("-k", min=1, help="How many results.")] = 5,
    agent: Annotated[str | None, typer.Option(help="Only this agent's memories.")] = None,
    namespace: Annotated[str | None, typer.Option(help="Only this namespace.")] = None,
    scope: ScopeOpt = None,
    category: CategoryOpt = None,
    tag: TagOpt = None,
    preset: PresetOpt = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
    touch: Annotated[
        bool,
        typer.Option(
            "--touch/--no-touch",
            help="Count an access on each result (feeds recency and frequency, so a repeated "
            "query can score a little differently); --no-touch only looks.",
        ),
    ] = True,
) -> None:
    """Recall the memories most relevant to a query, with scores."""
    with _open(db, embedder, read=True) as mem:
        results = mem.recall(
            query,
            k=k,
            config=preset,
            touch=touch,
            **_recall_filters(agent, namespace, scope, tag, category),
        )
        text = "\n".join(f"{r.score:7.3f}  {r.memory.id}  {r.memory.content}" for r in results)
        _emit(as_json, results, text or "(nothing relevant)")


@app.command()
def context(
    query: Annotated[str, typer.Argument(help="What the prompt is about.")],
    max_tokens: Annotated[int, typer.Option(min=1, help="Token budget.")] = 2000,
    agent: Annotated[str | None, typer.Option(help="Only this agent's memories.")] = None,
    namespace: Annotated[str | None, typer.Option(help="Only this namespace.")] = None,
    scope: ScopeOpt = None,
    preset: PresetOpt = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the memory block for a prompt, packed within a token budget."""
    with _open(db, embedder, read=True) as mem:
        block = mem.context(
            query,
            max_tokens=max_tokens,
            config=preset,
            **_recall_filters(agent, namespace, scope, None, None),
        )
        _emit(as_json, {"context": block}, block)


@app.command("list")
def list_cmd(
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    namespace: Annotated[str | None, typer.Option(help="Only this namespace.")] = None,
    run: Annotated[str | None, typer.Option(help="Only this run.")] = None,
    category: CategoryOpt = None,
    tier: Annotated[str | None, typer.Option(help="short_term|long_term")] = None,
    status: Annotated[str, typer.Option(help="active|superseded|archived|all")] = "active",
    tag: TagOpt = None,
    limit: LimitOpt = 20,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List memories matching filters, newest first."""
    with _open(db, "none", read=True) as mem:
        found = mem.list(
            agent_id=agent,
            namespace=namespace,
            run_id=run,
            category=category,
            tier=tier,
            status=None if status == "all" else status,
            tags=tag,
            limit=limit,
        )
        _emit(as_json, found, "\n".join(_memory_line(m) for m in found) or "(none)")


@app.command()
def show(
    memory_id: Annotated[str, typer.Argument(help="Memory id.")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one memory with all its fields."""
    with _open(db, "none", read=True) as mem:
        m = mem.get(memory_id)
        _emit(as_json, m, _fields(m))


@app.command()
def update(
    memory_id: Annotated[str, typer.Argument(help="Id of the current version.")],
    content: Annotated[str | None, typer.Argument(help="New content (optional).")] = None,
    reason: Annotated[str, typer.Option(help="Why (kept on the SUPERSEDES edge).")] = "update",
    importance: Annotated[float | None, typer.Option(help="0..1")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Replace the tags (repeatable).")] = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a new version of a memory that supersedes the current one; prints its id."""
    changes = {k: v for k, v in (("importance", importance), ("tags", tag)) if v is not None}
    with _open(db, embedder) as mem:
        new = mem.update(memory_id, content, reason=reason, **changes)
        _emit(as_json, new, new.id)


@app.command()
def history(
    memory_id: Annotated[str, typer.Argument(help="Memory id (any version).")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show every version of a memory (its SUPERSEDES chain), oldest first."""
    with _open(db, "none", read=True) as mem:
        versions = mem.history(memory_id)
        text = "\n".join(
            f"{v.valid_from or v.created_at:%Y-%m-%d %H:%M} [{v.status.value}] {v.id}  {v.content}"
            for v in versions
        )
        _emit(as_json, versions, text)


@app.command()
def entities(
    agent: Annotated[str | None, typer.Option(help="Only this agent's memories.")] = None,
    namespace: Annotated[str | None, typer.Option(help="Only this namespace.")] = None,
    scope: ScopeOpt = None,
    type: Annotated[
        str | None,
        typer.Option(help="person|place|organisation|event|object|other"),
    ] = None,
    limit: LimitOpt = 20,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the entities (people, places, organisations, events, things) that memories
    mention, most mentioned first."""
    with _open(db, "none", read=True) as mem:
        found = mem.knowledge.entities(
            type=type, limit=limit, **_recall_filters(agent, namespace, scope, None, None)
        )
        text = "\n".join(f"{e.mention_count:5d}  {e.type.value:<12} {e.name}" for e in found)
        _emit(as_json, found, text or "(none)")


@app.command()
def about(
    name: Annotated[str, typer.Argument(help="An entity's name or alias.")],
    agent: Annotated[str | None, typer.Option(help="Only this agent's memories.")] = None,
    namespace: Annotated[str | None, typer.Option(help="Only this namespace.")] = None,
    scope: ScopeOpt = None,
    limit: LimitOpt = 50,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What the memories say about an entity: the memories that mention it, oldest first,
    and the relations they record."""
    with _open(db, "none", read=True) as mem:
        found = mem.knowledge.about(
            name, limit=limit, **_recall_filters(agent, namespace, scope, None, None)
        )
        e = found.entity
        lines = [f"{e.name} ({e.type.value}), {len(found.memories)} memories"]
        lines += [f"{m.created_at:%Y-%m-%d}  {m.id}  {m.content}" for m in found.memories]
        lines += [f"{r.subject} -[{r.predicate}]-> {r.object}" for r in found.relations]
        _emit(as_json, found, "\n".join(lines))


@app.command()
def forget(
    memory_id: Annotated[str, typer.Argument(help="Memory id.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report.")] = False,
    cascade: Annotated[bool, typer.Option(help="Also delete versions and derived nodes.")] = True,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a memory, its versions and what was derived from it."""
    with _open(db, "none") as mem:
        report = mem.forget(memory_id, cascade=cascade, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        _emit(
            as_json,
            report,
            f"{verb} {len(report.deleted)} memories, restored {len(report.restored)}",
        )
