"""The background vectorizer against an in-memory store that keeps the seam's contract."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest

from graphmem.embeddings import HashEmbedder
from graphmem.vectorizer import Embed, Missing, Vectorizer

WAIT = 30.0  # a safety net against a hung test, not a speed claim


class FakeStore:
    """Memories by id; a vector is kept only if the content it was computed from is current."""

    def __init__(self) -> None:
        self.content: dict[str, str] = {}
        self.vectors: dict[str, np.ndarray] = {}
        self.vector_of: dict[str, str] = {}  # the content each stored vector was made from
        self.lock = threading.Lock()
        self.fetches = 0

    def put(self, mid: str, content: str) -> None:
        with self.lock:
            self.content[mid] = content
            self.vectors.pop(mid, None)

    def fetch_missing(self, limit: int) -> list[Missing]:
        with self.lock:
            self.fetches += 1
            return [(m, c) for m, c in self.content.items() if m not in self.vectors][:limit]

    def store(self, items: Sequence[Missing], vectors: np.ndarray) -> None:
        with self.lock:
            for (mid, content), vec in zip(items, vectors, strict=True):
                if self.content.get(mid) == content:
                    self.vectors[mid] = vec
                    self.vector_of[mid] = content


class CountingEmbed:
    def __init__(self, before: Callable[[Sequence[str]], None] | None = None) -> None:
        self.inner = HashEmbedder(32, cache_size=0)
        self.calls: list[int] = []
        self.before = before

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if self.before is not None:
            self.before(texts)
        self.calls.append(len(texts))
        return self.inner.embed(list(texts))


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def make(store: FakeStore) -> Iterator[Callable[..., Vectorizer]]:
    made: list[Vectorizer] = []

    def build(embed: Embed | None = None, **kw: object) -> Vectorizer:
        v = Vectorizer(embed or CountingEmbed(), store.fetch_missing, store.store, **kw)  # type: ignore[arg-type]
        made.append(v)
        return v

    yield build
    for v in made:
        v.close(flush=False, timeout=WAIT)


def test_writes_get_vectors_in_batches_behind_them(
    store: FakeStore, make: Callable[..., Vectorizer]
) -> None:
    embed = CountingEmbed()
    v = make(embed, batch_size=16)
    v.start()
    for i in range(100):
        store.put(f"m{i}", f"memory number {i}")
        v.notify()
    v.flush(timeout=WAIT)
    assert set(store.vectors) == set(store.content)
    for mid, content in store.content.items():
        np.testing.assert_array_equal(store.vectors[mid], embed.inner.embed([content])[0])
    assert sum(embed.calls) >= 100 and max(embed.calls) <= 16
    assert v.embedded == sum(embed.calls) and v.last_error is None


def test_memories_left_without_vectors_are_picked_up_at_start(
    store: FakeStore, make: Callable[..., Vectorizer]
) -> None:
    for i in range(40):  # written by a process that crashed before its vectors were stored
        store.put(f"m{i}", f"left over {i}")
    store.vectors["m0"] = np.zeros(32, dtype=np.float32)
    v = make(batch_size=8)
    v.start()
    v.wait_for_vectors(timeout=WAIT)
    assert set(store.vectors) == set(store.content)
    assert v.embedded == 39  # the one that had a vector was not embedded again


def test_a_memory_changed_while_embedding_gets_the_vector_of_its_new_content(
    store: FakeStore, make: Callable[..., Vectorizer]
) -> None:
    store.put("m1", "old words")
    changed = threading.Event()

    def edit_once(texts: Sequence[str]) -> None:
        if not changed.is_set():
            changed.set()
            store.put("m1", "new words")

    v = make(CountingEmbed(before=edit_once))
    v.start()
    v.flush(timeout=WAIT)
    assert store.vector_of["m1"] == "new words"


def test_flush_without_a_worker_does_the_work_on_the_caller(
    store: FakeStore, make: Callable[..., Vectorizer]
) -> None:
    store.put("a", "one")
    store.put("b", "two")
    v = make()
    v.flush()
    assert set(store.vectors) == {"a", "b"} and not v.running
    assert v.run_once() == 0


def test_a_failing_pass_is_raised_by_flush_and_retried(
    store: FakeStore, make: Callable[..., Vectorizer]
) -> None:
    broken = threading.Event()
    broken.set()

    def flaky(texts: Sequence[str]) -> None:
        if broken.is_set():
            raise RuntimeError("model crashed")

    store.put("m1", "hello")
    v = make(CountingEmbed(before=flaky), retry_delay=60.0)
    v.start()
    with pytest.raises(RuntimeError, match="model crashed"):
        v.flush(timeout=WAIT)
    assert v.running and "m1" not in store.vectors
    broken.clear()
    v.flush(timeout=WAIT)  # a flush wakes the worker at once, no waiting out the delay
    assert "m1" in store.vectors and v.last_error is None and v.running


def test_a_store_that_keeps_nothing_does_not_spin(
    store: FakeStore, make: Callable[..., Vectorizer], caplog: pytest.LogCaptureFixture
) -> None:
    embed = CountingEmbed()
    v = Vectorizer(embed, store.fetch_missing, lambda items, vecs: None, batch_size=4)
    store.put("m1", "never stored")
    with caplog.at_level(logging.WARNING, logger="graphmem.vectorizer"):
        v.flush()
    assert embed.calls == [1] and "still lack a vector" in caplog.text


def test_close_finishes_pending_work_and_then_refuses(
    store: FakeStore, make: Callable[..., Vectorizer]
) -> None:
    v = make(batch_size=5)
    v.start()
    v.flush(timeout=WAIT)
    for i in range(25):
        store.put(f"m{i}", f"pending {i}")
    v.notify()
    v.close(timeout=WAIT)
    assert set(store.vectors) == set(store.content) and not v.running
    v.notify()  # harmless after close
    with pytest.raises(RuntimeError, match="closed"):
        v.flush()
    with pytest.raises(RuntimeError, match="closed"):
        v.start()


def test_a_pass_that_fails_while_closing_is_not_said_to_be_retried(
    store: FakeStore, make: Callable[..., Vectorizer], caplog: pytest.LogCaptureFixture
) -> None:
    """A closing worker makes one last pass and exits; if the store was closed under it,
    the log must say the memories wait for the next start, not that a retry follows."""
    closed = threading.Event()

    def keep(items: Sequence[Missing], vectors: np.ndarray) -> None:
        if closed.is_set():
            raise RuntimeError("the store is closed")
        store.store(items, vectors)

    v = Vectorizer(CountingEmbed(), store.fetch_missing, keep, batch_size=5)
    v.start()
    v.flush(timeout=WAIT)
    closed.set()  # the backend closed before its memory handle
    store.put("m1", "pending")
    with caplog.at_level(logging.WARNING, logger="graphmem.vectorizer"):
        v.notify()
        v.close(timeout=WAIT)
    assert not v.running and "m1" not in store.vectors
    assert "retrying" not in caplog.text
    assert "next start" in caplog.text


def test_bad_embedder_output_is_an_error(store: FakeStore, make: Callable[..., Vectorizer]) -> None:
    store.put("m1", "x")
    store.put("m2", "y")
    v = make(lambda texts: np.zeros((1, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="1 vectors for 2 texts"):
        v.flush()
    assert store.vectors == {}
    with pytest.raises(ValueError):
        Vectorizer(CountingEmbed(), store.fetch_missing, store.store, batch_size=0)


EXIT_SCRIPT = """
import sys, time
import numpy as np
from graphmem.vectorizer import Vectorizer

rows = [(f"m{i}", "text") for i in range(1000)]
def embed(texts):
    print("batch started", flush=True)
    time.sleep(0.6)  # native code in a real embedder: a killed thread here aborts the process
    print("batch finished", flush=True)
    return np.ones((len(texts), 2), dtype=np.float32)
v = Vectorizer(embed=embed, fetch_missing=lambda n: rows[:n], store=lambda items, vecs: None)
v.start()
time.sleep(0.2)
print("exiting without close", flush=True)
"""


def test_interpreter_exit_stops_the_worker_after_its_batch_instead_of_killing_it() -> None:
    """A program that exits with vectors pending (no close) lets the worker finish the batch
    it is embedding, then stops it: a daemon thread killed inside ONNX Runtime printed
    "terminate called without an active exception" and aborted the process."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["batch started", "exiting without close", "batch finished"], lines
    assert lines.count("batch started") == 1  # no new batch after the exit began


def test_a_pass_embeds_its_window_by_length_a_batch_at_a_time(
    store: FakeStore, make: Callable[..., Vectorizer]
) -> None:
    # texts of like length share a model batch (little padding); no call is over a batch
    seen: list[list[int]] = []
    lengths = [37, 3, 20, 11, 29, 5, 41, 17, 2, 33, 8, 25]
    for i, n in enumerate(lengths):
        store.put(f"m{i}", "x" * n)
    v = make(CountingEmbed(before=lambda texts: seen.append([len(t) for t in texts])), batch_size=4)
    v.flush()
    assert seen == [sorted(lengths)[i : i + 4] for i in range(0, len(lengths), 4)]
    assert set(store.vectors) == set(store.content)


def test_the_next_batch_is_embedded_while_the_last_is_stored(store: FakeStore) -> None:
    """The model does not wait for the store: while one batch's vectors are written, the
    next batch's embedding call has already begun (on a helper thread), and each vector
    still goes to its own memory."""
    inner = HashEmbedder(32, cache_size=0)
    started = [threading.Event() for _ in range(3)]
    threads: set[str] = set()

    def embed(texts: Sequence[str]) -> np.ndarray:
        started[sum(e.is_set() for e in started)].set()
        threads.add(threading.current_thread().name)
        return inner.embed(list(texts))

    overlapped: list[bool] = []

    def keep(items: Sequence[Missing], vectors: np.ndarray) -> None:
        k = len(overlapped)
        overlapped.append(k + 1 >= len(started) or started[k + 1].wait(10.0))
        store.store(items, vectors)

    for i in range(12):
        store.put(f"m{i}", "x" * (i + 1))
    v = Vectorizer(embed, store.fetch_missing, keep, batch_size=4)
    v.flush()
    assert overlapped == [True, True, True]
    assert threads == {"graphmem-vectorizer-embed"}
    for mid, content in store.content.items():
        np.testing.assert_array_equal(store.vectors[mid], inner.embed([content])[0])
    assert not any(t.name == "graphmem-vectorizer-embed" for t in threading.enumerate())


def test_a_failing_call_on_the_helper_is_raised_and_the_batches_before_it_kept(
    store: FakeStore,
) -> None:
    embed = CountingEmbed()
    calls = 0

    def fail_second(texts: Sequence[str]) -> np.ndarray:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("model crashed")
        return embed(texts)

    for i in range(12):
        store.put(f"m{i}", f"memory {i:02d}")
    v = Vectorizer(fail_second, store.fetch_missing, store.store, batch_size=4)
    with pytest.raises(RuntimeError, match="model crashed"):
        v.flush()
    assert len(store.vectors) == 4  # the first batch's vectors, stored before the error
    assert not any(t.name == "graphmem-vectorizer-embed" for t in threading.enumerate())
    v.flush()  # the next pass embeds the rest
    assert set(store.vectors) == set(store.content)
