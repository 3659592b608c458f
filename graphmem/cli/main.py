"""The entry point: quiet flag help on every command, and ``main``."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from graphmem.cli.app import _config_first, app


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
