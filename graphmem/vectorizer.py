"""Background vectors: a worker that embeds stored memories in batches behind the write.

A write stores the memory without its vector and calls :meth:`Vectorizer.notify`; the worker
thread asks the store for memories that still lack a vector, embeds them in batches and
stores the vectors. The store itself is the queue: nothing waits only in memory, so after a
crash the next :meth:`Vectorizer.start` finds what was left and embeds it.

The class knows nothing about backends. It takes three callables:

- ``embed(texts) -> (n, dim) float32 array`` — usually ``Embedder.embed``;
- ``fetch_missing(limit) -> [(id, content), ...]`` — up to ``limit`` memories without a
  vector (an empty result means there is nothing to do);
- ``store(items, vectors)`` — write ``vectors[i]`` for ``items[i] = (id, content)``, but only
  where the memory still exists with that same content (a memory changed in the meantime is
  fetched again with its new content; a deleted one is skipped).

``fetch_missing`` and ``store`` run on the worker thread (or the caller's, for
:meth:`Vectorizer.run_once` and a :meth:`Vectorizer.flush` without :meth:`start`); when a
pass has more than one batch, ``embed`` runs on a helper thread, one call after another,
so the model embeds the next batch while the last one's vectors are stored.

>>> import numpy as np
>>> rows = {"m1": "Alice prefers tea"}
>>> vectors = {}
>>> v = Vectorizer(
...     embed=lambda texts: np.ones((len(texts), 2), dtype=np.float32),
...     fetch_missing=lambda n: [(i, c) for i, c in rows.items() if i not in vectors][:n],
...     store=lambda items, vecs: vectors.update({i: vec for (i, _), vec in zip(items, vecs)}),
... )
>>> v.start(); v.flush(); v.close()
>>> sorted(vectors)
['m1']
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future

import numpy as np

__all__ = ["Embed", "FetchMissing", "Missing", "Store", "Vectorizer"]

log = logging.getLogger("graphmem.vectorizer")

Missing = tuple[str, str]
"""A memory without a vector: (id, content)."""
Embed = Callable[[Sequence[str]], np.ndarray]
FetchMissing = Callable[[int], Sequence[Missing]]
Store = Callable[[Sequence[Missing], np.ndarray], None]

# Workers still running when the interpreter exits (their store was never closed).
_RUNNING: weakref.WeakSet[Vectorizer] = weakref.WeakSet()
#: how long the exit waits for a worker to finish the batch it is embedding
EXIT_TIMEOUT = 30.0
#: batches fetched at once and sorted by length before they are embedded one by one
WINDOW = 4
#: embedding calls queued on the helper thread beyond the batch being stored: with two, the
#: helper starts the next call as it ends one, without waiting for the worker to wake
AHEAD = 2


@atexit.register
def _stop_at_exit() -> None:
    """Stop every running worker after its current batch. A daemon thread killed inside the
    embedder's native code aborts the process ("terminate called without an active
    exception"); what is left is embedded at the store's next start."""
    for worker in list(_RUNNING):
        worker.close(flush=False, timeout=EXIT_TIMEOUT)


class Vectorizer:
    """Embeds memories that lack a vector, in batches, on one background thread.

    ``batch_size``: memories embedded at a time. A pass fetches :data:`WINDOW` batches'
    worth, sorts them by length and embeds them a batch at a time, storing each: texts of
    like length pad little in the model's batches (64 unsorted texts a call reached 75% of
    the raw model's throughput on LoCoMo turns, ``benchmarks/ingest.py``), while one call
    stays a few seconds of work, well inside :data:`EXIT_TIMEOUT` on a busy machine, and the
    first vectors of a bulk write are stored after one batch. With more than one batch to
    do, the calls run on a helper thread, queued :data:`AHEAD` deep, and the worker stores
    each batch's vectors while the model embeds the next (storing between two calls left
    the model's threads idle for 3% of the time). After a failed pass (the
    embedder or the store raised) the worker retries on its own after ``retry_delay`` seconds,
    doubling up to ``max_retry_delay``, or at once when notified; :meth:`flush` raises the
    error of the pass it waited for.
    """

    def __init__(
        self,
        embed: Embed,
        fetch_missing: FetchMissing,
        store: Store,
        *,
        batch_size: int = 256,
        retry_delay: float = 0.5,
        max_retry_delay: float = 30.0,
        name: str = "graphmem-vectorizer",
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._embed = embed
        self._fetch = fetch_missing
        self._store = store
        self.batch_size = batch_size
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.name = name
        self._cond = threading.Condition()
        self._requested = 0  # passes asked for (notify, flush, start)
        self._completed = 0  # the last request a successful pass covered
        self._failed = 0  # the last request a failed pass covered
        self._error: BaseException | None = None
        self._stop = False
        self._drain = True
        self._closed = False
        self._thread: threading.Thread | None = None
        self.embedded = 0
        """Memories embedded and handed to ``store`` so far."""

    # -- control ---------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def last_error(self) -> BaseException | None:
        """The error of the last pass, None once a pass succeeded."""
        return self._error

    def start(self) -> None:
        """Start the worker; its first pass picks up every memory still without a vector."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the vectorizer is closed")
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._requested += 1
        _RUNNING.add(self)
        self._thread.start()

    def notify(self) -> None:
        """New memories without a vector were stored: wake the worker (cheap, never blocks)."""
        with self._cond:
            if self._closed:
                return
            self._requested += 1
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> None:
        """Return once every memory that lacked a vector when called has one (or was changed
        or deleted meanwhile). Without a running worker the work is done on this thread.

        Raises the error of the pass it waited for, TimeoutError after ``timeout`` seconds,
        and RuntimeError when the vectorizer is closed.
        """
        with self._cond:
            if self._closed:
                raise RuntimeError("the vectorizer is closed")
            threaded = self._thread is not None
            if threaded:
                self._requested += 1
                target = self._requested
                self._cond.notify_all()
        if not threaded:
            self.run_once()
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._completed < target:
                if self._failed >= target and self._error is not None:
                    raise self._error
                if not self.running:
                    raise RuntimeError("the vectorizer's worker has stopped")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"vectors not done after {timeout} s")
                self._cond.wait(left)

    wait_for_vectors = flush

    def close(self, *, flush: bool = True, timeout: float | None = None) -> None:
        """Stop the worker. ``flush``: finish what is pending first (one last pass; its
        errors are logged, not raised — the memories are picked up again at the next start).
        Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._stop = True
            self._drain = flush
            thread = self._thread
            self._cond.notify_all()
        _RUNNING.discard(self)
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning(
                    "vectorizer %s still busy after %s s; left to finish", self.name, timeout
                )

    # -- work ------------------------------------------------------------------------

    def run_once(self) -> int:
        """Embed every memory that lacks a vector, on this thread (and, for more than one
        batch, a helper thread for the embedding calls); how many were embedded."""
        done = 0
        stored: set[str] = set()
        window: list[Missing] = []
        exhausted = False
        # batches handed to the helper (their vectors on the way), and the batch whose
        # vectors are being stored: both still lack a vector in the store
        ahead: deque[tuple[list[Missing], Future[np.ndarray] | None]] = deque()
        current: tuple[list[Missing], np.ndarray] | None = None
        calls: _Calls | None = None

        def next_batch() -> list[Missing]:
            nonlocal window, exhausted
            if not window and not exhausted:
                skip = {mid for batch, _f in ahead for mid, _c in batch}
                if current is not None:
                    skip.update(mid for mid, _c in current[0])
                limit = self.batch_size * WINDOW + len(skip)
                window = [m for m in self._fetch(limit) if m[0] not in skip]
                if window and stored.issuperset(mid for mid, _ in window):
                    # store() kept none of them (e.g. their content keeps changing): stop
                    # here rather than spin; the next notify or start tries again.
                    log.warning(
                        "vectorizer: %d memories still lack a vector after being stored",
                        len(window),
                    )
                    window = []
                exhausted = not window
                window.sort(key=lambda item: len(item[1]))
            batch, window = window[: self.batch_size], window[self.batch_size :]
            return batch

        def stopping() -> bool:
            return self._stop and not self._drain

        try:
            while True:
                while not stopping() and len(ahead) < AHEAD:
                    batch = next_batch()
                    if not batch:
                        break
                    if calls is None and not ahead and not window:
                        ahead.append((batch, None))  # a lone batch: no thread for it
                        break
                    if calls is None:
                        calls = _Calls(self._embed, stopping, f"{self.name}-embed")
                    ahead.append((batch, calls.submit([content for _, content in batch])))
                if current is not None:
                    batch, vectors = current
                    self._store(batch, vectors)
                    stored.update(mid for mid, _ in batch)
                    done += len(batch)
                    self.embedded += len(batch)
                    current = None
                    if stopping():
                        return done
                    if not ahead:
                        exhausted = False  # what the last fetch held back is stored: look again
                        continue
                if not ahead:
                    return done
                batch, future = ahead.popleft()
                if future is None:
                    vectors = self._embed([content for _, content in batch])
                else:
                    try:
                        vectors = future.result()
                    except CancelledError:  # the helper stopped: closing without a drain
                        return done
                if len(vectors) != len(batch):
                    raise ValueError(
                        f"embed returned {len(vectors)} vectors for {len(batch)} texts"
                    )
                current = (batch, vectors)
        finally:
            if calls is not None:
                calls.close()

    def _wait_for_work(self, retry_in: float) -> int | None:
        """Block until a pass is due; the request number it covers, or None to exit."""
        with self._cond:
            if retry_in > 0:
                deadline = time.monotonic() + retry_in
                while self._requested == self._failed and not self._stop:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            else:
                while self._requested == self._completed and not self._stop:
                    self._cond.wait()
            if self._stop and not (self._drain and self._requested > self._completed):
                return None
            return self._requested

    def _loop(self) -> None:
        retry_in = 0.0
        while True:
            target = self._wait_for_work(retry_in)
            if target is None:
                return
            try:
                n = self.run_once()
            except Exception as e:  # the embedder or store failed: keep the thread alive
                if self._stop:
                    log.warning(
                        "vectorizer's last pass failed while closing (%s: %s); memories "
                        "without a vector are embedded at the store's next start",
                        type(e).__name__,
                        e,
                    )
                else:
                    log.warning("vectorizer pass failed (%s: %s); retrying", type(e).__name__, e)
                retry_in = min(max(retry_in * 2, self.retry_delay), self.max_retry_delay)
                with self._cond:
                    self._error = e
                    self._failed = target
                    self._cond.notify_all()
                if self._stop:  # closing: the next start picks these memories up
                    return
            else:
                if n:
                    log.debug("vectorizer embedded %d memories", n)
                retry_in = 0.0
                with self._cond:
                    self._error = None
                    self._completed = max(self._completed, target)
                    self._cond.notify_all()


class _Calls:
    """Embedding calls run one after another on a daemon thread, while the worker stores
    the vectors of the call before. :meth:`close` drops the calls not yet started and waits
    for the one running (a daemon thread killed inside the embedder's native code aborts
    the process); ``stopping()`` true keeps the thread from starting another."""

    def __init__(self, embed: Embed, stopping: Callable[[], bool], name: str) -> None:
        self._embed = embed
        self._stopping = stopping
        self._queue: deque[tuple[list[str], Future[np.ndarray]]] = deque()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, texts: list[str]) -> Future[np.ndarray]:
        """The call's future; cancelled at once when the thread has stopped."""
        future: Future[np.ndarray] = Future()
        with self._cond:
            if self._stopped:
                future.cancel()
            else:
                self._queue.append((texts, future))
                self._cond.notify()
        return future

    def close(self) -> None:
        with self._cond:
            self._stopped = True
            self._drop()
            self._cond.notify()
        self._thread.join()

    def _drop(self) -> None:
        for _texts, future in self._queue:
            future.cancel()
        self._queue.clear()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if self._stopping():
                    self._stopped = True
                if self._stopped:
                    self._drop()
                    return
                texts, future = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._embed(texts))
            except BaseException as e:  # the worker raises it where it waits for the call
                future.set_exception(e)
