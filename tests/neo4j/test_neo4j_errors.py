"""Driver errors become typed graphmem errors, without a server: the recording driver
(tests/neo4j/fake_driver.py) raises what the real one raises. A write that lost a race must
come out as Conflict (which the callers retry), never as BackendError (which they pass on:
an acknowledged write then goes missing). The live counterparts:
tests/contract/test_log_keys.py on ``--backend neo4j`` and tests/neo4j/test_neo4j_pool_live.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from graphmem.backends.base import Expect, WriteBatch
from graphmem.backends.neo4j import Neo4jBackend
from graphmem.errors import Conflict, QueryFailed
from graphmem.memory import GraphMemory
from graphmem.models import Payload
from tests.neo4j.fake_driver import FakeDriver, guard_failure, result_failed, server_error

CONSTRAINT = "Neo.ClientError.Schema.ConstraintValidationFailed"


def _backend(driver: FakeDriver) -> Neo4jBackend:
    b = Neo4jBackend("bolt://127.0.0.1:7687", driver=driver, touch_flush_s=3600)
    b.ensure_schema()
    driver.recorder.reset()
    return b


@pytest.fixture
def fake() -> FakeDriver:
    return FakeDriver()


@pytest.mark.parametrize("carried", ["context", "cause"])
def test_a_result_failed_error_is_judged_by_the_error_it_carries(carried: str) -> None:
    """The driver can report a failed transaction as ``ResultFailedError`` with the real
    failure as its context or cause: a lost race inside stays a Conflict."""
    session = Neo4jBackend("bolt://127.0.0.1:7687", driver=FakeDriver())
    with pytest.raises(Conflict, match="lost"), session._translated("write"):
        try:
            raise Conflict("lost the race")
        except Conflict as e:
            if carried == "cause":
                raise result_failed() from e
            raise result_failed()  # noqa: B904 - the driver's way: the failure as context


def _payload(key: str, text: str) -> Payload:
    return Payload(id=key, text=text, size=len(text), refcount=0)


def test_a_create_that_meets_the_uniqueness_constraint_is_a_conflict(fake: FakeDriver) -> None:
    neo = _backend(fake)
    node = _payload("kv:k", "{}")

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name.startswith("write ") and "(create)" in name:
            raise server_error(CONSTRAINT, "Node(1) already exists with label `Payload`")
        return None

    fake.respond = respond
    with pytest.raises(Conflict, match="constraint"):
        neo.write(WriteBatch(nodes=[node], expect=[Expect(node.ref, exists=False)]))
    assert [t.outcome for t in fake.recorder.writes()] == ["rolled back"]


def test_a_failed_guard_is_a_conflict_that_names_the_precondition(fake: FakeDriver) -> None:
    """Also with the real driver's rollback error (``result-failed``): the guard failure
    still reads as one, so the Conflict's diagnosis runs (a ``check`` transaction) and
    names the field, not a node changed by mistake."""
    neo = _backend(fake)
    node = _payload("kv:k", "new")
    stored = {"id": "kv:k", "text": "changed by another writer", "size": 1, "refcount": 0}

    def respond(name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name.startswith("write guard"):
            raise guard_failure()
        if name == "check":
            return [{"label": "Payload", "id": "kv:k", "props": stored, "sources": []}]
        return None

    fake.respond = respond
    with pytest.raises(Conflict, match="text"):
        neo.write(WriteBatch(nodes=[node], expect=[Expect(node.ref, props={"text": "old"})]))
    assert [t.statements[0].name for t in fake.recorder.writes()][-1] == "check"


def test_any_other_failed_statement_keeps_its_own_type(fake: FakeDriver) -> None:
    """The unwrapping is by the statement's error, not a blanket Conflict."""
    neo = _backend(fake)
    fake.respond = lambda name, text, params: (
        (_ for _ in ()).throw(server_error("Neo.ClientError.Statement.SyntaxError", "bad"))
        if name.startswith("write ")
        else None
    )
    with pytest.raises(QueryFailed, match="Cypher rejected"):
        neo.write(WriteBatch(nodes=[_payload("kv:k", "{}")]))


class _Contended:
    """A key that other writers keep changing: the first ``losses`` writes of this
    handle lose (by the uniqueness constraint, then by the guard), then one wins."""

    def __init__(self, losses: int) -> None:
        self.losses = losses
        self.members: list[str] = []
        self.writes = 0

    def text(self) -> str:
        return json.dumps({"t": "set", "v": sorted(self.members)}, separators=(",", ":"))

    def respond(self, name: str, text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        if name == "nodes/payload_get":
            if not self.members:
                return []
            props = {"id": "kv:seen", "text": self.text(), "size": 1, "refcount": 0}
            return [{"id": "kv:seen", "eid": "e1", "props": props}]
        if name == "check":
            props = {"id": "kv:seen", "text": self.text(), "size": 1, "refcount": 0}
            return [{"label": "Payload", "id": "kv:seen", "props": props, "sources": []}]
        if name.startswith("write "):
            self.writes += 1
            if self.writes <= self.losses:
                # another writer got in first: it added its member meanwhile
                self.members.append(f"other-{self.writes}")
                if "(create)" in name:
                    raise server_error(CONSTRAINT, "already exists")
                raise guard_failure()
            rows = next(
                v for k, v in params.items() if k.endswith("_rows") and "size" in v[0]["props"]
            )
            self.members = json.loads(rows[0]["props"]["text"])["v"]
        return None


def test_sadd_that_loses_races_retries_and_keeps_every_member(fake: FakeDriver) -> None:
    """The log_keys race on Neo4j: a lost race (constraint on the first write of a key,
    guard afterwards) is retried from a fresh read, so no member is dropped."""
    neo = _backend(fake)
    key = _Contended(losses=3)
    fake.respond = key.respond
    mem = GraphMemory(neo, embedder=None, owns_backend=False)
    assert mem.log.sadd("seen", "mine") == 1
    assert sorted(key.members) == ["mine", "other-1", "other-2", "other-3"]
    assert key.writes == 4


def test_a_key_that_never_settles_ends_in_a_typed_conflict(
    fake: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retries are bounded: a writer that always loses gets Conflict (typed, saying why),
    after a bounded number of attempts, and the key keeps the other writers' value."""
    from graphmem import eventlog

    slept: list[float] = []
    monkeypatch.setattr(eventlog, "_sleep", slept.append)
    neo = _backend(fake)
    key = _Contended(losses=10**6)
    fake.respond = key.respond
    mem = GraphMemory(neo, embedder=None, owns_backend=False)
    with pytest.raises(Conflict, match="kept changing"):
        mem.log.sadd("seen", "mine")
    assert "mine" not in key.members
    assert key.writes == eventlog.KV_ATTEMPTS
    # jittered and growing, but bounded: the whole wait stays short
    assert len(slept) == eventlog.KV_ATTEMPTS - 1
    assert len(set(slept)) > 1 and max(slept) <= eventlog.KV_BACKOFF_MAX_S
    assert sum(slept) < 5.0
