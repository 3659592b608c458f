"""Every kind of untyped error issue 24 (finding 5) counted in its fuzz of 1ed2a17, called
once by name: each is now InvalidInput from graphmem.errors and changes nothing.

The seeded fuzzer (tests/interfaces/api_fuzz.py) covers every public verb; these are its
regression cases, kept apart so that a change to the fuzzer's draws cannot drop one.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem.errors import GraphMemError, InvalidInput
from graphmem.memory import GraphMemory

# the store as Any: these calls are wrong on purpose
Call = Callable[[Any, dict[str, str]], Any]

# (what the issue saw on 1ed2a17, the call)
CASES: list[tuple[str, Call]] = [
    ("about(<non-str>): TypeError", lambda m, w: m.knowledge.about(12)),
    ("about(<bytes>): TypeError", lambda m, w: m.knowledge.about(b"Alice")),
    ("count(bogus=1): TypeError from Filter.for_memories", lambda m, w: m.count(bogus=1)),
    ("remember_many(None): TypeError", lambda m, w: m.remember_many(None)),
    ('entities(type="x"): ValueError', lambda m, w: m.knowledge.entities(type="x")),
    ("entities(limit=None): TypeError", lambda m, w: m.knowledge.entities(limit=None)),
    (
        "org.publish(fact_id=1.5): AttributeError",
        lambda m, w: m.org.publish("a policy", author="alice", fact_id=1.5),
    ),
    (
        'org.publish(fact_id=b"x"): AttributeError',
        lambda m, w: m.org.publish("a policy", author="alice", fact_id=b"x"),
    ),
    (
        "remember(event_type=[...]): TypeError unhashable type",
        lambda m, w: m.remember("x", event_type=["a", "b"]),
    ),
    (
        "add_event(event_type=[...]): TypeError unhashable type",
        lambda m, w: m.runs.add_event(w["run"], ["a"], "hello"),
    ),
    ("context(policies=[None])", lambda m, w: m.context("tea", policies=[None])),
    (
        'start_run(app_name="a\\ud800"): TypeError from SQLite',
        lambda m, w: m.runs.start("alice", app_name="a\ud800"),
    ),
]


def _export(mem: GraphMemory) -> str:
    buf = io.StringIO()
    mem.transfer.export(buf)
    return buf.getvalue()


@pytest.mark.parametrize("seen, call", CASES, ids=[c[0].split(":")[0] for c in CASES])
def test_each_untyped_kind_of_the_fuzz_is_now_invalid_input(
    mem: GraphMemory, seen: str, call: Call
) -> None:
    mem.remember("Alice drinks tea with Carla in Lisbon", agent_id="alice")
    world = {"run": mem.runs.start("alice").id}
    before = _export(mem)
    with pytest.raises(InvalidInput):
        call(mem, world)
    assert _export(mem) == before, seen


@pytest.mark.embedded("opening a path of the local file system is the embedded store's door")
@pytest.mark.parametrize("where", ["/proc/graphmem-no-such/x.db", "a file as the parent"])
def test_opening_a_path_that_cannot_hold_a_store_is_a_typed_error(
    tmp_path: Path, where: str
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    path = str(blocker / "x.db") if where == "a file as the parent" else where
    with pytest.raises(GraphMemError):
        GraphMemory.open(path, embedder=None).close()


# numbers the argument check takes as floats without being Python floats (numbers.Real)
NUMBERS: list[Any] = [np.float32(0.25), np.float16(0.5), np.int64(1), np.uint8(0), Fraction(1, 4)]


@pytest.mark.parametrize("field", ["importance", "confidence"])
@pytest.mark.parametrize("value", NUMBERS, ids=[type(v).__name__ for v in NUMBERS])
def test_a_real_number_that_is_not_a_float_is_stored_as_its_value(
    mem: GraphMemory, field: str, value: Any
) -> None:
    """remember's duplicate check compared what the caller said with ``in (None, (), [],
    {})``: a numpy scalar compared with ``()`` is an empty array, whose truth is a
    ValueError, so ``importance=np.float32(0.25)`` raised an untyped error."""
    m = mem.remember(f"a note with {field} {value!r}", agent_id="alice", **{field: value})
    assert getattr(m, field) == float(value)
    assert getattr(mem.get(m.id), field) == float(value)
    again = mem.remember(f"a note with {field} {value!r}", agent_id="alice", **{field: value})
    assert again.id == m.id  # an exact duplicate, recognised as one


@pytest.mark.parametrize("given", ["graphmem.db", Path("graphmem.db"), None, 42, object()])
def test_a_backend_that_is_not_one_is_a_typed_error_that_names_the_open_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: Any
) -> None:
    """``GraphMemory("graphmem.db")`` — the natural first guess — was taken, and the first
    write failed deep inside with an AttributeError. It is refused at once, pointing at
    ``GraphMemory.open``, and writes no file."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match=r"GraphMemory\.open"):
        GraphMemory(given)
    assert list(tmp_path.iterdir()) == []


def test_relevance_refuses_a_naive_now_and_a_memory_copied_with_bad_fields(
    mem: GraphMemory,
) -> None:
    """``relevance(m, now=<naive>)`` raised TypeError (aware minus naive), and so did a
    Memory copied with ``model_copy`` holding a naive time or a text importance."""
    m = mem.remember("Alice drinks tea")
    with pytest.raises(InvalidInput):
        mem.relevance(m, now=datetime(2030, 1, 1))
    for bad in ({"last_accessed": datetime(2030, 1, 1)}, {"importance": "high"}):
        with pytest.raises(InvalidInput):
            mem.relevance(m.model_copy(update=bad))
    assert 0.0 <= mem.relevance(m, now=datetime(2030, 1, 1, tzinfo=UTC)) <= 1.0
