"""Memory rows written lean (schema version 6): what a lean row leaves out reads back as the
whole row said it, through every reader (an open from the rows, a handle catching up, an
access count written into the row), and a file of whole rows (version 5) reads the same and
goes on with lean ones beside them."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest

from graphmem import GraphMemory
from graphmem.backends.base import WriteBatch
from graphmem.backends.embedded import NetworkXBackend
from graphmem.backends.embedded.memory_rows import memory_props, memory_row
from graphmem.backends.embedded.rows import SCHEMA_VERSION
from graphmem.models import Memory
from graphmem.models.values import Category, Status, Tier, Visibility
from tests.unit.test_change_log import _view
from tests.unit.test_state_file import _rows_view

pytestmark = pytest.mark.embedded("the embedded store's memory rows in its SQLite file")

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _memories() -> list[Memory]:
    """Memories at and off every value a lean row leaves out."""
    other_zone = timezone(timedelta(hours=5))
    return [
        Memory(content="plain", agent_id="a", created_at=T0, updated_at=T0, valid_from=T0),
        Memory(content="no times set", agent_id="a", created_at=T0),
        Memory(
            content="off every default",
            agent_id="b",
            namespace="ns1",
            run_id="r1",
            event_type="step",
            seq=3,
            tags=("x", "y"),
            category=Category.EPISODIC,
            tier=Tier.SHORT_TERM,
            importance=0.25,
            confidence=0.5,
            access_count=7,
            status=Status.SUPERSEDED,
            visibility=Visibility.SHARED,
            created_at=T0,
            updated_at=T0 + timedelta(hours=1),
            valid_from=T0 - timedelta(days=1),
            valid_to=T0 + timedelta(days=9),
            expires_at=T0 + timedelta(days=30),
            last_accessed=T0 + timedelta(minutes=5),
            metadata={"source": "chat", "n": 2},
        ),
        Memory(content="org wide", agent_id="c", visibility=Visibility.ORG, created_at=T0),
        Memory(content="before 1970", created_at=datetime(1960, 1, 1, tzinfo=UTC)),
        Memory(
            content="the same instant elsewhere",
            created_at=T0,
            updated_at=T0.astimezone(other_zone),
            valid_from=T0,
        ),
        Memory(content="confidence one exactly", confidence=1, access_count=0, created_at=T0),
    ]


def _whole(m: Memory) -> dict[str, Any]:
    """The row a whole writer made (graphmem before schema version 6), as read back."""
    parsed: dict[str, Any] = orjson.loads(orjson.dumps(m.to_props()))
    return parsed


@pytest.mark.parametrize("m", _memories(), ids=lambda m: m.content)
def test_a_lean_row_reads_back_as_the_whole_row(m: Memory) -> None:
    text = memory_row(m.to_props())
    lean = orjson.loads(text)
    assert "id" not in lean
    assert memory_props(lean, m.id) == _whole(m)
    if not m.metadata:  # the column-wise path writes from the model's own fields
        assert memory_row(m.__dict__) == text


def test_a_plain_memorys_row_holds_only_what_it_says() -> None:
    m = _memories()[0]
    lean = orjson.loads(memory_row(m.to_props()))
    assert set(lean) == {"content", "importance", "created_at", "agent_id", "namespace"} | {
        "tags",
        "content_hash",
    }
    assert len(memory_row(m.to_props())) < 0.65 * len(orjson.dumps(m.to_props()))


def test_a_whole_row_reads_as_it_is() -> None:
    m = _memories()[2]
    assert memory_props(_whole(m), "another id") == _whole(m)


def _file_rows(path: Path) -> dict[str, dict[str, Any]]:
    """Each memory's row as the file holds it (id -> its JSON read, unfilled)."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, props FROM nodes WHERE label = 'Memory'").fetchall()
    return {ident: orjson.loads(props) for ident, props in rows}


def _notes(word: str, n: int) -> list[dict[str, Any]]:
    return [{"content": f"{word} {i}", "agent_id": "a", "run_id": "r"} for i in range(n)]


def _fill(mem: GraphMemory, n: int) -> tuple[list[Memory], list[Memory]]:
    """The varied memories written as models, then ``n`` notes appended to a run."""
    made = _memories()
    mem.backend.write(WriteBatch(nodes=made))
    return made, mem.remember_many(_notes("note", n))


def test_a_store_of_lean_rows_reads_the_same_from_them(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        made, batch = _fill(mem, 40)
        assert _view_of_rows(path) == _view(mem.backend)
        # an access written into a lean row (json_set) is read back
        mem.backend.touch([batch[0].id], T0 + timedelta(days=400))
        mem.backend.flush()  # type: ignore[attr-defined]
    rows = _file_rows(path)
    assert all("id" not in r for r in rows.values())
    b = NetworkXBackend(path)
    try:
        assert b.get(Memory, [m.id for m in made]) == made
        [touched] = b.get(Memory, [batch[0].id])
        assert (touched.access_count, touched.last_accessed) == (1, T0 + timedelta(days=400))
        assert b.get(Memory, [m.id for m in batch[1:]]) == batch[1:]
    finally:
        b.close()


def _view_of_rows(path: Path) -> dict[str, Any]:
    view = _rows_view(path)
    del view["next_rid"]
    return view


def _as_version_5(path: Path) -> None:
    """Rewrite the store's memory rows as graphmem wrote them before version 6: whole."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT rid, id, props FROM nodes WHERE label = 'Memory'").fetchall()
        db.executemany(
            "UPDATE nodes SET props = ? WHERE rid = ?",
            [
                (orjson.dumps(memory_props(orjson.loads(p), ident)).decode(), rid)
                for rid, ident, p in rows
            ],
        )
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")


def _version(path: Path) -> str:
    with sqlite3.connect(path) as db:
        value: str = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    return value


def test_a_version_5_file_of_whole_rows_reads_the_same_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        made, first = _fill(mem, 30)
        held = _view(mem.backend)
    _as_version_5(path)
    assert all("id" in r for r in _file_rows(path).values())
    assert _view_of_rows(path) == held
    assert _version(path) == SCHEMA_VERSION
    # two handles: one appends (lean rows beside the whole ones), the other catches up
    a, b = NetworkXBackend(path), NetworkXBackend(path)
    try:
        more = GraphMemory(a, embedder=None).remember_many(_notes("later", 30))
        every = [*made, *first, *more]
        assert b.get(Memory, [m.id for m in every]) == every
        rows = _file_rows(path)
        assert {"id" in rows[m.id] for m in more} == {False}
        assert {"id" in rows[m.id] for m in first} == {True}
        assert _view(b) | {"next_rid": 0} == _view(a) | {"next_rid": 0}
        assert _view_of_rows(path) == _view(a)
    finally:
        a.close()
        b.close()


def test_every_field_a_memory_may_leave_unset_is_one_a_lean_row_drops_unset() -> None:
    """A row written from a model's fields (the column-wise path) drops unset fields by a
    list taken from the model: a field that may hold None and is not on it would be written
    as a null the whole row never held."""
    from graphmem.backends.embedded.memory_rows import _LEAN_OUT, _UNSET

    for name in Memory.model_fields:
        try:
            m = Memory.model_validate({"content": "x", name: None})
        except ValueError:
            continue
        if m.__dict__[name] is None:
            assert name in _UNSET or name in _LEAN_OUT, name
            assert memory_row(m.__dict__) == memory_row(m.to_props())


def test_a_lean_row_leaves_out_exactly_the_values_the_reader_fills_in() -> None:
    """:data:`_LEAN_DEFAULTS` is what the reader fills a missing field with; the writer
    (``memory_row``, its checks unrolled) must leave a field out at that value — of its
    class — and at no other, from a model's fields and from its ``to_props``."""
    from graphmem.backends.embedded.memory_rows import _LEAN_DEFAULTS

    others: dict[str, list[Any]] = {
        "category": [Category.EPISODIC, "procedural"],
        "tier": [Tier.SHORT_TERM],
        "confidence": [0.5, 1, True, 0.0],
        "access_count": [3, 0.0, False],
        "status": [Status.ARCHIVED, "superseded"],
        "visibility": [Visibility.ORG, "shared"],
    }
    assert {k for k, _ in _LEAN_DEFAULTS} == set(others)
    base = Memory(content="x", agent_id="a", created_at=T0)
    for k, dv in _LEAN_DEFAULTS:
        at = _assembled(base, **{k: dv})
        assert k not in orjson.loads(memory_row(at.__dict__)), k
        assert k not in orjson.loads(memory_row(at.to_props())), k
        if dv.__class__ is str:  # the model's member and its text both
            assert k not in orjson.loads(memory_row(_assembled(base, **{k: str(dv)}).__dict__))
        for v in others[k]:
            off = _assembled(base, **{k: v})
            assert orjson.loads(memory_row(off.__dict__))[k] == v, (k, v)
            assert orjson.loads(memory_row(off.to_props()))[k] == v, (k, v)


def _assembled(m: Memory, **changes: Any) -> Memory:
    """``m`` with ``changes`` as they are (no validation: an int confidence stays an int)."""
    from graphmem.models.values import replaced

    return replaced(m, **changes)
