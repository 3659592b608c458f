"""A filter's time ranges answered from the memory table's time columns (see
:class:`~graphmem.backends.embedded.records.MemoryTable`): the rows within a range found
in C, where a predicate per memory costs ~5 µs (~0.5 s for a question naming a month
over 100k memories). What these give is a superset that the caller checks memory by
memory, so they need not answer every kind of range exactly."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from graphmem.backends.embedded.records import _EPOCH, _NONE, _US, MemoryTable, NodeTable
from graphmem.models import Filter, NodeLabel

_MEMORY_PREFIX = "Memory:"


def keys_in_range(
    table: MemoryTable,
    field: str,
    bounds: tuple[Any, Any, Any, Any],
    or_missing: bool,
    most: int,
) -> list[str] | None:
    """The keys of the rows whose time ``field`` lies within ``bounds`` (a range's ``gte,
    gt, lte, lt``; None: unbounded), and those without it when ``or_missing``: a pass over
    the column in C. A superset by a microsecond at each end (a row's time is read back
    through a float). None when the column cannot answer (not a time field, a bound that
    is not a datetime) or when more than ``most`` rows pass: a set of nearly every key
    costs more than it narrows."""
    col = table.times.get(field)
    if col is None or any(b is not None and not isinstance(b, datetime) for b in bounds):
        return None
    n = len(table.keys)
    us = np.frombuffer(col, dtype=np.int64)[:n]
    held = us != _NONE
    mask = held
    gte, gt, lte, lt = bounds
    for low in (gte, gt):
        if low is not None:
            mask = mask & (us >= (low - _EPOCH) // _US - 1)
    for high in (lte, lt):
        if high is not None:
            mask = mask & (us <= (high - _EPOCH) // _US + 1)
    if or_missing:
        mask = mask | ~held
    rows = np.flatnonzero(mask)
    if len(rows) > most:
        return None
    return table.keys_at(rows)


def memories_within(
    nodes: NodeTable, by_label: dict[NodeLabel, set[str]], flt: Filter, few: int
) -> set[str] | None:
    """The memories that may pass ``flt``'s time ranges (a superset: the caller checks
    each), or None when the columns cannot narrow them to a fifth of the memories (at
    least ``few``). Memories held as dicts rather than rows (a time the columns cannot
    hold) are always in."""
    table = nodes.memories
    every = len(by_label.get(NodeLabel.MEMORY, ()))
    found: set[str] | None = None
    for r in flt.ranges:
        keys = keys_in_range(
            table, r.field, (r.gte, r.gt, r.lte, r.lt), r.or_missing, max(every // 5, few)
        )
        if keys is not None:
            found = set(keys) if found is None else found.intersection(keys)
    if found is not None and every > len(table):
        found.update(k for k in nodes.dicts if k.startswith(_MEMORY_PREFIX))
    return found
