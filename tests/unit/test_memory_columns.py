"""The embedded store holds its memories' attributes as columns (records.NodeTable): a row
reads back as exactly the dict it was made from, a memory that does not fit the columns
keeps its dict, the table files and loads whole, and a state file of the format before
the columns is ignored with its reason and replaced."""

from __future__ import annotations

import copy
import logging
import random
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded import journal as journal_module
from graphmem.backends.embedded import records, state_file
from graphmem.backends.embedded.backend import NetworkXBackend
from graphmem.backends.embedded.records import MemoryRow, NodeTable
from graphmem.models import Memory

pytestmark = pytest.mark.embedded("the embedded store's in-memory node table")


def _attrs(rng: random.Random, i: int) -> dict[str, Any]:
    """A memory's attributes as the graph holds them, some optional ones left out."""
    t = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(microseconds=rng.randrange(10**15))
    a: dict[str, Any] = {
        "label": "Memory",
        "id": f"m{i}",
        "content": f"memory {i} " + "x" * rng.randrange(5),
        "category": rng.choice(["semantic", "episodic"]),
        "tier": "long_term",
        "importance": rng.random(),
        "confidence": 1.0,
        "created_at": t,
        "updated_at": t,
        "access_count": rng.randrange(3),
        "agent_id": f"a{i % 3}",
        "namespace": "default",
        "tags": tuple(f"t{j}" for j in range(rng.randrange(3))),
        "status": "active",
        "content_hash": f"{rng.getrandbits(256):064x}",
        "visibility": "private",
        "audience": f"a:a{i % 3}",
    }
    if rng.random() < 0.5:
        a["run_id"] = f"r{i % 4}"
        a["seq"] = rng.randrange(100)
        a["event_type"] = "message"
    if rng.random() < 0.3:
        a["last_accessed"] = t + timedelta(days=1)
        a["valid_from"] = t
    if rng.random() < 0.3:
        a["metadata.source"] = "chat"
        a["metadata.turn"] = i
    return a


def test_a_row_reads_back_as_the_dict_it_was_made_from() -> None:
    rng = random.Random(3)
    table = NodeTable()
    given = {f"Memory:m{i}": _attrs(rng, i) for i in range(300)}
    for k, a in given.items():
        table[k] = copy.copy(a)
    assert not table.dicts and len(table) == 300
    for k, a in given.items():
        row = table[k]
        assert isinstance(row, MemoryRow)
        assert row == a and dict(row) == a and table.attrs(k) == a
        assert {f: type(v) for f, v in table.attrs(k).items()} == {f: type(v) for f, v in a.items()}
        built, ref = table.memories.memory(table.memories.row_of[k]), Memory.from_trusted(a)
        assert list(built.__dict__.items()) == list(ref.__dict__.items())
        assert built.__pydantic_fields_set__ == ref.__pydantic_fields_set__
        assert {f: type(v) for f, v in built} == {f: type(v) for f, v in ref}
        assert row.get("valid_to") is None and "valid_to" not in row
        with pytest.raises(KeyError):
            row["valid_to"]
    # overwritten, dropped and reused rows
    for i in range(0, 300, 3):
        del table[f"Memory:m{i}"]
        del given[f"Memory:m{i}"]
    for i in range(300, 400):
        given[f"Memory:m{i}"] = _attrs(rng, i)
        table[f"Memory:m{i}"] = given[f"Memory:m{i}"]
    given["Memory:m1"] = {**given["Memory:m1"], "content": "changed", "tags": ("z",)}
    table["Memory:m1"] = given["Memory:m1"]
    assert max(table.memories.row_of.values()) < 300  # the dropped rows were taken again
    assert dict(table.items()) == given
    again = NodeTable.from_file(copy.deepcopy(table.to_file()))
    assert again == given and not again.dicts


def _models_match(table: NodeTable, given: dict[str, dict[str, Any]]) -> None:
    for k, a in given.items():
        built = table.memories.memory(table.memories.row_of[k])
        assert list(built.__dict__.items()) == list(Memory.from_trusted(a).__dict__.items())


def test_a_model_built_again_shows_every_change_to_its_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the table keeps the models of rows built twice (here the last 100, so that rows
    # leave the kept ones too): a later build must see every write, access and reuse
    monkeypatch.setattr(records, "_BUILT_MAX", 100)
    rng = random.Random(5)
    table = NodeTable()
    given = {f"Memory:m{i}": _attrs(rng, i) for i in range(120)}
    for k, a in given.items():
        table[k] = copy.copy(a)
    _models_match(table, given)
    assert not table.memories._built  # built once: not kept (most never come again)
    _models_match(table, given)  # built twice: kept
    assert len(table.memories._built) == 100
    at = datetime(2100, 5, 1, 12, tzinfo=UTC)
    for i in range(0, 120, 2):
        k = f"Memory:m{i}"
        table.count_access(k, 3, at)
        given[k] = {**given[k], "access_count": given[k]["access_count"] + 3, "last_accessed": at}
    for i in range(1, 120, 5):
        del table[f"Memory:m{i}"]
        del given[f"Memory:m{i}"]
    for i in range(120, 150):  # the dropped rows taken again
        given[f"Memory:m{i}"] = _attrs(rng, i)
        table[f"Memory:m{i}"] = copy.copy(given[f"Memory:m{i}"])
    given["Memory:m83"] = {**given["Memory:m83"], "content": "changed", "metadata.turn": 9}
    table["Memory:m83"] = copy.copy(given["Memory:m83"])
    _models_match(table, given)
    # each model's metadata is its own: changing one changes no other
    row = table.memories.row_of["Memory:m83"]
    table.memories.memory(row).metadata["turn"] = 10
    assert table.memories.memory(row).metadata["turn"] == 9


@pytest.mark.parametrize(
    "change",
    [
        {"importance": 1},  # an int where the model holds a float
        {"created_at": datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=2)))},
        {"created_at": datetime(2024, 1, 1)},  # naive
        {"access_count": True},
        {"content_hash": "ABC"},
        {"run_id": None},
        {"tags": ["a list"]},
        {"id": "another"},
    ],
)
def test_a_memory_that_does_not_fit_the_columns_keeps_its_dict(change: dict[str, Any]) -> None:
    table = NodeTable()
    a = {**_attrs(random.Random(1), 0), **change}
    table["Memory:m0"] = a
    assert table["Memory:m0"] is a and table.attrs("Memory:m0") == a
    table["Memory:m0"] = _attrs(random.Random(1), 0)  # fits again: back to a row
    assert not table.dicts and table["Memory:m0"] == _attrs(random.Random(1), 0)


def test_an_access_counted_on_a_row_is_what_it_is_on_a_dict() -> None:
    table, plain = NodeTable(), _attrs(random.Random(2), 0)
    table["Memory:m0"] = dict(plain)
    at = datetime(2100, 5, 1, 12, tzinfo=UTC)  # after every time _attrs draws
    for when in (at, at - timedelta(days=3)):
        table.count_access("Memory:m0", 2, when)
    assert table["Memory:m0"]["access_count"] == plain["access_count"] + 4
    assert table["Memory:m0"]["last_accessed"] == at and not table.dicts


@pytest.mark.parametrize(
    "damage",
    [
        lambda f: f["memories"]["keys"].append("Memory:x"),
        lambda f: f["memories"]["codes"].update(status=b"\x07\0\0\0" * len(f["memories"]["keys"])),
        lambda f: f["memories"]["free"].append(0),
        lambda f: f["memories"].update(hashes=b""),
    ],
)
def test_columns_that_do_not_add_up_are_refused(damage: Any) -> None:
    table = NodeTable()
    for i in range(5):
        table[f"Memory:m{i}"] = _attrs(random.Random(i), i)
    filed = copy.deepcopy(table.to_file())
    damage(filed)
    with pytest.raises((ValueError, KeyError, TypeError, IndexError)):
        NodeTable.from_file(filed)


def test_a_stores_memories_are_rows_and_a_state_file_of_the_older_format_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(journal_module, "STATE_MIN_NODES", 50)
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        made = mem.remember_many(
            [
                {"content": f"note {i}", "tags": ["t"], "metadata": {"n": i}, "agent_id": "a"}
                for i in range(80)
            ]
        )
        table = mem.backend._g._node  # type: ignore[attr-defined]
        assert len(table.memories) == 80 and all(k[:7] != "Memory:" for k in table.dicts)
        assert mem.get(made[5].id) == made[5]
    # the state file as the format before the columns filed it: ignored, reason logged
    monkeypatch.setattr(state_file, "FORMAT", 5)
    b = NetworkXBackend(path)
    b._state_seq = None  # write the state at close
    b.close()
    monkeypatch.undo()
    monkeypatch.setattr(journal_module, "STATE_MIN_NODES", 50)
    caplog.set_level(logging.INFO)
    b = NetworkXBackend(path)
    try:
        assert b._state_seq is None and "an older format (5)" in caplog.text
        rows = dict(b._g._node.items())
    finally:
        b.close()  # replaced by one of the current format
    b = NetworkXBackend(path)
    try:
        assert b._state_seq is not None and dict(b._g._node.items()) == rows
        assert Memory.from_trusted(b._g._node.attrs("Memory:" + made[5].id)) == made[5]
    finally:
        b.close()


def test_what_a_recall_returns_is_the_callers_to_change(tmp_path: Path) -> None:
    # recall's searches read the node table's own models: a result must be a copy
    with GraphMemory.open(str(tmp_path / "g.db"), embedder="hash") as mem:
        mem.remember("the blue house by the lake", agent_id="a", metadata={"room": "kitchen"})
        for _ in range(2):
            found = mem.recall("blue house", agent_id="a", touch=False)
            assert [r.memory.metadata for r in found] == [{"room": "kitchen"}]
            found[0].memory.metadata["room"] = "attic"
        assert mem.get(found[0].memory.id).metadata == {"room": "kitchen"}
        assert mem.list(agent_id="a")[0].metadata == {"room": "kitchen"}
