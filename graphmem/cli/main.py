"""The entry point: quiet flag help on every command, and ``main``."""

from __future__ import annotations

import atexit
import gc
import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_name

from graphmem.cli.app import _config_first, app


def _without_flag_hints(params: list[Any]) -> list[Any]:
    """Flags take no value, so their help shows no ``<bool>`` value hint."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.short_help is None and self.help:
            # the command list shows the first paragraph of the docstring, and in rich
            # markup keeps its source line breaks: one line, rich wraps it to the column
            self.short_help = " ".join(inspect.cleandoc(self.help).split("\n\n")[0].split())

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


def _invoked(argv: list[str]) -> str | None:
    """The command (or group) name ``argv`` invokes, None for none (help, version)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--config":
            i += 2
            continue
        if not arg.startswith("-"):
            return arg
        if arg == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        i += 1
    return None


@contextmanager
def _only(name: str | None) -> Iterator[None]:
    """Let typer build only the command (or group) ``name`` into the click tree: building
    all ~40 commands reads every signature and costs a cold ``graphmem recall`` tens of
    ms. An unknown or absent name keeps the whole tree (help, "No such command")."""
    commands = app.registered_commands
    groups = app.registered_groups
    chosen = [c for c in commands if _command_name(c) == name]
    chosen_groups = [g for g in groups if g.name == name]
    if name is None or not (chosen or chosen_groups):
        yield
        return
    app.registered_commands, app.registered_groups = chosen, chosen_groups
    try:
        yield
    finally:
        app.registered_commands, app.registered_groups = commands, groups


def _command_name(info: Any) -> str:
    callback = info.callback
    return str(info.name or get_command_name(getattr(callback, "__name__", "")))


def _no_final_collections() -> None:
    """At exit, before the interpreter tears itself down: move every object into the
    collector's permanent generation. The teardown's collections then skip the heap the
    imports built (pydantic's schemas, numpy, ONNX Runtime), which cost a cold command
    0.1-0.3 s of CPU after its answer was printed. What must be released is released
    before: the command closed its store, atexit handlers and ``weakref.finalize`` still
    run, and the process's memory goes back to the system either way."""
    gc.freeze()


_EXIT_HOOK: list[bool] = []


def main() -> None:
    """Console-script entry point."""
    if not _EXIT_HOOK:  # once per process (a test may call main many times)
        _EXIT_HOOK.append(True)
        atexit.register(_no_final_collections)
    argv = _config_first(sys.argv[1:])
    with _only(_invoked(argv)):
        app(args=argv, prog_name="graphmem")
