"""The command tree, its shared options and the plumbing every command uses (open, emit,
progress).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from graphmem.backends import store_path
from graphmem.config import Settings
from graphmem.errors import ConfigError, GraphMemError
from graphmem.memory import GraphMemory
from graphmem.opening import open_memory

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
        help="auto | onnx | onnx:fp32 | onnx:int8 | torch | none | hash | a "
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
    """The path of an embedded store that does not exist yet (None: it exists, the url
    names a server or an in-memory store, or it names nothing: the open says why)."""
    try:
        named = store_path(url)
    except GraphMemError:
        return None
    if named is None:
        return None
    path = Path(named)
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
        mem = open_memory(settings, **options)
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


ScopeOpt = Annotated[
    str | None, typer.Option("--scope", help="Only what this agent may read (own, shared, org).")
]
