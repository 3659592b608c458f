"""Embeddings that follow the store: embed what has no vector, re-embed for a new model.

:func:`reindex` embeds, in batches, every memory that has no vector (written with no
embedder, or left behind by a crash). With ``all=True`` it first clears every stored
vector, then embeds everything with the given embedder — the way to move a store to a new
model. Both are resumable: memories without a vector *are* the queue, so an interrupted
run is finished by running :func:`reindex` again (without ``all``). ``dry_run`` only
counts. ``progress(done, total)`` is called after every batch.

:func:`check_embedder` is what :meth:`GraphMemory.open` runs: an embedder whose vectors have
another dimension than the store's is refused at once, with the command that fixes it,
instead of a :class:`~graphmem.errors.DimensionMismatch` at the first write.

Changing the dimension needs a backend that lets a store with no vector left take a new
one: the embedded store does; Neo4j raises DimensionMismatch (its vector index is created
for one dimension), so there the vectors are cleared and recall is lexical until the store
is re-embedded with the old model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from graphmem.backends.base import GraphBackend, VectorQueue
from graphmem.consolidation import iter_memories
from graphmem.errors import DimensionMismatch, InvalidInput
from graphmem.fingerprint import ModelGuard, ModelStore, describe, record
from graphmem.models import Filter, Memory
from graphmem.vectorizer import Vectorizer
from graphmem.writes import Writes

__all__ = ["ReindexReport", "Vectors", "check_embedder", "reindex", "store_dim"]

log = logging.getLogger("graphmem.reindex")

Progress = Callable[[int, int], None]


class ReindexReport(BaseModel):
    """What :func:`reindex` did (or, on a dry run, would do)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    dry_run: bool
    model: str | None
    dim: int | None
    store_dim: int | None  # the store's dimension before the run
    cleared: int = 0  # vectors removed (all=True)
    missing: int = 0  # memories without a vector when embedding started
    embedded: int = 0
    batches: int = 0


def store_dim(backend: GraphBackend) -> int | None:
    """The dimension the store's vectors have (None: no vector yet), from its statistics."""
    return backend.stats().embedding_dim


def _name(embedder: Any) -> str:
    return str(getattr(embedder, "name", type(embedder).__name__))


def check_embedder(backend: GraphBackend, embedder: Any) -> None:
    """DimensionMismatch, naming the fix, when ``embedder`` cannot write to this store."""
    dim = getattr(embedder, "dim", None)
    if not isinstance(dim, int):
        return
    have = store_dim(backend)
    if have is not None and have != dim:
        name = _name(embedder)
        raise DimensionMismatch(
            f"this store's vectors have {have} dimensions and embedder {name!r} makes {dim}: "
            f"open it with the model it was built with, or re-embed it for {name!r} with "
            f"`graphmem reindex --all --embedder <that model>` (Python: "
            f"GraphMemory.open(url, embedder=None).reindex(embedder=..., all=True))"
        )


def _missing(backend: GraphBackend, limit: int) -> list[tuple[str, str]]:
    if not isinstance(backend, VectorQueue):
        raise InvalidInput(
            f"the {type(backend).__name__} backend cannot list memories without a vector"
        )
    return backend.missing_vectors(limit)


def reindex(
    writes: Writes,
    embedder: Any,
    *,
    all: bool = False,
    batch_size: int = 256,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ReindexReport:
    """Embed the memories without a vector (and with ``all``, every memory) in batches of
    ``batch_size`` with ``embedder`` (see the module docstring)."""
    if embedder is None:
        raise InvalidInput("reindex needs an embedder")
    if not callable(getattr(embedder, "embed", None)):
        raise InvalidInput(f"embedder must have embed(texts), not {type(embedder).__name__}")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InvalidInput("batch_size must be a positive int")
    backend = writes.backend
    dim = getattr(embedder, "dim", None)
    before = store_dim(backend)
    if not all and before is not None and isinstance(dim, int) and dim != before:
        check_embedder(backend, embedder)
    report = ReindexReport(
        dry_run=dry_run,
        model=_name(embedder),
        dim=dim if isinstance(dim, int) else None,
        store_dim=before,
    )
    everything = Filter.for_memories(status=None)
    if dry_run:
        with_vectors = (
            sum(1 for m in iter_memories(backend, everything) if m.embedding is not None)
            if all
            else 0
        )
        missing = len(_missing(backend, 10**9))
        return report.model_copy(
            update={"cleared": with_vectors, "missing": missing + with_vectors}
        )
    cleared = 0
    if all:
        batch: list[Memory] = []
        for m in iter_memories(backend, everything):
            if m.embedding is not None:
                batch.append(m.evolve(embedding=None))
            if len(batch) >= batch_size:
                cleared += len(writes.change(batch, expect_status=None))
                batch = []
        if batch:
            cleared += len(writes.change(batch, expect_status=None))
        log.info("reindex: cleared %d vectors", cleared)
        record(backend, describe(embedder))  # the store's vectors are this model's from now
    else:  # adding to the store's vectors: only with the model that made them
        ModelGuard(backend, embedder).before_vectors()
    total = len(_missing(backend, 10**9))
    done = batches = 0
    seen: set[str] = set()
    while True:
        items = [(i, c) for i, c in _missing(backend, batch_size) if i not in seen]
        if not items:
            break
        vectors = np.asarray(embedder.embed([c for _i, c in items]), dtype=np.float32)
        writes.store_vectors(items, vectors, checked=True)
        seen.update(i for i, _c in items)  # a memory changed meanwhile is not retried here
        done += len(items)
        batches += 1
        if progress is not None:
            progress(min(done, total), total)
    log.info("reindex: embedded %d memories in %d batches", done, batches)
    return report.model_copy(
        update={"cleared": cleared, "missing": total, "embedded": done, "batches": batches}
    )


class Vectors:
    """The vectors of a store (``mem.vectors``): :meth:`wait` for the background ones,
    :meth:`reindex` the store; and, for GraphMemory, the background worker itself.

    ``mode``: ``"background"`` acknowledges a write once it is durable and embeds it
    behind it; ``"inline"`` embeds before the write; ``"auto"`` is background for a model
    and inline for the hash embedder. Background needs a :class:`VectorQueue` backend (it
    can say which memories lack one).
    """

    def __init__(
        self, backend: GraphBackend, writes: Writes, embedder: Any | None, *, mode: str = "auto"
    ) -> None:
        if mode not in ("auto", "background", "inline"):
            raise InvalidInput(f"vectors must be auto, background or inline, not {mode!r}")
        self._backend = backend
        self._writes = writes
        self.embedder = embedder
        self._wrote_unvectored = False
        self._worker: Vectorizer | None = None
        queue = backend if isinstance(backend, VectorQueue) else None
        missing: Callable[[int], Sequence[tuple[str, str]]] | None = (
            queue.missing_vectors if queue is not None else None
        )
        self._missing = missing
        self._guard: ModelGuard | None = None
        if embedder is not None and isinstance(backend, ModelStore):
            self._guard = ModelGuard(backend, embedder)
            writes.before_vectors = self._guard.before_vectors
        if embedder is not None and missing is not None and _background(mode, embedder):
            self._worker = Vectorizer(
                embed=embedder.embed, fetch_missing=missing, store=writes.store_vectors
            )
            writes.defer_vectors = self._pending

    @property
    def background(self) -> bool:
        """Whether vectors are computed behind the writes (else inline or not at all)."""
        return self._worker is not None

    def wait(self, timeout: float | None = None) -> None:
        """Return once every memory written so far has its vector (background vectors);
        at once when vectors are computed inline or there is no embedder."""
        if self._worker is not None:
            self._worker.flush(timeout)

    def reindex(
        self,
        *,
        embedder: Any | None = None,
        all: bool = False,
        batch_size: int = 256,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> ReindexReport:
        """Embed the memories that have no vector, in batches (resumable: run it again);
        with ``all=True`` clear every vector first and re-embed everything — for a new
        model (``embedder``, default this store's). See :func:`reindex`."""
        try:
            return reindex(
                self._writes,
                embedder if embedder is not None else self.embedder,
                all=all,
                batch_size=batch_size,
                dry_run=dry_run,
                progress=progress,
            )
        finally:
            if self._guard is not None:  # the store may have another model now
                self._guard.reset()

    def check_model(self, *, query: bool = False) -> None:
        """EmbedderMismatch (naming the reindex command) when this handle's embedder is
        not the model that made the store's vectors (see :mod:`graphmem.fingerprint`).
        At open (``query=False``) only an embedder of another name is compared (no model
        loads for a name that matches); before a recall (``query=True``) every one is,
        once per handle."""
        if self._guard is not None:
            if query:
                self._guard.before_query()
            else:
                self._guard.check_open()

    def resume(self) -> None:
        """After opening: start embedding what an earlier handle left without a vector."""
        if self._worker is not None and self._missing is not None and self._missing(1):
            self._pending(())

    def settle(self, wait: float = 60.0) -> None:
        """Read your own writes: before a recall, wait (at most ``wait`` seconds, the recall
        config's ``vector_wait``) for the vectors of the memories this handle wrote, so a
        recall right after ``remember`` ranks them by meaning as a later one would. Costs
        nothing once they are done; on a timeout or a failing embedder recall goes on
        without the missing vectors (lexical and graph channels still find them)."""
        if self._worker is None or not self._wrote_unvectored or wait <= 0:
            return
        # cleared before the flush: a write racing with it sets the flag again, and the
        # flush covers every write acknowledged before it was asked for
        self._wrote_unvectored = False
        try:
            self._worker.flush(wait)
        except Exception as e:  # recall goes on without them; the worker retries
            self._wrote_unvectored = True
            log.info("recall without the vectors still pending after %s s: %s", wait, e)

    def close(self) -> None:
        """Wait for the vectors of what this handle wrote, then stop the worker. An older
        backlog (a store written without an embedder) is left for the next open, not made
        a cost of closing a short-lived handle such as one CLI command."""
        if self._worker is not None:
            self._worker.close(flush=self._wrote_unvectored)

    def _pending(self, memories: Sequence[Memory]) -> None:
        assert self._worker is not None
        if memories:
            self._wrote_unvectored = True
        if not self._worker.running:
            self._worker.start()
        self._worker.notify()


def _background(mode: str, embedder: Any) -> bool:
    if mode == "auto":
        from graphmem.embeddings import HashEmbedder  # no model, microseconds per text

        return not isinstance(embedder, HashEmbedder)
    return mode == "background"
