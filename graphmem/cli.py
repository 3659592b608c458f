"""The ``graphmem`` command line.

Every command opens the store named by ``--db`` (default ``./graphmem.db``; also
``memory://`` or ``neo4j://…``) and prints text, or JSON with ``--json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

import typer

from graphmem.errors import GraphMemError
from graphmem.memory import GraphMemory

__all__ = ["app", "main"]

app = typer.Typer(
    name="graphmem",
    help="graphmem: a graph-database knowledge memory for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DbOpt = Annotated[
    str, typer.Option("--db", envvar="GRAPHMEM_URL", help="Store URL or path (./graphmem.db).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
EmbedOpt = Annotated[
    str,
    typer.Option("--embedder", help="auto | none | hash | a sentence-transformers model name/path."),
]


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return _jsonable(value.model_dump(mode="json", exclude={"embedding"}))
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
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


@contextmanager
def _open(db: str, embedder: str = "none") -> Iterator[GraphMemory]:
    try:
        mem = GraphMemory.open(db, embedder=None if embedder == "none" else embedder)
    except GraphMemError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    try:
        yield mem
    except GraphMemError as e:
        typer.echo(f"error: {type(e).__name__}: {e}", err=True)
        raise typer.Exit(1) from e
    finally:
        mem.close()


@app.command()
def demo(
    db: DbOpt = "graphmem.db",
    embedder: EmbedOpt = "auto",
) -> None:
    """Ingest a short multi-session conversation, recall from it, show a fact's history."""
    from graphmem.demo import run_demo

    with _open(db, embedder) as mem:
        run_demo(mem)


@app.command()
def remember(
    content: Annotated[str, typer.Argument(help="The text to remember.")],
    agent: Annotated[str, typer.Option(help="Agent id.")] = "default",
    run: Annotated[str | None, typer.Option(help="Run id.")] = None,
    namespace: Annotated[str, typer.Option(help="Namespace.")] = "default",
    category: Annotated[str, typer.Option(help="episodic|semantic|procedural|summary")] = "semantic",
    tier: Annotated[str, typer.Option(help="short_term|long_term")] = "long_term",
    importance: Annotated[float, typer.Option(help="0..1")] = 0.5,
    tag: Annotated[list[str] | None, typer.Option(help="A tag (repeatable).")] = None,
    db: DbOpt = "graphmem.db",
    embedder: EmbedOpt = "none",
    as_json: JsonOpt = False,
) -> None:
    """Store one memory."""
    with _open(db, embedder) as mem:
        m = mem.remember(content, agent_id=agent, run_id=run, namespace=namespace,
                         category=category, tier=tier, importance=importance, tags=tag or [])
        _emit(as_json, m, m.id)


@app.command()
def recall(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option(help="How many results.")] = 5,
    agent: Annotated[str | None, typer.Option(help="Only this agent's memories.")] = None,
    namespace: Annotated[str | None, typer.Option(help="Only this namespace.")] = None,
    db: DbOpt = "graphmem.db",
    embedder: EmbedOpt = "none",
    as_json: JsonOpt = False,
) -> None:
    """Recall the memories most relevant to a query."""
    with _open(db, embedder) as mem:
        results = mem.recall(query, k=k, agent_id=agent, namespace=namespace)
        text = "\n".join(f"{r.score:7.3f}  {r.memory.id}  {r.memory.content}" for r in results)
        _emit(as_json, results, text or "(nothing relevant)")


@app.command()
def show(
    memory_id: Annotated[str, typer.Argument(help="Memory id.")],
    db: DbOpt = "graphmem.db",
    as_json: JsonOpt = False,
) -> None:
    """Show one memory with all its fields."""
    with _open(db) as mem:
        m = mem.get(memory_id)
        lines = [f"{k}: {v}" for k, v in _jsonable(m).items()]
        _emit(as_json, m, "\n".join(lines))


@app.command()
def history(
    memory_id: Annotated[str, typer.Argument(help="Memory id (any version).")],
    db: DbOpt = "graphmem.db",
    as_json: JsonOpt = False,
) -> None:
    """Show every version of a memory (its SUPERSEDES chain), oldest first."""
    with _open(db) as mem:
        versions = mem.history(memory_id)
        text = "\n".join(
            f"{v.valid_from:%Y-%m-%d %H:%M} [{v.status.value}] {v.id}  {v.content}"  # type: ignore[str-format]
            for v in versions
        )
        _emit(as_json, versions, text)


@app.command()
def forget(
    memory_id: Annotated[str, typer.Argument(help="Memory id.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report.")] = False,
    db: DbOpt = "graphmem.db",
    as_json: JsonOpt = False,
) -> None:
    """Delete a memory, its versions and what was derived from it."""
    with _open(db) as mem:
        report = mem.forget(memory_id, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        _emit(as_json, report,
              f"{verb} {len(report.deleted)} memories, restored {len(report.restored)}")


@app.command()
def stats(db: DbOpt = "graphmem.db", as_json: JsonOpt = False) -> None:
    """Print node/edge counts and the store's size."""
    with _open(db) as mem:
        s = mem.stats()
        text = "\n".join(f"{k}: {v}" for k, v in s.items())
        _emit(as_json, s, text)


@app.command("export")
def export_cmd(
    path: Annotated[str, typer.Argument(help="Output file (JSON lines), or - for stdout.")],
    db: DbOpt = "graphmem.db",
) -> None:
    """Export the whole graph as JSON lines."""
    with _open(db) as mem:
        report = mem.export(sys.stdout if path == "-" else path)
        if path != "-":
            typer.echo(f"exported {report.nodes} nodes and {report.edges} edges to {path}")


@app.command("import")
def import_cmd(
    path: Annotated[str, typer.Argument(help="A file written by `graphmem export`.")],
    db: DbOpt = "graphmem.db",
) -> None:
    """Import a JSON-lines export (validated completely before anything is written)."""
    with _open(db) as mem:
        report = mem.import_(path)
        typer.echo(f"imported {report.nodes} nodes and {report.edges} edges")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
