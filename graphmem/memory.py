"""GraphMemory: the face of the house — open/close, the core verbs, and the sub-objects
that own everything else.

>>> from graphmem import GraphMemory
>>> with GraphMemory.open("memory://", embedder=None) as mem:
...     m = mem.remember("Alice prefers tea", agent_id="assistant", tags=["prefs"])
...     [r.memory.content for r in mem.recall("tea", agent_id="assistant")]
['Alice prefers tea']

The core verbs: :meth:`~GraphMemory.remember`, :meth:`~GraphMemory.remember_many`,
:meth:`~GraphMemory.recall`, :meth:`~GraphMemory.context`, :meth:`~GraphMemory.get`,
:meth:`~GraphMemory.update`, :meth:`~GraphMemory.forget`, :meth:`~GraphMemory.history`,
:meth:`~GraphMemory.list`, :meth:`~GraphMemory.count`, :meth:`~GraphMemory.stats`.
Everything else lives whole on a sub-object:

==================  ===========================================================
``mem.runs``        sessions and their events (:class:`graphmem.runs.Runs`)
``mem.agents``      register / get / list agents (:class:`graphmem.agents.Agents`)
``mem.org``         organisation memory (:class:`graphmem.org.OrgMemory`)
``mem.namespaces``  shared namespaces (:class:`graphmem.scoping.Namespaces`)
``mem.lifecycle``   maintenance, passes and hooks (:class:`graphmem.lifecycle.Lifecycle`)
``mem.knowledge``   entities and what is known about one (:class:`graphmem.knowledge.Knowledge`)
``mem.log``         the orchestration log (:class:`graphmem.eventlog.EventLog`)
``mem.vectors``     wait for background vectors, reindex (:class:`graphmem.reindex.Vectors`)
``mem.transfer``    export / import the whole store (:class:`graphmem.transfer.Transfer`)
``mem.writes``      the write path and its low-level verbs (:class:`graphmem.verbs.MemoryWrites`)
==================  ===========================================================
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Unpack, overload

from graphmem.agents import Agents
from graphmem.backends import open_backend
from graphmem.backends.base import GraphBackend
from graphmem.boundary import guard, guard_face, unchecked
from graphmem.config import RecallConfig, Settings, VectorMode
from graphmem.config.profiles import with_profile
from graphmem.errors import Conflict, InvalidInput, NotFound
from graphmem.eventlog import EventLog
from graphmem.knowledge import Knowledge, KnowledgeIndexer
from graphmem.lifecycle import Lifecycle
from graphmem.llm import LLM
from graphmem.models import (
    Category,
    EdgeType,
    Filter,
    Memory,
    NodeLabel,
    NodeRef,
    RecallResult,
    Run,
    Status,
    Tier,
    Visibility,
    audience_key,
    utcnow,
    validated,
)
from graphmem.org import OrgMemory
from graphmem.protocol import (
    ContextFormat,
    ContextOptions,
    ForgetReport,
    ImportReport,
    MemoryAPI,
    MemoryFilters,
    ReadFilters,
)
from graphmem.reconcile import ReconcileResult
from graphmem.reindex import Vectors, check_embedder
from graphmem.retrieval import Retriever
from graphmem.retrieval.prompt import chat_messages, fleeting_results, relevant_now, split_tiers
from graphmem.runs import Runs
from graphmem.scoping import Namespaces, Scope
from graphmem.transfer import Transfer, graph_snapshot
from graphmem.verbs import MemoryWrites
from graphmem.writes import Committed

if TYPE_CHECKING:
    import networkx as nx

    from graphmem.lifecycle import MaintenanceScheduler

#: the fields update() may change (the rest belong to the write path)
_UPDATABLE = frozenset(
    "importance confidence tags metadata category tier expires_at valid_from namespace "
    "event_type visibility".split()
)

__all__ = ["ContextFormat", "ForgetReport", "GraphMemory", "ImportReport"]

log = logging.getLogger("graphmem.memory")


class GraphMemory(MemoryAPI):
    """Knowledge memory for agents over a :class:`GraphBackend`.

    Open one with :meth:`open`; use it as a context manager or call :meth:`close`.
    Thread-safe: the backends serialise access, and appends to a run are ordered.
    """

    runs: Runs
    agents: Agents
    org: OrgMemory
    namespaces: Namespaces
    lifecycle: Lifecycle
    knowledge: Knowledge
    log: EventLog
    vectors: Vectors
    transfer: Transfer
    writes: MemoryWrites

    def __init__(
        self,
        backend: GraphBackend,
        *,
        embedder: Any | None = None,
        llm: LLM | None = None,
        settings: Settings | None = None,
        clock: Callable[[], datetime] = utcnow,
        owns_backend: bool = True,
        vectors: VectorMode = "auto",
        knowledge: bool = False,
    ) -> None:
        if not isinstance(backend, GraphBackend):
            # a path or URL is the natural first guess; without this it failed at the
            # first write, deep inside, with an AttributeError
            hint = (
                f"; to open {str(backend)!r} use GraphMemory.open({str(backend)!r})"
                if isinstance(backend, str | os.PathLike)
                else "; to open a file or a server use GraphMemory.open(url)"
            )
            raise InvalidInput(
                f"GraphMemory(backend) takes a graph backend, not {type(backend).__name__}" + hint
            )
        self.settings = settings or Settings()
        self._backend = backend
        self._embedder = embedder
        self._recall: Retriever | None = None
        self._llm = llm
        self._clock = clock
        self._owns_backend = owns_backend
        self._closed = False
        cfg = self.settings
        #: the one write path: every state change of this store goes through it
        self.writes = MemoryWrites(
            backend,
            embed=embedder.embed if embedder is not None else None,
            clock=clock,
            reconcile_config=cfg.reconcile,
            llm=llm,
        )
        self.namespaces = Namespaces(backend, self.writes, clock=clock)
        # graphmem's own calls with the memories of a write (checked where they came in):
        # the face's argument check would walk each batch again
        self.writes.check_shared = unchecked(self.namespaces.check_writes)
        self.lifecycle = Lifecycle(
            self.writes,
            config=cfg.lifecycle,
            llm=llm,
            clock=clock,
            recall=self.recall,
            namespaces=self.namespaces,
        )
        self.writes.classify = self.lifecycle._classify
        self.writes.classify_columns = self.lifecycle._classify_columns
        self.org = OrgMemory(backend, self.writes, clock=clock, config=cfg.org)
        self.log = EventLog(
            backend,
            self.writes,
            clock=clock,
            dedup=cfg.log.dedup,
            dedup_min_chars=cfg.log.dedup_min_chars,
            inline_limit=cfg.log.inline_limit,
        )
        self.agents = Agents(backend, self.writes)
        self.runs = Runs(
            backend,
            self.writes,
            eventlog=self.log,
            lifecycle=self.lifecycle,
            namespaces=self.namespaces,
            limits=cfg.runs,
            clock=clock,
        )
        self.writes.add_hook(self._after_write)
        #: the knowledge layer (opt-in): entities and relations of every memory written,
        #: extracted with no model and no LLM after each commit (see graphmem.knowledge).
        #: Off by default: it did not move LoCoMo recall (benchmarks/RESULTS.md) and it is
        #: one more transaction per write.
        indexer = None
        if knowledge:
            indexer = KnowledgeIndexer(backend)
            indexer.attach(self.writes)
        self.knowledge = Knowledge(backend, self.namespaces.memory_filter, indexer)
        self.vectors = Vectors(backend, self.writes, embedder, mode=vectors)
        self.transfer = Transfer(backend, self.writes)
        self._sweeper: MaintenanceScheduler | None = None

    # -- opening and closing ----------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str] | None = None,
        *,
        auth: tuple[str, str] | None = None,
        database: str | None = None,
        embedder: Any | None = "auto",
        llm: LLM | None = None,
        settings: Settings | None = None,
        clock: Callable[[], datetime] = utcnow,
        vectors: VectorMode | None = None,
        knowledge: bool | None = None,
        profile: str | None = None,
        **backend_options: Any,
    ) -> GraphMemory:
        """Open a memory store by URL.

        ``url``: a file path, ``memory://``, or ``neo4j://host:7687`` (and the other
        neo4j/bolt schemes); ``auth`` ``(user, password)`` and ``database`` for Neo4j.
        Not given, they come from ``settings`` — by default :meth:`Settings.load`: the
        ``GRAPHMEM_URL`` / ``GRAPHMEM_USERNAME`` / ``GRAPHMEM_PASSWORD`` /
        ``GRAPHMEM_DATABASE`` variables (``NEO4J_URI`` / ``NEO4J_USER`` /
        ``NEO4J_PASSWORD`` / ``NEO4J_DATABASE`` as fallbacks), the file named by
        ``GRAPHMEM_CONFIG``, else the embedded store ``./graphmem.db``. The settings'
        ``store`` (or ``neo4j``) section gives the backend options; ``backend_options``
        given here win. ``embedder``: ``"auto"`` (sentence-transformers with the bundled
        offline model, falling back to a dependency-free embedder), ``None`` (no vectors),
        a model name, or an Embedder object. Nothing connects or loads a model here; that
        happens on first use.

        ``vectors`` (default ``settings.vectors.mode``): ``"background"`` acknowledges a
        write once it is durable and embeds it behind it (lexical and graph recall find it
        at once, vector recall when its vector is there; ``mem.vectors.wait()`` waits);
        ``"inline"`` embeds before the write; ``"auto"`` (default) is background for a
        model and inline for the hash embedder.
        Memories left without a vector (a crash, a store written with no embedder) are
        embedded in the background after opening.

        ``knowledge`` (default ``settings.knowledge.enabled``, off): extract entities and
        relations from every memory written (the knowledge layer, no model and no LLM), for
        ``mem.knowledge``; ``mem.knowledge.indexer.backfill`` indexes memories written
        before it was on.

        ``profile``: a named profile (:mod:`graphmem.config.profiles`: ``orka``, ``kaos``,
        ``synthorg``, ``openagentflow``, ``operator``; ``graphmem`` is the default) whose
        defaults fill what ``settings`` leave unset.
        """
        cfg = settings if settings is not None else Settings.load()
        if profile is not None:
            cfg = with_profile(cfg, profile)
        url = None if url is None else os.fspath(url)  # a pathlib.Path: its text
        url, options = cfg.connection(url, auth, database, backend_options)
        backend = open_backend(url, **options)
        if isinstance(embedder, str):
            from graphmem.embeddings import make_embedder

            embedder = make_embedder(embedder)
        try:
            mem = cls(
                backend,
                embedder=embedder,
                llm=llm,
                settings=cfg,
                clock=clock,
                vectors=vectors if vectors is not None else cfg.vectors.mode,
                knowledge=knowledge if knowledge is not None else cfg.knowledge.enabled,
            )
            backend.ensure_schema()
            if embedder is not None:  # a model of another dimension: say what to run
                check_embedder(backend, embedder)
                mem.vectors.check_model()  # same dimension, another model
            mem.vectors.resume()
            if mem.settings.maintenance.in_process:
                # the maintenance cycle without a server: stopped by close()
                mem._sweeper = mem.lifecycle.scheduled(mem.settings)
                if mem._sweeper is not None:
                    mem._sweeper.start()
        except BaseException:
            backend.close()
            raise
        return mem

    def close(self) -> None:
        """Finish pending background vectors, then close the backend if this object opened
        it (idempotent). Vectors that could not be computed are picked up at the next open."""
        if not self._closed:
            self._closed = True
            if self._sweeper is not None:
                self._sweeper.stop()
            self.vectors.close()
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

    @property
    def llm(self) -> LLM | None:
        """The LLM of the passes and of ``reconcile="llm"`` (None: the offline passes)."""
        return self._llm

    @llm.setter
    def llm(self, llm: LLM | None) -> None:
        self._llm = self.lifecycle.llm = self.writes.llm = llm

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
        always writes. :attr:`last_reconcile` says what happened, and
        ``mem.writes.reconcile`` returns it (see :mod:`graphmem.reconcile`)."""
        result = self.writes.reconcile(
            content,
            mode=reconcile,
            agent_id=agent_id,
            run_id=run_id,
            namespace=namespace,
            category=category,
            tier=tier,
            importance=importance,
            confidence=confidence,
            tags=tags,
            metadata=metadata,
            event_type=event_type,
            created_at=created_at or self._clock(),
            valid_from=valid_from,
            expires_at=expires_at,
            visibility=visibility,
            user_id=user_id,
        )
        return result.memory

    @property
    def last_reconcile(self) -> ReconcileResult | None:
        """What this thread's last :meth:`remember` did: ``action`` is ``created``,
        ``duplicate`` (nothing written; the existing memory was returned), ``superseded``
        or ``linked``, with the related memory ids and the reason."""
        return self.writes.last_reconcile

    def remember_many(self, items: Iterable[Memory | Mapping[str, Any]]) -> builtins.list[Memory]:
        """Store many memories in one atomic, durable batch.

        Each item is a :class:`Memory` or a mapping of its fields. Every item is validated
        first: one bad item raises InvalidInput and nothing is written.
        """
        memories = self.writes.remember_many(items)
        log.debug("remembered %d memories", len(memories))
        return memories

    def add_messages(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        run_id: str | None = None,
        namespace: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[Memory]:
        """Store OpenAI-format chat ``messages`` (``{"role", "content"}``; a string is one
        user message) as the next events of run ``run_id``, started when new (a new run when
        ``run_id`` is None). The Mem0 ``add(messages, user_id=, agent_id=, run_id=)`` shape;
        see :func:`graphmem.messages.add_messages`."""
        from graphmem.messages import add_messages

        return add_messages(
            self,
            messages,
            agent_id=agent_id,
            user_id=user_id,
            run_id=run_id,
            namespace=namespace,
            metadata=metadata,
        )

    def _fetch(
        self, ids: Sequence[str], scope: Scope | str | None, current: bool
    ) -> builtins.list[Memory]:
        found = self._readable(self._memories(ids), scope)
        return [self._current(m, scope) for m in found] if current else found

    def _memories(self, ids: Sequence[str]) -> builtins.list[Memory]:
        return [n for n in self._backend.get(Memory, list(ids)) if isinstance(n, Memory)]

    def _current(self, memory: Memory, scope: Scope | str | None) -> Memory:
        if memory.status is Status.ACTIVE:
            return memory
        versions = [m for m in self._versions(memory.id, scope) if m.status is Status.ACTIVE]
        if not versions:
            raise NotFound(f"memory {memory.id!r} has no active version")
        return versions[-1]

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
        allowed = _UPDATABLE
        unknown = set(changes) - allowed
        if unknown:
            raise InvalidInput(
                f"cannot update field(s) {sorted(unknown)}; allowed: {sorted(allowed)}"
            )
        old = self.get(memory_id)
        if old.status is not Status.ACTIVE:
            raise Conflict(f"memory {memory_id} is {old.status.value}; update its current version")
        return self.writes.version(old, content=content, reason=reason, **changes)

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
        limit: int | None = 100,
        offset: int = 0,
        order_by: str = "created_at",
        descending: bool = True,
        **filters: Unpack[MemoryFilters],
    ) -> builtins.list[Memory]:
        """Memories matching the ``filters`` (:class:`~graphmem.protocol.MemoryFilters`:
        ``agent_id``, ``run_id``, ``namespace``, ``category``, ``tier``, ``event_type``,
        ``status`` — ``"active"`` unless given, ``None`` for every status — ``tags``,
        ``since``, ``until``, ``as_of``, ``metadata``, ``scope``, ``user_id``), newest first."""
        flt = unchecked(self.namespaces.memory_filter)(**filters)
        return self._backend.match(
            Memory, flt, limit=limit, offset=offset, order_by=order_by, descending=descending
        )

    def count(self, **filters: Unpack[MemoryFilters]) -> int:
        """How many memories match (the filters of :meth:`list`)."""
        flt = unchecked(self.namespaces.memory_filter)(**filters)
        return self._backend.count(flt)

    def history(self, memory_id: str, *, scope: Scope | str | None = None) -> builtins.list[Memory]:
        """Every version connected to this memory by SUPERSEDES, oldest first (the last
        active one is ``get(memory_id, current=True)``). With ``scope``, versions it may
        not read are left out (a version moved into another namespace keeps its old
        content there). ``mem.lifecycle.provenance`` gives what a memory was derived from."""
        self.get(memory_id, scope=scope)
        return self._versions(memory_id, scope)

    def _versions(self, memory_id: str, scope: Scope | str | None) -> builtins.list[Memory]:
        sub = self._backend.expand(
            [NodeRef(NodeLabel.MEMORY, memory_id)],
            [EdgeType.SUPERSEDES],
            direction="both",
            depth=10_000,
            limit=100_000,
        )
        versions = self._readable([n for n in sub.nodes if isinstance(n, Memory)], scope)
        return sorted(versions, key=lambda m: (m.valid_from or m.created_at, m.created_at, m.id))

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        touch: bool = True,
        config: RecallConfig | str | None = None,
        min_relevance: float | None = None,
        tiers: str | Sequence[str] | None = None,
        **filters: Unpack[MemoryFilters],
    ) -> builtins.list[RecallResult]:
        """The ``k`` memories most relevant to ``query``, best first, each with its score
        breakdown (hybrid BM25 + vector + graph recall, see :mod:`graphmem.retrieval`).

        The ``filters`` (those of :meth:`list`) narrow the candidates before ranking;
        superseded and archived memories are left out unless ``status`` says otherwise,
        and ``as_of`` recalls what was valid at that time. ``scope`` (a
        :class:`~graphmem.scoping.Scope`, or an agent id for its default scope) limits
        recall to what that agent may read; without it recall is unscoped. ``config`` is a
        :class:`~graphmem.retrieval.RecallConfig` or preset name.
        ``min_relevance`` drops results scoring below it (default: the config's). With
        ``scope``, the asking agent's own memories gain the config's ``personal_boost``.
        ``tiers`` (``fleeting``, ``short_term``, ``long_term``) limits the tiers searched;
        ``fleeting`` adds the matching notes of the scratchpad of ``run_id`` (the process's
        without one), first, with ``metadata.key`` — matched by the config's
        ``fleeting_match``. A result's ``memory.embedding`` may be None although the memory
        has a vector: recall scores vectors where the store keeps them and does not copy
        them into its results (``list`` reads them).
        """
        fleeting: builtins.list[RecallResult] = []
        scope = filters.get("scope")
        if tiers is not None:
            with_fleeting, filters["tier"] = split_tiers(tiers, filters.get("tier"))
            if with_fleeting:
                cfg = RecallConfig.preset(config) if isinstance(config, str) else config
                runs = filters.get("run_id")
                if scope is not None and runs is not None:
                    runs = self._readable_runs(runs, scope)
                fleeting = fleeting_results(
                    self.lifecycle, query, k, runs, cfg or self.settings.recall, self._clock()
                )
            if not filters["tier"]:
                return fleeting
        stored = self._retriever(config).recall(
            query,
            k=k,
            filter=unchecked(self.namespaces.memory_filter)(**filters),
            config=config,
            touch=touch,
            min_relevance=min_relevance,
            asking_agent=scope.agent_id if isinstance(scope, Scope) else scope,
        )
        if not fleeting:
            return stored
        top = max([1.0] + [r.score for r in stored])
        fleeting = [r.model_copy(update={"score": top}) for r in fleeting]
        return (fleeting + stored)[:k]

    def _readable_runs(self, run_id: str | Sequence[str], scope: Scope | str) -> builtins.list[str]:
        """The runs among ``run_id`` whose scratchpads ``scope`` may read: a stored run of
        its own agent, or one in a shared namespace it may read (a run's notes are its
        agent's, and its namespace members' who may add to it)."""
        ids = [run_id] if isinstance(run_id, str) else builtins.list(run_id)
        allowed = set(self.namespaces.audiences(scope))
        runs = {r.id: r for r in self._backend.get(Run, ids) if isinstance(r, Run)}
        return [
            i
            for i in ids
            if (run := runs.get(i)) is not None
            and (
                audience_key(Visibility.PRIVATE, run.agent_id, "") in allowed
                or (
                    run.namespace != "default"
                    and audience_key(Visibility.SHARED, "", run.namespace) in allowed
                )
            )
        ]

    def relevance(self, memory: Memory, *, now: datetime | None = None) -> float:
        """The standing of ``memory`` at ``now`` (default: this store's clock) under the
        active profile's scoring strategy — recency, frequency, importance and decay
        combined as the profile defines them; no query involved."""
        if not isinstance(memory, Memory):
            raise InvalidInput(f"relevance takes a Memory, not {type(memory).__name__}")
        if now is not None and now.utcoffset() is None:
            raise InvalidInput(f"now must be timezone-aware (got naive {now.isoformat()})")
        # checked again: a copy made with model_copy(update=...) skipped validation
        checked: Memory = validated(Memory, dict(memory.__dict__))
        return self.settings.recall.strategy.relevance(checked, now or self._clock())

    @overload
    def context(
        self,
        query: str = "",
        *,
        format: Literal["text"] = "text",
        **options: Unpack[ContextOptions],
    ) -> str: ...

    @overload
    def context(
        self, query: str = "", *, format: Literal["messages"], **options: Unpack[ContextOptions]
    ) -> builtins.list[dict[str, str]]: ...

    def context(
        self,
        query: str = "",
        *,
        format: ContextFormat = "text",
        max_tokens: int = 2000,
        k: int = 50,
        policies: Sequence[str] | None = None,
        config: RecallConfig | str | None = None,
        touch: bool = True,
        run_id: str | None = None,
        system: str | None = None,
        max_events: int = 20,
        **filters: Unpack[ReadFilters],
    ) -> str | builtins.list[dict[str, str]]:
        """Recalled memories for a prompt, within ``max_tokens``.

        Every memory is fenced as untrusted data (content that tries to break the fence is
        neutralised); the organisation's core policies lead the block (``policies``
        overrides them; ``[]`` for none). ``filters`` are those of :meth:`recall`.

        An empty ``query`` gives what matters most now: the ``k`` most relevant memories
        of the filter (importance and use, decayed since the last access — the
        lifecycle's :func:`~graphmem.lifecycle.relevance`) among its newest.

        ``format="text"`` (default) returns the block as one string. ``format="messages"``
        returns role-tagged chat messages: one ``system`` message (``system``, then the
        block), the conversation of ``run_id`` (its last ``max_events`` user messages and
        agent responses as ``user`` / ``assistant``) and ``query`` as the last ``user``
        message. ``run_id`` and ``system`` belong to the messages format only."""
        if format not in ("text", "messages"):
            raise InvalidInput(f"format must be 'text' or 'messages', not {format!r}")
        if format == "text" and (run_id is not None or system is not None):
            raise InvalidInput("run_id and system belong to format='messages'")
        if isinstance(query, str) and not query.strip():
            block = self._window("", max_tokens, k, policies, None, touch, filters)
        else:
            block = self._window(query, max_tokens, k, policies, config, touch, filters)
        if format == "text":
            return block
        return chat_messages(
            block,
            query,
            system=system,
            run_id=run_id,
            max_events=max_events,
            runs=self.runs,
            scope=filters.get("scope"),
        )

    def _window(
        self,
        query: str,
        max_tokens: int,
        k: int,
        policies: Sequence[str] | None,
        config: RecallConfig | str | None,
        touch: bool,
        filters: ReadFilters,
    ) -> str:
        flt = unchecked(self.namespaces.memory_filter)(**filters)
        if policies is None:
            policies = self.org.core_policies()
        results = None
        if not query:  # no query: the most relevant memories among the newest
            results = relevant_now(
                self._backend, flt, k, self._clock(), self.lifecycle.config.decay
            )
        window = self._retriever(config, settle=bool(query)).context_window(
            query,
            max_tokens=max_tokens,
            k=k,
            filter=flt,
            policies=policies,
            config=config,
            touch=touch,
            results=results,
        )
        if not window.memories and window.dropped:
            # an empty block would look like "nothing relevant": say it was the budget
            log.warning(
                "context: max_tokens=%d fits none of the %d memories that matched; the "
                "block's fixed text alone takes about 100 tokens, raise max_tokens",
                max_tokens,
                window.dropped,
            )
        return window.text

    def _retriever(
        self, config: RecallConfig | str | None = None, *, settle: bool = True
    ) -> Retriever:
        unchecked(self.vectors.check_model)(query=True)
        retriever = self._recall
        if retriever is None or retriever.config is not self.settings.recall:
            # one per handle (and per settings): making one asks the backend which fast
            # paths it has, which costs more than a recall's filter
            retriever = self._recall = Retriever(
                self._backend, self._embedder, clock=self._clock, config=self.settings.recall
            )
        if settle:
            unchecked(self.vectors.settle)(retriever.resolve_config(config).vector_wait)
        return retriever

    # -- whole-store operations ------------------------------------------------------

    @property
    def graph(self) -> nx.MultiDiGraph:
        """The memory graph as networkx (read-only). Live for the embedded backend; a
        snapshot built from a full scan for server backends. A node's attributes are its
        stored properties (datetimes as aware datetimes, tags as a tuple of strings on
        every backend)."""
        return graph_snapshot(self._backend)

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

    def _after_write(self, done: Committed) -> None:
        # lifecycle work after a write: count short-term writes, refresh a run's
        # short-term tier every N writes (archival only, never an LLM call)
        if done.created:
            unchecked(self.lifecycle.on_write)(done.created)

    def __repr__(self) -> str:
        return f"GraphMemory({self._backend!r})"


# every public verb of the store and of its sub-objects checks its arguments first
# (graphmem.boundary): a call of the wrong shape is InvalidInput and touches nothing
guard_face(GraphMemory)
guard(Filter, ["for_memories"], prefix="Filter")
