"""Driver and sessions: the backend's options, the lazily made driver, managed read/write
transactions, and driver errors translated into :mod:`graphmem.errors` at this boundary."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from graphmem.backends.neo4j.queries import (
    CYPHER_DIR,
    GET_QUERIES,
    Q_COMPONENTS,
    QUERY_NAMES,
    CypherQuery,
    load_queries,
)
from graphmem.backends.neo4j.statements import chunks
from graphmem.backends.neo4j.values import node_from_db
from graphmem.errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    Conflict,
    GraphMemError,
    InvalidInput,
    QueryFailed,
)
from graphmem.models import GraphNode, Memory, NodeLabel, NodeRef

log = logging.getLogger("graphmem.backends.neo4j")
T = TypeVar("T")


SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")
"""URL schemes served by this backend (registered in :mod:`graphmem.backends`)."""


_BACKEND_OPTIONS = (
    "auth",
    "database",
    "cypher_dir",
    "batch_rows",
    "exact_search_max",
    "index_timeout_s",
    "connect_timeout_s",
    "retry_s",
    "vector_overfetch",
    "touch_flush_s",
    "touch_flush_rows",
    "fulltext_refresh",
    "vector_quantization",
    "driver",
)


FULLTEXT_REFRESH = ("commit", "background")
"""When the full-text index takes a write: ``commit`` (in the write's commit, so every
handle's lexical search finds a memory once ``remember`` returns) or ``background`` (behind
it: a write commits without waiting for Lucene, the handle that wrote waits for the index
before its next lexical search, and other handles may miss a write for a moment). Applies
when the index is made; an existing index keeps how it was made."""


DRIVER_OPTIONS = frozenset(
    {
        "connection_timeout",
        "connection_acquisition_timeout",
        "max_connection_lifetime",
        "max_connection_pool_size",
        "max_transaction_retry_time",
        "keep_alive",
        "liveness_check_timeout",
        "encrypted",
        "trust",
        "trusted_certificates",
        "ssl_context",
        "client_certificate",
        "user_agent",
        "resolver",
        "fetch_size",
        "telemetry_disabled",
        "notifications_min_severity",
        "notifications_disabled_categories",
        "notifications_disabled_classifications",
        "warn_notification_severity",
        "initial_retry_delay",
        "retry_delay_multiplier",
        "retry_delay_jitter_factor",
    }
)
"""Options of ``neo4j.GraphDatabase.driver`` a backend passes on; any other keyword is a
misspelling and raises InvalidInput when the backend is made."""


class Neo4jSession:
    """The connection half of :class:`~graphmem.backends.neo4j.Neo4jBackend`: options, the
    driver (made on first use), sessions, error translation, and the node reads every
    other part shares."""

    def __init__(
        self,
        url: str = "neo4j://localhost:7687",
        *,
        auth: Any = None,
        database: str | None = None,
        cypher_dir: str | Path | None = None,
        batch_rows: int = 5000,
        exact_search_max: int = 5000,
        index_timeout_s: int = 300,
        connect_timeout_s: float = 3.0,
        retry_s: float = 5.0,
        vector_overfetch: int = 2,
        touch_flush_s: float = 5.0,
        touch_flush_rows: int = 1000,
        fulltext_refresh: str = "commit",
        vector_quantization: bool = True,
        driver: Any = None,
        **driver_options: Any,
    ) -> None:
        unknown = sorted(set(driver_options) - DRIVER_OPTIONS)
        if unknown:
            import difflib

            known = sorted(DRIVER_OPTIONS | set(_BACKEND_OPTIONS))
            hints = [
                f"{u!r} (did you mean {m[0]!r}?)"
                if (m := difflib.get_close_matches(u, known, 1))
                else repr(u)
                for u in unknown
            ]
            raise InvalidInput(
                f"unknown Neo4j backend option {', '.join(hints)}; backend options: "
                f"{', '.join(_BACKEND_OPTIONS)}; driver options: "
                f"{', '.join(sorted(DRIVER_OPTIONS))}"
            )
        try:
            parts = urlsplit(url)
            port = parts.port
        except (ValueError, AttributeError) as e:
            raise InvalidInput(f"malformed Neo4j URL: {e}") from e
        if parts.scheme not in SCHEMES:
            raise InvalidInput(
                f"not a Neo4j URL: {url!r} (schemes: {', '.join(s + '://' for s in SCHEMES)})"
            )
        if not parts.hostname:
            raise InvalidInput(f"no host in Neo4j URL {parts.scheme}://...")
        if parts.username is not None and auth is None:
            auth = (unquote(parts.username), unquote(parts.password or ""))
        host = parts.hostname + (f":{port}" if port else "")
        self._url = urlunsplit((parts.scheme, host, parts.path, parts.query, ""))
        self._auth = auth
        self._user = auth[0] if isinstance(auth, tuple) and auth else None
        self._database = database or None
        self._cypher_dir = Path(cypher_dir) if cypher_dir is not None else CYPHER_DIR
        numbers = {
            "batch_rows": batch_rows,
            "exact_search_max": exact_search_max,
            "index_timeout_s": index_timeout_s,
            "connect_timeout_s": connect_timeout_s,
            "retry_s": retry_s,
            "vector_overfetch": vector_overfetch,
            "touch_flush_s": touch_flush_s,
            "touch_flush_rows": touch_flush_rows,
        }
        for key, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InvalidInput(f"{key} must be a non-negative number, got {value!r}")
        if batch_rows < 1 or index_timeout_s < 1 or connect_timeout_s <= 0 or vector_overfetch < 1:
            raise InvalidInput(
                "batch_rows, index_timeout_s, connect_timeout_s and "
                "vector_overfetch must be positive"
            )
        if fulltext_refresh not in FULLTEXT_REFRESH:
            raise InvalidInput(
                f"fulltext_refresh must be one of {', '.join(FULLTEXT_REFRESH)}, "
                f"got {fulltext_refresh!r}"
            )
        self._fulltext_refresh = fulltext_refresh
        if not isinstance(vector_quantization, bool):
            raise InvalidInput(
                f"vector_quantization must be True or False, got {vector_quantization!r}"
            )
        self._vector_quantization = vector_quantization
        self._batch_rows = int(batch_rows)
        self._exact_search_max = int(exact_search_max)
        self._index_timeout_s = int(index_timeout_s)
        self._vector_overfetch = int(vector_overfetch)
        self._touch_flush_s = float(touch_flush_s)
        self._touch_flush_rows = int(touch_flush_rows)
        self._driver_options = {
            "connection_timeout": float(connect_timeout_s),
            "max_transaction_retry_time": float(retry_s),
            # the statements are fixed and linted; the server's notes about them (e.g. a
            # relationship type no edge has yet) would be logged as a warning per call
            "notifications_min_severity": "OFF",
            **driver_options,
        }
        self._driver: Any = driver
        self._owns_driver = driver is None
        self._queries: dict[str, CypherQuery] | None = None
        self._lock = threading.RLock()
        self._schema_ready = False
        self._dim: int | None = None
        # the full-text index is updated behind commits (as the server reports it), and
        # this handle wrote memories it has not yet waited for there
        self._fulltext_eventual = False
        self._fulltext_behind = False
        self._server_version: str | None = None
        self._closed = False
        # deferred touches: memory id -> [accesses, latest access time]
        self._touches: dict[str, list[Any]] = {}
        self._touches_since: float | None = None
        self._touch_lock = threading.Lock()

    @property
    def location(self) -> str:
        """The server URL (without credentials) and database."""
        return self._url + (f" database={self._database}" if self._database else "")

    @property
    def database(self) -> str | None:
        return self._database

    def queries(self) -> dict[str, CypherQuery]:
        """The loaded query files (loaded and checked on first call)."""
        if self._queries is None:
            self._queries = load_queries(QUERY_NAMES, self._cypher_dir)
        return self._queries

    def _q(self, name: str) -> CypherQuery:
        return self.queries()[name]

    def _bound(self, name: str, **params: Any) -> tuple[str, str, dict[str, Any]]:
        """The name, text and parameters of the file statement ``name`` (see :meth:`_bind`),
        as :meth:`_query` takes them."""
        return (name, *self._bind(name, **params))

    def _bind(self, name: str, **params: Any) -> tuple[str, dict[str, Any]]:
        """Text and parameters of a query file; the parameters must be exactly the declared
        ones (a mismatch is a bug in this module, caught here rather than by the server)."""
        q = self._q(name)
        if set(params) != set(q.params):
            raise QueryFailed(
                f"internal error: {name} takes {list(q.params)}, got {sorted(params)}"
            )
        return q.text, params

    def _get_driver(self) -> Any:
        with self._lock:
            if self._closed:
                raise BackendUnavailable(f"the Neo4j backend for {self.location} is closed")
            if self._driver is None:
                import neo4j

                try:
                    self._driver = neo4j.GraphDatabase.driver(
                        self._url, auth=self._auth, **self._driver_options
                    )
                except (ValueError, TypeError, neo4j.exceptions.ConfigurationError) as e:
                    raise ConfigError(f"invalid Neo4j driver settings for {self._url}: {e}") from e
                log.info("neo4j driver created for %s", self.location)
            return self._driver

    @contextmanager
    def _translated(self, what: str) -> Iterator[None]:
        """Translate driver errors into graphmem errors (messages carry no memory content)."""
        from neo4j import exceptions as nx

        try:
            yield
        except GraphMemError:
            raise
        except nx.AuthError as e:
            raise BackendUnavailable(
                f"Neo4j at {self._url} rejected the credentials"
                f"{f' of user {self._user!r}' if self._user else ''} ({what}): "
                f"{_msg(e)}. Pass auth=(user, password) or set NEO4J_USER/NEO4J_PASSWORD."
            ) from e
        except nx.ConstraintError as e:
            raise Conflict(f"{what}: constraint violated: {_msg(e)}") from e
        except nx.CypherTypeError as e:
            raise InvalidInput(f"{what}: a value has a type Neo4j cannot use: {_msg(e)}") from e
        except nx.CypherSyntaxError as e:
            raise QueryFailed(f"{what}: Cypher rejected by the server: {_msg(e)}") from e
        except nx.ClientError as e:
            if "EntityNotFound" in str(getattr(e, "code", "")):
                # a node this write checked was deleted by another writer meanwhile
                raise Conflict(f"{what}: a node changed concurrently: {_msg(e)}") from e
            if "AuthenticationRateLimit" in str(getattr(e, "code", "")):
                # the user is locked for a while (dbms.security.auth_lock_time) after
                # repeated wrong passwords: even the right one is refused until then
                raise BackendUnavailable(
                    f"Neo4j at {self._url} refuses user {self._user!r} for now ({what}): "
                    f"{_msg(e)} Retry after the lock time (a few seconds by default)."
                ) from e
            raise QueryFailed(f"{what}: the server refused the query: {_msg(e)}") from e
        except (nx.ServiceUnavailable, nx.SessionExpired) as e:
            raise BackendUnavailable(f"cannot reach Neo4j at {self._url} ({what}): {e}") from e
        except nx.DatabaseUnavailable as e:
            raise BackendUnavailable(f"database unavailable at {self._url} ({what}): {e}") from e
        except nx.TransientError as e:
            raise QueryFailed(f"{what}: transient server error after retries: {_msg(e)}") from e
        except nx.Neo4jError as e:
            raise QueryFailed(f"{what}: {_msg(e)}") from e
        except nx.ConfigurationError as e:
            raise ConfigError(f"{what}: {e}") from e
        except nx.ResultFailedError as e:
            # the driver's rollback of a transaction whose statement failed can raise this
            # in place of what the transaction function raised (the function's own error is
            # the context, the statement's the cause): judge the write by those, so a lost
            # race stays a Conflict that callers retry instead of an untyped failure
            inner = e.__context__ if isinstance(e.__context__, GraphMemError) else e.__cause__
            if not isinstance(inner, Exception) or isinstance(inner, nx.ResultFailedError):
                raise BackendError(f"{what}: Neo4j driver error: {e}") from e
            with self._translated(what):
                raise inner  # noqa: B904 - the original error, its own cause kept
        except nx.DriverError as e:
            if type(e).__name__ == "ConnectionPoolError" or isinstance(
                e, getattr(nx, "ConnectionPoolError", ())
            ):
                raise BackendUnavailable(f"cannot reach Neo4j at {self._url} ({what}): {e}") from e
            raise BackendError(f"{what}: Neo4j driver error: {e}") from e

    def _session(self, write: bool) -> Any:
        import neo4j

        drv = self._get_driver()
        return drv.session(
            database=self._database,
            default_access_mode=neo4j.WRITE_ACCESS if write else neo4j.READ_ACCESS,
            bookmark_manager=drv.execute_query_bookmark_manager,
        )

    def _read(self, what: str, work: Callable[[Any], T]) -> T:
        return self._transact(what, work, write=False)

    def _write(self, what: str, work: Callable[[Any], T]) -> T:
        return self._transact(what, work, write=True)

    def _transact(self, what: str, work: Callable[[Any], T], *, write: bool) -> T:
        """Run ``work`` in one transaction, again while the driver calls the failure
        retryable (a deadlock, a leader change), for up to ``retry_s`` in all.

        Not the driver's ``execute_read``/``execute_write``: when the server fails a
        statement, the driver resets the connection and returns it to the pool at once, and
        those helpers' clean-up of a function that then raises still reads its socket to
        see whether it is dead. Another thread may have taken the connection by then; the
        stray read takes a byte of that thread's reply, which then never completes while the
        server keeps its transaction and locks. Here the clean-up is the session's, which
        knows whether it still holds the connection."""
        return self._retried(what, lambda: self._attempt(work, write))

    def _query(self, what: str, name: str, text: str, params: Mapping[str, Any]) -> list[Any]:
        """The rows of one read statement, run as an auto-commit transaction, retried as
        :meth:`_transact` retries. One round trip where an explicit read transaction takes
        three: the driver sends ``begin_transaction``'s BEGIN on its own and waits for it,
        then the statement, then COMMIT (measured at 100,000 memories, load 8: a recall
        statement's wall p50 31.8 ms in a transaction, 20.6 ms auto-commit). For a read
        of one statement the two are the same transaction."""
        return self._retried(what, lambda: self._auto(name, text, params))

    def _auto(self, name: str, text: str, params: Mapping[str, Any]) -> list[Any]:
        return self._in_session(False, lambda session: list(self._run(session, name, text, params)))

    def _retried(self, what: str, attempt: Callable[[], T]) -> T:
        """``attempt()`` again while the driver calls its failure retryable, with the
        driver's waits, for up to ``retry_s`` in all; errors translated."""
        from neo4j.exceptions import DriverError, Neo4jError

        opts = self._driver_options
        delay = float(opts.get("initial_retry_delay", 1.0))
        factor = float(opts.get("retry_delay_multiplier", 2.0))
        jitter = float(opts.get("retry_delay_jitter_factor", 0.2))
        give_up: float | None = None
        while True:
            with self._translated(what):
                try:
                    return attempt()
                except (DriverError, Neo4jError) as e:
                    now = time.monotonic()
                    if give_up is None:
                        give_up = now + float(opts["max_transaction_retry_time"])
                    if not e.is_retryable() or now >= give_up:
                        raise
                    log.info("%s: retrying a transaction in %.2fs (%s)", what, delay, _msg(e))
            time.sleep(delay * random.uniform(1 - jitter, 1 + jitter))
            delay *= factor

    def _attempt(self, work: Callable[[Any], T], write: bool) -> T:
        def transaction(session: Any) -> T:
            tx = session.begin_transaction()
            result = work(tx)
            tx.commit()
            return result

        return self._in_session(write, transaction)

    def _in_session(self, write: bool, use: Callable[[Any], T]) -> T:
        """``use(session)`` in a session of its own, closed after it."""
        session = self._session(write)
        try:
            result = use(session)
        except BaseException:
            # the session rolls back a transaction it still holds; one whose statement the
            # server failed is rolled back there already, its connection back in the pool
            try:
                session.close()
            except Exception as e:  # the first error is the one to report
                log.debug("%r while closing the session of a failed transaction", e)
            raise
        session.close()
        return result

    @staticmethod
    def _run(tx: Any, name: str, text: str, params: Mapping[str, Any]) -> Any:
        """Send one statement (``tx``: a transaction, or a session for an auto-commit one);
        its first line names it (``// graphmem: <name>``) so that a
        server's query log and the test suite's recording driver show what sent it."""
        return tx.run(f"// graphmem: {name}\n{text}", dict(params))

    def _run_file(self, tx: Any, name: str, **params: Any) -> Any:
        return self._run(tx, name, *self._bind(name, **params))

    def _execute(self, what: str, name: str, text: str, params: dict[str, Any]) -> None:
        """Run one write statement in its own transaction (schema commands need that)."""
        self._write(what, lambda tx: self._run(tx, name, text, params).consume())

    def _run_all(self, tx: Any, name: str, **params: Any) -> list[Any]:
        return list(self._run_file(tx, name, **params))

    def connect(self) -> None:
        """Create the driver and check that the server answers (and the credentials work).
        One attempt, bounded by ``connect_timeout_s``: no transaction retries."""
        with self._translated("connect"):
            self._get_driver().verify_connectivity()

    def health(self) -> dict[str, Any]:
        """``{"ok": True, "server": ..., "version": ..., "edition": ..., "database": ...,
        "latency_ms": ...}`` when the server answers, else ``{"ok": False, "error": ...}``.
        Never raises for an unreachable server."""
        started = time.perf_counter()
        try:
            self.connect()
            rows = self._read("health", lambda tx: self._run_all(tx, Q_COMPONENTS))
        except GraphMemError as e:
            return {"ok": False, "url": self._url, "error": str(e)}
        row = rows[0] if rows else None
        return {
            "ok": True,
            "url": self._url,
            "database": self._database,
            "server": row["name"] if row else None,
            "version": row["version"] if row else None,
            "edition": row["edition"] if row else None,
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        }

    def _lookup(
        self, tx: Any, refs: Iterable[NodeRef], *, with_props: bool = False
    ) -> dict[NodeRef, tuple[str, dict[str, Any] | None]]:
        """Element ids (and properties) of the existing nodes among ``refs``."""
        by_label: dict[NodeLabel, list[str]] = defaultdict(list)
        for ref in dict.fromkeys(refs):
            by_label[ref.label].append(ref.id)
        found: dict[NodeRef, tuple[str, dict[str, Any] | None]] = {}
        for label, ids in by_label.items():
            for chunk in chunks(ids, self._batch_rows):
                for rec in self._run_file(
                    tx, GET_QUERIES[label], ids=list(chunk), with_props=with_props
                ):
                    if rec["id"] is not None:  # else deleted while read (see vanished)
                        found[NodeRef(label, rec["id"])] = (rec["eid"], rec["props"])
        return found

    def _node(self, label: str, props: Mapping[str, Any]) -> GraphNode:
        """A node read from the server, with this process's pending access records."""
        node = node_from_db(label, props)
        if self._touches and isinstance(node, Memory):
            entry = self._touches.get(node.id)
            if entry is not None:
                node = node.model_copy(
                    update={
                        "access_count": node.access_count + entry[0],
                        "last_accessed": entry[1],
                    }
                )
        return node

    def _memory(self, props: Mapping[str, Any]) -> Memory:
        node = self._node(NodeLabel.MEMORY.value, props)
        assert isinstance(node, Memory)
        return node


def _msg(e: Any) -> str:
    text = str(getattr(e, "message", None) or e)
    return text if len(text) <= 300 else text[:297] + "..."
