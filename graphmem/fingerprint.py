"""Which embedding model made a store's vectors: recorded once, checked on every open.

Two models of the same dimension make vectors that cannot be compared (cosine about 0
between the two vectors of one text), so a dimension check alone lets a store drift into
mixed vectors. The store therefore keeps a :class:`ModelRecord`: the model's name, its
dimension and its vector of a fixed probe text (rounded, plus a short digest to show).

The record is written when the first vectors are written (embedding the probe then, so
opening a store never loads a model just to record it). Checks:

* at open, when the embedder's name differs from the recorded one, the probe is embedded
  and compared: another model (cosine of the two probe vectors under
  :data:`SAME_MODEL_COSINE`) is refused with :class:`~graphmem.errors.EmbedderMismatch`;
  the same model under another name (an alias, or the ONNX and torch runs of one model,
  which differ in the last digits) passes;
* before the first vectors a handle writes and before its first recall, the same comparison
  for an embedder whose name matches (another model saved under the same name).

A store with no record yet (no vectors, or written before records existed) takes the first
model that writes vectors; so does a store with no memory left. ``reindex(all=True)``
records the new model once it has cleared the old vectors.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from graphmem.errors import EmbedderMismatch

__all__ = [
    "PROBE",
    "SAME_MODEL_COSINE",
    "ModelGuard",
    "ModelRecord",
    "ModelStore",
    "check_incoming",
    "describe",
    "recorded",
]

PROBE = "graphmem probe: Alice met Bob in Paris on 3 May 2021 and ordered green tea."
"""The fixed text whose vector identifies a model (never change it: stored records hold
its vector)."""

SAME_MODEL_COSINE = 0.98
"""Probe vectors at least this close are one model (runtimes and quantisation differ in
the last digits; different models are near 0)."""

_KEY = "embedding_model"


@runtime_checkable
class ModelStore(Protocol):
    """A backend that keeps one small named value beside the graph (its meta)."""

    def get_meta(self, key: str) -> str | None:
        """The value stored under ``key`` (None: none)."""
        ...

    def set_meta(self, key: str, value: str | None) -> None:
        """Store ``value`` under ``key`` (None removes it)."""
        ...


@dataclass(frozen=True)
class ModelRecord:
    """Name, dimension and probe vector of the model that made a store's vectors."""

    name: str
    dim: int
    probe: tuple[float, ...]

    @property
    def fingerprint(self) -> str:
        """A short digest of the rounded probe vector (for people; checks use the cosine)."""
        rounded = ",".join(f"{x:.2f}" for x in self.probe)
        return hashlib.blake2b(rounded.encode(), digest_size=8).hexdigest()

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "dim": self.dim,
                "fingerprint": self.fingerprint,
                "probe": [round(x, 5) for x in self.probe],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ModelRecord | None:
        try:
            d = json.loads(text)
            return cls(str(d["name"]), int(d["dim"]), tuple(float(x) for x in d["probe"]))
        except (ValueError, TypeError, KeyError):
            return None  # unreadable: treated as no record, the next writer records again

    def same_model(self, other: ModelRecord) -> bool:
        if self.dim != other.dim or len(self.probe) != len(other.probe):
            return False
        a = np.asarray(self.probe, dtype=np.float64)
        b = np.asarray(other.probe, dtype=np.float64)
        norms = float(np.linalg.norm(a) * np.linalg.norm(b))
        return norms > 0 and float(a @ b) / norms >= SAME_MODEL_COSINE


def _name(embedder: Any) -> str:
    return str(getattr(embedder, "name", type(embedder).__name__))


def describe(embedder: Any) -> ModelRecord:
    """The record of ``embedder`` (embeds :data:`PROBE`: may load the model)."""
    vec = np.asarray(embedder.embed([PROBE]), dtype=np.float32)[0]
    return ModelRecord(_name(embedder), int(vec.shape[0]), tuple(float(x) for x in vec))


def recorded(backend: Any) -> ModelRecord | None:
    """The store's record (None: none, or a backend that keeps no meta)."""
    if not isinstance(backend, ModelStore):
        return None
    text = backend.get_meta(_KEY)
    return ModelRecord.from_json(text) if text else None


def record(backend: Any, model: ModelRecord) -> None:
    """Make ``model`` the store's model (after its old vectors were cleared)."""
    if isinstance(backend, ModelStore):
        backend.set_meta(_KEY, model.to_json())


def check_incoming(backend: Any, incoming: ModelRecord | None, what: str) -> bool:
    """Before vectors made elsewhere (``what``: an import, a migration) are written to
    ``backend``: EmbedderMismatch when the store records another model (nothing written
    yet). True when the store keeps records and has none: it takes ``incoming`` once the
    vectors are written (:func:`record`). Vectors whose model is not known (an export of
    an older graphmem) are not checked."""
    if incoming is None or not isinstance(backend, ModelStore):
        return False
    have = recorded(backend)
    if have is None:
        return True
    if not have.same_model(incoming):
        raise EmbedderMismatch(
            f"{what} holds vectors made by {incoming.name!r} ({incoming.dim} dimensions, "
            f"fingerprint {incoming.fingerprint}); this store's were made by {have.name!r} "
            f"({have.dim} dimensions, fingerprint {have.fingerprint}): their vectors cannot "
            "be compared. Load it into a store of that model (or a new one), then re-embed "
            "with `graphmem reindex --all`"
        )
    return False


def _spec(name: str) -> str:
    """The ``--embedder`` value that makes the model called ``name``."""
    if re.fullmatch(r"hash-\d+", name):
        return name.replace("-", ":", 1)
    if name.lower() == "all-minilm-l6-v2-int8":
        return "onnx:int8"
    return name


def mismatch(have: ModelRecord, name: str) -> EmbedderMismatch:
    return EmbedderMismatch(
        f"this store's vectors were made by {have.name!r} ({have.dim} dimensions, "
        f"fingerprint {have.fingerprint}), not by embedder {name!r}: their vectors cannot be "
        f"compared. Open it with {have.name!r}, or re-embed it for {name!r} with "
        f"`graphmem reindex --all --embedder {_spec(name)}` (Python: GraphMemory.open(url, "
        f"embedder=None).vectors.reindex(embedder=..., all=True))"
    )


def _has_memories(backend: Any) -> bool:
    return bool(backend.stats().nodes.get("Memory", 0))


class ModelGuard:
    """The check of one handle's embedder against the store's record (thread-safe; a
    passed check is remembered until :meth:`reset`)."""

    def __init__(self, backend: Any, embedder: Any) -> None:
        self._backend = backend
        self._embedder = embedder
        self._mine: ModelRecord | None = None
        self._ok = False
        self._queried = False
        self._lock = threading.Lock()

    def _model(self) -> ModelRecord:
        if self._mine is None:
            self._mine = describe(self._embedder)
        return self._mine

    def check_open(self) -> None:
        """At open: compare now only when the names differ (else at the first write)."""
        have = recorded(self._backend)
        if have is not None and have.name != _name(self._embedder):
            with self._lock:
                self._verify(have, adopt=False)

    def before_vectors(self) -> None:
        """Before this handle writes vectors: record the model, or refuse another one."""
        if self._ok:
            return
        with self._lock:
            if not self._ok:
                self._verify(recorded(self._backend), adopt=True)

    def before_query(self) -> None:
        """Before this handle's first recall: refuse another model's query vectors (one
        meta read per handle; a store with no record yet has no vectors to mix with)."""
        if self._ok or self._queried:
            return
        with self._lock:
            have = recorded(self._backend)
            if not self._ok and have is not None:
                self._verify(have, adopt=False)
            self._queried = True

    def reset(self) -> None:
        """Check again at the next write and recall (the store may have another model)."""
        self._ok = self._queried = False

    def _verify(self, have: ModelRecord | None, *, adopt: bool) -> None:
        mine = self._model()
        if have is not None and have.same_model(mine):
            self._ok = True
            return
        if have is not None and _has_memories(self._backend):
            raise mismatch(have, mine.name)
        if adopt:
            record(self._backend, mine)
            self._ok = True
