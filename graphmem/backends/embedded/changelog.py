"""The embedded store's change log: which node keys each write changed, so that other
handles and processes reload only those (see ``EmbeddedJournal._refresh``), and the
position a state file or a saved vector graph was made at.

A position counts changed keys: a write that changed ``n`` keys takes the ``n`` positions
after the last one and is one row, its ``seq`` the last of them. A row's ``key`` is the one
key (every row of a store written before schema version 3) or a JSON list of the keys in
position order (node keys begin with a label's name, never with ``[``). One row a write
instead of one a key: a batch of 1,000 memories changes ~2,500 keys, and a row each cost
more than its memories' own rows."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection

import orjson

from graphmem.backends.embedded.commit import Pending


def _keys_of(text: str) -> list[str]:
    keys: list[str] = orjson.loads(text) if text.startswith("[") else [text]
    return keys


def counter(db: sqlite3.Connection) -> int:
    """The last position handed out (the table's AUTOINCREMENT counter, not max(seq): a
    position is never handed out twice, even once pruned)."""
    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
    return int(row[0]) if row else 0


def log(db: Pending, keys: Collection[str], *, after: int) -> int:
    """Record ``keys`` as one write's changes (inside the caller's write transaction, whose
    :func:`counter` was ``after``); the new last position."""
    seq = after + len(keys)
    text = next(iter(keys)) if len(keys) == 1 else orjson.dumps(list(keys)).decode()
    db.execute("INSERT INTO changes(seq, key) VALUES (?, ?)", (seq, text))
    return seq


def last(db: sqlite3.Connection) -> int:
    """The last position logged (0 for none)."""
    pos: int = db.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0]
    return pos


def reach(db: sqlite3.Connection) -> tuple[int, int] | None:
    """(the first position the log still holds, the last), or None when it holds none:
    a reader at position ``p`` can catch up when the first is at most ``p + 1``."""
    row = db.execute("SELECT seq, key FROM changes ORDER BY seq LIMIT 1").fetchone()
    if row is None:
        return None
    return row[0] - len(_keys_of(row[1])) + 1, last(db)


def keys_since(db: sqlite3.Connection, seq: int) -> set[str]:
    """The keys changed after position ``seq`` (a position some write ended at)."""
    out: set[str] = set()
    for (text,) in db.execute("SELECT key FROM changes WHERE seq > ?", (seq,)):
        out.update(_keys_of(text))
    return out


def prune(db: Pending, upto: int) -> None:
    """Forget the writes that ended at or before position ``upto``."""
    db.execute("DELETE FROM changes WHERE seq <= ?", (upto,))


#: changes up to a state file's position that name it: a store put back from a copy and
#: written to again can reach the same position with the same last change (the same node
#: changed last in both histories), hardly with the same sixteen
POSITION_KEYS = 16


def _position_keys(db: sqlite3.Connection, seq: int) -> list[str]:
    """The keys at the last :data:`POSITION_KEYS` positions up to ``seq`` the log still
    holds, oldest first; none when no write the log holds ended at ``seq``."""
    rows = db.execute(
        "SELECT seq, key FROM changes WHERE seq > ? AND seq <= ? ORDER BY seq",
        (seq - POSITION_KEYS, seq),
    ).fetchall()
    if not rows or rows[-1][0] != seq:
        return []
    keys: list[str] = []
    for _end, text in rows:
        keys += _keys_of(text)
    # the first row may begin before the window (it is one write of many keys)
    return keys[-POSITION_KEYS:]


def position_key(db: sqlite3.Connection, seq: int) -> str | None:
    """What a state file at ``seq`` records of the change log there (None when the log
    holds no change at ``seq``): the keys of the last changes up to it."""
    keys = _position_keys(db, seq)
    return json.dumps(keys) if keys else None


def same_position(db: sqlite3.Connection, seq: int, recorded: str | None) -> bool:
    """Whether the change log at ``seq`` is the one a state file recorded: the changes
    both still know (the log forgets its oldest) name the same nodes."""
    if recorded is None:
        return False
    try:
        saved = json.loads(recorded)
    except ValueError:
        return False
    if not isinstance(saved, list) or not saved:
        return False
    held = _position_keys(db, seq)
    n = min(len(saved), len(held))
    return bool(n) and saved[-n:] == held[-n:]


def memory_changes_since(db: sqlite3.Connection, seq: int) -> set[str] | None:
    """The memory keys the change log names after ``seq`` (inside the caller's read
    snapshot); None when the log no longer reaches back there, or when ``seq`` is ahead
    of it (a file saved for a later state of a store put back from a copy)."""
    held = reach(db)
    if held is None:
        return set() if seq == 0 else None
    first, hi = held
    if seq > hi or seq < first - 1:
        return None
    return {k for k in keys_since(db, seq) if k.startswith("Memory:")}
