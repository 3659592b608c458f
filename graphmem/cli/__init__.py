"""The ``graphmem`` command line: every capability of GraphMemory, for people and scripts.

Every command opens the store the settings name — ``--db`` (a path, ``memory://`` or
``neo4j://…``), else ``GRAPHMEM_URL``, else the ``--config`` TOML file, else ``./graphmem.db``
(see :mod:`graphmem.config` for the precedence) — and prints text, or JSON with ``--json``.
Errors print ``error: <Type>: <message>`` on stderr and exit with status 1 (2 for bad
settings or usage). Long work shows a progress bar on stderr.
"""

import gc
import os

# numpy's OpenBLAS starts a worker thread per core that spins (~0.1 s of busy waiting) before
# it sleeps, once at import and after each threaded product: 35-45 ms of CPU that every cold
# command paid for nothing, taken from a core the command could use on a busy machine. A
# worker woken from sleep costs microseconds, little beside a product big enough to thread. Before
# anything imports numpy; a value the user set wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from graphmem.gcpause import gc_paused

# The imports below build ~40k objects (pydantic's model schemas above all) and none of
# them is garbage: the collector would run ~100 times over them for nothing.
with gc_paused():
    # importing the command modules registers their commands on ``app``; main finishes it
    from graphmem.cli import admin, groups, lifecycle, memories
    from graphmem.cli.app import app
    from graphmem.cli.main import main

    # Once resumed, its first collections (young, then middle generation) would still walk
    # all of them, ~50 ms each for a cold command: straight into the oldest generation
    # instead (freeze, then unfreeze, moves them there without a walk), which only a full
    # collection scans, so nothing is kept from the collector for good. Before it resumes:
    # the first allocation after would trigger that walk.
    gc.freeze()
    gc.unfreeze()

__all__ = ["admin", "app", "groups", "lifecycle", "main", "memories"]
