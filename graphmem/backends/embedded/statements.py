"""Statements of an embedded write beside its node rows: its edges, where runs' chains
end, and what a delete removes.

A run's head (its event count and last memory) is a row of its own in ``run_heads``,
overriding those two fields of the run's row: a batch appends to hundreds of runs, and
setting the fields inside each run's JSON rewrote a row in a page of its own for each
(~66 of a batch's ~520 pages at 60k memories), with the JSON parsed and written again."""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from graphmem.backends.embedded.commit import Pending
from graphmem.backends.embedded.rows import NEXT, _encode_edge_props


def write_heads(
    db: Pending, rid_of: dict[str, int], heads: list[tuple[str, int, str | None]]
) -> None:
    """Set where stored runs' chains end (see ``NetworkXBackend._heads_of``), their rows
    as stored."""
    # every run named is one this handle holds, and it is current with the file under the
    # write lock (see ``_heads_of``): no other process can have deleted it
    if heads:
        keys, counts, lasts = zip(*heads, strict=True)
        db.insert_columns(
            "INSERT OR REPLACE INTO run_heads(rid, event_count, last_event_id)",
            [list(map(rid_of.__getitem__, keys)), counts, lasts],
        )


def write_edges(
    db: Pending,
    plan: dict[str, Any],
    rid_of: dict[str, int],
    succ: dict[str, dict[str, dict[str, Any]]],
) -> None:
    """A write plan's edges (its nodes' rows written): a bare NEXT edge (a run's chain) as
    two row ids in ``next_edges``, any other in ``edges``; one already held (``succ``: the
    handle's adjacency) may be stored in the other table (an older store's NEXT edges are
    in ``edges``), and is taken from there."""
    fresh = plan["fresh"]
    at = dict(zip(fresh.keys, fresh.rids, strict=True)) if fresh is not None else {}
    # an edge into a memory this write makes is not held yet (a run's chain: most edges of
    # a batch): the adjacency not looked at, whose dicts are mostly out of the CPU's caches
    born: Container[str] = fresh.by_key if fresh is not None else ()
    at.update(plan["rids"])
    plan["edge_rids"] = at  # the batch's new nodes' rids, for a delete in the same write
    next_dst: list[int] = []
    next_src: list[int] = []
    rows, moved_out, moved_in = [], [], []
    none: dict[str, Any] = {}
    for src, etype, dst, props in plan["edges"]:
        held = dst not in born and etype in succ.get(src, none).get(dst, ())
        if etype == NEXT and not props:
            next_dst.append(at.get(dst) or rid_of[dst])
            next_src.append(at.get(src) or rid_of[src])
            if held:
                moved_out.append((src, etype, dst))
        else:
            rows.append((src, etype, dst, _encode_edge_props(props)))
            if held and etype == NEXT:
                moved_in.append((src, dst))
    if moved_out:
        db.executemany("DELETE FROM edges WHERE src=? AND type=? AND dst=?", moved_out)
    unlink_next(db, moved_in, at, rid_of)
    db.insert_columns("INSERT OR IGNORE INTO next_edges(dst, src)", [next_dst, next_src])
    db.insert(
        "INSERT INTO edges(src, type, dst, props)",
        rows,
        "ON CONFLICT(src, type, dst) DO UPDATE SET props = excluded.props",
    )


def unlink_next(
    db: Pending,
    pairs: list[tuple[str, str]],
    new: dict[str, int],
    rid_of: dict[str, int],
) -> None:
    """Remove the bare NEXT edges (src key, dst key) ``pairs`` held in ``next_edges``
    (``new``: the rids of the write's new nodes; a pair naming a node the store does not
    hold names no row)."""
    rows = []
    for s, d in pairs:
        src, dst = new.get(s) or rid_of.get(s), new.get(d) or rid_of.get(d)
        if src is not None and dst is not None:
            rows.append((dst, src))
    if rows:
        db.executemany("DELETE FROM next_edges WHERE dst = ? AND src = ?", rows)


def forget_heads(db: Pending, rids: list[tuple[int]]) -> None:
    """Let the rows of the runs ``rids`` (written whole) say where their chains end."""
    if rids:
        db.executemany("DELETE FROM run_heads WHERE rid = ?", rids)


def forget_texts(db: Pending, rows: list[tuple[int, str]]) -> None:
    """Take rows (row id, the text it was indexed with) out of the full-text index (a
    contentless index forgets a row only given the text it indexed)."""
    if rows:
        db.executemany(
            "INSERT INTO memory_fts(memory_fts, rowid, content) VALUES ('delete', ?, ?)", rows
        )


def write_delete(
    db: Pending, plan: dict[str, Any], new: dict[str, int], rid_of: dict[str, int]
) -> None:
    """Remove what a delete plan (``NetworkXBackend._plan_delete``) names (``new``: the
    rids of the write's new nodes)."""
    if plan["edges"]:
        db.executemany("DELETE FROM edges WHERE src=? AND type=? AND dst=?", list(plan["edges"]))
        unlink_next(db, [(s, d) for s, t, d in plan["edges"] if t == NEXT], new, rid_of)
    forget_texts(db, plan["fts"])
    if plan["rids"]:
        db.executemany("DELETE FROM vectors WHERE rid = ?", plan["rids"])
        forget_heads(db, plan["rids"])  # a later node may take a deleted one's rid
        db.executemany("DELETE FROM nodes WHERE rid = ?", plan["rids"])
