"""The ``graphmem`` command line: every capability of GraphMemory, for people and scripts.

Every command opens the store the settings name — ``--db`` (a path, ``memory://`` or
``neo4j://…``), else ``GRAPHMEM_URL``, else the ``--config`` TOML file, else ``./graphmem.db``
(see :mod:`graphmem.config` for the precedence) — and prints text, or JSON with ``--json``.
Errors print ``error: <Type>: <message>`` on stderr and exit with status 1 (2 for bad
settings or usage). Long work shows a progress bar on stderr.
"""

# importing the command modules registers their commands on ``app``; main then finishes it
from graphmem.cli import admin, groups, lifecycle, memories
from graphmem.cli.app import app
from graphmem.cli.main import main

__all__ = ["admin", "app", "groups", "lifecycle", "main", "memories"]
