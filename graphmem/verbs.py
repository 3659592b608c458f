"""``mem.writes``: the store's one write path (:class:`~graphmem.writes.Writes`) with the
low-level write verbs of the public face, which take memory ids where Writes takes the
memories read by its caller:

- :meth:`MemoryWrites.reconcile`: ``remember`` returning what reconciliation did;
- :meth:`MemoryWrites.supersede`, :meth:`MemoryWrites.link`,
  :meth:`MemoryWrites.set_status`: SUPERSEDES / DERIVED_FROM edges and archive/restore
  between existing memories (NotFound for an unknown id, nothing written);
- :meth:`MemoryWrites.validate`: the fields of a memory about to be written, checked and
  completed (importance and tier by the lifecycle's rules).

>>> from graphmem import GraphMemory
>>> with GraphMemory.open("memory://", embedder=None) as mem:
...     first = mem.writes.reconcile("Alice lives in Oslo", agent_id="a")
...     again = mem.writes.reconcile("Alice lives in Oslo", agent_id="a")
...     (first.action, again.action, again.memory.id == first.memory.id)
('created', 'duplicate', True)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from graphmem.backends.base import GraphBackend
from graphmem.boundary import batch_columns
from graphmem.config import ReconcileConfig
from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.gcpause import gc_paused
from graphmem.llm import LLM
from graphmem.models import Memory, Status, utcnow, validated
from graphmem.models.plain import ClassifyColumns, plain_memories, plain_memory
from graphmem.models.values import _check_id as check_id
from graphmem.models.values import new_ids, replaced
from graphmem.reconcile import DUPLICATE_FIELDS, ReconcileResult, reconcile
from graphmem.writes import Embed, Writes, check_new

__all__ = ["MemoryWrites"]

#: items of a ``remember_many`` from which its young objects are promoted (see gc_paused)
_PROMOTE_FROM = 64

Classify = Callable[[dict[str, Any]], dict[str, Any]]


#: what a Memory object given for an existing memory must still hold (access statistics,
#: updated_at and the vector aside: a read does not always carry them)
_AS_READ = (
    "content",
    "agent_id",
    "run_id",
    "namespace",
    "visibility",
    "category",
    "tier",
    "status",
    "importance",
    "confidence",
    "tags",
    "metadata",
    "event_type",
    "seq",
    "created_at",
    "valid_from",
    "valid_to",
    "expires_at",
)


def _revalidated(memory: Memory, **changes: Any) -> Memory:
    """A caller's new Memory validated again (with ``changes``), its derived fields (content
    hash, audience) made from its own fields: pydantic's ``model_copy(update=...)`` skips
    validation, so a copy keeps the original's audience (who may read it) and hash, and its
    updated fields are not checked. Its fields as they are held, not serialised: a copy's
    field may hold a value of another type (a str for an enum), which validation converts."""
    made: Memory = validated(Memory, {**memory.__dict__, "content_hash": "", **changes})
    return made


def _unplaced(memory: Memory) -> Memory:
    """``memory`` without a place among its run's events: a run's order is the write
    path's to give (as ``runs.add_events`` gives it), and a place taken as given was a
    second event at an existing place, and skipped the run's joining rule."""
    return memory if memory.seq is None else replaced(memory, seq=None)


def _said(value: Any) -> bool:
    """Whether the caller said something with ``value``: not None, nor an empty list,
    tuple or mapping. By type and length, not by ``==`` with those: a numpy number (which
    the argument check takes as a float) compared with ``()`` is an array, whose truth
    raises."""
    if value is None:
        return False
    if isinstance(value, list | tuple | Mapping):
        return len(value) > 0
    return True


class MemoryWrites(Writes):
    """The write path plus the id-level verbs (see the module docstring).

    ``classify`` fills importance and tier of a memory about to be written (the store's
    lifecycle rules); ``reconcile_config`` and ``llm`` drive :meth:`reconcile`.
    """

    def __init__(
        self,
        backend: GraphBackend,
        *,
        embed: Embed | None = None,
        clock: Callable[[], datetime] = utcnow,
        reconcile_config: ReconcileConfig | None = None,
        llm: LLM | None = None,
    ) -> None:
        super().__init__(backend, embed=embed, clock=clock)
        self.reconcile_config = reconcile_config or ReconcileConfig()
        self.llm = llm
        #: fills importance and tier (set by the store once its lifecycle exists)
        self.classify: Classify | None = None
        #: the same over a batch's columns (see graphmem.models.plain.plain_memories)
        self.classify_columns: ClassifyColumns | None = None
        self._local = threading.local()

    # -- creating ----------------------------------------------------------------------

    def validate(self, items: Iterable[Memory | Mapping[str, Any]]) -> list[Memory]:
        """Memories from :class:`Memory` objects or mappings of their fields; fields not
        given are completed (``created_at`` now; importance and tier scored and
        classified). One bad item raises InvalidInput naming it."""
        with gc_paused():  # many small acyclic objects (see graphmem.gcpause)
            return self._validate(items)

    def remember_many(self, items: Iterable[Memory | Mapping[str, Any]]) -> list[Memory]:
        """``mem.remember_many``: validate and create the batch. The store's boundary has
        checked ``items`` already; this is not a checked verb, so a batch is walked once."""
        # a batch's young objects promoted after it (see gc_paused): a few are not worth
        # the splice, and a single write's few would promote the caller's young objects
        big = isinstance(items, list | tuple) and len(items) >= _PROMOTE_FROM
        with gc_paused(promote=big):
            return self.create(self._validate(items))

    def _validate(self, items: Iterable[Memory | Mapping[str, Any]]) -> list[Memory]:
        now = self._clock()
        items = items if isinstance(items, list | tuple) else list(items)
        ids = new_ids(len(items))  # one read of random bytes for the batch
        # what the argument check read of a batch of one shape, column by column
        read = batch_columns(items)
        if self.classify is None or self.classify_columns is not None:
            batch = plain_memories(items, ids, now, self.classify_columns, read)
            if batch is not None:
                return batch
        return self._validate_each(items, ids, now)

    def _validate_each(
        self, items: Sequence[Memory | Mapping[str, Any]], ids: list[str], now: datetime
    ) -> list[Memory]:
        """:meth:`_validate` an item at a time: a batch of items of several shapes, or
        one that holds a value to convert or to refuse (named by its item)."""
        memories: list[Memory] = []
        for i, item in enumerate(items):
            if isinstance(item, Memory):
                try:
                    memories.append(_unplaced(_revalidated(item)))
                    check_new(memories[-1], now)
                except InvalidInput as e:
                    raise InvalidInput(f"item {i}: {e}") from e
                continue
            if not isinstance(item, Mapping):
                raise InvalidInput(f"item {i}: expected a Memory or a mapping")
            # the content hash is derived from the content, never taken as given (it is
            # what finds exact duplicates)
            data = {k: v for k, v in item.items() if v is not None and k != "content_hash"}
            data.setdefault("created_at", now)
            if "user_id" in data:  # an end user's memory: kept as metadata.user_id
                user = data.pop("user_id")
                try:  # the id rule of a run's user_id, which a scope names it by
                    check_id(user, "user_id")
                except ValueError as e:
                    raise InvalidInput(f"item {i}: {e}") from None
                meta = data.get("metadata") or {}
                if isinstance(meta, Mapping):  # else the metadata is refused below
                    data["metadata"] = {**meta, "user_id": user}
            try:
                if self.classify is not None:
                    data = self.classify(data)
                memories.append(_unplaced(plain_memory(data, ids[i]) or validated(Memory, data)))
                check_new(memories[-1], now)
            except InvalidInput as e:
                raise InvalidInput(f"item {i}: {e}") from e
        return memories

    def reconcile(self, content: str, *, mode: str | None = None, **fields: Any) -> ReconcileResult:
        """Write one memory (the keyword arguments of ``mem.remember``) reconciled with its
        scope, and say what happened: ``action`` (created, duplicate, superseded, linked),
        the memory now holding the content, the related ids and the reason.

        ``mode`` (default ``settings.reconcile.mode``, ``auto``): ``auto`` returns the
        existing memory (touched) for an exact duplicate in the same scope, makes a
        contradiction of the same subject and attribute a new version that supersedes the
        old one, and links a near-duplicate; ``llm`` also asks the configured LLM; ``off``
        always writes. See :mod:`graphmem.reconcile`."""
        cfg = self.reconcile_config
        if mode is not None:
            if mode not in ("auto", "off", "llm"):
                raise InvalidInput(f"reconcile must be 'auto', 'off' or 'llm', not {mode!r}")
            cfg = cfg.model_copy(update={"mode": mode})
        [memory] = self._validate([{"content": content, **fields}])
        if cfg.mode == "off":
            result = ReconcileResult(action="created", memory=self.create([memory])[0])
        else:
            # what the caller said (defaults are not said): an exact duplicate keeps it
            said = {
                f
                for f in DUPLICATE_FIELDS
                if _said(fields.get(f)) and not (f == "confidence" and fields.get(f) == 1.0)
            }
            if fields.get("user_id") is not None:
                said.add("metadata")
            result = reconcile(
                self,
                memory,
                config=cfg,
                llm=self.llm,
                now=self._clock(),
                given=frozenset(said),
            )
        self._local.last = result
        return result

    @property
    def last_reconcile(self) -> ReconcileResult | None:
        """What this thread's last :meth:`reconcile` (or ``mem.remember``) did."""
        result: ReconcileResult | None = getattr(self._local, "last", None)
        return result

    # -- between existing memories -----------------------------------------------------

    def supersede(
        self,
        olds: Sequence[Memory | str],
        new: Memory | str,
        *,
        reason: str,
        pass_name: str | None = None,
        create_new: bool = True,
    ) -> Memory:
        """``new`` replaces ``olds`` (memories or ids): each old version becomes
        superseded, with SUPERSEDES (and DERIVED_FROM when ``pass_name``) edges, in one
        atomic write. A ``new`` given by id is an existing memory (not created again).
        NotFound for an unknown id; Conflict when an old one is no longer active."""
        if isinstance(new, str):
            [new] = self.memories([new])
            create_new = False
        elif create_new:
            new = _revalidated(new)
        return super().supersede(
            self.memories(olds), new, reason=reason, pass_name=pass_name, create_new=create_new
        )

    def link(
        self, derived_id: str, source_ids: Sequence[str], *, pass_name: str = "manual"
    ) -> None:
        """Record provenance: ``derived_id`` DERIVED_FROM each of ``source_ids`` (all
        existing memories; NotFound names the first that is not). AccessDenied, nothing
        written, when the derived memory's agent may not read a source (a forget of the
        source deletes what was derived from it)."""
        if isinstance(source_ids, str):
            raise InvalidInput("source_ids must be a list of ids, not one string")
        self.memories([derived_id, *source_ids])
        super().link(derived_id, source_ids, pass_name=pass_name)

    def set_status(
        self,
        memories: Sequence[Memory | str],
        status: Status | str,
        *,
        reason: str | None = None,
        pin: bool | None = None,
        extra: Mapping[str, Any] | None = None,
        nodes: Sequence[Any] = (),
        expect: Sequence[Any] = (),
    ) -> list[Memory]:
        """Archive or restore memories (or ids) in place; returns the new values. See
        :meth:`Writes.set_status` for what archiving records and restoring gives back."""
        try:
            status = Status(status)
        except ValueError as e:
            raise InvalidInput(f"unknown status {status!r}") from e
        return super().set_status(
            self.memories(memories),
            status,
            reason=reason,
            pin=pin,
            extra=extra,
            nodes=nodes,
            expect=expect,
        )

    def memories(self, items: Sequence[Memory | str]) -> list[Memory]:
        """Memories given as objects or ids, in order, as stored; NotFound for the first
        unknown id. An object must still be what is stored (Conflict otherwise: it is
        stale, or it was edited): its fields were written back, so a copy with edited
        content rewrote the memory in place, without a version."""
        if isinstance(items, str):
            raise InvalidInput("expected a list of memory ids, not one string")
        ids = [i.id if isinstance(i, Memory) else i for i in items]
        found = {n.id: n for n in self.backend.get(Memory, list(dict.fromkeys(ids)))}
        out: list[Memory] = []
        for item, i in zip(items, ids, strict=True):
            node = found.get(i)
            if not isinstance(node, Memory):
                raise NotFound(f"no memory {i!r}")
            if isinstance(item, Memory) and any(
                getattr(item, f, None) != getattr(node, f) for f in _AS_READ
            ):
                raise Conflict(
                    f"memory {i!r} is not as given (it changed since it was read, or the "
                    "object was edited): read it again"
                )
            out.append(node)
        return out
