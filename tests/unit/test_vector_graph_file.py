"""The embedded store keeps its HNSW graph beside the file: an open reads it instead of
building it, catches up with what was written after it was saved (also when the writer was
killed), and never trusts a damaged, foreign or stale file."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import faiss
import numpy as np
import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded import journal as journal_module
from graphmem.backends.embedded import state_file
from graphmem.backends.embedded import vector_index as vector_index_module
from graphmem.backends.embedded.hnsw_file import files_of
from graphmem.backends.embedded.vector_index import VectorIndex
from graphmem.models import Filter, VectorQuery
from tests.killed_writer import ids_written_then_killed

pytestmark = pytest.mark.embedded(
    "the embedded store's saved vector-graph file beside its SQLite file"
)

THRESHOLD = 200  # vectors above which the graph is used (50,000 by default)


@pytest.fixture(autouse=True, params=["rows", "state"])
def small_threshold(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_index_module, "ANN_THRESHOLD", THRESHOLD)
    monkeypatch.setattr(vector_index_module, "LEAN_THRESHOLD", THRESHOLD)
    if request.param == "state":  # a state file kept beside: it names the graph's vectors
        monkeypatch.setattr(journal_module, "STATE_MIN_NODES", 50)


def _fill(path: Path, n: int, start: int = 0) -> list[str]:
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        made = mem.remember_many(
            [
                {"content": f"note {i} about topic {i % 17}", "agent_id": "a"}
                for i in range(start, start + n)
            ]
        )
        mem.vectors.wait(timeout=60)
    return [m.id for m in made]


def _index(mem: GraphMemory) -> VectorIndex:
    index = mem.backend.vector_index  # type: ignore[attr-defined]
    assert isinstance(index, VectorIndex)
    return index


def _build_and_close(path: Path) -> None:
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert _index(mem).build_ann()


def _built(tmp_path: Path) -> tuple[Path, list[str]]:
    """A store of 400 memories whose graph was built and saved, and their ids."""
    path = tmp_path / "s.db"
    ids = _fill(path, 400)
    _build_and_close(path)
    return path, ids


def _exact_scores(index: VectorIndex, q: np.ndarray, k: int) -> list[float]:
    """The k best cosines by brute force (compared as scores: the hash embedder's
    vectors tie often, and ties may come back in any order)."""
    mat = np.stack([index.get(key) for key in index.keys()])  # type: ignore[misc]
    scores = mat @ q / np.linalg.norm(mat, axis=1) / np.linalg.norm(q)
    return sorted(scores.tolist(), reverse=True)[:k]


def _assert_graph_answers_like_exact(index: VectorIndex, ids: list[str]) -> None:
    for i in ids[:: max(1, len(ids) // 25)]:
        q = index.get(f"Memory:{i}")
        assert q is not None
        got = index.search(q, 5)
        assert got[0][1] == pytest.approx(1.0, abs=1e-5)
        assert [s for _, s in got] == pytest.approx(_exact_scores(index, q, 5), abs=1e-5)


def test_reopen_reads_the_saved_graph_instead_of_building_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, ids = _built(tmp_path)
    bin_path, meta_path = files_of(path)
    assert bin_path.stat().st_size > 0 and meta_path.stat().st_size > 0

    def read_every_vector(*args: object) -> None:
        raise AssertionError("the open read every vector into a matrix beside the graph")

    # from the rows or from the state, the graph is the vectors: no matrix is read at all
    monkeypatch.setattr(journal_module, "add_stored_vectors", read_every_vector)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        index = _index(mem)
        # in use at open: no build started, no exact fallback, no matrix beside it
        assert index._ann is not None and index._building is None and index.ann_active
        assert index.lean and index._mat.size == 0
        _assert_graph_answers_like_exact(index, ids)


def test_writes_after_the_save_are_caught_up_even_when_the_writer_was_killed(
    tmp_path: Path,
) -> None:
    path, ids = _built(tmp_path)
    saved = files_of(path)[1].read_bytes()
    late = ids_written_then_killed(
        f"""
        from graphmem import GraphMemory
        from graphmem.backends.embedded import vector_index
        vector_index.ANN_THRESHOLD = vector_index.LEAN_THRESHOLD = {THRESHOLD}
        mem = GraphMemory.open({str(path)!r}, embedder="hash:32")
        made = mem.remember_many([{{"content": f"late note {{i}}"}} for i in range(60)])
        mem.vectors.wait(timeout=60)
        for i in {ids[:10]!r}:
            mem.forget(i)
        """
    )
    assert len(late) == 60
    assert files_of(path)[1].read_bytes() == saved  # the killed process saved nothing
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        index = _index(mem)
        assert index._ann is not None and index._building is None
        assert all(f"Memory:{i}" not in index._label for i in ids[:10])
        assert all(f"Memory:{i}" in index._label for i in late)
        _assert_graph_answers_like_exact(index, late + ids[10:])
        forgotten = {f"Memory:{i}" for i in ids[:10]}
        for i in late[:10]:
            q = index.get(f"Memory:{i}")
            assert q is not None
            assert not forgotten & {k for k, _ in index.search(q, 50)}


@pytest.mark.parametrize("damage", ["flip", "vector", "truncate", "json", "foreign", "ahead"])
def test_a_damaged_foreign_or_stale_graph_file_is_rebuilt_not_trusted(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path, ids = _built(tmp_path)
    bin_path, meta_path = files_of(path)
    if damage == "flip":
        data = bytearray(bin_path.read_bytes())
        for at in range(len(data) // 3, len(data) // 3 + 64):
            data[at] ^= 0xFF
        bin_path.write_bytes(bytes(data))
    elif damage == "vector":  # one stored component changed: the file still loads fine
        raw = bin_path.read_bytes()
        at = len(raw) - 32 * len(ids) // 2  # the graph's quantized vectors end the file
        bin_path.write_bytes(raw[:at] + bytes([raw[at] ^ 0x80]) + raw[at + 1 :])
        assert faiss.read_index(str(bin_path)).ntotal == len(ids)
    elif damage == "truncate":
        with open(bin_path, "r+b") as f:
            f.truncate(bin_path.stat().st_size // 2)
    elif damage == "json":
        meta_path.write_bytes(meta_path.read_bytes()[:-40])
    elif damage == "foreign":  # another store's graph of the same dimension
        other = tmp_path / "other.db"
        _fill(other, 300)
        _build_and_close(other)
        for src, dst in zip(files_of(other), files_of(path), strict=True):
            os.replace(src, dst)
    else:  # saved for a later state than the store's (the store was put back from a copy)
        meta_path.write_bytes(meta_path.read_bytes().replace(b'"seq":', b'"seq":9999', 1))
    caplog.set_level(logging.INFO)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        index = _index(mem)
        assert index._ann is None  # not trusted: searches stay exact until rebuilt
        assert "rebuilding" in caplog.text
        q = index.get(f"Memory:{ids[7]}")
        assert q is not None
        assert [s for _, s in index.search(q, 5)] == pytest.approx(
            _exact_scores(index, q, 5), abs=1e-5
        )
        assert index.wait_for_ann(timeout=60)  # the first search started a build
        _assert_graph_answers_like_exact(index, ids)
    # the rebuilt graph replaced the bad file: the next open uses it
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert _index(mem)._ann is not None and _index(mem)._building is None


def test_a_saved_graph_half_of_retired_nodes_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, ids = _built(tmp_path)
    caplog.set_level(logging.INFO)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        for i in ids[:199]:
            mem.forget(i)
        assert _index(mem)._ann is not None  # the graph keeps their nodes, retired
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert _index(mem)._ann is not None and _index(mem)._building is None
        assert "retired" not in caplog.text  # 199 of 400: kept
        mem.forget(ids[199])
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        index = _index(mem)
        assert "half retired nodes; rebuilding" in caplog.text
        assert index.build_ann()
        assert len(index._label_keys) == len(index) == 200  # a graph of the live ones
        _assert_graph_answers_like_exact(index, ids[200:])


def test_below_the_threshold_no_file_is_written(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _fill(path, 50)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert _index(mem)._ann is None
    assert not any(p.exists() for p in files_of(path))


def test_the_graph_is_the_one_copy_in_memory_and_stored_vectors_read_back_exactly(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path = tmp_path / "s.db"
    ids = _fill(path, 400)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        before = {i: mem.get(i).embedding for i in ids}  # the matrix's rows
        assert _index(mem).build_ann() and _index(mem).lean
        assert {i: mem.get(i).embedding for i in ids} == before
    state = state_file.load(path, store_id=_store_id(path), dim=32)
    if request.node.callspec.params["small_threshold"] == "state":
        # the state names the vectors and leaves them to the graph file and the rows
        assert state is not None and state.vectors is None and len(state.vec_keys) == 400
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        index = _index(mem)
        assert index.lean and index._mat.size == 0
        assert {i: mem.get(i).embedding for i in ids} == before
        hits = mem.backend.search_vector(  # type: ignore[attr-defined]
            VectorQuery(vector=before[ids[5]], k=3, filter=Filter.for_memories())
        )
        assert hits[0].node.id == ids[5] and hits[0].node.embedding == before[ids[5]]
        assert hits[0].score == pytest.approx(1.0, abs=1e-6)


def test_a_handle_without_the_matrix_catches_up_with_another_handles_writes(
    tmp_path: Path,
) -> None:
    path, ids = _built(tmp_path)
    with (
        GraphMemory.open(str(path), embedder="hash:32") as reader,
        GraphMemory.open(str(path), embedder="hash:32") as writer,
    ):
        assert _index(reader).lean
        made = writer.remember_many([{"content": f"late okapi {i}"} for i in range(30)])
        writer.vectors.wait(timeout=60)
        writer.forget(ids[4])
        for m in made[:5]:
            vec = writer.get(m.id).embedding
            assert vec is not None
            hits = reader.backend.search_vector(  # type: ignore[attr-defined]
                VectorQuery(vector=vec, k=3, filter=Filter.for_memories())
            )
            assert hits[0].node.id == m.id and hits[0].node.embedding == vec
        assert f"Memory:{ids[4]}" not in _index(reader) or reader.get(ids[4]).status != "active"
        assert len(_index(reader)) == len(_index(writer))


def _store_id(path: Path) -> str:
    import sqlite3

    with sqlite3.connect(path) as db:
        return str(db.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()[0])


@pytest.mark.parametrize("small_threshold", ["state"], indirect=True)
def test_the_state_follows_where_the_index_keeps_its_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state written while the graph held the vectors names them only; opened where the
    index keeps its matrix (a higher lean threshold), the vectors come from the rows and
    the next close writes them into the state again (and back)."""
    path, ids = _built(tmp_path)
    store_id = _store_id(path)
    assert state_file.load(path, store_id=store_id, dim=32).vectors is None  # type: ignore[union-attr,unused-ignore]
    monkeypatch.setattr(vector_index_module, "LEAN_THRESHOLD", 10_000)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        index = _index(mem)
        assert not index.lean and index.ann_active and len(index) == 400
        _assert_graph_answers_like_exact(index, ids)
    saved = state_file.load(path, store_id=store_id, dim=32)
    assert saved is not None and saved.vectors is not None and saved.vectors.shape == (400, 32)
    monkeypatch.setattr(vector_index_module, "LEAN_THRESHOLD", THRESHOLD)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert _index(mem).lean
    assert state_file.load(path, store_id=store_id, dim=32).vectors is None  # type: ignore[union-attr,unused-ignore]


def test_an_open_from_the_state_takes_the_graphs_labels_from_it(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A state file written after the graph keeps its labels with the graph files'
    identity: the next open takes them from there, not from the description (whose two
    labels are swapped here: read, they would misname two vectors)."""
    if request.node.callspec.params["small_threshold"] != "state":
        pytest.skip("no state file: the labels are the description's")
    path, ids = _built(tmp_path)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert _index(mem).graph_on_disk() is not None
    meta = files_of(path)[1]
    a, b = f"Memory:{ids[10]}".encode(), f"Memory:{ids[11]}".encode()
    assert len(a) == len(b)
    meta.write_bytes(
        meta.read_bytes().replace(a, b"\0" * len(a)).replace(b, a).replace(b"\0" * len(a), b)
    )
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        index = _index(mem)
        assert index._ann is not None and index._building is None and index.lean
        for i in ids[8:14]:
            q = index.get(f"Memory:{i}")
            assert q is not None
            assert index.search(q, 1)[0][0] == f"Memory:{i}"


def test_the_graph_files_read_beside_the_open_leave_no_thread_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph files are read in a thread of their own from the start of an open; the
    open waits for it whether it took the graph or not (here: not wanted, the threshold
    raised above the store's vectors)."""
    path, ids = _built(tmp_path)

    def readers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "graphmem-graph-read"]

    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert _index(mem)._ann is not None and not readers()
        _assert_graph_answers_like_exact(_index(mem), ids)
    monkeypatch.setattr(vector_index_module, "ANN_THRESHOLD", 10_000)
    monkeypatch.setattr(vector_index_module, "LEAN_THRESHOLD", 10_000)
    with GraphMemory.open(str(path), embedder="hash:32") as mem:
        assert _index(mem)._ann is None and not readers()
