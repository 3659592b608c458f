"""VectorIndex: exact search, filters before the top-k cut, and the HNSW path at scale."""

from __future__ import annotations

import numpy as np
import pytest

from graphmem.backends.embedded.vector_index import VectorIndex
from graphmem.errors import DimensionMismatch, InvalidInput


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _brute(keys: list[str], mat: np.ndarray, q: np.ndarray, k: int) -> list[str]:
    qn = q / np.linalg.norm(q)
    scores = mat @ qn / np.linalg.norm(mat, axis=1)
    return [keys[i] for i in np.argsort(-scores, kind="stable")[:k]]


def test_exact_search_matches_brute_force() -> None:
    rng = np.random.default_rng(1)
    keys = [f"k{i}" for i in range(500)]
    mat = rng.standard_normal((500, 16)).astype(np.float32)  # not normalised on purpose
    idx = VectorIndex(16, capacity=16)  # forces several grows
    idx.add(keys, mat)
    q = rng.standard_normal(16).astype(np.float32)
    got = idx.search(q, 10)
    assert [k for k, _ in got] == _brute(keys, mat, q, 10)
    scores = [s for _, s in got]
    assert scores == sorted(scores, reverse=True)
    assert -1.0 <= scores[-1] <= scores[0] <= 1.0 + 1e-6


def test_replace_remove_and_get() -> None:
    idx = VectorIndex(2)
    idx.add(["a", "b", "c"], np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
    idx.add(["a"], np.array([[0, -1]], dtype=np.float32))  # replace
    assert len(idx) == 3
    np.testing.assert_allclose(idx.get("a"), [0, -1])
    idx.remove(["b", "missing"])
    assert len(idx) == 2 and "b" not in idx and idx.get("b") is None
    # the row of "c" moved into b's slot; it must still be found with its own vector
    assert idx.search(np.array([1.0, 1.0]), 1)[0][0] == "c"
    assert [k for k, _ in idx.search(np.array([0.0, -1.0]), 3)] == ["a", "c"]
    assert idx.missing({"a", "b", "c", "d"}) == {"b", "d"}


def test_filters_apply_before_the_top_k_cut() -> None:
    rng = np.random.default_rng(2)
    keys = [f"k{i}" for i in range(300)]
    mat = _unit(rng, 300, 8)
    idx = VectorIndex(8)
    idx.add(keys, mat)
    q = mat[0]
    even = {k for i, k in enumerate(keys) if i % 2 == 0}
    rare = {"k7", "k123", "k299"}
    # a predicate that rejects the nearest neighbours still yields k results
    got = idx.search(q, 20, allowed=lambda k: k in even and k != "k0")
    assert len(got) == 20 and all(k in even and k != "k0" for k, _ in got)
    assert [k for k, _ in got] == [k for k in _brute(keys, mat, q, 300) if k in even][1:21]
    # candidates: only those keys, all of them when fewer than k
    got = idx.search(q, 10, candidates=rare | {"not-indexed"})
    assert {k for k, _ in got} == rare
    assert idx.search(q, 5, candidates=set()) == []


def test_dimension_and_value_errors_change_nothing() -> None:
    idx = VectorIndex(3)
    idx.add(["a"], np.ones((1, 3), dtype=np.float32))
    with pytest.raises(DimensionMismatch):
        idx.add(["b"], np.ones((1, 4), dtype=np.float32))
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(InvalidInput):
            idx.add(["x", "b"], np.array([[1, 0, 0], [1.0, bad, 0.0]], dtype=np.float32))
    with pytest.raises(DimensionMismatch):
        idx.search(np.ones(2), 1)
    assert len(idx) == 1 and "b" not in idx and "x" not in idx
    # finite values whose squares overflow float32 are finite all the same
    idx.add(["big"], np.array([[1e20, 1e20, 0.0]], dtype=np.float32))
    assert "big" in idx


def test_hnsw_path_is_used_above_threshold_and_keeps_exact_scores() -> None:
    rng = np.random.default_rng(3)
    n, dim = 3000, 32
    centers = _unit(rng, 30, dim)
    mat = centers[rng.integers(0, 30, n)] + 0.2 * rng.standard_normal((n, dim)).astype(np.float32)
    keys = [f"m{i}" for i in range(n)]
    idx = VectorIndex(dim, ann_threshold=1000, exact_candidates_limit=100, background_build=False)
    idx.add(keys, mat)
    exact = VectorIndex(dim, ann_threshold=10**9)
    exact.add(keys, mat)
    qs = mat[rng.integers(0, n, 20)] + 0.05 * rng.standard_normal((20, dim)).astype(np.float32)
    overlap = []
    for q in qs:
        got = idx.search(q, 10)
        want = exact.search(q, 10)
        assert idx.ann_active
        # rescored exactly: every returned score is the true cosine of that key
        true = {k: s for k, s in exact.search(q, n)}
        for k, s in got:
            assert s == pytest.approx(true[k], abs=1e-5)
        overlap.append(len({k for k, _ in got} & {k for k, _ in want}) / 10)
    assert np.mean(overlap) >= 0.9
    # a large candidate set goes through the filtered HNSW traversal
    half = {k for i, k in enumerate(keys) if i % 2}
    got = idx.search(qs[0], 10, candidates=half)
    assert len(got) == 10 and all(k in half for k, _ in got)
    # incremental maintenance after the build: removed keys never come back, new ones do
    idx.remove([k for k, _ in got])
    again = idx.search(qs[0], 10, candidates=half)
    assert not {k for k, _ in got} & {k for k, _ in again}
    idx.add(["fresh"], qs[0][None, :])
    assert idx.search(qs[0], 1)[0][0] == "fresh"
    idx.add(["fresh"], -qs[0][None, :])  # replaced: the old graph node is retired
    assert "fresh" not in [k for k, _ in idx.search(qs[0], 5)]


def test_background_build_keeps_searches_exact_then_takes_over_with_changes() -> None:
    rng = np.random.default_rng(5)
    n, dim = 4000, 16
    mat = rng.standard_normal((n, dim)).astype(np.float32)
    keys = [f"m{i}" for i in range(n)]
    idx = VectorIndex(dim, ann_threshold=1000)
    idx.add(keys, mat)
    first = idx.search(mat[0], 5)  # starts the build, answers exactly meanwhile
    assert first[0][0] == "m0" and first[0][1] == pytest.approx(1.0, abs=1e-5)
    # changes made while the graph is being built must reach it
    idx.remove(["m1"])
    idx.add(["new"], mat[1:2] * 3)
    assert idx.wait_for_ann(timeout=120)
    assert idx.ann_active
    got = idx.search(mat[1], 3)
    assert got[0][0] == "new" and "m1" not in {k for k, _ in got}
    assert idx.search(mat[2], 1)[0][0] == "m2"


def test_a_stored_vector_is_the_models_tuple_and_hands_numpy_its_row() -> None:
    import copy
    import pickle

    from graphmem.backends.embedded.graph import StoredVector
    from graphmem.models import Memory

    row = np.array([0.25, -1.5, 3.0], dtype=np.float32)
    vec = StoredVector(row)
    assert isinstance(vec, tuple) and vec == (0.25, -1.5, 3.0)
    stacked = np.asarray([vec, StoredVector(row * 2)], dtype=np.float32)
    assert stacked.shape == (2, 3) and stacked[1].tolist() == [0.5, -3.0, 6.0]
    assert np.asarray(vec, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError):  # numpy shares the row read-only, like the tuple
        np.asarray(vec, dtype=np.float32)[0] = 9.0
    for again in (pickle.loads(pickle.dumps(vec)), copy.deepcopy(vec), copy.copy(vec)):
        assert type(again) is tuple and again == (0.25, -1.5, 3.0)
    mem = Memory(content="x", agent_id="a")
    mem.__dict__["embedding"] = vec
    assert mem.model_dump()["embedding"] == (0.25, -1.5, 3.0)
    assert Memory.model_validate_json(mem.model_dump_json()).embedding == vec


@pytest.mark.parametrize("contiguous", [True, False])
def test_an_adopted_matrix_grows_and_changes_like_a_copied_one(contiguous: bool) -> None:
    """An empty index may keep the array it is given at an open as its matrix; later adds,
    replacements and removals then behave as on an index that copied it."""
    rng = np.random.default_rng(7)
    keys = [f"k{i}" for i in range(200)]
    mat = rng.standard_normal((200, 32 if contiguous else 64)).astype(np.float32)
    given = mat if contiguous else mat[:, ::2]  # a strided view cannot be kept as it is
    adopted, copied = VectorIndex(32), VectorIndex(32)
    adopted.add(keys, given, adopt=True)
    copied.add(keys, given.copy())
    extra = rng.standard_normal((50, 32)).astype(np.float32)
    for idx in (adopted, copied):
        idx.add([f"n{i}" for i in range(50)], extra)  # grows past the adopted rows
        idx.add(["k3"], extra[:1] * 2)  # replaces one
        idx.remove(["k5"])
    for _ in range(20):
        q = rng.standard_normal(32).astype(np.float32)
        got, want = adopted.search(q, 15), copied.search(q, 15)
        assert [k for k, _ in got] == [k for k, _ in want]
        # (a strided array's norms are summed in another order: the last bits may differ)
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
    assert len(adopted) == len(copied) == 249


class _Rows:
    """Stored vectors by key, as the store's rows hold them: the source an index reads
    exact vectors from once its graph holds them."""

    def __init__(self) -> None:
        self.held: dict[str, np.ndarray] = {}
        self.reads = 0

    def put(self, idx: VectorIndex, keys: list[str], mat: np.ndarray) -> None:
        self.held.update(zip(keys, mat.copy(), strict=True))
        idx.add(keys, mat)

    def drop(self, idx: VectorIndex, keys: list[str]) -> None:
        for key in keys:
            self.held.pop(key, None)
        idx.remove(keys)

    def __call__(self, keys: object) -> tuple[list[str], np.ndarray]:
        self.reads += 1
        found = [k for k in keys if k in self.held]  # type: ignore[attr-defined]
        rows = [self.held[k] for k in found]
        return found, np.array(rows, dtype=np.float32).reshape(len(found), -1)


def test_once_the_graph_holds_the_vectors_the_matrix_goes_and_answers_stay_exact() -> None:
    """With a source of exact vectors, an index whose HNSW graph is built drops its
    matrix: searches, scoped searches, cosines and stored vectors read the exact rows and
    give the same numbers as an index that kept its matrix; writes go on."""
    rng = np.random.default_rng(11)
    n, dim = 3000, 32
    centers = _unit(rng, 30, dim)
    mat = centers[rng.integers(0, 30, n)] + 0.2 * rng.standard_normal((n, dim)).astype(np.float32)
    keys = [f"m{i}" for i in range(n)]
    rows = _Rows()
    idx = VectorIndex(
        dim, ann_threshold=1000, lean_threshold=0, background_build=False, lean_exact_limit=300
    )
    idx.source = rows
    rows.put(idx, keys, mat)
    exact = VectorIndex(dim, ann_threshold=10**9)  # no graph: the matrix's answers
    exact.add(keys, mat)
    assert not idx.lean
    assert idx.build_ann() and idx.lean and idx.ann_active
    assert idx._mat.size == 0 and not idx._row  # the one copy in memory is the graph's
    assert len(idx) == n and "m7" in idx and idx.missing(["m7", "zz"]) == {"zz"}
    assert np.array_equal(idx.get("m7"), mat[7]) and idx.get("zz") is None
    qs = mat[rng.integers(0, n, 20)] + 0.05 * rng.standard_normal((20, dim)).astype(np.float32)
    some = keys[::7]
    overlap = []
    for q in qs:
        got = idx.search(q, 10)
        true = dict(exact.search(q, n))
        assert all(s == pytest.approx(true[k], abs=1e-6) for k, s in got)
        overlap.append(len({k for k, _ in got} & {k for k, _ in exact.search(q, 10)}) / 10)
        cos, want = idx.cosines(some, q), exact.cosines(some, q)
        assert cos.keys() == want.keys()
        assert list(cos.values()) == pytest.approx(list(want.values()), abs=1e-6)
        small = set(keys[:250])  # read and scored exactly: the same answer as the matrix's
        got = idx.search(q, 10, candidates=small, allowed=lambda k: k != "m3")
        want = exact.search(q, 10, candidates=small, allowed=lambda k: k != "m3")
        assert [k for k, _ in got] == [k for k, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
    assert np.mean(overlap) >= 0.9
    half = {k for i, k in enumerate(keys) if i % 2}  # a large set: through the graph
    got = idx.search(qs[0], 10, candidates=half)
    assert len(got) == 10 and all(k in half for k, _ in got)
    # a filter fewer than k pass: every key that passes, scored exactly
    few = {"m1", "m2", "m3"}
    assert {k for k, _ in idx.search(qs[0], 10, allowed=few.__contains__)} == few
    # writes after the matrix went: removed keys never come back, new and replaced ones do
    rows.drop(idx, [k for k, _ in got])
    again = idx.search(qs[0], 10, candidates=half)
    assert not {k for k, _ in got} & {k for k, _ in again}
    rows.put(idx, ["fresh"], qs[0][None, :])
    assert idx.search(qs[0], 1)[0][0] == "fresh" and len(idx) == n - 10 + 1
    rows.put(idx, ["fresh"], -qs[0][None, :])
    assert "fresh" not in [k for k, _ in idx.search(qs[0], 5)]
    keys_now, vectors = idx.rows()
    assert vectors is None and sorted(keys_now) == sorted(rows.held)


@pytest.mark.parametrize("source", [False, True])
def test_without_a_source_or_below_the_lean_threshold_the_matrix_stays(source: bool) -> None:
    rng = np.random.default_rng(2)
    idx = VectorIndex(
        8, ann_threshold=100, lean_threshold=1000 if source else 0, background_build=False
    )
    if source:
        idx.source = _Rows()
    idx.add([f"k{i}" for i in range(300)], rng.standard_normal((300, 8)).astype(np.float32))
    assert idx.build_ann() and idx.ann_active and not idx.lean
    _keys, vectors = idx.rows()
    assert vectors is not None and vectors.shape == (300, 8)


def test_a_background_build_drops_the_matrix_with_the_changes_made_meanwhile() -> None:
    rng = np.random.default_rng(6)
    n, dim = 4000, 16
    mat = rng.standard_normal((n, dim)).astype(np.float32)
    keys = [f"m{i}" for i in range(n)]
    rows = _Rows()
    idx = VectorIndex(dim, ann_threshold=1000, lean_threshold=0)
    idx.source = rows
    rows.put(idx, keys, mat)
    assert idx.search(mat[0], 1)[0][0] == "m0"  # starts the build
    rows.drop(idx, ["m1"])
    rows.put(idx, ["new"], mat[1:2] * 3)
    rows.put(idx, ["m2"], -mat[2:3])
    assert idx.wait_for_ann(timeout=120) and idx.lean
    got = idx.search(mat[1], 3)
    assert got[0][0] == "new" and "m1" not in {k for k, _ in got}
    assert idx.search(-mat[2], 1)[0][0] == "m2"
    assert idx.search(mat[4], 1) == [("m4", pytest.approx(1.0, abs=1e-6))]
    assert sorted(idx.keys()) == sorted(rows.held)


def test_cosines_after_a_search_are_its_scores_and_follow_every_change() -> None:
    rng = np.random.default_rng(7)
    keys = [f"k{i}" for i in range(200)]
    mat = rng.standard_normal((200, 16)).astype(np.float32)
    idx = VectorIndex(16)
    idx.add(keys, mat)
    q = rng.standard_normal(16).astype(np.float32)
    q /= np.linalg.norm(q)
    found = dict(idx.search(q, 20))
    # the hits' cosines as the search scored them, to the last bit
    assert idx.cosines(list(found), tuple(q.tolist())) == found
    want = mat @ q / np.linalg.norm(mat, axis=1)
    got = idx.cosines(keys, tuple(q.tolist()))
    assert np.allclose([got[k] for k in keys], want, atol=1e-6)
    # a replaced vector, and a row moved by a removal, are not read from the search
    idx.add(["k3"], -mat[3:4])
    assert idx.cosines(["k3"], q.tolist())["k3"] == pytest.approx(-want[3], abs=1e-6)
    idx.search(q, 5)
    idx.remove(["k0"])  # the last row (k199) moves into row 0
    assert idx.cosines(["k199"], q.tolist())["k199"] == pytest.approx(want[199], abs=1e-6)
    # another query's search is not this query's cosines
    idx.search(-q, 5)
    assert idx.cosines(["k5"], q.tolist())["k5"] == pytest.approx(want[5], abs=1e-6)
