"""A recording stand-in for the ``neo4j`` driver, for tests that need no server.

It implements the part of the driver's API the backend uses (``Driver.session``,
``Session.begin_transaction/close/run``, ``Transaction.run/commit/rollback/close``,
``Result.single/consume/fetch`` and iteration; ``Session.execute_read/execute_write`` and
``ManagedTransaction.run`` too), with the real driver's method names and parameters (checked
against the installed ``neo4j`` package by ``test_the_fake_driver_has_the_real_api``). It
evaluates no Cypher: every statement is recorded with its transaction, and answered by a
responder from the statement's name (the ``// graphmem: <name>`` line the backend puts
first). The default responder answers like a Neo4j 5.26 server on which graphmem's schema
exists; tests script the rest.

A round trip here is one statement (``run``): what the backend sends and waits for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphmem.backends.neo4j.queries import FULLTEXT_INDEX, SCHEMA_QUERIES, VECTOR_INDEX

Responder = Callable[[str, str, dict[str, Any]], list[dict[str, Any]] | None]


class FakeRecord(dict[str, Any]):
    """A record: by key like ``neo4j.Record``, and by position."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


class FakeResult:
    def __init__(self, records: list[dict[str, Any]]) -> None:
        self._records = [FakeRecord(r) for r in records]
        self._pos = 0

    def __iter__(self) -> Iterator[FakeRecord]:
        while self._pos < len(self._records):
            self._pos += 1
            yield self._records[self._pos - 1]

    def single(self, strict: bool = False) -> FakeRecord | None:
        left = self._records[self._pos :]
        self._pos = len(self._records)
        if strict and len(left) != 1:
            raise AssertionError(f"expected one record, got {len(left)}")
        return left[0] if left else None

    def fetch(self, n: int) -> list[FakeRecord]:
        out = self._records[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    def consume(self) -> None:
        self._pos = len(self._records)


@dataclass
class Statement:
    name: str
    text: str
    params: dict[str, Any]
    tx: int  # index into Recorder.transactions (-1: auto-commit)


@dataclass
class Transaction:
    mode: str  # "read", "write" or "auto"
    statements: list[Statement] = field(default_factory=list)
    outcome: str = "open"  # "committed" or "rolled back"
    access: str = ""  # an auto-commit transaction's: its session's "read" or "write"


class Recorder:
    """What the backend sent: statements in order, grouped into transactions."""

    def __init__(self) -> None:
        self.statements: list[Statement] = []
        self.transactions: list[Transaction] = []
        self.events: list[str] = []  # "verify", "session", "close"

    def reset(self) -> None:
        self.statements.clear()
        self.transactions.clear()
        self.events.clear()

    def names(self) -> list[str]:
        return [s.name for s in self.statements]

    def writes(self) -> list[Transaction]:
        return [t for t in self.transactions if t.mode == "write"]

    def reads(self) -> list[Transaction]:
        """Read transactions, explicit or auto-commit."""
        return [t for t in self.transactions if "read" in (t.mode, t.access)]


def guard_failure() -> Exception:
    """What a server raises when a write's guard finds a precondition broken (its 1 / 0)."""
    from neo4j.exceptions import Neo4jError

    return Neo4jError._hydrate_neo4j(
        code="Neo.ClientError.Statement.ArithmeticError", message="/ by zero"
    )


def server_error(code: str, message: str) -> Exception:
    """The driver's exception for a server FAILURE with this code (the real class: a
    ``...Schema.ConstraintValidationFailed`` code gives a ``ConstraintError``)."""
    from neo4j.exceptions import Neo4jError

    return Neo4jError._hydrate_neo4j(code=code, message=message)


def result_failed() -> Exception:
    """The driver's report of a transaction whose statement failed earlier."""
    from neo4j.exceptions import ResultFailedError

    return ResultFailedError(
        None,
        "The result has failed. Either this result or another result in the same "
        "transaction has encountered an error.",
    )


def statement_name(text: str) -> str:
    m = re.match(r"// graphmem: (.*)\n", text)
    return m.group(1) if m else "<unnamed>"


def schema_rows(dim: int | None) -> dict[str, list[dict[str, Any]]]:
    """SHOW INDEXES / SHOW CONSTRAINTS rows of a store whose schema exists."""
    names = [q.split("/", 1)[1] for q in SCHEMA_QUERIES]
    constraints = [{"name": n, "type": "UNIQUENESS"} for n in names if n.endswith("_unique")]
    indexes = [
        {"name": n, "type": "RANGE", "state": "ONLINE", "options": {}}
        for n in names
        if n != FULLTEXT_INDEX
    ]
    indexes.append({"name": FULLTEXT_INDEX, "type": "FULLTEXT", "state": "ONLINE", "options": {}})
    if dim is not None:
        indexes.append(
            {
                "name": VECTOR_INDEX,
                "type": "VECTOR",
                "state": "ONLINE",
                "options": {"indexConfig": {"vector.dimensions": dim}},
            }
        )
    return {"admin/show_indexes": indexes, "admin/show_constraints": constraints}


def default_answer(
    name: str, params: Mapping[str, Any], *, dim: int | None, version: str
) -> list[dict[str, Any]]:
    """How a 5.26 server with graphmem's schema answers (empty results elsewhere)."""
    if name == "admin/components":
        return [{"name": "Neo4j Kernel", "version": version, "edition": "community"}]
    if name == "admin/property_key_known":
        return [{"known": True}]
    schema = schema_rows(dim)
    if name in schema:
        return schema[name]
    if name.startswith("write "):
        # every part wrote all of its rows (an edge upsert found both ends of each edge)
        parts = sorted({int(m) for m in re.findall(r"p(\d+)_", " ".join(params))})
        return [{f"c{i}": len(params.get(f"p{i}_rows", [None])) for i in parts}]
    if name == "admin/stats":
        return [{"nodes": {}, "edges": {}}]
    if name == "count":
        return [{"count": 0}]
    if name == "nodes/delete":
        return [{"deleted": len(params.get("eids", []))}]
    return []


class FakeDriver:
    """Stands in for ``neo4j.Driver``; ``respond(name, text, params)`` may return records
    for a statement (None: the default answer)."""

    def __init__(
        self,
        respond: Responder | None = None,
        *,
        dim: int | None = None,
        version: str = "5.26.0",
    ) -> None:
        self.recorder = Recorder()
        self.respond = respond
        self.dim = dim
        self.version = version
        self.execute_query_bookmark_manager = object()
        self.closed = False
        self.fail: Exception | None = None  # raised by the next statement when set

    def _answer(self, text: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        name = statement_name(text)
        if name == "schema/memory_embedding_vector_drop":
            self.dim = None
        elif name.startswith("schema/memory_embedding_vector"):
            self.dim = int(params["dimensions"])  # SHOW INDEXES lists it from now on
        if self.fail is not None:
            err, self.fail = self.fail, None
            raise err
        if self.respond is not None:
            got = self.respond(name, text, params)
            if got is not None:
                return got
        return default_answer(name, params, dim=self.dim, version=self.version)

    def session(self, **config: Any) -> FakeSession:
        self.recorder.events.append("session")
        return FakeSession(self, config)

    def verify_connectivity(self, **config: Any) -> None:
        self.recorder.events.append("verify")

    def close(self) -> None:
        self.closed = True


class FakeTransaction:
    """Stands in for ``neo4j.ManagedTransaction``."""

    def __init__(self, driver: FakeDriver, index: int) -> None:
        self._driver = driver
        self._index = index
        self.failed: Exception | None = None  # the error a statement of it raised

    def run(
        self, query: str, parameters: dict[str, Any] | None = None, **kwparameters: Any
    ) -> FakeResult:
        params = {**(parameters or {}), **kwparameters}
        rec = self._driver.recorder
        statement = Statement(statement_name(query), query, params, self._index)
        rec.statements.append(statement)
        if self._index >= 0:
            rec.transactions[self._index].statements.append(statement)
        try:
            return FakeResult(self._driver._answer(query, params))
        except Exception as e:
            self.failed = e
            raise


class FakeExplicitTransaction(FakeTransaction):
    """Stands in for ``neo4j.Transaction``. As with the real driver, a statement the server
    fails ends the transaction there and hands its connection back to the pool: the session
    lets go of it, and rolling it back or closing it after that is an error here (the real
    driver would read a connection another thread may be using)."""

    def __init__(self, driver: FakeDriver, index: int, session: FakeSession) -> None:
        super().__init__(driver, index)
        self._session = session
        self._done = False

    def _record(self) -> Transaction:
        return self._driver.recorder.transactions[self._index]

    def run(
        self, query: str, parameters: dict[str, Any] | None = None, **kwparameters: Any
    ) -> FakeResult:
        assert not self._done and self.failed is None, "a statement after the end"
        try:
            return super().run(query, parameters, **kwparameters)
        except Exception:
            self._done = True
            self._record().outcome = "rolled back"
            self._session._tx = None
            raise

    def commit(self) -> None:
        assert not self._done, "commit of an ended transaction"
        self._done = True
        self._record().outcome = "committed"
        self._session._tx = None

    def rollback(self) -> None:
        assert self.failed is None, (
            "rollback of a transaction whose statement failed: its connection is back in the pool"
        )
        if not self._done:
            self._done = True
            self._record().outcome = "rolled back"
        self._session._tx = None

    def close(self) -> None:
        self.rollback()

    def closed(self) -> bool:
        return self._done


class FakeSession:
    """Stands in for ``neo4j.Session``."""

    def __init__(self, driver: FakeDriver, config: dict[str, Any]) -> None:
        self._driver = driver
        self.config = config
        self._tx: FakeExplicitTransaction | None = None  # held until it ends or fails

    def __enter__(self) -> FakeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Like the real session: roll back a transaction it still holds."""
        if self._tx is not None and not self._tx.closed():
            self._tx.rollback()
        self._tx = None

    def _managed(
        self, mode: str, transaction_function: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        rec = self._driver.recorder
        rec.transactions.append(Transaction(mode))
        tx = rec.transactions[-1]
        handle = FakeTransaction(self._driver, len(rec.transactions) - 1)
        try:
            out = transaction_function(handle, *args, **kwargs)
        except BaseException:
            tx.outcome = "rolled back"
            raise
        tx.outcome = "committed"
        return out

    def begin_transaction(
        self, metadata: dict[str, Any] | None = None, timeout: float | None = None
    ) -> FakeExplicitTransaction:
        mode = self.config.get("default_access_mode", "WRITE")
        rec = self._driver.recorder
        rec.transactions.append(Transaction("read" if mode == "READ" else "write"))
        self._tx = FakeExplicitTransaction(self._driver, len(rec.transactions) - 1, self)
        return self._tx

    def execute_read(
        self, transaction_function: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        return self._managed("read", transaction_function, *args, **kwargs)

    def execute_write(
        self, transaction_function: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        return self._managed("write", transaction_function, *args, **kwargs)

    def run(
        self, query: str, parameters: dict[str, Any] | None = None, **kwargs: Any
    ) -> FakeResult:
        rec = self._driver.recorder
        access = "read" if self.config.get("default_access_mode") == "READ" else "write"
        rec.transactions.append(Transaction("auto", outcome="committed", access=access))
        return FakeTransaction(self._driver, len(rec.transactions) - 1).run(query, parameters)


#: (fake class, real ``neo4j`` class) pairs whose public methods must match
SPEC: tuple[tuple[type, str], ...] = (
    (FakeDriver, "Driver"),
    (FakeSession, "Session"),
    (FakeTransaction, "ManagedTransaction"),
    (FakeExplicitTransaction, "Transaction"),
    (FakeResult, "Result"),
)
