"""Pausing Python's cyclic garbage collector around bulk work.

A batch write allocates many small acyclic containers (validated models, property dicts,
index entries). Each collection they trigger walks every tracked object of the process,
the whole in-memory graph of an embedded store included: at 100k memories that was a
third of ``remember_many``'s CPU time. Nothing a batch builds is cyclic garbage, so the
collector is paused while it runs and resumes after.

The pause is counted across threads: the collector resumes when the last pauser leaves
(and only when it was enabled before the first one came).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


class _Pause:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.resume = False


_PAUSE = _Pause()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic garbage collector paused (nested and threaded use
    is fine)."""
    p = _PAUSE
    with p.lock:
        if p.depth == 0:
            p.resume = gc.isenabled()
            gc.disable()
        p.depth += 1
    try:
        yield
    finally:
        with p.lock:
            p.depth -= 1
            if p.depth == 0 and p.resume:
                gc.enable()
