"""What every sub-object of a NullMemory shares: the store's clock, and nothing kept."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime


class NullPart:
    """A sub-object of a NullMemory: it validates and returns, and stores nothing; the
    times it stamps come from the store's clock."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
