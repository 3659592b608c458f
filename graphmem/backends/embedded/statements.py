"""Statements of an embedded write that touch rows the in-memory plan does not build:
where runs' chains end, and what a delete removes."""

from __future__ import annotations

import sqlite3
from typing import Any

from graphmem.errors import Conflict


def write_heads(
    db: sqlite3.Connection, rid_of: dict[str, int], heads: list[tuple[str, int, str | None]]
) -> None:
    """Set where stored runs' chains end in their rows, their other properties as stored
    (see ``NetworkXBackend._heads_of``)."""
    if not heads:
        return
    ended = [(c, last, rid_of[k]) for k, c, last in heads if last is not None]
    empty = [(c, rid_of[k]) for k, c, last in heads if last is None]
    done = 0
    if ended:
        done += db.executemany(
            "UPDATE nodes SET props = json_set(props, '$.event_count', ?, "
            "'$.last_event_id', ?) WHERE rid = ?",
            ended,
        ).rowcount
    if empty:
        done += db.executemany(
            "UPDATE nodes SET props = json_remove(json_set(props, '$.event_count', ?), "
            "'$.last_event_id') WHERE rid = ?",
            empty,
        ).rowcount
    if done != len(heads):
        raise Conflict("the store changed underneath this write; retry")


def write_delete(db: sqlite3.Connection, plan: dict[str, Any]) -> None:
    """Remove what a delete plan (``NetworkXBackend._plan_delete``) names."""
    if plan["edges"]:
        db.executemany("DELETE FROM edges WHERE src=? AND type=? AND dst=?", list(plan["edges"]))
    if plan["fts"]:
        db.executemany(
            "INSERT INTO memory_fts(memory_fts, rowid, content) VALUES ('delete', ?, ?)",
            plan["fts"],
        )
    if plan["rids"]:
        db.executemany("DELETE FROM vectors WHERE rid = ?", plan["rids"])
        db.executemany("DELETE FROM nodes WHERE rid = ?", plan["rids"])
