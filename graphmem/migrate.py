"""Copy a whole memory graph from one backend to another (``graphmem migrate SRC DST``).

The source is read with :meth:`GraphBackend.scan` (every node, then every edge, in batches)
and each batch is written to the destination with one :meth:`GraphBackend.write`, so a
batch is one transaction (one round trip on Neo4j). Structural edges (AUTHORED_BY, IN_RUN,
RUN_BY, TAGGED) are not copied as such: the destination derives them from the node
properties, exactly as it does for any write. Upserts replace by id, so running the same
migration again — after an interruption, say — converges on the same destination graph
(idempotent, hence resumable). The embedding model the source records goes along: a
destination that records another one is refused before anything is copied. At the end the
node count of every label and the edge count of every type are compared between source and
destination.

Example::

    report = migrate("graphmem.db", "neo4j://localhost:7687", auth=("neo4j", "secret"))
    assert report.verified
"""

from __future__ import annotations

import logging
import os
import sys
import time
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from graphmem.backends import open_backend, store_path
from graphmem.backends.base import GraphBackend, StoreFiles, WriteBatch
from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.fingerprint import check_incoming, record, recorded
from graphmem.models import Edge, EdgeType, GraphNode

__all__ = [
    "STRUCTURAL_EDGE_TYPES",
    "MigrationMismatch",
    "MigrationReport",
    "ProgressCallback",
    "migrate",
]

log = logging.getLogger("graphmem.migrate")

ProgressCallback = Callable[[str, int, int], None]
"""``progress(stage, done, total)`` with stage ``"nodes"``, ``"edges"`` or ``"verify"``."""

STRUCTURAL_EDGE_TYPES = frozenset(
    {EdgeType.AUTHORED_BY, EdgeType.IN_RUN, EdgeType.RUN_BY, EdgeType.TAGGED}
)
"""Edge types every backend derives from node properties (not copied, re-derived)."""

_SERVER_SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")


class MigrationReport(BaseModel):
    """What a migration did and whether the destination matches the source."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    source: str
    destination: str
    dry_run: bool
    nodes_copied: int
    edges_copied: int
    """Non-structural edges written (structural ones are derived by the destination)."""
    batches: int
    source_nodes: dict[str, int]
    source_edges: dict[str, int]
    destination_nodes: dict[str, int]
    destination_edges: dict[str, int]
    mismatches: dict[str, tuple[int, int]]
    """``"node:Memory"`` / ``"edge:NEXT"`` -> (source count, destination count)."""
    verified: bool
    seconds: float


def _is_server(url: str) -> bool:
    return url.partition("://")[0] in _SERVER_SCHEMES


def _open(
    target: str | GraphBackend, options: Mapping[str, Any] | None, auth: Any
) -> tuple[GraphBackend, bool, str]:
    """(backend, whether we opened it, a printable location)."""
    if isinstance(target, str):
        opts = dict(options or {})
        if auth is not None and _is_server(target) and "@" not in target.partition("://")[2]:
            opts.setdefault("auth", auth)
        backend = open_backend(target, **opts)
        return backend, True, str(getattr(backend, "location", target))
    if isinstance(target, GraphBackend):
        return target, False, str(getattr(target, "location", repr(target)))
    raise InvalidInput(f"migrate takes a URL or a backend, got {type(target).__name__}")


def _one_file(a: GraphBackend, b: GraphBackend) -> bool:
    """Whether two embedded stores are one file opened twice (under two spellings)."""
    if not (isinstance(a, StoreFiles) and isinstance(b, StoreFiles)):
        return False
    first, second = a.store_files()[:1], b.store_files()[:1]
    try:
        return bool(first and second) and os.path.samefile(first[0], second[0])
    except OSError:  # a file that is not there yet is not the other one
        return False


def _compare(
    src: Mapping[str, int], dst: Mapping[str, int], kind: str
) -> dict[str, tuple[int, int]]:
    return {
        f"{kind}:{key}": (src.get(key, 0), dst.get(key, 0))
        for key in sorted(set(src) | set(dst))
        if src.get(key, 0) != dst.get(key, 0)
    }


class MigrationMismatch(Conflict):
    """A migration that finished with counts that differ between source and destination;
    ``report`` says what was copied and counted."""

    def __init__(self, message: str, report: MigrationReport) -> None:
        super().__init__(message)
        self.report = report


def migrate(
    src: str | GraphBackend,
    dst: str | GraphBackend,
    *,
    batch_size: int = 1000,
    progress: ProgressCallback | None = None,
    dry_run: bool = False,
    verify: bool = True,
    strict: bool = True,
    auth: Any = None,
    src_options: Mapping[str, Any] | None = None,
    dst_options: Mapping[str, Any] | None = None,
) -> MigrationReport:
    """Copy every node and edge of ``src`` into ``dst`` (URLs as for ``open_backend``, or
    open backends, which are then left open).

    ``batch_size`` nodes or edges go in one transaction. ``progress(stage, done, total)`` is
    called after every batch. ``dry_run`` reads the whole source and writes nothing.
    ``auth`` is used for a server URL that carries no credentials of its own;
    ``src_options``/``dst_options`` go to ``open_backend``. With ``verify`` the counts per
    label and edge type are compared at the end; a difference raises ``Conflict`` when
    ``strict`` (the report is on the exception as ``report``), else it is reported.
    """
    if batch_size < 1:
        raise InvalidInput("batch_size must be >= 1")
    if isinstance(src, str) and isinstance(dst, str) and src == dst and src != "memory://":
        raise InvalidInput("source and destination are the same store")
    if isinstance(src, str) and (path := store_path(src)) is not None and not Path(path).exists():
        raise NotFound(f"no store at {path} (a migration never creates its source)")
    started = time.perf_counter()
    source, own_src, src_loc = _open(src, src_options, auth)
    try:
        destination, own_dst, dst_loc = _open(dst, dst_options, auth)
    except BaseException:
        if own_src:
            source.close()
        raise
    try:
        if source is destination or _one_file(source, destination):
            raise InvalidInput("source and destination are the same store")
        before = source.stats()
        total_nodes = sum(before.nodes.values())
        total_edges = sum(
            n for t, n in before.edges.items() if EdgeType(t) not in STRUCTURAL_EDGE_TYPES
        )
        # the vectors' model goes along: a destination of another model is refused first
        model = recorded(source) if before.embedding_dim is not None else None
        adopt = check_incoming(destination, model, f"the migration from {src_loc}")
        if not dry_run:
            destination.ensure_schema(embedding_dim=before.embedding_dim)
        nodes_done = edges_done = batches = 0
        log.info(
            "migrating %d nodes and %d edges from %s to %s%s",
            total_nodes,
            total_edges,
            src_loc,
            dst_loc,
            " (dry run)" if dry_run else "",
        )
        for nodes, edges in source.scan(batch_size=batch_size):
            batch_nodes: list[GraphNode] = list(nodes)
            batch_edges: list[Edge] = [e for e in edges if e.type not in STRUCTURAL_EDGE_TYPES]
            if not batch_nodes and not batch_edges:
                continue
            if not dry_run:
                destination.write(WriteBatch(nodes=batch_nodes, edges=batch_edges))
            batches += 1
            nodes_done += len(batch_nodes)
            edges_done += len(batch_edges)
            if progress is not None:
                if batch_nodes:
                    progress("nodes", nodes_done, max(total_nodes, nodes_done))
                else:
                    progress("edges", edges_done, max(total_edges, edges_done))
            log.debug("batch %d: %d nodes, %d edges", batches, len(batch_nodes), len(batch_edges))
        if adopt and model is not None and not dry_run:
            record(destination, model)
        after = destination.stats() if verify and not dry_run else None
        if progress is not None and after is not None:
            progress("verify", 1, 1)
        mismatches: dict[str, tuple[int, int]] = {}
        if after is not None:
            mismatches = {
                **_compare(before.nodes, after.nodes, "node"),
                **_compare(before.edges, after.edges, "edge"),
            }
        report = MigrationReport(
            source=src_loc,
            destination=dst_loc,
            dry_run=dry_run,
            nodes_copied=0 if dry_run else nodes_done,
            edges_copied=0 if dry_run else edges_done,
            batches=batches,
            source_nodes=dict(before.nodes),
            source_edges=dict(before.edges),
            destination_nodes=dict(after.nodes) if after else {},
            destination_edges=dict(after.edges) if after else {},
            mismatches=mismatches,
            verified=after is not None and not mismatches,
            seconds=round(time.perf_counter() - started, 3),
        )
        log.info(
            "migration %s: %d nodes, %d edges in %d batches, %.1fs",
            "verified" if report.verified else "done",
            report.nodes_copied,
            report.edges_copied,
            batches,
            report.seconds,
        )
        if mismatches and strict:
            detail = ", ".join(f"{k} {s} -> {d}" for k, (s, d) in mismatches.items())
            raise MigrationMismatch(
                f"migration finished but the counts differ ({detail}); the destination held "
                "other data, or the source changed during the migration",
                report,
            )
        return report
    finally:
        if own_dst:
            destination.close()
        if own_src:
            source.close()


class _CallableModule(types.ModuleType):
    """``graphmem.migrate`` is both this module and the public function; the package loads
    its names lazily, so whichever is bound there first, ``graphmem.migrate(src, dst)``
    runs the migration."""

    def __call__(self, *args: Any, **kwargs: Any) -> MigrationReport:
        return migrate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
