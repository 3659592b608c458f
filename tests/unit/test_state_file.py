"""The embedded store keeps its in-memory state beside the file: an open reads it instead
of the rows, catches up with what was written after it (also by a killed process or one
still running), and never trusts a damaged, foreign, stale or planted file."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded import journal as journal_module
from graphmem.backends.embedded import state_file
from graphmem.backends.embedded.backend import NetworkXBackend
from graphmem.backends.embedded.buckets import MemoryBucket
from graphmem.backends.embedded.state_file import file_of
from graphmem.models import Filter, Memory, NodeLabel
from tests.killed_writer import ids_written_then_killed

pytestmark = pytest.mark.embedded("the embedded store's saved state file beside its SQLite file")

SMALL = 50  # nodes from which the state is kept (5,000 by default)


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_module, "STATE_MIN_NODES", SMALL)
    monkeypatch.setattr(journal_module, "STATE_LAG", 20)


def _fill(path: Path, n: int, start: int = 0) -> list[str]:
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        made = mem.remember_many(
            [
                {
                    "content": f"note {i} about topic {i % 17}",
                    "agent_id": f"a{i % 3}",
                    "run_id": f"r{i % 3}",
                    "namespace": f"ns{i % 2}",
                    "tags": [f"t{i % 5}", "all"],
                }
                for i in range(start, start + n)
            ]
        )
        mem.vectors.wait(timeout=60)
        ids = [m.id for m in made]
        # a stored edge with properties (between memories of one agent: a memory derives
        # only from what its agent may read)
        mem.writes.link(ids[0], [ids[9]])
        mem.update(ids[2], content="note 2, corrected")
    return ids


def _worked_out(b: NetworkXBackend) -> None:
    """Ask every bucket the memory columns answer for every value a node holds (and
    None), so that its ``items()`` show them all (see ``records.MemoryBucket``)."""
    for (_label, f), bucket in b._index.items():
        if isinstance(bucket, MemoryBucket):
            for attrs in list(b._g._node.values()):
                v = attrs.get(f)
                for item in v if isinstance(v, tuple | list) else (v,):
                    bucket.get(item)


def _view(b: NetworkXBackend) -> dict[str, Any]:
    """Everything an open builds, in comparable form."""
    _worked_out(b)
    vi = b._vindex
    vecs = {} if vi is None else {k: vi.get(k).tobytes() for k in vi._row}  # type: ignore[union-attr]
    return {
        "nodes": b._g._node,
        "succ": b._g._succ,
        "pred": b._g._pred,
        "rid_of": b._rid_of,
        "key_of": b._key_of,
        "by_label": {k: v for k, v in b._by_label.items() if v},
        "index": {k: {v: s for v, s in d.items() if s} for k, d in b._index.items() if d},
        "unvectored": b._unvectored,
        "vectors": vecs,
        "dim": b._dim,
        "next_rid": b._next_rid,
    }


def _open_both(path: Path) -> tuple[bool, dict[str, Any], dict[str, Any]]:
    """(whether the state file was used, its view, the view read from the rows)."""
    b = NetworkXBackend(path)
    used = b._state_seq is not None
    via_state = _view(b)
    b._closed = True  # leave the file as it is (no save at close)
    return used, via_state, _rows_view(path)


def _rows_view(path: Path) -> dict[str, Any]:
    """The view of an open that reads the rows (the state file set aside meanwhile)."""
    saved = file_of(path)
    aside = saved.with_suffix(".aside")
    if saved.exists():
        os.replace(saved, aside)
    try:
        rows = NetworkXBackend(path)
        via_rows = _view(rows)
        rows._closed = True
    finally:
        if aside.exists():
            os.replace(aside, saved)
    return via_rows


def test_reopen_reads_the_saved_state_and_it_equals_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _fill(path, 120)
    assert file_of(path).stat().st_size > 0
    used, via_state, via_rows = _open_both(path)
    assert used
    assert via_state == via_rows
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert len(mem.list(limit=None, agent_id="a1")) == 40
        hits = mem.recall("note 7 about topic 7", k=3, touch=False)
        assert hits and "topic 7" in hits[0].memory.content


def _shared_values(b: NetworkXBackend) -> dict[str, bool]:
    """For each repeated field of the memories, whether its values are shared: at most
    two string objects per distinct value (the one read from a state file, the interned
    one of later writes), not one per memory."""
    objects: dict[str, set[int]] = {}
    values: dict[str, set[str]] = {}
    for attrs in b._g._node.values():
        if attrs["label"] != "Memory":
            continue
        for f in ("label", "agent_id", "namespace", "run_id", "status", "tier", "visibility"):
            if f in attrs:
                objects.setdefault(f, set()).add(id(attrs[f]))
                values.setdefault(f, set()).add(attrs[f])
        for t in attrs.get("tags", ()):
            objects.setdefault("tags", set()).add(id(t))
            values.setdefault("tags", set()).add(t)
    return {f: len(objects[f]) <= 2 * len(values[f]) for f in objects}


def _keys_are_the_nodes(b: NetworkXBackend) -> bool:
    """Whether every adjacency entry, bucket and vector-index key holds the node's own key
    string (one object per key), not a copy of it."""
    own = {k: k for k in b._g._node}
    held = [v for adj in (b._g._succ, b._g._pred) for nbrs in adj.values() for v in nbrs]
    held += [k for adj in (b._g._succ, b._g._pred) for k in adj]
    held += list(b._rid_of)
    if b._vindex is not None:
        held += list(b._vindex._row)
    return bool(held) and all(own[k] is k for k in held)


_FRESH = """
import os, sys
from pathlib import Path
import graphmem.backends.embedded.journal as journal
from graphmem import GraphMemory
from graphmem.backends.embedded.backend import NetworkXBackend
from graphmem.backends.embedded.state_file import file_of
from tests.unit.test_state_file import _keys_are_the_nodes, _shared_values
journal.STATE_MIN_NODES, journal.STATE_LAG = 50, 20
path, step = sys.argv[1], sys.argv[2]
if step == "write":
    with GraphMemory.open(path, embedder="hash:32") as mem:
        mem.remember_many([{"content": f"more {i}", "agent_id": "a1"} for i in range(5)])
        b = mem.backend
        print(b._state_seq is not None, all(_shared_values(b).values()), _keys_are_the_nodes(b))
else:
    if step == "rows":
        os.remove(file_of(Path(path)))
    b = NetworkXBackend(path)
    print(b._state_seq is not None, all(_shared_values(b).values()), _keys_are_the_nodes(b))
    b._closed = True
"""


def _fresh(path: Path, step: str) -> list[str]:
    """Run a step of the test below in a fresh process: in this one, a key string another
    live handle still holds is the interned one, which later edges would point at."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _FRESH, str(path), step],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_repeated_values_and_keys_are_one_object_after_writes_and_either_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    _fill(path, 120)
    assert _fresh(path, "write") == ["True", "True", "True"]  # written, from the state
    assert _fresh(path, "state") == ["True", "True", "True"]  # the state and a catch-up
    assert _fresh(path, "rows") == ["False", "True", "True"]


def test_below_the_threshold_no_state_is_written(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember("only one")
    assert not file_of(path).exists()


def test_a_short_session_does_not_rewrite_the_state_and_the_next_open_catches_up(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    ids = _fill(path, 120)
    before = file_of(path).read_bytes()
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        mem.remember("a later note", agent_id="a1")
        mem.forget(ids[5])
    assert file_of(path).read_bytes() == before  # 2 changes behind: not worth a write
    used, via_state, via_rows = _open_both(path)
    assert used and via_state == via_rows
    # far behind: rewritten at close
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        mem.remember_many([{"content": f"more {i}", "agent_id": "a2"} for i in range(40)])
        mem.vectors.wait(timeout=60)
    assert file_of(path).read_bytes() != before
    used, via_state, via_rows = _open_both(path)
    assert used and via_state == via_rows


def test_writes_of_a_killed_process_after_the_save_are_caught_up(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ids = _fill(path, 120)
    saved = file_of(path).read_bytes()
    late = ids_written_then_killed(
        f"""
        from graphmem import GraphMemory
        mem = GraphMemory.open({str(path)!r}, embedder="hash:32")
        made = mem.remember_many([{{"content": f"late note {{i}}"}} for i in range(6)])
        mem.vectors.wait(timeout=60)
        mem.forget({ids[3]!r})
        mem.update({ids[4]!r}, content="changed by the killed process")
        """
    )
    assert file_of(path).read_bytes() == saved
    used, via_state, via_rows = _open_both(path)
    assert used and via_state == via_rows
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert mem.backend.get(Memory, [ids[3]]) == []
        assert {m.id for m in mem.backend.get(Memory, late)} == set(late)


def test_another_process_writing_while_this_one_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process writes without pause while another opens, reads and closes (saving its
    state): every state file it leaves describes some moment of the store exactly, so
    each one, caught up afterwards, equals the rows."""
    monkeypatch.setattr(journal_module, "STATE_LAG", 100_000)  # catch up from any of them
    path = tmp_path / "s.db"
    _fill(path, 120)
    writer = textwrap.dedent(
        f"""
        from graphmem import GraphMemory
        with GraphMemory.open({str(path)!r}, embedder="hash:32") as mem:
            for i in range(40):
                mem.remember_many(
                    [{{"content": f"w{{i}} {{j}}", "agent_id": "w"}} for j in range(5)]
                )
                mem.forget(mem.list(agent_id="w", limit=1)[0].id)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", writer])
    saved: list[bytes] = []
    try:
        while proc.poll() is None or len(saved) < 2:
            with GraphMemory.open(str(path), embedder="hash:32") as mem:
                mem.backend._state_seq = None  # type: ignore[attr-defined]  # save at close
                mem.count()
            saved.append(file_of(path).read_bytes())
    finally:
        assert proc.wait(timeout=120) == 0
    for data in saved:
        file_of(path).write_bytes(data)
        used, via_state, via_rows = _open_both(path)
        assert used and via_state == via_rows


class _Planted:
    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.target}",))


@pytest.mark.parametrize(
    "damage", ["flip", "truncate", "header", "foreign", "ahead", "history", "planted"]
)
def test_a_damaged_foreign_stale_or_planted_state_is_not_trusted(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    ids = _fill(path, 120)
    state = file_of(path)
    if damage == "flip":
        data = bytearray(state.read_bytes())
        for at in range(len(data) // 2, len(data) // 2 + 16):
            data[at] ^= 0xFF
        state.write_bytes(bytes(data))
    elif damage == "truncate":
        with open(state, "r+b") as f:
            f.truncate(state.stat().st_size - 100)
    elif damage == "header":
        state.write_bytes(state.read_bytes().replace(b'"nodes":', b'"nodes":"x",', 1))
    elif damage == "foreign":  # another store's state of the same dimension
        other = tmp_path / "other.db"
        _fill(other, 120)
        os.replace(file_of(other), state)
    elif damage == "ahead":  # the store was put back from an older copy
        copy = tmp_path / "copy.db"
        shutil.copy(path, copy)
        with GraphMemory.open(str(path), embedder="hash:32") as mem:
            mem.remember_many([{"content": f"gone {i}"} for i in range(40)])
            mem.vectors.wait(timeout=60)
        os.replace(copy, path)
    elif damage == "history":  # put back, then written to again past the same position
        copy = tmp_path / "copy.db"
        shutil.copy(path, copy)
        with GraphMemory.open(str(path), embedder="hash:32") as mem:
            mem.remember_many([{"content": f"first {i}"} for i in range(40)])
        first = state.read_bytes()
        shutil.copy(copy, path)
        with GraphMemory.open(str(path), embedder="hash:32") as mem:
            mem.remember_many([{"content": f"second {i}"} for i in range(40)])
            for i in ids[:10]:
                mem.forget(i)
        state.write_bytes(first)
    else:  # a well-formed file whose pickle would run a command when loaded
        b = NetworkXBackend(path)
        store_id, seq = b._store_id, b._seen_seq
        b.close()
        state_file.save(
            path,
            {"nodes": _Planted(tmp_path / "pwned")},
            [],
            np.zeros((0, 32), np.float32),
            store_id=store_id,
            dim=32,
            seq=seq,
            seq_key=None,
            nodes=1,
        )
    caplog.set_level(logging.INFO)
    b = NetworkXBackend(path)
    try:
        assert b._state_seq is None
        assert "not using the saved state" in caplog.text
        rows = _view(b)
    finally:
        b.close()
    if damage in ("flip", "truncate", "header", "foreign", "planted"):
        with GraphMemory.open(str(path), embedder="hash:32") as mem:
            assert {m.id for m in mem.backend.get(Memory, ids[10:])} == set(ids[10:])
    used, via_state, via_rows = _open_both(path)
    assert used and via_state == via_rows == rows  # replaced at close by a good one
    assert not (tmp_path / "pwned").exists()


def test_two_histories_ending_with_the_same_change_are_told_apart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store put back from a copy and written to again reaches the same change-log
    position as the state file of the discarded history, its last change the same node
    (both forgot the same memory last) and its node count the same: the file describes
    other memories and must not be used."""
    path = tmp_path / "s.db"
    ids = _fill(path, 120)
    state = file_of(path)
    copy = tmp_path / "copy.db"
    shutil.copy(path, copy)

    def branch(word: str) -> None:
        with GraphMemory.open(str(path), embedder=None) as mem:
            mem.remember_many([{"content": f"{word} {i}", "agent_id": "a1"} for i in range(40)])
            mem.forget(ids[0])

    branch("first")
    first = state.read_bytes()
    shutil.copy(copy, path)
    branch("second")
    state.write_bytes(first)
    caplog.set_level(logging.INFO)
    b = NetworkXBackend(path)
    try:
        assert b._state_seq is None
        assert "not using the saved state" in caplog.text
    finally:
        b.close()
    used, via_state, via_rows = _open_both(path)
    assert used and via_state == via_rows
    with GraphMemory.open(str(path), embedder=None) as mem:
        assert {m.content for m in mem.list(limit=None, agent_id="a1")} >= {
            f"second {i}" for i in range(40)
        }


def test_a_state_of_the_older_format_is_ignored_with_its_reason_and_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    _fill(path, 120)
    state = file_of(path)
    # format 1: the magic, the header's length and the header, then the body
    head = b'{"format":1}'
    state.write_bytes(b"GMSTATE\n" + len(head).to_bytes(4, "little") + head + b"body")
    caplog.set_level(logging.INFO)
    b = NetworkXBackend(path)
    b.close()
    assert "an older format (1)" in caplog.text
    used, via_state, via_rows = _open_both(path)
    assert used and via_state == via_rows


def test_count_from_the_index_agrees_with_the_predicate(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ids = _fill(path, 120)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        for i in ids[:7]:
            mem.forget(i)
        backend = mem.backend
        assert isinstance(backend, NetworkXBackend)
        filters = [
            Filter.for_memories(),
            Filter.for_memories(status=None),
            Filter.for_memories(agent_id="a1"),
            Filter.for_memories(agent_id=["a1", "a2"], namespace="ns0"),
            Filter.for_memories(tags=["t3", "all"]),
            Filter.for_memories(tags=["t3"], run_id="r0"),
            Filter.for_memories(status=["active", "superseded"]),
            Filter.for_memories(agent_id="nobody"),
            Filter.for_memories(ids=ids[:20]),
        ]
        for flt in filters:
            slow = len(backend.match(Memory, flt, limit=None))
            assert backend.count(flt) == slow, flt
        assert np.isfinite(len(ids))


def test_a_reused_row_id_stays_searchable_in_a_handle_that_catches_up(tmp_path: Path) -> None:
    """Another handle forgets the newest memory and writes a new one, which takes the freed
    row id; catching up must not drop the new memory from lexical search, whatever order
    the two changes are replayed in."""
    path = tmp_path / "s.db"
    for attempt in range(6):  # the replay order follows set order: try a few pairs
        with (
            GraphMemory.open(str(path), embedder=None) as reader,
            GraphMemory.open(str(path), embedder=None) as writer,
        ):
            doomed = writer.remember(f"doomed zebra{attempt} note", agent_id="a")
            assert reader.count(agent_id="a") == attempt + 1  # the reader has seen it
            writer.forget(doomed.id)
            fresh = writer.remember(f"fresh okapi{attempt} note", agent_id="a")
            hits = reader.recall(f"okapi{attempt}", k=3, touch=False, agent_id="a")
            assert [h.memory.id for h in hits] == [fresh.id]


def test_the_open_never_holds_the_bodys_bytes_beside_what_they_make(tmp_path: Path) -> None:
    """At 1M memories the pickled body is ~530 MB: read whole before unpickling, it sat
    beside the state it made, the open's peak half a gigabyte above what the store holds."""
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember_many([{"content": f"{i} " + "word " * 10_000} for i in range(SMALL + 10)])
        store_id = mem.backend._store_id
    body = file_of(path).stat().st_size
    assert body > 2_500_000
    tracemalloc.start()
    try:
        saved = state_file.load(path, store_id=store_id, dim=None)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert saved is not None
    assert sum(k is not None for k in saved.payload["nodes"]["memories"]["keys"]) == SMALL + 10
    assert peak - held < body // 2


def _tag_types(nodes: dict[str, dict[str, Any]]) -> set[type]:
    return {type(a["tags"]) for a in nodes.values() if a["label"] == "Memory" and "tags" in a}


def test_tags_are_tuples_after_a_write_a_row_read_and_a_state_read(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _fill(path, 120)
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember("one more", tags=["x", "y"])
        assert _tag_types(mem.backend._g._node) == {tuple}
        assert mem.list(limit=None, tags=["x"])[0].tags == ("x", "y")
    used, via_state, via_rows = _open_both(path)
    assert used
    assert _tag_types(via_state["nodes"]) == _tag_types(via_rows["nodes"]) == {tuple}


def test_a_set_held_by_most_of_a_label_is_filed_as_what_it_leaves_out(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ids = _fill(path, 120)
    with GraphMemory.open(str(path), embedder=None) as mem:
        moved = [mem.update(i, category="episodic").id for i in ids[3:6]]
        store_id = mem.backend._store_id
        dim = mem.backend._dim
        mem.backend._state_seq = None  # write the state at close
    saved = state_file.load(path, store_id=store_id, dim=dim)
    assert saved is not None
    most = {(lab, f, v): sorted(out) for lab, f, v, out, _extra in saved.payload["most"]}
    assert most[("Memory", "category", "semantic")] == sorted(f"Memory:{i}" for i in moved)
    assert "semantic" not in saved.payload["index"][("Memory", "category")]
    used, via_state, via_rows = _open_both(path)
    assert used and via_state == via_rows


def test_buckets_the_columns_answer_stay_exact_through_writes_after_a_state_open(
    tmp_path: Path,
) -> None:
    """A state open leaves the memory buckets of agent, namespace, run, audience, tags and
    content hash to be worked out when asked for; writes before and after a value is asked
    for (new memories, a repeated content, a moved memory, a forgotten one, a value never
    seen) leave every bucket as a read of the rows builds it."""
    path = tmp_path / "s.db"
    ids = _fill(path, 120)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        b = mem.backend
        assert isinstance(b, NetworkXBackend) and b._state_seq is not None
        agents = b._index[(NodeLabel.MEMORY, "agent_id")]
        assert isinstance(agents, MemoryBucket) and not dict.__len__(agents)
        # a0 and t1 asked for before the writes, a1, ns0 and the rest after
        assert len(mem.list(limit=None, agent_id="a0")) == 40
        assert len(mem.list(limit=None, tags=["t1"])) == 24
        mem.remember_many(
            [
                {"content": f"later {i}", "agent_id": f"a{i % 2}", "tags": ["t1", "new"]}
                for i in range(6)
            ]
            + [{"content": "elsewhere", "agent_id": "a9", "namespace": "ns7", "run_id": "r9"}]
            + [{"content": "note 5 about topic 5", "namespace": "ns9"}]  # a repeated hash
        )
        mem.update(ids[3], tags=["t9"])
        mem.forget(ids[4])
        mem.forget(ids[6])
        assert len(mem.list(limit=None, agent_id="a0")) == 40 + 3 - 1
        assert len(mem.list(limit=None, agent_id="a9", namespace="ns7")) == 1
        via_state, via_rows = _view(b), _rows_view(path)
        assert via_state["index"] == via_rows["index"]
        assert via_state == via_rows


@pytest.mark.parametrize(
    ("fmt", "field", "lie"),
    [(6, "agent_id", "a0"), (7, "content_hash", "0" * 64), (7, "content_hash", None)],
)
def test_a_state_of_an_older_format_is_read_without_its_memory_buckets_and_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: int, field: str, lie: Any
) -> None:
    """Format 6 filed every bucket; format 7 leaves out those the memory columns answer
    but the content hash's, format 8 that one too. An older file is used as it is (its
    buckets of those fields are not: here one that lies, which a read that used it would
    show) and replaced at the next close."""
    path = tmp_path / "s.db"
    _fill(path, 120)
    apart = state_file.index_apart

    def as_older(index: Any, by_label: Any) -> Any:
        index = {**index, ("Memory", field): {lie: "Memory:not-one-of-them"}}
        return apart(index, by_label)

    monkeypatch.setattr(state_file, "FORMAT", fmt)
    monkeypatch.setattr(state_file, "index_apart", as_older)
    b = NetworkXBackend(path)
    b._state_seq = None  # write the state at close
    b.close()
    monkeypatch.undo()
    monkeypatch.setattr(journal_module, "STATE_MIN_NODES", SMALL)
    monkeypatch.setattr(journal_module, "STATE_LAG", 20)
    older = file_of(path).read_bytes()
    used, via_state, via_rows = _open_both(path)
    assert used and via_state == via_rows
    b = NetworkXBackend(path)
    assert b._state_seq is not None
    b.close()  # nothing changed, but the older file is replaced
    assert file_of(path).read_bytes() != older
    used, via_state, via_rows = _open_both(path)
    assert used and via_state == via_rows


def test_a_closed_handle_still_referenced_holds_none_of_the_stores_state(
    tmp_path: Path,
) -> None:
    """A handle sits in reference cycles (its facades, the vector index's hooks) that only a
    full collection frees: its state must go at the close, or a process that opens the
    store again holds both (at 1M memories, 2 GB more and a slower reopen)."""
    path = tmp_path / "s.db"
    _fill(path, 60)
    import gc
    import weakref

    gc.disable()
    try:
        mem = GraphMemory.open(str(path), embedder="hash:32")
        backend = mem.backend
        assert isinstance(backend, NetworkXBackend)
        index = backend.vector_index
        assert index is not None and len(index) >= 60
        count = mem.count()
        held = weakref.ref(index)
        nodes = backend._g.number_of_nodes()
        del index
        mem.close()
        assert held() is None  # freed at the close, no collection ran
        assert nodes > 60 and backend._g.number_of_nodes() == 0
        assert backend.vector_index is None
    finally:
        gc.enable()
    with GraphMemory.open(str(path), embedder="hash:32") as again:  # the file is untouched
        assert again.count() == count
        assert len(again.recall("note about topic 3", k=3)) == 3
