"""The orchestration log: what agents did, step by step, with deduplicated payloads.

``log(agent_id, event_type, payload, run_id=…, step=…, parent=…)`` appends a
:class:`~graphmem.models.LogEntry`; ``tail(n)`` reads the newest ones back, ``entry(id)``
one of them. A payload is any JSON value, stored as canonical JSON text, deduplicated by
content in two ways:

- at any depth, the value of a ``result``/``results``/``response``/``responses`` key whose
  JSON text is over 200 characters (:data:`DEDUP_MIN_CHARS`) is stored once as a
  :class:`~graphmem.models.Payload` (id: the SHA-256 of its text) and replaced in the entry
  by a blob reference ``{"$graphmem_blob": "<sha256>"}``;
- what remains, when over :data:`DEFAULT_INLINE_LIMIT` bytes, is stored the same way whole.

Every entry REFERENCES the blobs it uses; a blob counts its referencing entries and is
deleted with the last of them. Reading an entry puts the blobs back (``tail``, ``get``).
``stats()`` reports how many bytes the sharing saved. Entries older than the lifecycle's
log retention are deleted by maintenance (:meth:`EventLog.prune`).

Next to the log, orchestrators keep shared state in Redis-style keys: ``set``/``get``/
``delete`` (any JSON value), hashes (``hset``/``hget``/``hkeys``/``hdel``/``hgetall``) and
sets (``sadd``/``srem``/``smembers``).

Entries link to their run (``IN_RUN``) and to their parent entry (``CHILD_OF``), so a
delegation tree can be walked in the graph.

>>> from graphmem import GraphMemory
>>> with GraphMemory.open("memory://", embedder=None) as mem:
...     big = {"rows": list(range(500))}
...     a = mem.log.log("planner", "tool_result", big, run_id="r1", step=1)
...     b = mem.log.log("planner", "tool_result", big, run_id="r1", step=2)
...     (a.payload_ref == b.payload_ref, mem.log.stats().payloads)
(True, 1)
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import random
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from graphmem.backends.base import Expect, GraphBackend
from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.models import (
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    LogEntry,
    NodeLabel,
    NodeRef,
    Payload,
    Range,
    utcnow,
    validated,
)
from graphmem.writes import Writes

__all__ = [
    "BLOB_KEY",
    "DEDUP_KEYS",
    "DEDUP_MIN_CHARS",
    "DEFAULT_INLINE_LIMIT",
    "MAX_PAYLOAD_BYTES",
    "EventLog",
    "LogRecord",
    "LogStats",
]

log = logging.getLogger("graphmem.eventlog")

DEFAULT_INLINE_LIMIT = 1024  # bytes of canonical JSON kept inline on an entry
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
#: keys whose large values are stored once, at any depth of a payload (the seed's rule)
DEDUP_KEYS = frozenset({"result", "results", "response", "responses"})
DEDUP_MIN_CHARS = 200  # characters of a value's canonical JSON
BLOB_KEY = "$graphmem_blob"  # {"$graphmem_blob": sha256} stands for a stored value
#: id prefix of the key-value entries (never a SHA-256, so never a blob's id)
KV_PREFIX = "kv:"
#: a key is stored as the id ``kv:<key>``, and an id has at most 256 characters
MAX_KEY_CHARS = 256 - len(KV_PREFIX)
#: writes a key change tries before it gives up with Conflict (each after a fresh read)
KV_ATTEMPTS = 32
#: the longest pause between two of them (seconds); the first is at most 2 ms
KV_BACKOFF_MAX_S = 0.1
#: key changes of one handle are serialised per key stripe (no lost race inside a process)
_KEY_STRIPES = 64
_sleep = time.sleep


def backoff(attempt: int) -> float:
    """The pause before retry ``attempt + 1`` after a lost race: random ("full jitter", so
    that writers who lost together do not collide again in step) under a bound that
    doubles from 2 ms up to :data:`KV_BACKOFF_MAX_S`."""
    return random.uniform(0.0, min(KV_BACKOFF_MAX_S, 0.002 * 2**attempt))


class LogRecord(BaseModel):
    """A log entry with its payload decoded (from the entry or its shared Payload)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    entry: LogEntry
    payload: Any = None


class LogStats(BaseModel):
    """Size of the log. ``logical_bytes`` is what the referenced payloads would take if
    every entry stored its own copy; ``bytes_saved`` = logical - stored."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    entries: int
    inline_entries: int
    referencing_entries: int
    payloads: int
    stored_payload_bytes: int
    logical_payload_bytes: int
    bytes_saved: int


def canonical_json(payload: Any) -> str:
    """The canonical JSON text of a payload (sorted keys, no spaces); InvalidInput when it
    is not JSON-serialisable."""
    try:
        text = json.dumps(
            payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        text.encode("utf-8")  # a lone surrogate cannot be stored
        return text
    except (TypeError, ValueError, RecursionError) as e:
        raise InvalidInput(f"log payload is not JSON-serialisable: {e}") from e


class EventLog:
    """Append-only orchestration log over a :class:`GraphBackend` (see module docs)."""

    def __init__(
        self,
        backend: GraphBackend,
        writes: Writes,
        *,
        clock: Callable[[], datetime] = utcnow,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        dedup: Literal["value", "entry"] = "value",
        dedup_min_chars: int = DEDUP_MIN_CHARS,
    ) -> None:
        if inline_limit < 0:
            raise InvalidInput("inline_limit must not be negative")
        if dedup not in ("value", "entry"):
            raise InvalidInput("dedup is 'value' or 'entry'")
        self._backend = backend
        self._writes = writes
        self._clock = clock
        self.inline_limit = inline_limit
        self.dedup_keys = DEDUP_KEYS
        #: ``value``: a large result/response value (over ``dedup_min_chars``) is stored
        #: once; ``entry``: a whole payload that has a result/response key is stored once
        #: when its JSON reaches ``dedup_min_chars``
        self.dedup = dedup
        self.dedup_min_chars = dedup_min_chars
        # reference counts are read-modify-write: serialise them inside this process
        self._lock = threading.Lock()
        self._key_locks = tuple(threading.Lock() for _ in range(_KEY_STRIPES))

    # -- writing ----------------------------------------------------------------------

    def log(
        self,
        agent_id: str,
        event_type: str,
        payload: Any = None,
        *,
        run_id: str | None = None,
        step: int | None = None,
        parent: str | None = None,
        at: datetime | None = None,
    ) -> LogEntry:
        """Append one entry. ``parent`` is the id of an earlier entry (NotFound if absent);
        a ``run_id`` that does not exist yet starts that run (owned by ``agent_id``)."""
        text = None if payload is None else canonical_json(payload)
        size = 0 if text is None else len(text.encode("utf-8"))
        if size > MAX_PAYLOAD_BYTES:
            raise InvalidInput(f"log payload has {size} bytes; at most {MAX_PAYLOAD_BYTES}")
        if isinstance(step, bool):
            raise InvalidInput("step must be a non-negative integer")
        blobs: dict[str, str] = {}  # sha256 -> text of each value stored once
        whole = False
        if payload is not None and self.dedup_keys:
            if self.dedup == "entry":
                whole = (
                    isinstance(payload, dict)
                    and any(k in self.dedup_keys for k in payload)
                    and text is not None
                    and len(text) >= self.dedup_min_chars
                )
            else:
                text = canonical_json(self._extract(payload, blobs, under_key=False))
        shared = text is not None and (whole or len(text.encode("utf-8")) > self.inline_limit)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest() if shared and text else None
        if digest is not None and text is not None:
            blobs[digest] = text
        entry: LogEntry = validated(
            LogEntry,
            {
                "agent_id": agent_id,
                "event_type": event_type,
                "run_id": run_id,
                "step": step,
                "parent_id": parent,
                "at": at or self._clock(),
                "payload": None if shared else text,
                "payload_ref": digest,
                "payload_size": size,
            },
        )
        with self._lock:
            for attempt in range(KV_ATTEMPTS):
                nodes: list[GraphNode] = [entry]
                edges: list[Edge] = []
                expect = [Expect(entry.ref, exists=False)]
                if parent is not None:
                    if not self._backend.get(LogEntry, [parent]):
                        raise NotFound(f"no log entry {parent!r} (parent)")
                    parent_ref = NodeRef(NodeLabel.LOG_ENTRY, parent)
                    edges.append(_edge(EdgeType.CHILD_OF, entry.ref, parent_ref))
                    expect.append(Expect(parent_ref))
                # (the backend links the entry IN_RUN to its run, creating a missing run)
                found_blobs = {p.id: p for p in self._backend.get(Payload, sorted(blobs))}
                for h, blob_text in sorted(blobs.items()):
                    old = found_blobs.get(h)
                    if old is not None:
                        count = old.refcount
                        blob = old.evolve(refcount=count + 1)
                        expect.append(Expect(blob.ref, props={"refcount": count}))
                    else:
                        blob = Payload(
                            id=h, text=blob_text, size=len(blob_text.encode("utf-8")), refcount=1
                        )
                        expect.append(Expect(blob.ref, exists=False))
                    nodes.append(blob)
                    edges.append(_edge(EdgeType.REFERENCES, entry.ref, blob.ref))
                try:
                    self._writes.put(nodes, edges, expect=expect)
                    break
                except Conflict:
                    # another handle changed the shared payload's count: count again
                    if attempt == KV_ATTEMPTS - 1 or (
                        parent is not None and not self._backend.get(LogEntry, [parent])
                    ):
                        raise
                    _sleep(backoff(attempt))
        log.debug(
            "logged %s entry (%d payload bytes, %d blobs)", entry.event_type, size, len(blobs)
        )
        return entry

    def _extract(self, value: Any, blobs: dict[str, str], *, under_key: bool) -> Any:
        """``value`` with every large result/response (at any depth) replaced by a blob
        reference, the blobs collected in ``blobs``."""
        if under_key:
            text = canonical_json(value)
            if len(text) > self.dedup_min_chars:
                h = hashlib.sha256(text.encode("utf-8")).hexdigest()
                blobs[h] = text
                return {BLOB_KEY: h}
        if isinstance(value, dict):
            return {
                k: self._extract(v, blobs, under_key=k in self.dedup_keys) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._extract(v, blobs, under_key=False) for v in value]
        return value

    def delete_entries(self, entry_ids: Sequence[str]) -> int:
        """Delete entries; payloads nobody references any more are deleted with them, the
        others have their reference count recomputed. Returns how many entries went."""
        with self._lock:
            entries: list[LogEntry] = self._backend.get(LogEntry, list(dict.fromkeys(entry_ids)))
            if not entries:
                return 0
            doomed = {e.id for e in entries}
            used = self._backend.expand(
                [e.ref for e in entries],
                [EdgeType.REFERENCES],
                direction="out",
                depth=1,
                limit=10_000_000,
            )
            refs = sorted(
                {n.id for n in used.nodes if isinstance(n, Payload)}
                | {e.payload_ref for e in entries if e.payload_ref}
            )
            drop: list[NodeRef] = []
            keep: list[GraphNode] = []
            expect: list[Expect] = []
            for blob in self._backend.get(Payload, refs):
                expect.append(Expect(blob.ref, props={"refcount": blob.refcount}))
                users = self._backend.expand(
                    [blob.ref], [EdgeType.REFERENCES], direction="in", depth=1, limit=10_000_000
                )
                left = sum(1 for n in users.nodes if isinstance(n, LogEntry) and n.id not in doomed)
                if left == 0:
                    drop.append(blob.ref)
                else:
                    keep.append(blob.evolve(refcount=left))
            # counts and deletes in one transaction that expects the counts it computed from
            self._writes.delete_nodes([e.ref for e in entries] + drop, nodes=keep, expect=expect)
        log.info("deleted %d log entries and %d payloads", len(entries), len(drop))
        return len(entries)

    def delete_run(self, run_id: str) -> int:
        """Delete every entry of a run (see :meth:`delete`)."""
        ids = [
            e.id
            for e in self._backend.match(
                LogEntry,
                validated(Filter, {"label": NodeLabel.LOG_ENTRY, "equals": {"run_id": run_id}}),
            )
        ]
        return self.delete_entries(ids)

    def expired(self, *, older_than: timedelta, now: datetime | None = None) -> list[str]:
        """Ids of the entries logged before ``now - older_than``, oldest first.
        InvalidInput for a negative age (a cut-off after ``now``: every entry), a naive
        ``now`` or a cut-off before the year 1."""
        if older_than < timedelta(0):
            raise InvalidInput("older_than must not be negative")
        try:
            cutoff = (now or self._clock()) - older_than
        except OverflowError:
            raise InvalidInput("older_than reaches back before the year 1") from None
        at: Range = validated(Range, {"field": "at", "lt": cutoff})
        flt = validated(Filter, {"label": NodeLabel.LOG_ENTRY, "ranges": (at,)})
        return [e.id for e in self._backend.match(LogEntry, flt, order_by="at")]

    def prune(self, *, older_than: timedelta, now: datetime | None = None) -> int:
        """Delete entries logged before ``now - older_than``; returns how many."""
        return self.delete_entries(self.expired(older_than=older_than, now=now))

    # -- keys, hashes and sets ---------------------------------------------------------
    # Redis-style values next to the log (an orchestrator's shared state): each key holds
    # a string (any JSON value), a hash (field -> JSON value) or a set (JSON scalars). A key
    # is one Payload node ``kv:<key>`` whose text is ``{"t": type, "v": value}``; every
    # change is checked against the text it read, so concurrent writers never lose one.

    def _kv_read(self, key: str) -> tuple[str | None, Any, str | None]:
        """(type, value, stored text) of ``key``; (None, None, None) when absent."""
        _check_key(key)
        found = self._backend.get(Payload, [KV_PREFIX + key])
        if not found:
            return None, None, None
        text: str = found[0].text
        data = json.loads(text)
        return data["t"], data["v"], text

    def _kv_change(self, key: str, kind: str, change: Callable[[Any], tuple[Any, Any]]) -> Any:
        """Apply ``change(current value or None) -> (new value or None to delete, result)``
        to ``key`` of type ``kind`` atomically; returns the result.

        Optimistic: read, change, write only if the stored text is still the one read.
        Writers of this handle queue per key first, so only other handles (processes) can
        make it lose; a lost race reads again after a jittered pause, at most
        :data:`KV_ATTEMPTS` times, then raises Conflict (nothing of this call written)."""
        with self._key_locks[zlib.crc32(key.encode("utf-8", "surrogatepass")) % _KEY_STRIPES]:
            return self._kv_attempts(key, kind, change)

    def _kv_attempts(self, key: str, kind: str, change: Callable[[Any], tuple[Any, Any]]) -> Any:
        for attempt in range(KV_ATTEMPTS):
            t, value, text = self._kv_read(key)
            if t is not None and t != kind:
                raise InvalidInput(f"key {key!r} holds a {t}, not a {kind}")
            new, result = change(value)
            ref = NodeRef(NodeLabel.PAYLOAD, KV_PREFIX + key)
            expect = [
                Expect(ref, exists=False) if text is None else Expect(ref, props={"text": text})
            ]
            try:
                if new is None:
                    if text is not None:
                        self._writes.delete_nodes([ref], expect=expect)
                else:
                    stored = new.value if isinstance(new, _Boxed) else new
                    body = canonical_json({"t": kind, "v": stored})
                    node = Payload(
                        id=KV_PREFIX + key, text=body, size=len(body.encode("utf-8")), refcount=0
                    )
                    self._writes.put([node], [], expect=expect)
                return result
            except Conflict as e:
                if attempt == KV_ATTEMPTS - 1:
                    raise Conflict(
                        f"key {key!r} kept changing: {KV_ATTEMPTS} writes lost to other "
                        "writers; nothing of this change was written"
                    ) from e
                _sleep(backoff(attempt))
        raise AssertionError("unreachable")

    def set(self, key: str, value: Any) -> bool:
        """Store ``value`` (any JSON value) under ``key``, replacing a string there."""
        canonical_json(value)
        self._kv_change(key, "string", lambda _old: (_Boxed(value), True))
        return True

    def get(self, key: str, default: Any = None) -> Any:
        """The string value of ``key`` (``default`` when absent)."""
        t, value, _ = self._kv_read(key)
        if t is None:
            return default
        if t != "string":
            raise InvalidInput(f"key {key!r} holds a {t}, not a string")
        return value

    def delete(self, *keys: str) -> int:
        """Delete keys of any type; returns how many existed."""
        gone = 0
        for key in keys:
            t, _, _ = self._kv_read(key)
            if t is not None:
                gone += self._kv_change(key, t, lambda _old: (None, 1))
        return gone

    def hset(self, key: str, field: str, value: Any) -> int:
        """Set ``field`` of the hash ``key`` to ``value``; 1 if the field is new, else 0."""
        _check_field(field)
        canonical_json(value)

        def change(old: Any) -> tuple[Any, int]:
            h = dict(old or {})
            new = 0 if field in h else 1
            h[field] = value
            return h, new

        result: int = self._kv_change(key, "hash", change)
        return result

    def hget(self, key: str, field: str, default: Any = None) -> Any:
        """One field of the hash ``key`` (``default`` when absent)."""
        _check_field(field)
        return self._hash(key).get(field, default)

    def hgetall(self, key: str) -> dict[str, Any]:
        """Every field of the hash ``key`` (empty when absent)."""
        return self._hash(key)

    def hkeys(self, key: str) -> list[str]:
        """The fields of the hash ``key``, sorted."""
        return sorted(self._hash(key))

    def hdel(self, key: str, *fields: str) -> int:
        """Remove fields from the hash ``key`` (the key goes with its last field); returns
        how many were there."""
        for f in fields:
            _check_field(f)

        def change(old: Any) -> tuple[Any, int]:
            h = dict(old or {})
            n = sum(1 for f in set(fields) if h.pop(f, _MISSING) is not _MISSING)
            return (h or None), n

        result: int = self._kv_change(key, "hash", change)
        return result

    def sadd(self, key: str, *members: Any) -> int:
        """Add members (strings, numbers, booleans) to the set ``key``; returns how many
        were new."""
        for m in members:
            _check_member(m)

        def change(old: Any) -> tuple[Any, int]:
            have = [*(old or [])]
            new = [m for m in dict.fromkeys(members) if m not in have]
            return _sorted_members(have + new), len(new)

        result: int = self._kv_change(key, "set", change)
        return result

    def srem(self, key: str, *members: Any) -> int:
        """Remove members from the set ``key`` (the key goes with its last member);
        returns how many were there."""

        def change(old: Any) -> tuple[Any, int]:
            have = [*(old or [])]
            left = [m for m in have if m not in members]
            return (left or None), len(have) - len(left)

        result: int = self._kv_change(key, "set", change)
        return result

    def smembers(self, key: str) -> builtins.set[Any]:
        """The members of the set ``key`` (empty when absent)."""
        t, value, _ = self._kv_read(key)
        if t is None:
            return set()
        if t != "set":
            raise InvalidInput(f"key {key!r} holds a {t}, not a set")
        return set(value)

    def _hash(self, key: str) -> dict[str, Any]:
        t, value, _ = self._kv_read(key)
        if t is None:
            return {}
        if t != "hash":
            raise InvalidInput(f"key {key!r} holds a {t}, not a hash")
        return dict(value)

    # -- reading ----------------------------------------------------------------------

    def _filter(self, run_id: str | None, agent_id: str | None, event_type: str | None) -> Filter:
        equals = {
            k: v
            for k, v in (("run_id", run_id), ("agent_id", agent_id), ("event_type", event_type))
            if v is not None
        }
        flt: Filter = validated(Filter, {"label": NodeLabel.LOG_ENTRY, "equals": equals})
        return flt

    def tail(
        self,
        n: int = 20,
        *,
        run_id: str | None = None,
        agent_id: str | None = None,
        event_type: str | None = None,
    ) -> list[LogRecord]:
        """The newest ``n`` entries (optionally of one run / agent / type), oldest first,
        with their payloads decoded."""
        if n < 0:
            raise InvalidInput("n must not be negative")
        if n == 0:
            return []
        newest: list[LogEntry] = self._backend.match(
            LogEntry,
            self._filter(run_id, agent_id, event_type),
            order_by="at",
            descending=True,
            limit=n,
        )
        return self._records(list(reversed(newest)))

    def entry(self, entry_id: str) -> LogRecord:
        """One entry with its payload; NotFound if there is none."""
        found: list[LogEntry] = self._backend.get(LogEntry, [entry_id])
        if not found:
            raise NotFound(f"no log entry {entry_id!r}")
        return self._records(found)[0]

    def children(self, entry_id: str) -> list[LogRecord]:
        """The entries logged with ``parent=entry_id``, in log order."""
        sub = self._backend.expand(
            [NodeRef(NodeLabel.LOG_ENTRY, entry_id)], [EdgeType.CHILD_OF], direction="in", depth=1
        )
        kids = [n for n in sub.nodes if isinstance(n, LogEntry) and n.id != entry_id]
        return self._records(sorted(kids, key=lambda e: (e.at, e.id)))

    def _records(self, entries: list[LogEntry]) -> list[LogRecord]:
        texts: dict[str, str] = {}

        def fetch(ids: set[str]) -> None:
            todo = sorted(ids - texts.keys())
            if todo:
                texts.update({p.id: p.text for p in self._backend.get(Payload, todo)})

        fetch({e.payload_ref for e in entries if e.payload_ref})
        skeletons = []
        for e in entries:
            text = texts.get(e.payload_ref) if e.payload_ref else e.payload
            skeletons.append(None if text is None else json.loads(text))
        fetch({h for sk in skeletons for h in _blob_ids(sk)})
        return [
            LogRecord(entry=e, payload=_restore(sk, texts))
            for e, sk in zip(entries, skeletons, strict=True)
        ]

    def count(self, *, run_id: str | None = None, agent_id: str | None = None) -> int:
        return self._backend.count(self._filter(run_id, agent_id, None))

    def stats(self) -> LogStats:
        """Entry and payload counts, and the bytes that content addressing saved."""
        entries = self._backend.count(self._filter(None, None, None))
        referencing: list[LogEntry] = self._backend.match(
            LogEntry,
            validated(
                Filter,
                {"label": NodeLabel.LOG_ENTRY, "ranges": (Range(field="payload_ref", gte=""),)},
            ),
        )
        payloads: list[Payload] = self._backend.match(Payload, Filter(label=NodeLabel.PAYLOAD))
        payloads = [p for p in payloads if not p.id.startswith(KV_PREFIX)]
        stored = sum(p.size for p in payloads)
        logical = sum(p.size * max(p.refcount, 1) for p in payloads)
        inline = self._backend.count(
            validated(
                Filter, {"label": NodeLabel.LOG_ENTRY, "ranges": (Range(field="payload", gte=""),)}
            )
        )
        return LogStats(
            entries=entries,
            inline_entries=inline,
            referencing_entries=len(referencing),
            payloads=len(payloads),
            stored_payload_bytes=stored,
            logical_payload_bytes=logical,
            bytes_saved=logical - stored,
        )


def _is_blob(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(BLOB_KEY), str)


def _blob_ids(value: Any) -> set[str]:
    if _is_blob(value):
        return {value[BLOB_KEY]}
    if isinstance(value, dict):
        return {h for v in value.values() for h in _blob_ids(v)}
    if isinstance(value, list):
        return {h for v in value for h in _blob_ids(v)}
    return set()


def _restore(value: Any, texts: dict[str, str]) -> Any:
    if _is_blob(value):
        text = texts.get(value[BLOB_KEY])
        return value if text is None else json.loads(text)
    if isinstance(value, dict):
        return {k: _restore(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v, texts) for v in value]
    return value


def _edge(etype: EdgeType, src: NodeRef, dst: NodeRef) -> Edge:
    edge: Edge = validated(Edge, {"type": etype, "src": src, "dst": dst})
    return edge


_MISSING = object()


class _Boxed:
    """A value to store that may itself be None (None as a change means "delete")."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _check_key(key: Any) -> None:
    if (
        not isinstance(key, str)
        or not 0 < len(key) <= MAX_KEY_CHARS
        or key.rstrip() != key
        or any(ord(c) < 32 or ord(c) == 127 for c in key)
    ):
        raise InvalidInput(
            f"a key is 1-{MAX_KEY_CHARS} printable characters without trailing whitespace"
        )


def _check_field(field: Any) -> None:
    if not isinstance(field, str) or not field:
        raise InvalidInput("a hash field is a non-empty string")


def _check_member(member: Any) -> None:
    if isinstance(member, float) and member != member:
        raise InvalidInput("a set member cannot be NaN")
    if not isinstance(member, str | int | float | bool):
        raise InvalidInput("a set member is a string, number or boolean")


def _sorted_members(members: list[Any]) -> list[Any]:
    return sorted(members, key=lambda m: (type(m).__name__, m))
