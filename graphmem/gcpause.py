"""Pausing Python's cyclic garbage collector around bulk work.

A batch write allocates many small acyclic containers (validated models, property dicts,
index entries). Each collection they trigger walks every tracked object of the process,
the whole in-memory graph of an embedded store included: at 100k memories that was a
third of ``remember_many``'s CPU time. Nothing a batch builds is cyclic garbage, so the
collector is paused while it runs and resumes after.

The pause is counted across threads: the collector resumes when the last pauser leaves
(and only when it was enabled before the first one came). A process forked meanwhile keeps
only the forking thread's pauses: the other pausers do not exist in the child, and would
otherwise keep its collector off for good.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused", "promote_all"]


class _Pause:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        #: the pauses each thread holds (by its ident), which add up to ``depth``
        self.held: dict[int, int] = {}
        self.resume = False
        #: the outermost pauser asked for the pause's objects to be promoted
        self.promote = False


_PAUSE = _Pause()


def _after_fork_in_child() -> None:
    """In a forked child, only the forking thread is left: the pauses of the others end
    (their lock may have been held by one of them at the fork)."""
    p = _PAUSE
    p.lock = threading.Lock()
    me = threading.get_ident()
    mine = p.held.get(me, 0)
    p.held = {me: mine} if mine else {}
    p.depth = mine
    if mine == 0:
        p.promote = False
        if p.resume:
            gc.enable()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@contextmanager
def gc_paused(*, promote: bool = False) -> Iterator[None]:
    """Run the block with the cyclic garbage collector paused (nested and threaded use
    is fine).

    ``promote`` (for bulk work, by the outermost pauser): the objects the block leaves
    behind go to the oldest generation when the pause ends (a freeze and an unfreeze: two
    list splices) instead of waiting for the collector's next young pass, which would walk
    them all (a batch of 1,000 memories leaves ~10,000: its models, the rows and links the
    store keeps; ~2 ms, and again at the middle generation's pass). So that only the
    block's objects are promoted, the young generations are collected first (the
    caller's objects since the last pause: a few). The interpreter's rule for a full
    collection never counts promoted objects (the block's are acyclic by design), and
    finds them when it runs for the others."""
    p = _PAUSE
    with p.lock:
        if p.depth == 0:
            p.resume = gc.isenabled()
            gc.disable()
            # not when the process keeps frozen objects of its own (an unfreeze would
            # release them), nor when the collector was off to begin with
            p.promote = promote and p.resume and gc.get_freeze_count() == 0
            if p.promote:
                gc.collect(1)
        p.depth += 1
        me = threading.get_ident()
        p.held[me] = p.held.get(me, 0) + 1
    try:
        yield
    finally:
        with p.lock:
            p.depth -= 1
            left = p.held.get(me, 1) - 1
            if left:
                p.held[me] = left
            else:
                p.held.pop(me, None)
            if p.depth == 0:
                if p.promote:
                    gc.freeze()
                    gc.unfreeze()
                    p.promote = False
                if p.resume:
                    gc.enable()


def promote_all() -> None:
    """Move every object the collector tracks into its oldest generation without walking
    them (a freeze, then an unfreeze: two list splices).

    An open builds hundreds of thousands of containers that live as long as the store.
    Left young, the collector's next two passes (young, then middle generation) walk all
    of them right after the open — 0.2-0.4 s at 100k memories — only to find them alive.
    Promoted, only full collections see them, as they would after those two passes.
    The process's other young objects are promoted too: cyclic garbage among them is
    reclaimed at the next full collection instead of a younger one. Skipped when the
    process keeps frozen objects of its own (an unfreeze would release them)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
