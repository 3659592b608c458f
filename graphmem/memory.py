"""GraphMemory: the one public entry point, composing backend, embedder and the passes.

>>> from graphmem import GraphMemory
>>> with GraphMemory.open("memory://", embedder=None) as mem:
...     m = mem.remember("Alice prefers tea", agent_id="assistant", tags=["prefs"])
...     [r.memory.content for r in mem.recall("tea", agent_id="assistant")]
['Alice prefers tea']
"""

from __future__ import annotations

import builtins
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

import networkx as nx
from pydantic import BaseModel, ConfigDict

from graphmem import knowledge
from graphmem.backends import open_backend
from graphmem.backends.base import Expect, GraphBackend
from graphmem.consolidation import (
    ConsolidationConfig,
    ConsolidationReport,
    FactsReport,
    ImproveReport,
    UnmergeReport,
    improve_memories,
    iter_memories,
    reflect_on,
    store_facts,
    summarize_into_memory,
)
from graphmem.consolidation import consolidate as consolidate_memories
from graphmem.consolidation import unmerge as unmerge_memories
from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.eventlog import EventLog, LogRecord, canonical_json
from graphmem.knowledge import KnowledgeIndexer
from graphmem.lifecycle import (
    Lifecycle,
    LifecycleConfig,
    MaintenanceReport,
    MaintenanceScheduler,
    Scratchpad,
    TurnReport,
    config_from_settings,
    relevance,
)
from graphmem.llm import LLM, OfflineLLM, Reflection
from graphmem.models import (
    CONTENT_JSON_KEY,
    Agent,
    Category,
    Edge,
    EdgeType,
    Entity,
    Filter,
    GraphNode,
    LogEntry,
    Memory,
    Namespace,
    NodeLabel,
    NodeRef,
    RecallResult,
    Run,
    RunStatus,
    Status,
    Subgraph,
    Tier,
    Visibility,
    node_model,
    utcnow,
    validated,
)
from graphmem.org import OrgConfig, OrgMemory
from graphmem.profiles import with_profile
from graphmem.reconcile import ReconcileConfig, ReconcileResult
from graphmem.reconcile import reconcile as reconcile_write
from graphmem.reindex import ReindexReport, check_embedder
from graphmem.reindex import reindex as reindex_store
from graphmem.retrieval import RecallConfig, Retriever
from graphmem.runs import CleanupReport, DeleteRunReport, Runs, RunStats
from graphmem.scoping import Namespaces, Scope
from graphmem.vectorizer import Vectorizer
from graphmem.writes import Committed, Writes

__all__ = ["ForgetReport", "GraphMemory", "ImportReport"]

log = logging.getLogger("graphmem.memory")

#: before a recall, wait up to SETTLE_SECONDS for the vectors of this handle's writes
#: when at most SETTLE_MAX_PENDING memories still lack one
SETTLE_MAX_PENDING = 64
SETTLE_SECONDS = 0.5

EXPORT_FORMAT = "graphmem-jsonl"
EXPORT_VERSION = 1


@runtime_checkable
class _HasGraphView(Protocol):
    @property
    def graph(self) -> nx.MultiDiGraph: ...


class ForgetReport(BaseModel):
    """What ``forget`` deleted (or would delete, on a dry run) and what it restored."""

    model_config = ConfigDict(frozen=True)

    deleted: tuple[str, ...]
    restored: tuple[str, ...]
    dry_run: bool = False


class ImportReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    nodes: int
    edges: int


class GraphMemory:
    """Knowledge memory for agents over a :class:`GraphBackend`.

    Open one with :meth:`open`; use it as a context manager or call :meth:`close`.
    Thread-safe: the backends serialise access, and appends to a run are ordered here.
    """

    def __init__(
        self,
        backend: GraphBackend,
        *,
        embedder: Any | None = None,
        llm: Any | None = None,
        settings: Any | None = None,
        clock: Callable[[], datetime] = utcnow,
        owns_backend: bool = True,
        vectors: str = "auto",
        knowledge: bool = True,
    ) -> None:
        if vectors not in ("auto", "background", "inline"):
            raise InvalidInput(f"vectors must be auto, background or inline, not {vectors!r}")
        self._backend = backend
        self._embedder = embedder
        self.llm = llm
        self.settings = settings
        self._clock = clock
        self._owns_backend = owns_backend
        self._run_lock = threading.Lock()
        self._lifecycle_lock = threading.Lock()
        self._closed = False
        self._local = threading.local()  # per-thread outcome of remember()
        #: the one write path: every state change of this store goes through it
        self.writes = Writes(backend, embed=self._embed_texts if embedder else None, clock=clock)
        self.namespaces = Namespaces(backend, self.writes, clock=clock)
        self.writes.check_shared = self.namespaces.check_writes
        org_config = getattr(settings, "org", None)
        self.org = OrgMemory(
            backend,
            self.writes,
            clock=clock,
            config=org_config if isinstance(org_config, OrgConfig) else None,
        )
        log_settings = getattr(settings, "log", None)
        self.eventlog = EventLog(
            backend,
            self.writes,
            clock=clock,
            **(
                {}
                if log_settings is None
                else {
                    "dedup": log_settings.dedup,
                    "dedup_min_chars": log_settings.dedup_min_chars,
                    "inline_limit": log_settings.inline_limit,
                }
            ),
        )
        self.runs = Runs(self)
        self.writes.add_hook(self._after_write)
        #: the knowledge layer: entities and relations of every memory written, extracted
        #: with no model and no LLM after each commit (see graphmem.knowledge)
        self.knowledge: KnowledgeIndexer | None = None
        if knowledge:
            self.knowledge = KnowledgeIndexer(backend)
            self.knowledge.attach(self.writes)
        self._vectorizer: Vectorizer | None = None
        self._wrote_unvectored = False
        self._sweeper: MaintenanceScheduler | None = None
        if embedder is not None and _background_vectors(vectors, embedder, backend):
            self._vectorizer = Vectorizer(
                embed=embedder.embed,
                fetch_missing=backend.missing_vectors,  # type: ignore[attr-defined]
                store=self.writes.store_vectors,
            )
            self.writes.defer_vectors = self._vectors_pending

    # -- opening and closing ----------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        auth: tuple[str, str] | None = None,
        database: str | None = None,
        embedder: Any | None = "auto",
        llm: Any | None = None,
        settings: Any | None = None,
        clock: Callable[[], datetime] = utcnow,
        vectors: str = "auto",
        knowledge: bool = True,
        profile: str | None = None,
        **backend_options: Any,
    ) -> GraphMemory:
        """Open a memory store by URL (default: the embedded store ``./graphmem.db``).

        ``url``: a file path, ``memory://``, or ``neo4j://host:7687`` (and the other
        neo4j/bolt schemes). ``embedder``: ``"auto"`` (sentence-transformers with the bundled
        offline model, falling back to a dependency-free embedder), ``None`` (no vectors),
        a model name, or an Embedder object. Nothing connects or loads a model here; that
        happens on first use.

        ``vectors``: ``"background"`` acknowledges a write once it is durable and embeds it
        behind it (lexical and graph recall find it at once, vector recall when its vector
        is there; :meth:`wait_for_vectors` waits); ``"inline"`` embeds before the write;
        ``"auto"`` (default) is background for a model and inline for the hash embedder.
        Memories left without a vector (a crash, a store written with no embedder) are
        embedded in the background after opening.

        ``knowledge``: extract entities and relations from every memory written (the
        knowledge layer, no model and no LLM; on by default). ``mem.knowledge.backfill``
        indexes memories written before.

        ``profile``: a named profile (:mod:`graphmem.profiles`: ``orka``, ``kaos``,
        ``synthorg``, ``openagentflow``, ``operator``; ``graphmem`` is the default) whose
        defaults fill what ``settings`` leave unset.
        """
        if profile is not None:
            settings = with_profile(settings, profile)
        if auth is not None:
            backend_options["auth"] = auth
        if database is not None:
            backend_options["database"] = database
        backend = open_backend(url, **backend_options)
        if isinstance(embedder, str):
            from graphmem.embeddings import make_embedder

            embedder = make_embedder(embedder)
        try:
            mem = cls(
                backend,
                embedder=embedder,
                llm=llm,
                settings=settings,
                clock=clock,
                vectors=vectors,
                knowledge=knowledge,
            )
            backend.ensure_schema()
            if embedder is not None:  # a model of another dimension: say what to run
                check_embedder(backend, embedder)
            if mem._vectorizer is not None and backend.missing_vectors(1):  # type: ignore[attr-defined]
                mem._vectors_pending(())
            maintenance = getattr(settings, "maintenance", None)
            if getattr(maintenance, "in_process", False):
                # the decay sweep without a server: stopped by close()
                mem._sweeper = mem.lifecycle.scheduled(settings)
                if mem._sweeper is not None:
                    mem._sweeper.start()
        except BaseException:
            backend.close()
            raise
        return mem

    def _vectors_pending(self, memories: Sequence[Memory]) -> None:
        assert self._vectorizer is not None
        if memories:
            self._wrote_unvectored = True
        if not self._vectorizer.running:
            self._vectorizer.start()
        self._vectorizer.notify()

    def reindex(
        self,
        *,
        embedder: Any | None = None,
        all: bool = False,
        batch_size: int = 256,
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> ReindexReport:
        """Embed the memories that have no vector, in batches (resumable: run it again);
        with ``all=True`` clear every vector first and re-embed everything — for a new
        model (``embedder``, default this handle's). See :mod:`graphmem.reindex`."""
        return reindex_store(
            self.writes,
            embedder if embedder is not None else self._embedder,
            all=all,
            batch_size=batch_size,
            dry_run=dry_run,
            progress=progress,
        )

    def wait_for_vectors(self, timeout: float | None = None) -> None:
        """Return once every memory written so far has its vector (background vectors);
        at once when vectors are computed inline or there is no embedder."""
        if self._vectorizer is not None:
            self._vectorizer.flush(timeout)

    def close(self) -> None:
        """Finish pending background vectors, then close the backend if this object opened
        it (idempotent). Vectors that could not be computed are picked up at the next open."""
        if not self._closed:
            self._closed = True
            if self._sweeper is not None:
                self._sweeper.stop()
            if self._vectorizer is not None:
                # wait for the vectors of what this handle wrote; an older backlog (a store
                # written without an embedder) is left for the next open, not made a cost
                # of closing a short-lived handle such as one CLI command
                self._vectorizer.close(flush=self._wrote_unvectored)
            if self._owns_backend:
                self._backend.close()

    def __enter__(self) -> GraphMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def backend(self) -> GraphBackend:
        return self._backend

    @property
    def embedder(self) -> Any | None:
        return self._embedder

    def now(self) -> datetime:
        return self._clock()

    # -- writing ---------------------------------------------------------------------

    def remember(
        self,
        content: str,
        *,
        agent_id: str = "default",
        run_id: str | None = None,
        namespace: str = "default",
        category: Category | str = Category.SEMANTIC,
        tier: Tier | str | None = None,
        importance: float | None = None,
        confidence: float = 1.0,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        event_type: str | None = None,
        created_at: datetime | None = None,
        valid_from: datetime | None = None,
        expires_at: datetime | None = None,
        visibility: Visibility | str = Visibility.PRIVATE,
        user_id: str | None = None,
        reconcile: str | None = None,
    ) -> Memory:
        """Store one memory durably and return it (with its generated id).

        ``visibility``: ``private`` (only ``agent_id`` reads it), ``shared`` (the members of
        the shared ``namespace``; the author must be one) or ``org`` (every agent).
        ``user_id`` (stored as ``metadata.user_id``) scopes the memory to one end user.
        ``importance``/``tier`` not given are scored and classified by the lifecycle rules.

        ``reconcile`` (default ``settings.reconcile.mode``, ``auto``): ``auto`` returns the
        existing memory (touched) for an exact duplicate in the same scope, makes a
        contradiction of the same subject and attribute a new version that supersedes the
        old one, and links a near-duplicate; ``llm`` also asks the configured LLM; ``off``
        always writes. :attr:`last_reconcile` says what happened (see
        :mod:`graphmem.reconcile`)."""
        data: dict[str, Any] = {
            "content": content,
            "agent_id": agent_id,
            "run_id": run_id,
            "namespace": namespace,
            "category": category,
            "tier": tier,
            "importance": importance,
            "confidence": confidence,
            "tags": tags,
            "metadata": metadata,
            "event_type": event_type,
            "created_at": created_at or self._clock(),
            "valid_from": valid_from,
            "expires_at": expires_at,
            "visibility": visibility,
        }
        if user_id is not None:
            data["metadata"] = {**(metadata or {}), "user_id": user_id}
        cfg = self._reconcile_config(reconcile)
        if cfg.mode == "off":
            result = ReconcileResult(action="created", memory=self.remember_many([data])[0])
        else:
            [memory] = self._validate_many([data])
            result = reconcile_write(
                self.writes, memory, config=cfg, llm=self.llm, now=self._clock()
            )
        self._local.reconcile = result
        return result.memory

    def reconcile(self, content: str, *, mode: str | None = None, **fields: Any) -> ReconcileResult:
        """:meth:`remember` (same keyword arguments; ``mode`` is its ``reconcile``),
        returning what reconciliation did: ``action`` (created, duplicate, superseded,
        linked), the memory now holding the content, the related ids and the reason.
        Unlike :attr:`last_reconcile` it is safe across threads and in ``graphmem.aio``."""
        self.remember(content, reconcile=mode, **fields)
        result: ReconcileResult = self._local.reconcile
        return result

    @property
    def last_reconcile(self) -> ReconcileResult | None:
        """What this thread's last :meth:`remember` did: ``action`` is ``created``,
        ``duplicate`` (nothing written; the existing memory was returned), ``superseded``
        or ``linked``, with the related memory ids and the reason."""
        result: ReconcileResult | None = getattr(self._local, "reconcile", None)
        return result

    def _reconcile_config(self, mode: str | None) -> ReconcileConfig:
        base = getattr(self.settings, "reconcile", None)
        cfg = base if isinstance(base, ReconcileConfig) else ReconcileConfig()
        if mode is None:
            return cfg
        if mode not in ("auto", "off", "llm"):
            raise InvalidInput(f"reconcile must be 'auto', 'off' or 'llm', not {mode!r}")
        return cfg.model_copy(update={"mode": mode})

    def remember_many(self, items: Iterable[Memory | Mapping[str, Any]]) -> builtins.list[Memory]:
        """Store many memories in one atomic, durable batch.

        Each item is a :class:`Memory` or a mapping of its fields. Every item is validated
        first: one bad item raises InvalidInput and nothing is written.
        """
        memories = self.writes.create(self._validate_many(items))
        log.debug("remembered %d memories", len(memories))
        return memories

    def _validate_many(self, items: Iterable[Memory | Mapping[str, Any]]) -> builtins.list[Memory]:
        # importance and tier not given are scored and classified by the lifecycle rules
        now = self._clock()
        memories: builtins.list[Memory] = []
        for i, item in enumerate(items):
            if isinstance(item, Memory):
                memories.append(item)
                continue
            if not isinstance(item, Mapping):
                raise InvalidInput(f"item {i}: expected a Memory or a mapping")
            data = {k: v for k, v in item.items() if v is not None}
            data.setdefault("created_at", now)
            if "user_id" in data:  # an end user's memory: kept as metadata.user_id
                data["metadata"] = {**(data.get("metadata") or {}), "user_id": data.pop("user_id")}
            try:
                memories.append(validated(Memory, self.lifecycle.classify(data)))
            except InvalidInput as e:
                raise InvalidInput(f"item {i}: {e}") from e
        return memories

    def get(self, memory_id: str, *, scope: Scope | str | None = None) -> Memory:
        """The memory with this id (any status); NotFound if there is none, or if
        ``scope`` (an agent id or :class:`Scope`) may not read it."""
        found = self.get_many([memory_id], scope=scope)
        if not found:
            raise NotFound(f"no memory {memory_id!r}")
        return found[0]

    def get_many(
        self, memory_ids: Sequence[str], *, scope: Scope | str | None = None
    ) -> builtins.list[Memory]:
        """The memories that exist among these ids (and that ``scope`` may read), in order."""
        if isinstance(memory_ids, str):
            raise InvalidInput("memory_ids must be a list of ids, not one string")
        found: builtins.list[Memory] = self._backend.get(  # type: ignore[assignment]
            NodeLabel.MEMORY, memory_ids
        )
        return self._readable(found, scope)

    def _readable(
        self, memories: builtins.list[Memory], scope: Scope | str | None
    ) -> builtins.list[Memory]:
        """The one read check of every read path: what ``scope`` may read, in order."""
        if scope is None:
            return memories
        allowed = set(self.namespaces.audiences(scope))
        return [m for m in memories if m.audience in allowed]

    def update(
        self,
        memory_id: str,
        content: str | None = None,
        *,
        reason: str = "update",
        **changes: Any,
    ) -> Memory:
        """Write a new version of a memory that SUPERSEDES the current one.

        The old version stays in the graph with status ``superseded`` and ``valid_to`` set;
        ``history()`` shows the chain. Only an active memory can be updated (Conflict
        otherwise). ``changes`` may set importance, confidence, tags, metadata, category,
        tier, expires_at, valid_from, namespace.
        """
        allowed = {
            "importance",
            "confidence",
            "tags",
            "metadata",
            "category",
            "tier",
            "expires_at",
            "valid_from",
            "namespace",
            "event_type",
            "visibility",
        }
        unknown = set(changes) - allowed
        if unknown:
            raise InvalidInput(
                f"cannot update field(s) {sorted(unknown)}; allowed: {sorted(allowed)}"
            )
        old = self.get(memory_id)
        if old.status is not Status.ACTIVE:
            raise Conflict(f"memory {memory_id} is {old.status.value}; update its current version")
        return self.writes.version(old, content=content, reason=reason, **changes)

    def supersede(
        self, new_id_: str, old_ids: Sequence[str], *, reason: str, pass_name: str | None = None
    ) -> None:
        """Mark ``old_ids`` superseded by the existing memory ``new_id_`` (SUPERSEDES edges,
        and DERIVED_FROM edges too when ``pass_name`` is given) in one atomic write."""
        new = self.get(new_id_)
        olds = self.get_many(old_ids)
        if len(olds) != len(set(old_ids)):
            raise NotFound(f"some of {list(old_ids)} do not exist")
        self.writes.supersede(olds, new, reason=reason, pass_name=pass_name, create_new=False)

    def link(
        self, derived_id: str, source_ids: Sequence[str], *, pass_name: str = "manual"
    ) -> None:
        """Record provenance: ``derived_id`` DERIVED_FROM each of ``source_ids``."""
        ids = [derived_id, *source_ids]
        found = {m.id for m in self.get_many(ids)}
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(f"no memory {missing[0]!r}")
        self.writes.link(derived_id, source_ids, pass_name=pass_name)

    def set_status(self, memory_ids: Sequence[str], status: Status | str) -> builtins.list[Memory]:
        """Set the status of memories in place (archive / restore); returns the new values."""
        try:
            status = Status(status)
        except ValueError as e:
            raise InvalidInput(f"unknown status {status!r}") from e
        return self.writes.set_status(self.get_many(memory_ids), status)

    def forget(
        self, memory_id: str, *, cascade: bool = True, dry_run: bool = False
    ) -> ForgetReport:
        """Delete a memory for good — the only operation besides import that removes data.

        Cascade (default): the memory's older versions (what it SUPERSEDES, transitively)
        are deleted with it, and so is every node derived from any of them — newer
        versions, merges and summaries (DERIVED_FROM / SUPERSEDES pointing at them,
        transitively) — because those carry the forgotten content. A memory that was
        superseded *only* by deleted nodes is restored to active (a merge partner of the
        forgotten memory comes back). With ``cascade=False`` only this node is deleted and
        derived nodes keep their content (their provenance edge to it is gone).
        """
        plan = self.writes.forget(memory_id, cascade=cascade, dry_run=dry_run)
        return ForgetReport(
            deleted=plan.deleted, restored=tuple(m.id for m in plan.restored), dry_run=dry_run
        )

    # -- reading ---------------------------------------------------------------------

    def list(
        self,
        *,
        agent_id: str | Sequence[str] | None = None,
        run_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        category: str | Sequence[str] | None = None,
        tier: str | Sequence[str] | None = None,
        event_type: str | Sequence[str] | None = None,
        status: str | Sequence[str] | None = "active",
        tags: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = 100,
        offset: int = 0,
        order_by: str = "created_at",
        descending: bool = True,
        scope: Scope | str | None = None,
        user_id: str | None = None,
    ) -> builtins.list[Memory]:
        """Memories matching the filters (``status=None`` for every status), newest first;
        with ``scope``, only those it may read; with ``user_id``, only that user's."""
        flt = self._recall_filter(
            agent_id=agent_id,
            run_id=run_id,
            namespace=namespace,
            category=category,
            tier=tier,
            event_type=event_type,
            status=status,
            tags=tags,
            since=since,
            until=until,
            metadata=metadata,
            scope=scope,
            user_id=user_id,
        )
        return self._backend.match(  # type: ignore[return-value]
            flt, limit=limit, offset=offset, order_by=order_by, descending=descending
        )

    def count(self, *, scope: Scope | str | None = None, **filters: Any) -> int:
        """How many memories match (same keyword filters as :meth:`list`)."""
        status = filters.pop("status", "active")
        return self._backend.count(self._recall_filter(scope=scope, status=status, **filters))

    def history(self, memory_id: str, *, scope: Scope | str | None = None) -> builtins.list[Memory]:
        """Every version connected to this memory by SUPERSEDES, oldest first. With
        ``scope``, versions it may not read are left out (a version moved into another
        namespace keeps its old content there)."""
        self.get(memory_id, scope=scope)
        sub = self._backend.expand(
            [NodeRef(NodeLabel.MEMORY, memory_id)],
            [EdgeType.SUPERSEDES],
            direction="both",
            depth=10_000,
            limit=100_000,
        )
        versions = self._readable([n for n in sub.nodes if isinstance(n, Memory)], scope)
        return sorted(versions, key=lambda m: (m.valid_from or m.created_at, m.created_at, m.id))

    def current(self, memory_id: str, *, scope: Scope | str | None = None) -> Memory:
        """The newest active version in this memory's history."""
        versions = [m for m in self.history(memory_id, scope=scope) if m.status is Status.ACTIVE]
        if not versions:
            raise NotFound(f"memory {memory_id!r} has no active version")
        return versions[-1]

    def provenance(
        self, memory_id: str, *, depth: int = 10, scope: Scope | str | None = None
    ) -> Subgraph:
        """The DERIVED_FROM / SUPERSEDES tree below a memory (what it was made from); with
        ``scope``, without the memories it may not read (and their edges)."""
        self.get(memory_id, scope=scope)
        sub = self._backend.expand(
            [NodeRef(NodeLabel.MEMORY, memory_id)],
            [EdgeType.DERIVED_FROM, EdgeType.SUPERSEDES],
            direction="out",
            depth=depth,
        )
        if scope is None:
            return sub
        keep = {
            m.ref.key
            for m in self._readable([n for n in sub.nodes if isinstance(n, Memory)], scope)
        }
        return Subgraph(
            nodes=tuple(n for n in sub.nodes if n.ref.key in keep),
            edges=tuple(e for e in sub.edges if e.src.key in keep and e.dst.key in keep),
        )

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        agent_id: str | Sequence[str] | None = None,
        run_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        category: str | Sequence[str] | None = None,
        tier: str | Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        as_of: datetime | None = None,
        status: str | Sequence[str] | None = "active",
        touch: bool = True,
        scope: Scope | str | None = None,
        config: RecallConfig | str | None = None,
        user_id: str | None = None,
        min_relevance: float | None = None,
        tiers: str | Sequence[str] | None = None,
    ) -> builtins.list[RecallResult]:
        """The ``k`` memories most relevant to ``query``, best first, each with its score
        breakdown (hybrid BM25 + vector + graph recall, see :mod:`graphmem.retrieval`).

        Filters narrow the candidates before ranking; superseded and archived memories are
        left out unless ``status`` says otherwise, and ``as_of`` recalls what was valid at
        that time. ``scope`` (a :class:`~graphmem.scoping.Scope`, or an agent id for its
        default scope) limits recall to what that agent may read; without it recall is
        unscoped. ``config`` is a :class:`~graphmem.retrieval.RecallConfig` or preset name.
        ``min_relevance`` drops results scoring below it (default: the config's). With
        ``scope``, the asking agent's own memories gain the config's ``personal_boost``.
        ``tiers`` (``fleeting``, ``short_term``, ``long_term``) limits the tiers searched;
        ``fleeting`` adds the matching notes of the scratchpad of ``run_id`` (the process's
        without one), first, with ``metadata.key`` — matched by the config's
        ``fleeting_match``.
        """
        fleeting: builtins.list[RecallResult] = []
        if tiers is not None:
            names = [tiers] if isinstance(tiers, str) else builtins.list(tiers)
            unknown = sorted({str(t) for t in names} - {"fleeting", *(t.value for t in Tier)})
            if unknown or not names:
                raise InvalidInput(
                    f"tiers are fleeting, short_term, long_term; got {unknown or 'none'}"
                )
            if tier is not None:
                raise InvalidInput("give tier or tiers, not both")
            if "fleeting" in names:
                fleeting = self._fleeting(query, k, run_id, config)
            tier = [str(t) for t in names if t != "fleeting"]
            if not tier:
                return fleeting
        flt = self._recall_filter(
            agent_id=agent_id,
            run_id=run_id,
            namespace=namespace,
            category=category,
            tier=tier,
            tags=tags,
            since=since,
            until=until,
            as_of=as_of,
            status=status,
            scope=scope,
            user_id=user_id,
        )
        asker = scope.agent_id if isinstance(scope, Scope) else scope
        stored = self._retriever().recall(
            query,
            k=k,
            filter=flt,
            config=config,
            touch=touch,
            min_relevance=min_relevance,
            asking_agent=asker,
        )
        if not fleeting:
            return stored
        top = max([1.0] + [r.score for r in stored])
        fleeting = [r.model_copy(update={"score": top}) for r in fleeting]
        return (fleeting + stored)[:k]

    def _fleeting(
        self,
        query: str,
        k: int,
        run_id: str | Sequence[str] | None,
        config: RecallConfig | str | None,
    ) -> builtins.list[RecallResult]:
        """Scratchpad notes matching ``query`` as recall results (never persisted)."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string")
        if isinstance(config, str):
            config = RecallConfig.preset(config)
        cfg = config or getattr(self.settings, "recall", None) or RecallConfig()
        runs = [run_id] if run_id is None or isinstance(run_id, str) else builtins.list(run_id)
        out = []
        for run in runs:
            pad = self.lifecycle.scratchpad(run)
            for key, note in pad.recall(query, k, match=cfg.fleeting_match):
                text = note if isinstance(note, str) else canonical_json(note)
                meta: dict[str, Any] = {"tier": "fleeting", "key": key}
                if not isinstance(note, str):
                    meta[CONTENT_JSON_KEY] = True
                m = Memory(
                    id=f"fleeting-{run or ''}-{key}",
                    content=text,
                    run_id=run,
                    tier=Tier.SHORT_TERM,
                    metadata=meta,
                    created_at=self._clock(),
                )
                out.append(RecallResult(memory=m, score=1.0, breakdown={"fleeting": 1.0}))
        return out[:k]

    def relevance(self, memory: Memory, *, now: datetime | None = None) -> float:
        """The standing of ``memory`` at ``now`` (default: this store's clock) under the
        active profile's scoring strategy — recency, frequency, importance and decay
        combined as the profile defines them; no query involved."""
        if not isinstance(memory, Memory):
            raise InvalidInput(f"relevance takes a Memory, not {type(memory).__name__}")
        recall_config = getattr(self.settings, "recall", None)
        cfg = recall_config if isinstance(recall_config, RecallConfig) else RecallConfig()
        return cfg.strategy.relevance(memory, now or self._clock())

    def context(
        self,
        query: str,
        *,
        max_tokens: int = 2000,
        k: int = 50,
        policies: Sequence[str] | None = None,
        config: RecallConfig | str | None = None,
        touch: bool = True,
        **filters: Any,
    ) -> str:
        """Recalled memories as one text block for a prompt, within ``max_tokens``.

        Every memory is fenced as untrusted data (content that tries to break the fence is
        neutralised); the organisation's core policies lead the block (``policies``
        overrides them; ``[]`` for none). ``filters`` are those of :meth:`recall`. An empty
        ``query`` gives the query-less :meth:`context_window`.
        """
        if isinstance(query, str) and not query.strip():
            return self.context_window(max_tokens, k=k, policies=policies, touch=touch, **filters)
        flt = self._recall_filter(**filters)
        if policies is None:
            policies = self.org.core_policies()
        window = self._retriever().context_window(
            query,
            max_tokens=max_tokens,
            k=k,
            filter=flt,
            policies=policies,
            config=config,
            touch=touch,
        )
        return window.text

    def context_window(
        self,
        max_tokens: int = 2000,
        *,
        k: int = 50,
        policies: Sequence[str] | None = None,
        touch: bool = True,
        **filters: Any,
    ) -> str:
        """What matters most now, with no query: the ``k`` most relevant memories of the
        filter (importance and use, decayed since the last access — the lifecycle's
        :func:`~graphmem.lifecycle.relevance`) among its newest, fenced and packed into
        ``max_tokens`` like :meth:`context`. ``filters`` are those of :meth:`recall`."""
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
            raise InvalidInput("k must be an int in 1..1000")
        flt = self._recall_filter(**filters)
        if policies is None:
            policies = self.org.core_policies()
        now = self._clock()
        decay = self.lifecycle.config.decay
        pool: builtins.list[Memory] = self._backend.match(  # type: ignore[assignment]
            flt, limit=max(10 * k, 500), order_by="created_at", descending=True
        )
        scored = sorted(
            ((relevance(m, now, decay), m) for m in pool), key=lambda sm: (-sm[0], sm[1].id)
        )[:k]
        results = [
            RecallResult(memory=m, score=s, breakdown={"relevance": s, "score": s})
            for s, m in scored
        ]
        window = self._retriever().context_window(
            "",
            max_tokens=max_tokens,
            filter=flt,
            policies=policies,
            touch=touch,
            results=results,
        )
        return window.text

    def context_messages(
        self,
        query: str = "",
        *,
        run_id: str | None = None,
        system: str | None = None,
        max_events: int = 20,
        max_tokens: int = 2000,
        **options: Any,
    ) -> builtins.list[dict[str, str]]:
        """The context as role-tagged chat messages: one ``system`` message (``system``,
        then the fenced memory block of :meth:`context`), the conversation of ``run_id``
        (its last ``max_events`` user messages and agent responses as ``user`` /
        ``assistant``) and ``query`` as the last ``user`` message. ``options`` go to
        :meth:`context` (filters, ``k``, ``policies`` ...)."""
        block = self.context(query, max_tokens=max_tokens, **options)
        head = "\n\n".join(p for p in (system, block) if p)
        messages = [{"role": "system", "content": head}] if head else []
        if run_id is not None and max_events > 0:
            roles = {"user_message": "user", "agent_response": "assistant"}
            events = self.events(run_id, event_types=builtins.list(roles), status="active")
            messages += [
                {"role": roles[e.event_type or ""], "content": e.content}
                for e in events[-max_events:]
            ]
        if query.strip() and (
            len(messages) < 2 or messages[-1] != {"role": "user", "content": query}
        ):
            messages.append({"role": "user", "content": query})
        return messages

    def scratchpad(self, run_id: str | None = None) -> Scratchpad:
        """The fleeting tier of a run (or of the process): keyed notes with recall and
        forget, in process only, cleared by :meth:`on_turn_end`."""
        return self.lifecycle.scratchpad(run_id)

    def _retriever(self) -> Retriever:
        self._settle_vectors()
        recall_config = getattr(self.settings, "recall", None)
        return Retriever(
            self._backend,
            self._embedder,
            clock=self._clock,
            config=recall_config if isinstance(recall_config, RecallConfig) else None,
        )

    def _settle_vectors(self) -> None:
        """Read your own writes, within reason: before a recall, wait briefly for the
        vectors of a small backlog this handle wrote (an agent that remembers, then asks),
        never for a bulk ingest (those memories are found lexically meanwhile)."""
        if self._vectorizer is None or not self._wrote_unvectored:
            return
        pending = self._backend.missing_vectors(SETTLE_MAX_PENDING + 1)  # type: ignore[attr-defined]
        if not pending:
            self._wrote_unvectored = False
        elif len(pending) <= SETTLE_MAX_PENDING:
            try:
                self._vectorizer.flush(SETTLE_SECONDS)
            except Exception as e:  # recall goes on without them; the worker retries
                log.debug("recall without waiting for pending vectors: %s", e)

    def _recall_filter(
        self,
        *,
        scope: Scope | str | None = None,
        status: str | Sequence[str] | None = "active",
        user_id: str | None = None,
        **kw: Any,
    ) -> Filter:
        if user_id is not None:
            kw["metadata"] = {**(kw.get("metadata") or {}), "user_id": user_id}
        flt = Filter.for_memories(status=status, **kw)
        return self.namespaces.filter(scope, flt) if scope is not None else flt

    # -- agents and runs -------------------------------------------------------------

    def register_agent(
        self,
        agent_id: str,
        *,
        name: str | None = None,
        seniority: str | None = None,
        autonomy: int | None = None,
        kind: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Agent:
        """Create or update an agent (fields not given keep their stored values)."""
        found = self._backend.get(NodeLabel.AGENT, [agent_id])
        base: dict[str, Any] = found[0].model_dump() if found else {"id": agent_id}
        for k, v in (
            ("name", name),
            ("seniority", seniority),
            ("autonomy", autonomy),
            ("kind", kind),
            ("metadata", metadata),
        ):
            if v is not None:
                base[k] = v
        agent: Agent = validated(Agent, base)
        self.writes.put([agent])
        return agent

    def get_agent(self, agent_id: str) -> Agent:
        found = self._backend.get(NodeLabel.AGENT, [agent_id])
        if not found:
            raise NotFound(f"no agent {agent_id!r}")
        return found[0]  # type: ignore[return-value]

    def list_agents(self, *, limit: int | None = None, offset: int = 0) -> builtins.list[Agent]:
        return self._backend.match(  # type: ignore[return-value]
            Filter(label=NodeLabel.AGENT), limit=limit, offset=offset
        )

    def start_run(
        self,
        agent_id: str = "default",
        *,
        run_id: str | None = None,
        user_id: str | None = None,
        app_name: str | None = None,
        namespace: str = "default",
        started_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Run:
        """Start a run (an agent session). Conflict if ``run_id`` already exists."""
        data: dict[str, Any] = {
            "agent_id": agent_id,
            "user_id": user_id,
            "app_name": app_name,
            "namespace": namespace,
            "started_at": started_at or self._clock(),
            "metadata": metadata,
        }
        if run_id is not None:
            data["id"] = run_id
        run: Run = validated(Run, {k: v for k, v in data.items() if v is not None})
        try:
            self.writes.put([run], expect=[Expect(run.ref, exists=False)])
        except Conflict as e:
            raise Conflict(f"run {run.id!r} already exists") from e
        self.runs.enforce()
        return run

    def get_run(self, run_id: str) -> Run:
        found = self._backend.get(NodeLabel.RUN, [run_id])
        if not found:
            raise NotFound(f"no run {run_id!r}")
        return found[0]  # type: ignore[return-value]

    def end_run(self, run_id: str, *, status: RunStatus | str = RunStatus.COMPLETED) -> Run:
        """Mark a run ended (completed by default)."""
        try:
            status = RunStatus(status)
        except ValueError as e:
            raise InvalidInput(
                f"unknown run status {status!r}; one of {[s.value for s in RunStatus]}"
            ) from e
        for _attempt in range(8):
            old = self.get_run(run_id)
            run = old.evolve(status=status, ended_at=self._clock())
            try:
                self.writes.put(
                    [run],
                    expect=[
                        Expect(
                            old.ref, props={"status": old.status, "event_count": old.event_count}
                        )
                    ],
                )
                return run
            except Conflict:
                continue  # an event was appended meanwhile: end the run as it is now
        raise Conflict(f"run {run_id!r} keeps changing; try again")

    def list_runs(
        self,
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        status: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
    ) -> builtins.list[Run]:
        """Runs, newest first."""
        equals = {
            k: v
            for k, v in (("agent_id", agent_id), ("user_id", user_id), ("status", status))
            if v is not None
        }
        flt = validated(Filter, {"label": NodeLabel.RUN, "equals": equals})
        return self._backend.match(  # type: ignore[return-value]
            flt, limit=limit, offset=offset, order_by="started_at", descending=True
        )

    def add_event(
        self,
        run_id: str,
        event_type: str,
        content: Any,
        *,
        agent_id: str | None = None,
        importance: float | None = None,
        tier: Tier | str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> Memory:
        """Append an episodic event to a run (started on the fly if it does not exist).

        Events of a run are ordered: each has ``seq`` (0, 1, 2 …) and the previous event
        links to it with ``(earlier)-[:NEXT]->(later)``. ``content`` is text or any JSON
        value (stored as its canonical JSON text, searchable; ``Memory.value`` gives it
        back). ``importance``/``tier`` not given
        come from the lifecycle's scorer and classification rules.
        """
        return self.add_events(
            run_id,
            [
                {
                    "event_type": event_type,
                    "content": content,
                    "agent_id": agent_id,
                    "importance": importance,
                    "tier": tier,
                    "tags": tags,
                    "metadata": metadata,
                    "created_at": created_at,
                }
            ],
        )[0]

    def add_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> builtins.list[Memory]:
        """Append several events to a run in one atomic write (see :meth:`add_event`)."""
        now = self._clock()
        with self._run_lock:  # one appender per handle; other handles are caught below
            for attempt in range(32):
                try:
                    memories = self._append_events(run_id, events, now)
                    break
                except Conflict:
                    # another handle or process appended to this run since it was read
                    if attempt == 31:
                        raise
        self.runs.enforce(run_id)
        return memories

    def _append_events(
        self, run_id: str, events: Sequence[Mapping[str, Any]], now: datetime
    ) -> builtins.list[Memory]:
        found = self._backend.get(NodeLabel.RUN, [run_id])
        run: Run = (
            found[0]
            if found
            else validated(  # type: ignore[assignment]
                Run,
                {
                    "id": run_id,
                    "agent_id": (events[0].get("agent_id") if events else None) or "default",
                    "started_at": now,
                },
            )
        )
        memories: builtins.list[Memory] = []
        for i, ev in enumerate(events):
            if not isinstance(ev, Mapping):
                raise InvalidInput(f"event {i}: expected a mapping")
            data = {k: v for k, v in ev.items() if v is not None}
            if "content" in ev and not isinstance(ev["content"], str):
                try:
                    data["content"] = canonical_json(ev["content"])
                except InvalidInput as e:
                    raise InvalidInput(f"event {i}: content: {e}") from None
                meta = data.get("metadata")
                data["metadata"] = {
                    **(meta if isinstance(meta, Mapping) else {}),
                    CONTENT_JSON_KEY: True,
                }
            data.setdefault("agent_id", run.agent_id)
            data.setdefault("namespace", run.namespace)
            data.setdefault("created_at", now)
            data.setdefault("category", Category.EPISODIC)
            data["run_id"] = run.id
            data.pop("seq", None)  # the write path gives each its place in the run
            try:
                memories.append(validated(Memory, self.lifecycle.classify(data)))
            except InvalidInput as e:
                raise InvalidInput(f"event {i}: {e}") from e
        # the write path places them in the run (starting the run when it is new)
        return self.writes.create(memories, chain="events")

    def events(
        self,
        run_id: str,
        *,
        event_types: Sequence[str] | None = None,
        limit: int | None = None,
        status: str | Sequence[str] | None = None,
        scope: Scope | str | None = None,
    ) -> builtins.list[Memory]:
        """A run's events in order (optionally only some types; with ``scope``, only
        those it may read)."""
        flt = self._recall_filter(run_id=run_id, event_type=event_types, status=status, scope=scope)
        events: builtins.list[Memory] = self._backend.match(flt, order_by="seq")  # type: ignore[assignment]
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise InvalidInput(f"limit must be an int or None, got {type(limit).__name__}")
        return events if limit is None else events[-limit:] if limit > 0 else []

    # -- whole-store operations ------------------------------------------------------

    @property
    def graph(self) -> nx.MultiDiGraph:
        """The memory graph as networkx (read-only). Live for the embedded backend; a
        snapshot built from a full scan for server backends."""
        if isinstance(self._backend, _HasGraphView):
            return self._backend.graph
        g = nx.MultiDiGraph()
        for nodes, edges in self._backend.scan():
            for n in nodes:
                props = n.to_props()
                props.pop("embedding", None)
                g.add_node(n.ref.key, label=n.label.value, **props)
            for e in edges:
                g.add_edge(e.src.key, e.dst.key, key=e.type.value, type=e.type.value, **e.props)
        frozen: nx.MultiDiGraph = nx.freeze(g)
        return frozen

    def stats(self) -> dict[str, Any]:
        """Counts per label/edge type, memories per status and tier, and the store's size."""
        s = self._backend.stats()
        by_status = {st.value: self.count(status=st.value) for st in Status}
        by_tier = {t.value: self.count(tier=t.value, status=None) for t in Tier}
        return {
            "backend": s.backend,
            "location": s.location,
            "file_bytes": s.file_bytes,
            "nodes": s.nodes,
            "edges": s.edges,
            "memories_by_status": by_status,
            "memories_by_tier": by_tier,
            "embedding_dim": s.embedding_dim,
        }

    def export(self, dest: str | Path | IO[str]) -> ImportReport:
        """Write the whole graph as JSON lines (a header line, nodes, then edges)."""
        if isinstance(dest, str | Path):
            with open(dest, "w", encoding="utf-8") as f:
                return self._export(f)
        if not callable(getattr(dest, "write", None)):
            raise InvalidInput(
                f"export writes to a path or a text file object, not {type(dest).__name__}"
            )
        return self._export(dest)

    def _export(self, f: IO[str]) -> ImportReport:
        f.write(json.dumps({"format": EXPORT_FORMAT, "version": EXPORT_VERSION}) + "\n")
        n_nodes = n_edges = 0
        for nodes, edges in self._backend.scan():
            for n in nodes:
                f.write(
                    json.dumps({"node": n.label.value, "props": n.to_props()}, default=_jsonable)
                    + "\n"
                )
                n_nodes += 1
            for e in edges:
                f.write(
                    json.dumps(
                        {
                            "edge": e.type.value,
                            "src": list(e.src),
                            "dst": list(e.dst),
                            "props": e.props,
                        },
                        default=_jsonable,
                    )
                    + "\n"
                )
                n_edges += 1
        return ImportReport(nodes=n_nodes, edges=n_edges)

    def import_(self, src: str | Path | IO[str], *, batch_size: int = 2000) -> ImportReport:
        """Load an export. Every line is validated before anything is written (a bad line
        raises InvalidInput naming it); existing nodes with the same ids are replaced."""
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InvalidInput("batch_size must be a positive int")
        if isinstance(src, str | Path):
            with open(src, encoding="utf-8") as f:
                return self._import(f, batch_size)
        if not hasattr(src, "__iter__"):
            raise InvalidInput(
                f"import reads a path or a text file object, not {type(src).__name__}"
            )
        return self._import(src, batch_size)

    def _import(self, f: IO[str], batch_size: int) -> ImportReport:
        nodes: builtins.list[GraphNode] = []
        edges: builtins.list[Edge] = []
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if lineno == 1:
                    if rec.get("format") != EXPORT_FORMAT:
                        raise InvalidInput("not a graphmem export (missing header line)")
                    if rec.get("version") != EXPORT_VERSION:
                        raise InvalidInput(f"unsupported export version {rec.get('version')}")
                    continue
                if "node" in rec:
                    nodes.append(node_model(rec["node"]).from_props(_revive(rec["props"])))
                elif "edge" in rec:
                    edges.append(
                        Edge.from_row(
                            {
                                "type": rec["edge"],
                                "src_label": rec["src"][0],
                                "src": rec["src"][1],
                                "dst_label": rec["dst"][0],
                                "dst": rec["dst"][1],
                                "props": _revive(rec.get("props") or {}),
                            }
                        )
                    )
                else:
                    raise InvalidInput("line is neither a node nor an edge")
            except (ValueError, KeyError, TypeError, IndexError) as e:
                raise InvalidInput(f"import line {lineno}: {e}") from e
        node_keys = {n.ref.key for n in nodes}
        for edge in edges:
            for end in (edge.src, edge.dst):
                if end.key not in node_keys and not self._backend.get(end.label, [end.id]):
                    raise InvalidInput(f"edge {edge.type.value} refers to missing node {end.key}")
        dims = {len(n.embedding) for n in nodes if isinstance(n, Memory) and n.embedding}
        if len(dims) > 1:
            raise InvalidInput(f"the export mixes embedding dimensions {sorted(dims)}")
        if dims:
            self._backend.ensure_schema(embedding_dim=dims.pop())
        for i in range(0, len(nodes), batch_size):
            self.writes.load(nodes[i : i + batch_size])
        for i in range(0, len(edges), batch_size):
            self.writes.load((), edges[i : i + batch_size])
        return ImportReport(nodes=len(nodes), edges=len(edges))

    # --- lifecycle & consolidation (issue 5) -----------------------------------------
    # thin delegates; the logic lives in lifecycle.py, consolidation.py and llm.py

    @property
    def lifecycle(self) -> Lifecycle:
        """Tiers, hooks and maintenance (created on first use from ``settings.lifecycle``)."""
        lc: Lifecycle | None = getattr(self, "_lifecycle_obj", None)
        if lc is None:
            with self._lifecycle_lock:
                lc = getattr(self, "_lifecycle_obj", None)
                if lc is None:
                    lc = Lifecycle(
                        self.writes,
                        config=config_from_settings(self.settings),
                        llm=self.llm,
                        clock=self._clock,
                    )
                    self._lifecycle_obj = lc
        return lc

    def configure_lifecycle(self, config: LifecycleConfig) -> Lifecycle:
        """Replace the lifecycle thresholds (a new :class:`Lifecycle`; scratchpads reset)."""
        lc = Lifecycle(self.writes, config=config, llm=self.llm, clock=self._clock)
        self._lifecycle_obj = lc
        return lc

    def _embed_texts(self, texts: builtins.list[str]) -> Any:
        assert self._embedder is not None
        return self._embedder.embed(texts)

    def _after_write(self, done: Committed) -> None:
        # lifecycle work after a write: count short-term writes, refresh a run's
        # short-term tier every N writes (archival only, never an LLM call)
        if done.created:
            self.lifecycle.on_write(done.created)

    def _pass_llm(self, llm: LLM | None) -> LLM:
        chosen = llm if llm is not None else self.llm
        return chosen if chosen is not None else OfflineLLM()

    def consolidate(
        self,
        *,
        dry_run: bool = False,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        config: ConsolidationConfig | None = None,
        llm: LLM | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> ConsolidationReport:
        """Merge near-duplicate memories (token Jaccard) into new memories that are
        DERIVED_FROM and SUPERSEDE their sources; ``dry_run=True`` only reports the plan.
        Merged content comes from ``llm`` (or the configured LLM) for similar groups, else
        from a deterministic merge. See :func:`graphmem.consolidation.consolidate`."""
        return consolidate_memories(
            self.writes,
            agent_id=agent_id,
            namespace=namespace,
            config=config or self.lifecycle.config.consolidation,
            llm=llm if llm is not None else self.llm,
            dry_run=dry_run,
            now=self._clock(),
            progress=progress,
        )

    def unmerge(self, merged_id: str, *, dry_run: bool = False) -> UnmergeReport:
        """Undo a consolidation merge: restore its sources and delete the merged node."""
        return unmerge_memories(self.writes, merged_id, dry_run=dry_run, now=self._clock())

    def summarize(
        self,
        memory_ids: Sequence[str] | None = None,
        *,
        run_id: str | None = None,
        llm: LLM | None = None,
        dry_run: bool = False,
    ) -> Memory:
        """Write a ``summary`` memory DERIVED_FROM the given memories, or from the active
        memories of ``run_id``; returns it (unwritten on a dry run)."""
        if (memory_ids is None) == (run_id is None):
            raise InvalidInput("give either memory_ids or run_id")
        if memory_ids is not None:
            sources = self.get_many(memory_ids)
            if len(sources) != len(set(memory_ids)):
                raise NotFound("some memories to summarise do not exist")
        else:
            sources = [
                m
                for m in iter_memories(
                    self._backend, Filter.for_memories(run_id=run_id, status="active")
                )
                if m.category is not Category.SUMMARY
            ]
            if not sources:
                raise NotFound(f"run {run_id!r} has no active memories to summarise")
        return summarize_into_memory(
            self.writes,
            self._pass_llm(llm),
            sources,
            purpose="run" if run_id is not None else "memories",
            run_id=run_id,
            dry_run=dry_run,
            now=self._clock(),
        )

    def improve(
        self,
        memory_ids: Sequence[str] | None = None,
        *,
        llm: LLM | None = None,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        limit: int = 200,
        dry_run: bool = False,
    ) -> ImproveReport:
        """Rewrite memories for precision and resolve contradictions; every change is a
        new version with DERIVED_FROM / SUPERSEDES provenance. Without ``memory_ids`` the
        ``limit`` newest active memories of the scope are improved together."""
        if memory_ids is not None:
            memories = self.get_many(memory_ids)
        else:
            memories = self.list(agent_id=agent_id, namespace=namespace, limit=limit)
        return improve_memories(
            self.writes,
            self._pass_llm(llm),
            memories,
            dry_run=dry_run,
            now=self._clock(),
        )

    def extract_facts(
        self,
        turn: str,
        *,
        agent_id: str = "default",
        namespace: str = "default",
        run_id: str | None = None,
        speaker: str = "user",
        source_ids: Sequence[str] = (),
        llm: LLM | None = None,
        dry_run: bool = False,
    ) -> FactsReport:
        """Store the durable facts of a conversation turn as long-term memories
        DERIVED_FROM ``source_ids`` (nothing when the turn has none)."""
        return store_facts(
            self.writes,
            self._pass_llm(llm),
            turn,
            agent_id=agent_id,
            namespace=namespace,
            run_id=run_id,
            speaker=speaker,
            source_ids=source_ids,
            dry_run=dry_run,
            now=self._clock(),
        )

    def entities(
        self, *, type: str | None = None, limit: int = 100, **filters: Any
    ) -> builtins.list[Entity]:
        """The entities mentioned by the memories the filters (those of :meth:`recall`,
        ``scope`` included) admit, most mentioned first; ``type`` narrows to person,
        place, organisation, event, object or other."""
        return knowledge.entities(
            self._backend, self._recall_filter(**filters), type=type, limit=limit
        )

    def about(self, name: str, *, limit: int = 200, **filters: Any) -> knowledge.About:
        """What the store says about an entity (by name or alias): the memories that
        mention it, oldest first, and the relations they record. NotFound when no memory
        the filters admit mentions it."""
        return knowledge.about(self._backend, name, self._recall_filter(**filters), limit=limit)

    def reflect(
        self, question: str, *, k: int = 10, llm: LLM | None = None, **recall_filters: Any
    ) -> Reflection:
        """Answer ``question`` from the memories recalled for it, citing their ids."""
        hits = self.recall(question, k=k, **recall_filters)
        return reflect_on(self._pass_llm(llm), question, [h.memory for h in hits])

    def maintain(
        self,
        *,
        dry_run: bool = False,
        hard_delete: bool = False,
        agent_id: str | Sequence[str] | None = None,
        namespace: str | Sequence[str] | None = None,
        steps: Sequence[str] = Lifecycle.STEPS,
    ) -> MaintenanceReport:
        """Expiry, retention, decay, staleness, per-agent limits and consolidation; removal
        is archival unless ``hard_delete``. See :meth:`Lifecycle.maintain`."""
        return self.lifecycle.maintain(
            dry_run=dry_run,
            hard_delete=hard_delete,
            agent_id=agent_id,
            namespace=namespace,
            steps=steps,
        )

    def archive(
        self,
        memory_ids: Sequence[str],
        *,
        reason: str = "manual",
        dry_run: bool = False,
        hard_delete: bool = False,
    ) -> MaintenanceReport:
        """Take memories out of recall (status archived; ``restore`` brings them back)."""
        return self.lifecycle.archive(
            memory_ids, reason=reason, dry_run=dry_run, hard_delete=hard_delete
        )

    def restore(
        self, memory_ids: Sequence[str], *, pin: bool = False, dry_run: bool = False
    ) -> MaintenanceReport:
        """Bring archived memories back into recall (``pin`` exempts them from maintenance)."""
        return self.lifecycle.restore(memory_ids, pin=pin, dry_run=dry_run)

    def on_turn_end(self, run_id: str | None = None, **options: Any) -> TurnReport:
        """Turn hook: clear the fleeting scratchpad (see :meth:`Lifecycle.on_turn_end`)."""
        return self.lifecycle.on_turn_end(run_id, **options)

    def on_run_end(self, run_id: str, *, dry_run: bool = False) -> MaintenanceReport:
        """Run hook: promote and summarise the run's short-term memories."""
        return self.lifecycle.on_run_end(run_id, dry_run=dry_run)

    def on_idle(self, *, dry_run: bool = False, **options: Any) -> MaintenanceReport:
        """Idle hook: the full maintenance cycle."""
        return self.lifecycle.on_idle(dry_run=dry_run, **options)

    # --- org, scoping, runs & log (issue 6) ------------------------------------------
    # thin delegates; the logic lives in org.py, scoping.py, runs.py and eventlog.py

    def share_namespace(
        self, namespace: str, *, owner: str, members: Sequence[str] = ()
    ) -> Namespace:
        """Create a namespace shared by ``owner`` and ``members`` (see graphmem.scoping)."""
        return self.namespaces.create(namespace, owner=owner, members=members)

    def get_or_create_run(
        self,
        run_id: str,
        *,
        agent_id: str = "default",
        user_id: str | None = None,
        app_name: str | None = None,
        namespace: str = "default",
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[Run, bool]:
        """The run ``run_id`` (and False), or a new one started now (and True)."""
        return self.runs.get_or_create(
            run_id,
            agent_id=agent_id,
            user_id=user_id,
            app_name=app_name,
            namespace=namespace,
            metadata=metadata,
        )

    def delete_run(self, run_id: str, *, cascade: bool = True) -> DeleteRunReport:
        """Delete a run, its memories (and, with ``cascade``, what was derived from them)
        and its log entries."""
        return self.runs.delete(run_id, cascade=cascade)

    def cleanup_runs(
        self, older_than_hours: float, *, archive: bool = False, dry_run: bool = False
    ) -> CleanupReport:
        """Delete (or archive) runs inactive for more than ``older_than_hours``."""
        return self.runs.cleanup(older_than_hours, archive=archive, dry_run=dry_run)

    def run_stats(self, *, agent_id: str | None = None, user_id: str | None = None) -> RunStats:
        """Runs per status, events, and the average number of events per run."""
        return self.runs.stats(agent_id=agent_id, user_id=user_id)

    def conversation_context(self, run_id: str, max_events: int = 20) -> str:
        """The run's latest conversational events as "User: …" / "Assistant: …" lines."""
        return self.runs.conversation_context(run_id, max_events)

    def log(
        self,
        agent_id: str,
        event_type: str,
        payload: Any = None,
        *,
        run_id: str | None = None,
        step: int | None = None,
        parent: str | None = None,
    ) -> LogEntry:
        """Append to the orchestration log (large payloads are stored once, by SHA-256)."""
        return self.eventlog.log(
            agent_id, event_type, payload, run_id=run_id, step=step, parent=parent
        )

    def tail(
        self,
        n: int = 20,
        *,
        run_id: str | None = None,
        agent_id: str | None = None,
        event_type: str | None = None,
    ) -> builtins.list[LogRecord]:
        """The newest ``n`` orchestration-log entries, oldest first, payloads decoded."""
        return self.eventlog.tail(n, run_id=run_id, agent_id=agent_id, event_type=event_type)

    def __repr__(self) -> str:
        return f"GraphMemory({self._backend!r})"


def _background_vectors(mode: str, embedder: Any, backend: GraphBackend) -> bool:
    if "vectors" not in getattr(backend, "capabilities", frozenset()):
        return False
    if mode == "auto":
        from graphmem.embeddings import HashEmbedder  # no model, microseconds per text

        return not isinstance(embedder, HashEmbedder)
    return mode == "background"


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$dt": value.isoformat()}
    raise TypeError(f"cannot export {type(value).__name__}")


def _revive(props: dict[str, Any]) -> dict[str, Any]:
    return {
        k: datetime.fromisoformat(v["$dt"]) if isinstance(v, dict) and "$dt" in v else v
        for k, v in props.items()
    }
