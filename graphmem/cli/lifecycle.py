"""Maintenance commands: consolidate, unmerge, maintain, reindex, archive, restore, improve,
summarize, extract-facts, reflect, share.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from graphmem.cli.app import (
    AgentOpt,
    DbOpt,
    EmbedOpt,
    JsonOpt,
    LlmOpt,
    NamespaceOpt,
    ScopeOpt,
    _emit,
    _open,
    _settings,
    _with_progress,
    app,
)

# ---------------------------------------------------------------------------------------
# maintenance and LLM passes


ApplyOpt = Annotated[bool, typer.Option("--apply", help="Write the changes (default: dry run).")]
IdsArg = Annotated[list[str], typer.Argument(help="Memory ids.")]


@app.command()
def consolidate(
    apply: ApplyOpt = False,
    agent: AgentOpt = None,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    llm: LlmOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge near-duplicate memories with provenance (a dry run unless --apply)."""
    with _open(db, embedder, llm) as mem:
        report = _with_progress(
            mem.lifecycle.consolidate,
            "consolidating",
            dry_run=not apply,
            agent_id=agent,
            namespace=namespace,
        )
        verb = "merged" if apply else "would merge"
        lines = [
            f"{verb} {len(report.groups)} groups ({report.pairs} similar pairs among "
            f"{report.scanned} memories)"
        ]
        lines += [
            f"  {g.kind}: {', '.join(g.source_ids)}"
            + (f" -> {g.merged_id}" if g.merged_id else "")
            + (f" (skipped: {g.skipped})" if g.skipped else "")
            for g in report.groups
        ]
        _emit(as_json, report, "\n".join(lines))


@app.command()
def unmerge(
    merged_id: Annotated[str, typer.Argument(help="Id of a memory made by consolidate.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report.")] = False,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Undo a consolidation merge: restore the sources, delete the merged memory."""
    with _open(db, "none") as mem:
        report = mem.lifecycle.unmerge(merged_id, dry_run=dry_run)
        _emit(as_json, report, f"restored {len(report.restored_ids)} memories")


@app.command()
def maintain(
    apply: ApplyOpt = False,
    hard_delete: Annotated[
        bool, typer.Option("--hard-delete", help="Delete instead of archiving.")
    ] = False,
    agent: AgentOpt = None,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    llm: LlmOpt = None,
    as_json: JsonOpt = False,
    every: Annotated[
        str | None,
        typer.Option(
            "--every", help="Run again every interval (90, 45s, 30m, 1h, 1d) until interrupted."
        ),
    ] = None,
    count: Annotated[
        int | None, typer.Option("--count", min=1, help="With --every: stop after this many runs.")
    ] = None,
) -> None:
    """Expiry, retention, decay, staleness, limits, improve and consolidation (dry run
    unless --apply); with --every, on an interval, for a store without a server."""
    import threading

    from graphmem.config import parse_interval

    try:
        seconds = parse_interval(every) if every is not None else None
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--every") from None
    with _open(db, embedder, llm) as mem:
        runs = 0
        try:
            while True:
                report = mem.lifecycle.maintain(
                    dry_run=not apply, hard_delete=hard_delete, agent_id=agent, namespace=namespace
                )
                lines = [
                    f"{a.step}: {a.action} {a.memory_id or ''}".rstrip() for a in report.actions
                ]
                head = "planned" if report.dry_run else "done"
                _emit(
                    as_json, report, "\n".join([f"{head}: {len(report.actions)} actions", *lines])
                )
                runs += 1
                if seconds is None or (count is not None and runs >= count):
                    break
                threading.Event().wait(seconds)
        except KeyboardInterrupt:
            typer.echo(f"stopped after {runs} runs", err=True)


@app.command()
def reindex(
    everything: Annotated[
        bool,
        typer.Option("--all", help="Clear every vector and re-embed everything (a new model)."),
    ] = False,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Memories embedded at a time.")
    ] = 256,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count.")] = False,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Embed the memories that have no vector (resumable: run it again); --all re-embeds
    the whole store for a new --embedder."""
    from graphmem.embeddings import make_embedder

    settings = _settings(url=db, embedder=embedder)
    if settings.embedder == "none":
        typer.echo("error: reindex needs an embedder (--embedder)", err=True)
        raise typer.Exit(2)
    # opened without an embedder: a store built with another model must open to be fixed
    with _open(db, "none", "none") as mem:
        model = make_embedder(settings.embedder)
        with typer.progressbar(
            length=1, label="embedding", file=sys.stderr, hidden=as_json or dry_run
        ) as bar:

            def progress(done: int, total: int) -> None:
                bar.length = max(total, 1)
                bar.update(done - bar.pos)

            report = mem.vectors.reindex(
                embedder=model,
                all=everything,
                batch_size=batch_size,
                dry_run=dry_run,
                progress=progress,
            )
        if dry_run:
            text = (
                f"would clear {report.cleared} vectors and embed {report.missing} "
                f"memories with {report.model}"
            )
        else:
            text = (
                f"embedded {report.embedded} memories with {report.model} in "
                f"{report.batches} batches"
                + (f" (cleared {report.cleared} vectors)" if everything else "")
            )
        _emit(as_json, report, text)


@app.command()
def archive(
    memory_ids: IdsArg,
    reason: Annotated[str, typer.Option(help="Why (kept on the memory).")] = "manual",
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Take memories out of recall (restorable with `graphmem restore`)."""
    with _open(db, "none") as mem:
        report = mem.lifecycle.archive(memory_ids, reason=reason)
        _emit(as_json, report, f"archived {len(report.actions)} memories")


@app.command()
def restore(
    memory_ids: IdsArg,
    pin: Annotated[bool, typer.Option("--pin", help="Exempt them from maintenance.")] = False,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Bring archived memories back into recall."""
    with _open(db, "none") as mem:
        report = mem.lifecycle.restore(memory_ids, pin=pin)
        _emit(as_json, report, f"restored {len(report.actions)} memories")


@app.command()
def improve(
    memory_ids: Annotated[
        list[str] | None,
        typer.Argument(help="Memory ids (default: the newest memories of the scope)."),
    ] = None,
    apply: ApplyOpt = False,
    agent: AgentOpt = None,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    llm: LlmOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite memories for precision and resolve contradictions (new versions)."""
    with _open(db, embedder, llm) as mem:
        report = mem.lifecycle.improve(
            memory_ids or None, agent_id=agent, namespace=namespace, dry_run=not apply
        )
        verb = "rewrote" if apply else "would rewrite"
        lines = [f"{verb} {len(report.created)} memories, superseding {len(report.superseded_ids)}"]
        lines += [f"  {m.id}  {m.content}" for m in report.created]
        _emit(as_json, report, "\n".join(lines))


@app.command()
def summarize(
    run_id: Annotated[str | None, typer.Option("--run", help="Summarise this run.")] = None,
    memory_ids: Annotated[list[str] | None, typer.Argument(help="Or these memories.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the summary.")] = False,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    llm: LlmOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a summary memory derived from a run's memories (or from given memories)."""
    with _open(db, embedder, llm) as mem:
        summary = mem.lifecycle.summarize(memory_ids or None, run_id=run_id, dry_run=dry_run)
        _emit(as_json, summary, f"{summary.id}  {summary.content}")


@app.command("extract-facts")
def extract_facts(
    turn: Annotated[str, typer.Argument(help="A conversation turn.")],
    agent: Annotated[str, typer.Option(help="Agent id.")] = "default",
    run: Annotated[str | None, typer.Option(help="Run id.")] = None,
    speaker: Annotated[str, typer.Option(help="Who said it.")] = "user",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the facts.")] = False,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    llm: LlmOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Store the durable facts of a conversation turn as long-term memories."""
    with _open(db, embedder, llm) as mem:
        report = mem.lifecycle.extract_facts(
            turn, agent_id=agent, run_id=run, speaker=speaker, dry_run=dry_run
        )
        text = "\n".join(f"{m.id}  {m.content}" for m in report.created)
        _emit(as_json, report, text or "(no durable facts)")


@app.command()
def reflect(
    question: Annotated[str, typer.Argument(help="A question about the past.")],
    k: Annotated[int, typer.Option("-k", min=1, help="Memories to consult.")] = 10,
    scope: ScopeOpt = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    llm: LlmOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question from recalled memories, citing memory ids."""
    with _open(db, embedder, llm, read=True) as mem:
        result = mem.lifecycle.reflect(question, k=k, scope=scope)
        cites = f"\n(cites: {', '.join(result.cited_ids)})" if result.cited_ids else ""
        _emit(as_json, result, result.answer + cites)


@app.command()
def share(
    namespace: Annotated[str, typer.Argument(help="Namespace to share.")],
    owner: Annotated[str, typer.Option(help="Owning agent.")],
    member: Annotated[list[str] | None, typer.Option(help="A member agent (repeatable).")] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a namespace shared by several agents."""
    with _open(db, "none") as mem:
        ns = mem.namespaces.create(namespace, owner=owner, members=member or [])
        _emit(as_json, ns, f"{ns.id}: {', '.join(ns.members)}")
