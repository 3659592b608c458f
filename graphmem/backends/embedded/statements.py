"""Statements of an embedded write that touch rows the in-memory plan does not build:
where runs' chains end, and what a delete removes.

A run's head (its event count and last memory) is a row of its own in ``run_heads``,
overriding those two fields of the run's row: a batch appends to hundreds of runs, and
setting the fields inside each run's JSON rewrote a row in a page of its own for each
(~66 of a batch's ~520 pages at 60k memories), with the JSON parsed and written again."""

from __future__ import annotations

import sqlite3
from typing import Any


def write_heads(
    db: sqlite3.Connection, rid_of: dict[str, int], heads: list[tuple[str, int, str | None]]
) -> None:
    """Set where stored runs' chains end (see ``NetworkXBackend._heads_of``), their rows
    as stored."""
    # every run named is one this handle holds, and it is current with the file under the
    # write lock (see ``_heads_of``): no other process can have deleted it
    db.executemany(
        "INSERT OR REPLACE INTO run_heads(rid, event_count, last_event_id) VALUES (?, ?, ?)",
        [(rid_of[k], c, last) for k, c, last in heads],
    )


def forget_heads(db: sqlite3.Connection, rids: list[tuple[int]]) -> None:
    """Let the rows of the runs ``rids`` (written whole) say where their chains end."""
    if rids:
        db.executemany("DELETE FROM run_heads WHERE rid = ?", rids)


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
        forget_heads(db, plan["rids"])  # a later node may take a deleted one's rid
        db.executemany("DELETE FROM nodes WHERE rid = ?", plan["rids"])
