"""Threads for the concurrency tests: started together, joined within a bound.

A worker stuck in a driver or a lock must fail its test with a count, not hang the run (and,
since a non-daemon thread blocks the interpreter's exit, the CI job after it); and an
exception in a worker must fail the test, not vanish into a warning."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any


def run_threads(
    target: Callable[..., Any], args: Iterable[Sequence[Any]], *, timeout_s: float = 240.0
) -> None:
    """Run ``target(*a)`` for each ``a`` in ``args``, each on its own daemon thread; wait
    for all of them for at most ``timeout_s`` in total. Fails if one is still running, and
    raises the first exception a worker raised."""
    errors: list[BaseException] = []
    lock = threading.Lock()

    def guarded(*a: Any) -> None:
        try:
            target(*a)
        except BaseException as e:  # raised again by the caller's thread below
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=guarded, args=tuple(a), daemon=True) for a in args]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = sum(t.is_alive() for t in threads)
    assert not stuck, f"{stuck} of {len(threads)} threads still running after {timeout_s:.0f} s"
    if errors:
        raise errors[0]
