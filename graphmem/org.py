"""Organisational memory: versioned, write-controlled facts shared by every agent.

An org fact (a policy, an ADR, a procedure, a convention, …) has a logical ``fact_id`` and
a chain of :class:`~graphmem.models.OrgFact` versions: :meth:`OrgMemory.publish` writes
version 1, or version n+1 that SUPERSEDES version n (which stays, status ``superseded``);
:meth:`OrgMemory.retract` marks the current version retracted (status ``archived``,
``retracted_at`` set). Every publish and retract also appends an
:class:`~graphmem.models.OrgOperation` (``(op)-[:RECORDS]->(version)``), so the history of a
fact cannot be rewritten by later writes.

Write access is checked *before* anything is written: the author is looked up as an
:class:`~graphmem.models.Agent` (a human is an agent with ``seniority="human"`` or
``kind="human"``) and must satisfy the :class:`WriteRule` of the fact's category. Defaults
(:data:`DEFAULT_WRITE_RULES`):

==============  =========================  ==========
category        agents (minimum seniority) humans
==============  =========================  ==========
policy          senior                     yes
adr             senior                     yes
security        lead                       yes
procedure       mid                        yes
convention      mid                        yes
(any other)     mid                        yes
core=True       lead (in addition)         yes
==============  =========================  ==========

Seniority ranks ``junior < mid < senior < lead``; an unknown author or seniority is denied.

>>> from graphmem import GraphMemory
>>> with GraphMemory.open("memory://", embedder=None) as mem:
...     _ = mem.agents.register("cto", seniority="human")
...     f = mem.org.publish("Never log secrets.", author="cto", fact_id="no-secrets")
...     g = mem.org.publish("Never log secrets or tokens.", author="cto", fact_id="no-secrets")
...     [v.version for v in mem.org.versions("no-secrets")], g.content
([1, 2], 'Never log secrets or tokens.')
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

from graphmem.backends.base import Expect, GraphBackend
from graphmem.config import (
    HUMAN,
    OrgConfig,
    WriteRule,
)
from graphmem.errors import AccessDenied, Conflict, InvalidInput, NotFound
from graphmem.models import (
    Agent,
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    NodeLabel,
    OrgFact,
    OrgOperation,
    Status,
    new_id,
    utcnow,
    validated,
)
from graphmem.text import words
from graphmem.writes import Writes

__all__ = [
    "OrgMemory",
]

log = logging.getLogger("graphmem.org")

CONFIG_PREFIX = "config:"  # fact ids of configured core policies (not stored, read-only)


def _tokens(text: str) -> list[str]:
    return [t for t in words(text) if len(t) > 1]


class OrgMemory:
    """Versioned, write-controlled organisational facts over a :class:`GraphBackend`.

    Thread-safe within one process: read-modify-write sequences (a new version, a
    retraction) hold a lock; each one is a single atomic backend write.
    """

    def __init__(
        self,
        backend: GraphBackend,
        writes: Writes,
        *,
        config: OrgConfig | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._backend = backend
        self._writes = writes
        self._config = config or OrgConfig()
        self._clock = clock
        self._lock = threading.Lock()
        self._configured_at = clock()

    @property
    def config(self) -> OrgConfig:
        return self._config

    # -- access control ---------------------------------------------------------------

    def _author(self, author: str) -> Agent:
        found = self._backend.get(NodeLabel.AGENT, [author]) if isinstance(author, str) else []
        if not found:
            raise AccessDenied(
                f"unknown author {author!r}: register the agent (or human) before it writes "
                "org facts"
            )
        return found[0]  # type: ignore[return-value]

    @staticmethod
    def is_human(agent: Agent) -> bool:
        return agent.seniority.lower() == HUMAN or agent.kind.lower() == HUMAN

    def _allowed(self, agent: Agent, rule: WriteRule) -> bool:
        if self.is_human(agent):
            return rule.humans
        levels = self._config.seniority_levels
        if rule.min_seniority is None or agent.seniority not in levels:
            return False
        if rule.min_seniority not in levels:
            return False  # a rule naming an unknown level admits no agent
        return (
            levels.index(agent.seniority) >= levels.index(rule.min_seniority)
            and agent.autonomy >= rule.min_autonomy
        )

    def can_write(self, author: str, category: str, *, core: bool = False) -> bool:
        """Whether ``author`` may publish or retract facts of ``category``."""
        try:
            self.check_write(author, category, core=core)
        except AccessDenied:
            return False
        return True

    def check_write(self, author: str, category: str, *, core: bool = False) -> Agent:
        """The author's Agent if it may write ``category`` (and core facts, when ``core``);
        AccessDenied otherwise."""
        agent = self._author(author)
        rules = [(category, self._config.rule_for(category))]
        if core:
            rules.append(("core", self._config.core_rule))
        for what, rule in rules:
            if not self._allowed(agent, rule):
                who = (
                    HUMAN
                    if self.is_human(agent)
                    else (f"{agent.seniority} agent (autonomy {agent.autonomy})")
                )
                log.info("org write denied: category=%s rule=%s", category, what)
                raise AccessDenied(f"{author!r}, a {who}, may not write {what} org facts")
        return agent

    # -- writing ----------------------------------------------------------------------

    def publish(
        self,
        content: str,
        *,
        author: str,
        category: str | None = None,
        fact_id: str | None = None,
        tags: Sequence[str] | None = None,
        core: bool | None = None,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> OrgFact:
        """Publish a fact: version 1 of a new ``fact_id`` (generated when omitted), or a new
        version that SUPERSEDES the current one. Category, tags and ``core`` default to those
        of the current version (else ``policy``, none, False).

        ``expected_version`` (the version the caller last read; 0 for "must be new") turns a
        concurrent change into a Conflict instead of a silent overwrite.
        """
        if fact_id is not None and fact_id.startswith(CONFIG_PREFIX):
            raise InvalidInput(f"fact ids starting with {CONFIG_PREFIX!r} are reserved")
        with self._lock:
            prev = self._current(fact_id) if fact_id is not None else None
            have = prev.version if prev is not None else 0
            if expected_version is not None and expected_version != have:
                raise Conflict(f"fact {fact_id!r} is at version {have}, not {expected_version}")
            cat = category if category is not None else (prev.category if prev else "policy")
            is_core = core if core is not None else (prev.core if prev else False)
            now = self._clock()
            new: OrgFact = validated(
                OrgFact,
                {
                    "fact_id": fact_id if fact_id is not None else new_id(),
                    "version": have + 1,
                    "content": content,
                    "category": cat,
                    "tags": tags if tags is not None else (prev.tags if prev else ()),
                    "author": author,
                    "created_at": now,
                    "core": is_core,
                },
            )
            agent = self.check_write(author, cat, core=is_core)
            if prev is not None and prev.category != cat:
                self.check_write(author, prev.category, core=prev.core)
            new = new.evolve(author_seniority=HUMAN if self.is_human(agent) else agent.seniority)
            op: OrgOperation = validated(
                OrgOperation,
                {
                    "fact_id": new.fact_id,
                    "operation": "publish",
                    "version": new.version,
                    "author": author,
                    "at": now,
                    "reason": reason,
                },
            )
            nodes: list[GraphNode] = [new, op]
            # (AUTHORED_BY -> the author is structural: the backend maintains it)
            edges = [_edge(EdgeType.RECORDS, op, new)]
            # another handle publishing the same version first wins; this one gets Conflict
            expect = [Expect(new.ref, exists=False)]
            if prev is not None:
                expect.append(Expect(prev.ref, props={"status": prev.status}))
                if prev.status is Status.ACTIVE:
                    nodes.append(prev.evolve(status=Status.SUPERSEDED))
                edges.append(
                    _edge(
                        EdgeType.SUPERSEDES, new, prev, {"reason": reason or "publish", "at": now}
                    )
                )
            self._writes.put(nodes, edges, expect=expect)
        log.info("org fact published: category=%s version=%d", new.category, new.version)
        return new

    def retract(self, fact_id: str, *, author: str, reason: str | None = None) -> OrgFact:
        """Mark the current version of a fact retracted; Conflict if it already is."""
        with self._lock:
            cur = self.get(fact_id)
            if cur.status is not Status.ACTIVE:
                raise Conflict(f"fact {fact_id!r} is already retracted")
            self.check_write(author, cur.category, core=cur.core)
            now = self._clock()
            retracted = cur.evolve(status=Status.ARCHIVED, retracted_at=now)
            op: OrgOperation = validated(
                OrgOperation,
                {
                    "fact_id": fact_id,
                    "operation": "retract",
                    "version": cur.version,
                    "author": author,
                    "at": now,
                    "reason": reason,
                },
            )
            self._writes.put(
                [retracted, op],
                [_edge(EdgeType.RECORDS, op, retracted)],
                expect=[Expect(cur.ref, props={"status": Status.ACTIVE})],
            )
        log.info("org fact retracted: category=%s version=%d", cur.category, cur.version)
        return retracted

    # -- reading ----------------------------------------------------------------------

    def _current(self, fact_id: str) -> OrgFact | None:
        found = self._backend.match(
            validated(Filter, {"label": NodeLabel.ORG_FACT, "equals": {"fact_id": fact_id}}),
            order_by="version",
            descending=True,
            limit=1,
        )
        return found[0] if found else None  # type: ignore[return-value]

    def get(self, fact_id: str) -> OrgFact:
        """The newest version of a fact (it may be retracted); NotFound if there is none."""
        cur = self._current(fact_id)
        if cur is None:
            raise NotFound(f"no org fact {fact_id!r}")
        return cur

    def versions(self, fact_id: str) -> list[OrgFact]:
        """Every version of a fact, oldest first."""
        found: list[OrgFact] = self._backend.match(  # type: ignore[assignment]
            validated(Filter, {"label": NodeLabel.ORG_FACT, "equals": {"fact_id": fact_id}}),
            order_by="version",
        )
        if not found:
            raise NotFound(f"no org fact {fact_id!r}")
        return found

    def history(self, fact_id: str) -> list[OrgOperation]:
        """The append-only operation log of a fact (publish/retract), oldest first."""
        ops: list[OrgOperation] = self._backend.match(  # type: ignore[assignment]
            validated(Filter, {"label": NodeLabel.ORG_OPERATION, "equals": {"fact_id": fact_id}}),
            order_by="at",
        )
        if not ops:
            raise NotFound(f"no org fact {fact_id!r}")
        return ops

    def _filter(
        self,
        categories: Sequence[str] | str | None,
        include_retracted: bool,
        tags: Sequence[str] | None = None,
        **equals: object,
    ) -> Filter:
        any_of: dict[str, tuple[object, ...]] = {}
        if categories is not None:
            any_of["category"] = (categories,) if isinstance(categories, str) else tuple(categories)
        if include_retracted:
            any_of["status"] = (Status.ACTIVE.value, Status.ARCHIVED.value)
        else:
            equals["status"] = Status.ACTIVE.value
        flt: Filter = validated(
            Filter,
            {
                "label": NodeLabel.ORG_FACT,
                "equals": equals,
                "any_of": any_of,
                "tags_all": tuple(tags or ()),
            },
        )
        return flt

    def query(
        self,
        text: str | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        tags: Sequence[str] | None = None,
        include_retracted: bool = False,
        limit: int = 10,
    ) -> list[OrgFact]:
        """Current facts matching ``text`` (lexical, best first), categories and tags.

        Without ``text``: every matching fact ordered by fact id. Org facts are few, so the
        ranking (BM25 over the candidates) runs here, above the seam, alike for every backend.
        """
        if limit < 1:
            raise InvalidInput("limit must be at least 1")
        flt = self._filter(categories, include_retracted, tags)
        if text is None:
            return self._backend.match(flt, order_by="fact_id", limit=limit)  # type: ignore[return-value]
        terms = set(_tokens(text))
        if not terms:
            raise InvalidInput("query text has no searchable words")
        facts: list[OrgFact] = self._backend.match(flt, order_by="fact_id")  # type: ignore[assignment]
        return [f for _s, f in _bm25(terms, facts)[:limit]]

    # -- policies ---------------------------------------------------------------------

    def _configured(self) -> list[OrgFact]:
        return [
            OrgFact(
                id=f"config-{i}",
                fact_id=f"{CONFIG_PREFIX}{i}",
                content=text,
                category="policy",
                author="config",
                author_seniority="config",
                created_at=self._configured_at,
                core=True,
            )
            for i, text in enumerate(self._config.core_policies, 1)
        ]

    def list_policies(self, *, limit: int | None = None, offset: int = 0) -> list[OrgFact]:
        """Current policies in a stable order: the configured core policies (config order),
        then written core policies, then the other written ones (each by fact id; generated
        fact ids sort by creation time). Paged with ``limit``/``offset``."""
        if offset < 0 or (limit is not None and limit < 0):
            raise InvalidInput("limit and offset must not be negative")
        out: list[OrgFact] = []
        configured = self._configured()
        end = None if limit is None else offset + limit
        out.extend(configured[offset:end])
        skip = max(0, offset - len(configured))
        for core in (True, False):
            left = None if limit is None else limit - len(out)
            if left == 0:
                break
            flt = self._filter("policy", False, core=core)
            seg_count = self._backend.count(flt)
            if skip >= seg_count:
                skip -= seg_count
                continue
            page: list[OrgFact] = self._backend.match(  # type: ignore[assignment]
                flt, order_by="fact_id", offset=skip, limit=left
            )
            out.extend(page)
            skip = 0
        return out

    def count_policies(self) -> int:
        """How many policies :meth:`list_policies` lists in all."""
        return len(self._config.core_policies) + self._backend.count(self._filter("policy", False))

    def core_policies(self) -> list[str]:
        """The texts that head every ``context()``: configured core policies, then written
        current policies marked core."""
        written: list[OrgFact] = self._backend.match(  # type: ignore[assignment]
            self._filter("policy", False, core=True), order_by="fact_id"
        )
        return [*self._config.core_policies, *(f.content for f in written)]

    # last in the class: mypy resolves ``list[...]`` after it to this method
    def list(
        self,
        *,
        categories: Sequence[str] | None = None,
        include_retracted: bool = False,
        limit: int | None = 100,
        offset: int = 0,
    ) -> list[OrgFact]:
        """Current versions of facts (ordered by fact id), optionally of some categories."""
        return self._backend.match(  # type: ignore[return-value]
            self._filter(categories, include_retracted),
            order_by="fact_id",
            limit=limit,
            offset=offset,
        )


def _edge(
    etype: EdgeType, src: GraphNode, dst: GraphNode, props: dict[str, object] | None = None
) -> Edge:
    edge: Edge = validated(Edge, {"type": etype, "src": src, "dst": dst, "props": props or {}})
    return edge


def _bm25(
    terms: set[str], facts: Sequence[OrgFact], *, k1: float = 1.2, b: float = 0.75
) -> list[tuple[float, OrgFact]]:
    docs = [Counter(_tokens(f.content + " " + " ".join(f.tags))) for f in facts]
    if not docs:
        return []
    avg = sum(sum(d.values()) for d in docs) / len(docs) or 1.0
    df = {t: sum(1 for d in docs if t in d) for t in terms}
    n = len(docs)
    scored: list[tuple[float, OrgFact]] = []
    for fact, d in zip(facts, docs, strict=True):
        length = sum(d.values())
        score = 0.0
        for t in terms:
            tf = d.get(t, 0)
            if tf:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        if score > 0:
            scored.append((score, fact))
    scored.sort(key=lambda sf: (-sf[0], sf[1].fact_id))
    return scored
