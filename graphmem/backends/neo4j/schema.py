"""Schema: the server version check, constraints and indexes made on first use, and the
vector index with its dimension."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from graphmem.backends.neo4j.queries import (
    FULLTEXT_EVENTUAL_QUERY,
    FULLTEXT_INDEX,
    FULLTEXT_QUERY,
    LOCK_PROPERTY,
    OLD_FULLTEXT_DROP,
    OLD_FULLTEXT_INDEX,
    Q_ANY_VECTOR,
    Q_AWAIT_INDEXES,
    Q_COMPONENTS,
    Q_CREATE_PROPERTY_KEY,
    Q_PROPERTY_KEY_KNOWN,
    Q_SHOW_CONSTRAINTS,
    Q_SHOW_INDEXES,
    Q_WARM_VECTOR_INDEX,
    SCHEMA_QUERIES,
    VECTOR_INDEX,
    VECTOR_INDEX_DROP,
    VECTOR_INDEX_EXACT_QUERY,
    VECTOR_INDEX_QUERY,
)
from graphmem.backends.neo4j.session import Neo4jSession
from graphmem.errors import BackendUnavailable, DimensionMismatch, InvalidInput

log = logging.getLogger("graphmem.backends.neo4j")


MIN_SERVER_VERSION = (5, 18)


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", version)[:3]
    return tuple(int(p) for p in parts)


@dataclass
class BulkLoad:
    """What a :meth:`Neo4jSchema.bulk_load` did, filled in when it ends."""

    dimension: int | None = None
    """The vector index's dimension (None: no vector was ever written, no index)."""
    dropped: bool = False
    """Whether a vector index existed when the load began (and was dropped)."""
    index_s: float = 0.0
    """Seconds spent creating the vector index, awaiting its population and reading it once
    (so that the first search after the load finds it in memory) at the end."""


class Neo4jSchema(Neo4jSession):
    """Ensures the schema on first use (see :meth:`ensure_schema`)."""

    _bulk: BulkLoad | None = None
    """Set while a bulk load of this handle defers the vector index."""

    def ensure_schema(self, *, embedding_dim: int | None = None) -> None:
        """Create the constraints and indexes that are missing (``IF NOT EXISTS``; cheap
        once done) and wait until they are online. ``embedding_dim`` creates the vector
        index with that dimension the first time; a different one later is a
        DimensionMismatch while any memory holds a vector (with none left, the index is
        made again for the new dimension, as the embedded store takes one)."""
        if embedding_dim is not None and (
            isinstance(embedding_dim, bool)
            or not isinstance(embedding_dim, int)
            or embedding_dim <= 0
        ):
            raise InvalidInput("embedding_dim must be a positive integer")
        self._ready()
        if embedding_dim is not None:
            self._ensure_dim(embedding_dim)

    def _ready(self) -> None:
        """On first use: reach the server (one bounded attempt, so that an unreachable URL
        fails in seconds), check its version, make the guards' lock property known (a new
        database) and create missing schema objects."""
        if self._schema_ready:
            return
        with self._lock:
            if self._schema_ready:
                return
            self.queries()
            self.connect()

            def first_look(tx: Any) -> tuple[list[Any], list[Any]]:
                return (
                    self._run_all(tx, Q_COMPONENTS),
                    self._run_all(tx, Q_PROPERTY_KEY_KNOWN, key=LOCK_PROPERTY),
                )

            components, lock_key = self._read("version check", first_look)
            version = components[0]["version"] if components else "unknown"
            self._server_version = version
            if _version_tuple(version) < MIN_SERVER_VERSION:
                raise BackendUnavailable(
                    f"Neo4j {version} at {self._url} is too old: graphmem needs 5.18 or later"
                )
            if not (lock_key and lock_key[0]["known"]):
                # a new database: until the name is known, the guards' removal of it is
                # skipped and locks nothing (see LOCK_PROPERTY)
                self._execute(
                    "create lock property",
                    Q_CREATE_PROPERTY_KEY,
                    *self._bind(Q_CREATE_PROPERTY_KEY, key=LOCK_PROPERTY),
                )
            existing = self._schema_names()
            missing = [q for q in SCHEMA_QUERIES if q.split("/", 1)[1] not in existing]
            background = self._fulltext_refresh == "background"
            for name in missing:
                made = FULLTEXT_EVENTUAL_QUERY if name == FULLTEXT_QUERY and background else name
                self._execute(f"create {name}", made, *self._bind(made))
            if FULLTEXT_QUERY in missing:
                self._fulltext_eventual = background
            elif self._fulltext_eventual != background:
                log.warning(
                    "the full-text index %s is refreshed %s, not as fulltext_refresh=%r asks: "
                    "an existing index keeps how it was made (drop it to make it again)",
                    FULLTEXT_INDEX,
                    "behind commits" if self._fulltext_eventual else "at commit",
                    self._fulltext_refresh,
                )
            if missing:
                log.info("created %d schema objects; waiting for indexes", len(missing))
                self._await_indexes()
            if OLD_FULLTEXT_INDEX in existing:
                # a store made before the scope fields were indexed: its content-only index
                # is replaced by the one just populated (one Lucene index per write)
                self._execute(
                    "drop old full-text index", OLD_FULLTEXT_DROP, *self._bind(OLD_FULLTEXT_DROP)
                )
            self._schema_ready = True

    def _schema_names(self) -> set[str]:
        def work(tx: Any) -> tuple[list[Any], list[Any]]:
            return (self._run_all(tx, Q_SHOW_INDEXES), self._run_all(tx, Q_SHOW_CONSTRAINTS))

        indexes, constraints = self._read("show schema", work)
        self._dim = None
        for row in indexes:
            if row["name"] == FULLTEXT_INDEX:
                config = (row["options"] or {}).get("indexConfig") or {}
                self._fulltext_eventual = bool(config.get("fulltext.eventually_consistent"))
            if row["name"] == VECTOR_INDEX:
                config = (row["options"] or {}).get("indexConfig") or {}
                dim = config.get("vector.dimensions")
                self._dim = int(dim) if dim is not None else None
        return {row["name"] for row in indexes} | {row["name"] for row in constraints}

    def _await_indexes(self, timeout_s: float | None = None) -> None:
        timeout = self._index_timeout_s if timeout_s is None else timeout_s
        self._execute(
            "await indexes", Q_AWAIT_INDEXES, *self._bind(Q_AWAIT_INDEXES, timeout=int(timeout))
        )

    def vector_index_query(self) -> str:
        """The query file that creates the vector index on this server: the server's own
        index (quantized on 5.23+), unless ``vector_quantization=False`` asks for one
        without quantization where the server has the option. Recall re-scores the
        neighbours exactly either way, so quantization only decides which are fetched:
        measured on hard synthetic data it found the exact top 30 as often from 100
        neighbours, and searched faster (benchmarks/RESULTS.md, issue 19, tenth session)."""
        version = _version_tuple(self._server_version or "0")
        if self._vector_quantization or version < (5, 23):
            return VECTOR_INDEX_QUERY
        return VECTOR_INDEX_EXACT_QUERY

    @contextmanager
    def bulk_load(self, *, timeout_s: float = 3600.0) -> Iterator[BulkLoad]:
        """Defer the vector index for a large load: ``with backend.bulk_load(): ...writes...``.

        On entry the vector index is dropped; writes inside the block store their vectors
        without it, and on exit (also after an error) the index is created again with the
        store's dimension and its population is awaited (up to ``timeout_s``), so the
        first search after the block sees every vector. The server then inserts each vector
        once into one graph instead of once per committed write (at 100k memories with
        384-d vectors: hours against minutes on a small machine; see docs/neo4j.md).

        Searches through this handle inside the block stay exact (every memory's cosine is
        computed, slow but complete). Other handles on the same database should not search
        vectors meanwhile: a search of theirs that asks the index fails while it is missing.
        Yields a :class:`BulkLoad` report, completed when the block ends. Not reentrant."""
        self._ready()
        with self._lock:
            if self._bulk is not None:
                raise InvalidInput("a bulk load is already under way on this handle")
            self._schema_names()
            report = BulkLoad(dimension=self._dim, dropped=self._dim is not None)
            if report.dropped:
                self._execute(
                    "drop vector index", VECTOR_INDEX_DROP, *self._bind(VECTOR_INDEX_DROP)
                )
            self._dim = None
            self._bulk = report
        try:
            yield report
        finally:
            with self._lock:
                self._bulk = None
                started = time.perf_counter()
                if report.dimension is not None:
                    self._ensure_dim(report.dimension, timeout_s=timeout_s)
                    # read the new index once: the first recall after the load would
                    # otherwise read its graph from the store (seconds at 100k vectors)
                    probe = [1.0] + [0.0] * (report.dimension - 1)
                    self._read(
                        "warm vector index",
                        lambda tx: self._run_file(tx, Q_WARM_VECTOR_INDEX, vector=probe).consume(),
                    )
                report.index_s = time.perf_counter() - started
            log.info(
                "bulk load: vector index %s in %.1f s",
                "populated" if report.dimension is not None else "not needed",
                report.index_s,
            )

    def _ensure_dim(self, dim: int, *, timeout_s: float | None = None) -> None:
        if self._dim == dim:
            return
        with self._lock:
            bulk = self._bulk
            if bulk is not None:  # the index is created when the load ends
                if bulk.dimension is None:
                    bulk.dimension = dim
                if bulk.dimension != dim:
                    raise DimensionMismatch(
                        f"embedding has {dim} dimensions; this store uses {bulk.dimension}"
                    )
                return
            self._schema_names()  # another handle may have created or changed the index
            if self._dim is not None and self._dim != dim and not self._any_vector():
                # every vector was cleared (reindex --all to a new model): a vector index has
                # one fixed dimension, so it is made again for the new one
                self._execute(
                    "drop vector index", VECTOR_INDEX_DROP, *self._bind(VECTOR_INDEX_DROP)
                )
                log.info(
                    "vector index %s dropped (%d dimensions, no vector left)",
                    VECTOR_INDEX,
                    self._dim,
                )
                self._dim = None
            if self._dim is None:
                name = self.vector_index_query()
                self._execute("create vector index", name, *self._bind(name, dimensions=dim))
                self._await_indexes(timeout_s)
                self._schema_names()
                log.info("vector index %s created with %d dimensions", VECTOR_INDEX, dim)
            if self._dim != dim:
                raise DimensionMismatch(
                    f"embedding has {dim} dimensions; this store uses {self._dim} (re-embed "
                    "everything with `graphmem reindex --all`)"
                )

    def _any_vector(self) -> bool:
        row = self._read("any vector", lambda tx: self._run_file(tx, Q_ANY_VECTOR).single())
        return bool(row["found"])
