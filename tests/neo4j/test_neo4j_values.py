"""Memories read back from a Neo4j row (no server needed): a row of the shape graphmem
writes is rebuilt without the model's validators and equals the memory written; any other
row is validated in full, so a stored audience can never widen who may read a memory and an
invalid row is a BackendError."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from graphmem.backends.neo4j.values import node_from_db, temporal_fields
from graphmem.errors import BackendError
from graphmem.models import Memory, NodeLabel

T0 = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)


def _memory() -> Memory:
    return Memory(
        content="Alice prefers green tea",
        agent_id="a",
        namespace="team",
        run_id="r1",
        tags=["prefs", "drinks"],
        importance=0.25,
        created_at=T0,
        valid_to=T0 + timedelta(days=3),
        metadata={"user_id": "u1", "n": 3},
        embedding=[0.5, 0.25],
    )


def _row(m: Memory) -> dict[str, Any]:
    """The memory as recall's statements return it: times as Neo4j's toString text."""
    props: dict[str, Any] = dict(m.to_props())
    for f in temporal_fields(NodeLabel.MEMORY):
        if props.get(f) is not None:
            props[f] = props[f].isoformat().replace("+00:00", "Z")
    return props


def test_a_row_of_graphmems_shape_comes_back_equal() -> None:
    m = _memory()
    back = node_from_db("Memory", _row(m))
    assert back == m and back.model_dump() == m.model_dump()
    assert back.created_at.tzinfo is UTC and back.tags == ("prefs", "drinks")
    lean = node_from_db("Memory", {**_row(m), "embedding": None})
    assert isinstance(lean, Memory) and lean.embedding is None and lean.content == m.content


def test_times_in_another_offset_are_read_as_utc() -> None:
    row = {**_row(_memory()), "created_at": "2025-03-01T14:30:00+02:00"}
    back = node_from_db("Memory", row)
    assert isinstance(back, Memory)
    assert back.created_at == T0 and back.created_at.utcoffset() == timedelta(0)


def test_a_stored_audience_that_would_widen_access_is_recomputed() -> None:
    m = _memory()
    row = {**_row(m), "audience": "public"}
    back = node_from_db("Memory", row)
    assert isinstance(back, Memory) and back.audience == m.audience != "public"


def test_a_row_without_a_defaulted_field_gets_the_models_default() -> None:
    row = _row(_memory())
    del row["confidence"]
    back = node_from_db("Memory", row)
    assert isinstance(back, Memory) and back.confidence == 1.0


@pytest.mark.parametrize(
    ("field", "value"),
    [("status", "bogus"), ("created_at", "yesterday"), ("importance", 7.0), ("id", "")],
)
def test_an_invalid_row_is_a_backend_error(field: str, value: Any) -> None:
    with pytest.raises(BackendError, match="not valid"):
        node_from_db("Memory", {**_row(_memory()), field: value})


# -- rows of nodes deleted while a statement read them --------------------------------------


def _vanished_rows() -> dict[str, list[dict[str, Any]]]:
    """What each read statement returns, by name: one memory that exists, then one deleted
    by another transaction between the statement's match and its read of the properties
    (Neo4j reads are read committed: every property, the id too, reads as null)."""
    live = _row(_memory())  # the same memory in every answer
    gone_lean = {k: None for k in live} | {"_metadata_pairs": []}  # lean projections
    gone_all = {k: None for k in temporal_fields(NodeLabel.MEMORY)}  # n {.*, times}
    hit = {"probe": 1.0, "linked": True, "fetched": 2, "sim": None, "score": 0.5}
    return {
        "match": [{"props": live}, {"props": gone_all}],
        "nodes/memory_get": [
            {"id": live["id"], "eid": "e1", "props": live},
            {"id": None, "eid": "e2", "props": {}},
        ],
        "search/text (bounded)": [{"props": live, "score": 1.0}, {"props": gone_all, "score": 0.9}],
        "recall search": [
            {"props": live, "channel": "lexical", **hit},
            {"props": gone_lean, "channel": "lexical", **hit},
        ],
        "recall expansion": [
            {
                "seed": "s",
                "probe": 1.0,
                "linked": [{"type": "NEXT", "props": gone_lean, "sim": None}],
                "tagged": [{"props": live, "sim": None}, {"props": gone_lean, "sim": None}],
                "entities": [{"entity": "alice", "props": gone_lean, "sim": None}],
            }
        ],
        "nodes/scan": [
            {"label": "Memory", "props": live},
            {"label": None, "props": {}},
            {"label": "Memory", "props": {}},
        ],
    }


def test_a_node_deleted_while_a_statement_read_it_is_left_out_of_every_read() -> None:
    """Each read of the Neo4j backend leaves out the row of a node another transaction
    deleted while the statement read it, instead of failing to decode it (BackendError
    "stored Memory node None is not valid": a list, a recall and a get racing a forget on
    a live server failed that way; tests/neo4j/test_neo4j_concurrency_live.py)."""
    from graphmem.backends.neo4j import Neo4jBackend
    from graphmem.models import Filter, NodeRef, TextQuery
    from tests.neo4j.fake_driver import FakeDriver

    rows = _vanished_rows()
    backend = Neo4jBackend(
        "bolt://127.0.0.1:7687",
        driver=FakeDriver(lambda name, text, params: rows.get(name)),
    )
    want = rows["match"][0]["props"]["id"]
    flt = Filter.for_memories()
    assert [m.id for m in backend.match(Memory, flt)] == [want]
    assert [m.id for m in backend.get(Memory, [want, "gone"])] == [want]
    query = TextQuery(text="tea", filter=flt, k=5)
    assert [h.node.id for h in backend.search_text(query)] == [want]
    lexical, _near = backend.search_both(query, None)
    assert [h.node.id for h in lexical] == [want]
    assert [m.id for _s, _via, m in backend.neighbours(["s"], flt)] == [want]
    scanned = [n.id for nodes, _edges in backend.scan() for n in nodes]
    assert scanned == [want]
    sub = backend.expand([NodeRef(NodeLabel.MEMORY, "gone")], [])
    assert sub.nodes == ()
