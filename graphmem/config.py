"""Settings: one frozen model for everything graphmem can be configured with.

Settings come from four layers; a later layer wins over an earlier one, key by key (nested
sections merge field by field):

1. the defaults below (the embedded store ``./graphmem.db``, no auth, offline LLM);
2. a TOML file — given explicitly (``Settings.load(config_file=...)``, ``graphmem --config``)
   or named by the ``GRAPHMEM_CONFIG`` environment variable;
3. ``GRAPHMEM_*`` environment variables: ``GRAPHMEM_URL``, ``GRAPHMEM_USERNAME``,
   ``GRAPHMEM_PASSWORD``, ``GRAPHMEM_DATABASE`` … for top-level fields and a double
   underscore for each section level, e.g. ``GRAPHMEM_SERVER__PORT=9000`` or
   ``GRAPHMEM_LIFECYCLE__DECAY__HALF_LIFE_DAYS=14``; list and map values
   (``GRAPHMEM_SERVER__API_KEYS``) are JSON. Neo4j's own ``NEO4J_URI``, ``NEO4J_USER``
   (or ``NEO4J_USERNAME``), ``NEO4J_PASSWORD`` and ``NEO4J_DATABASE`` are the documented
   fallbacks for the connection when ``NEO4J_URI`` is set: the ``GRAPHMEM_*`` names win;
4. explicit arguments (``Settings.load(url=...)``, command-line options).

Sections (each one frozen model): ``store`` (the embedded store), ``neo4j`` (the Neo4j
backend and its driver options), ``vectors``, ``knowledge``, ``recall``, ``reconcile``,
``lifecycle`` (with ``decay``, ``retention``, ``consolidation``, ``scorer``, ``rules``),
``org``, ``runs``, ``maintenance``, ``log``, ``server``; ``profile`` names a profile
(:mod:`graphmem.profiles`) whose defaults sit under everything configured. The models live
here, at the bottom of the house (this module imports only :mod:`graphmem.errors`,
:mod:`graphmem.models` and :mod:`graphmem.scoring`, which imports only the models; the
profiles are imported when settings are built); the modules that act on them import them
from here.

The environment is read only by :meth:`Settings.from_env` and :meth:`Settings.load`, never at
import or in the constructor. Secrets (passwords, API keys) are ``SecretStr`` and print masked.

>>> s = Settings.load(environ={"GRAPHMEM_SERVER__PORT": "9000"}, url="memory://")
>>> (s.url, s.server.port)
('memory://', 9000)
>>> Settings(password="hunter2").masked()["password"]
'**********'
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import math
import os
import re
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from graphmem.errors import ConfigError
from graphmem.models import Tier
from graphmem.scoring import Composition, Curve, Frequency, RankWeights, Scoring

if TYPE_CHECKING:
    from graphmem.memory import GraphMemory

__all__ = [
    "ENV_PREFIX",
    "NEO4J_FALLBACKS",
    "PRESETS",
    "TEST_ONLY_ENV",
    "AgentRetention",
    "ApiKey",
    "ClassificationRules",
    "ConsolidationConfig",
    "DecayConfig",
    "ImportanceScorer",
    "KnowledgeSettings",
    "LifecycleConfig",
    "LogSettings",
    "MaintenanceSettings",
    "Neo4jSettings",
    "OrgConfig",
    "RankWeights",
    "RecallConfig",
    "ReconcileConfig",
    "RetentionPolicy",
    "RunLimits",
    "ServerSettings",
    "Settings",
    "StoreSettings",
    "VectorSettings",
    "WriteRule",
    "neo4j_from_env",
    "parse_interval",
]

log = logging.getLogger("graphmem.config")

ENV_PREFIX = "GRAPHMEM_"
CONFIG_ENV = "GRAPHMEM_CONFIG"
# Read by graphmem.embeddings (where derived model files go), not a Settings field.
CACHE_DIR_ENV = "GRAPHMEM_CACHE_DIR"
#: switches of graphmem's own test suite and notebooks, not settings: recognised, so that
#: every process they start does not warn about them
TEST_ONLY_ENV = frozenset(
    {"GRAPHMEM_NEO4J_ALLOW_WIPE", "GRAPHMEM_NOTEBOOK_NEO4J_CLEANUP", "GRAPHMEM_TEST_BACKEND"}
)
_MASK = "**********"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ApiKey(_Frozen):
    """One HTTP API key: the agent it acts as and the namespaces it may touch.

    ``namespaces=("*",)`` allows every namespace.
    """

    key: SecretStr
    agent_id: str = "default"
    namespaces: tuple[str, ...] = ("default",)

    @field_validator("key")
    @classmethod
    def _long_enough(cls, v: SecretStr) -> SecretStr:
        if len(v.get_secret_value()) < 8:
            raise ValueError("an API key must have at least 8 characters")
        return v


# ---------------------------------------------------------------------------------------
# the store and its backends

StoreDurability = Literal["normal", "full", "off"]


class StoreSettings(_Frozen):
    """The embedded store (a file path or ``memory://``): ``durability`` is SQLite's
    synchronous level of the journal (``normal``: an acknowledged write survives a process
    crash; ``full``: also a power loss; ``off``: neither, for throwaway stores) and
    ``busy_timeout_ms`` how long a write waits for another process's lock."""

    durability: StoreDurability = "normal"
    busy_timeout_ms: int = Field(default=10_000, ge=0)


class Neo4jSettings(_Frozen):
    """The Neo4j backend (``neo4j://`` and ``bolt://`` URLs): its own options and
    ``driver_options``, passed to the official driver (e.g. ``max_connection_pool_size``,
    ``connection_acquisition_timeout``); ``cypher_dir`` overrides the bundled query files."""

    cypher_dir: str | None = None
    batch_rows: int = Field(default=5000, ge=1)
    exact_search_max: int = Field(default=5000, ge=0)
    index_timeout_s: int = Field(default=300, ge=1)
    connect_timeout_s: float = Field(default=3.0, gt=0.0)
    retry_s: float = Field(default=5.0, ge=0.0)
    vector_overfetch: int = Field(default=2, ge=1)
    touch_flush_s: float = Field(default=5.0, ge=0.0)
    touch_flush_rows: int = Field(default=1000, ge=1)
    driver_options: dict[str, Any] = Field(default_factory=dict)


VectorMode = Literal["auto", "background", "inline"]


class VectorSettings(_Frozen):
    """When vectors are computed: ``background`` acknowledges a write once durable and
    embeds it behind it; ``inline`` embeds before the write; ``auto`` is background for a
    model and inline for the hash embedder."""

    mode: VectorMode = "auto"


class KnowledgeSettings(_Frozen):
    """The knowledge layer: extract entities and relations from every memory written (no
    model, no LLM). Off by default: on LoCoMo it moved recall by under a point
    (benchmarks/RESULTS.md) and it costs one more transaction per write."""

    enabled: bool = False


# ---------------------------------------------------------------------------------------
# recall


class RecallConfig(BaseModel):
    """How recall finds, fuses and ranks candidates. Frozen; derive variants with
    ``config.model_copy(update={...})`` or start from a preset."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fusion: Literal["rrf", "linear"] = "rrf"
    rrf_k: int = Field(default=10, ge=1)
    lexical_weight: float = Field(default=1.0, ge=0.0)
    vector_weight: float = Field(default=0.5, ge=0.0)
    #: a memory next to a strong seed (graph expansion) scores at least
    #: ``graph_weight`` x the seed's relevance
    graph_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    #: episodic context: each memory gains ``run_weight`` x the best relevance found in
    #: its run (a conversation session is topical), then relevance is renormalised
    run_weight: float = Field(default=1.0, ge=0.0)
    #: candidates fetched per channel: max(candidates, 2 * k). 30 gives the same LoCoMo
    #: recall@10 for k=10 calls as 50 (73.6 both) at a lower cost per query
    candidates: int = Field(default=30, ge=1, le=10_000)
    # graph expansion
    expand_seeds: int = Field(default=5, ge=0)
    expand_next: bool = True
    expand_derived: bool = True
    expand_tags: bool = True
    expand_tag_limit: int = Field(default=8, ge=1)  # shared-tag neighbours per seed
    # knowledge layer (graphmem.knowledge): memories mentioning an entity the query names
    # join as a channel with this weight; seeds bring memories that share a rare entity
    # (one mentioned by at most entity_hub_limit memories)
    entity_weight: float = Field(default=0.0, ge=0.0)
    #: off by default: on LoCoMo the entity hops moved recall by less than a point
    #: (benchmarks/RESULTS.md), and they cost a graph read per recall
    expand_entities: bool = False
    entity_hub_limit: int = Field(default=25, ge=1)
    # floor: a seed needs cosine >= min_similarity or term coverage >= min_coverage
    min_similarity: float = Field(default=0.25, ge=-1.0, le=1.0)
    min_coverage: float = Field(default=0.5, ge=0.0, le=1.0)
    # relevance signals: final = fused * ((1 - signal_weight) + signal_weight * signals).
    # Kept modest: recall itself feeds recency and frequency (touch), so a heavy weight lets
    # a memory recalled once outrank more relevant ones on unrelated queries afterwards.
    weights: RankWeights = Field(default_factory=RankWeights)
    signal_weight: float = Field(default=0.15, ge=0.0, le=1.0)
    recency_half_life_days: float = Field(default=7.0, gt=0.0)
    decay_half_life_days: float = Field(default=90.0, gt=0.0)
    frequency_saturation: int = Field(default=10, ge=1)
    #: the scoring strategy (graphmem.scoring); None: graphmem's own, built from the
    #: weights, signal_weight, half-lives and frequency_saturation above
    scoring: Scoring | None = None
    #: the asking agent's own memories (``recall(..., asking_agent=...)``) gain
    #: ``personal_boost`` x the best score before the final order
    personal_boost: float = Field(default=0.0, ge=0.0, le=1.0)
    #: results scoring below this are dropped (``recall(..., min_relevance=...)`` per call)
    min_relevance: float | None = Field(default=None, ge=0.0)
    #: dense content (code, JSON, ids) in a context window is cut to its most telling lines
    compress_dense: bool = False
    #: how recall matches fleeting notes (``tiers`` with ``fleeting``): ``words`` shared
    #: with the query, or the query as a ``substring`` of key or value
    fleeting_match: Literal["words", "substring"] = "words"
    # temporal channel (graphmem.temporal): a question naming a day, month or year lifts
    # the memories whose time (the day written, or a relative date in the text resolved
    # against it) falls in it, and brings such memories in as a channel ranked by
    # similarity; a "when" question lifts memories that say when something happened
    #: 1.0 chosen on LoCoMo dev conversations conv-26/30/41 (recall@10 +2.2) and
    #: confirmed on conv-42/43 (benchmarks/RESULTS.md)
    temporal_weight: float = Field(default=1.0, ge=0.0)
    when_weight: float = Field(default=0.0, ge=0.0)
    #: memories looked at per temporal query (written within the span, widened by the
    #: reach of relative dates)
    temporal_limit: int = Field(default=500, ge=1)
    #: pseudo-relevance feedback on the lexical channel: the ``prf_terms`` words most
    #: shared by the best ``prf_docs`` candidates are added to the query and the expanded
    #: lexical search joins as a channel of weight ``prf_weight`` (0: off)
    prf_weight: float = Field(default=0.0, ge=0.0)
    prf_docs: int = Field(default=5, ge=1)
    prf_terms: int = Field(default=5, ge=1)
    #: read your writes: seconds a recall through GraphMemory waits for the vectors of the
    #: memories the same handle wrote and not yet embedded (background vectors), so that a
    #: recall right after ``remember`` ranks them as one a minute later would; 0: never wait
    #: (those memories are then found by the lexical and graph channels only)
    vector_wait: float = Field(default=60.0, ge=0.0)
    # diversity: with embeddings, cosine between memories; without, bigram Jaccard of text
    mmr: bool = False
    mmr_lambda: float = Field(default=0.7, ge=0.0, le=1.0)

    @property
    def strategy(self) -> Scoring:
        """The scoring strategy in force: ``scoring``, or graphmem's default shapes with
        this config's parameters."""
        if self.scoring is not None:
            return self.scoring
        return _default_scoring(
            self.weights,
            self.signal_weight,
            self.recency_half_life_days,
            self.decay_half_life_days,
            self.frequency_saturation,
        )

    @classmethod
    def preset(cls, name: str) -> RecallConfig:
        """A named preset: ``balanced`` (default), ``lexical``, ``semantic``, ``linear``,
        ``diverse``, ``precise``, ``recent``."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ConfigError(
                f"unknown recall preset {name!r}; choose from {sorted(PRESETS)}"
            ) from None


@functools.lru_cache(maxsize=64)
def _default_scoring(
    weights: RankWeights,
    signal_weight: float,
    recency_days: float,
    decay_days: float,
    saturation: int,
) -> Scoring:
    return Scoring(
        recency=Curve(shape="half_life", days=recency_days, since="access"),
        frequency=Frequency(shape="log", saturation=saturation),
        decay=Curve(shape="half_life", days=decay_days, since="created"),
        weights=weights,
        composition=Composition(kind="multiplier", signal_weight=signal_weight),
    )


PRESETS: dict[str, RecallConfig] = {
    "balanced": RecallConfig(),
    "lexical": RecallConfig(vector_weight=0.0),
    "semantic": RecallConfig(lexical_weight=0.0),
    "linear": RecallConfig(fusion="linear"),
    "diverse": RecallConfig(mmr=True, mmr_lambda=0.6),
    "precise": RecallConfig(
        min_similarity=0.4, min_coverage=0.75, graph_weight=0.25, run_weight=0.25
    ),
    "recent": RecallConfig(
        signal_weight=0.6,
        weights=RankWeights(recency=0.6, frequency=0.1, importance=0.2, decay=0.1),
    ),
}


# ---------------------------------------------------------------------------------------
# reconcile on write

ReconcileMode = Literal["auto", "off", "llm"]
NearDuplicatePolicy = Literal["link", "supersede", "keep"]


class ReconcileConfig(BaseModel):
    """How a write is reconciled with the memories already in its scope."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: ReconcileMode = "auto"
    near_duplicates: NearDuplicatePolicy = "keep"
    near_threshold: float = Field(default=0.7, gt=0.0, le=1.0)
    candidates: int = Field(default=20, ge=1, le=1000)


# ---------------------------------------------------------------------------------------
# organisation memory

SENIORITY_LEVELS: tuple[str, ...] = ("junior", "mid", "senior", "lead")
HUMAN = "human"


class WriteRule(BaseModel):
    """Who may publish or retract facts of one category.

    ``min_seniority``: the lowest agent seniority allowed (``None``: no agent may);
    ``min_autonomy``: the lowest agent autonomy level allowed; ``humans``: whether humans may.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_seniority: str | None = "senior"
    min_autonomy: int = Field(default=0, ge=0, le=5)
    humans: bool = True


DEFAULT_RULE = WriteRule(min_seniority="mid")
DEFAULT_CORE_RULE = WriteRule(min_seniority="lead")
DEFAULT_WRITE_RULES: dict[str, WriteRule] = {
    "policy": WriteRule(min_seniority="senior"),
    "adr": WriteRule(min_seniority="senior"),
    "security": WriteRule(min_seniority="lead"),
    "procedure": WriteRule(min_seniority="mid"),
    "convention": WriteRule(min_seniority="mid"),
}


class OrgConfig(BaseModel):
    """Org memory settings: write rules per category, the rule for the fallback category and
    for core facts, the seniority ladder, and the configured core policies (texts that head
    every ``context()``; they are not stored and cannot be retracted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: dict[str, WriteRule] = Field(default_factory=lambda: dict(DEFAULT_WRITE_RULES))
    default_rule: WriteRule = DEFAULT_RULE
    core_rule: WriteRule = DEFAULT_CORE_RULE
    seniority_levels: tuple[str, ...] = SENIORITY_LEVELS
    core_policies: tuple[str, ...] = ()

    @field_validator("seniority_levels")
    @classmethod
    def _levels(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or len(set(v)) != len(v) or HUMAN in v:
            raise ValueError("seniority_levels must be distinct, non-empty, without 'human'")
        return v

    @field_validator("core_policies", mode="before")
    @classmethod
    def _policies(cls, v: object) -> tuple[str, ...]:
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list | tuple) or not all(isinstance(p, str) and p.strip() for p in v):
            raise ValueError("core policies must be a list of non-empty strings")
        return tuple(v)

    def rule_for(self, category: str) -> WriteRule:
        return self.rules.get(category, self.default_rule)


# ---------------------------------------------------------------------------------------
# runs


class RunLimits(BaseModel):
    """Session limits (the seed's defaults); ``None`` means unlimited. Over a limit, the
    oldest ``archive_fraction`` (at least the excess) is archived."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_runs: int | None = Field(default=1000, ge=1)
    max_events_per_run: int | None = Field(default=500, ge=1)
    archive_fraction: float = Field(default=0.1, gt=0.0, le=1.0)
    #: ``fraction``: over a limit, archive the oldest ``archive_fraction`` at once;
    #: ``oldest``: archive just the excess, oldest first (one per append at the limit)
    eviction: Literal["fraction", "oldest"] = "fraction"

    def evict(self, n: int, limit: int) -> int:
        """How many of ``n`` (over ``limit``) go."""
        if self.eviction == "oldest":
            return n - limit
        return max(n - limit, math.ceil(n * self.archive_fraction))


# ---------------------------------------------------------------------------------------
# lifecycle: importance, tiers, decay, retention, consolidation


class ImportanceScorer(BaseModel):
    """Importance in 0..1 = ``base`` + boosts, clamped.

    The defaults are the seed's rule: base 0.5; events ``write`` +0.3, ``success`` +0.2,
    ``completion`` +0.2, ``result`` +0.1, ``error`` -0.1. Optional boosts (empty by
    default) come from the agent type (``Agent.kind``), payload signals (a key of the
    metadata that is present and truthy) and words in the content.

    >>> ImportanceScorer().score(event_type="write")
    0.8
    >>> ImportanceScorer().score(event_type="error")
    0.4
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base: float = Field(default=0.5, ge=0.0, le=1.0)
    event_boosts: dict[str, float] = Field(
        default_factory=lambda: {
            "write": 0.3,
            "success": 0.2,
            "completion": 0.2,
            "result": 0.1,
            "error": -0.1,
        }
    )
    agent_boosts: dict[str, float] = Field(default_factory=dict)
    #: ``kind``: an agent boost applies to the registered ``Agent.kind`` equal to its key;
    #: ``id_substring``: to every agent whose id contains its key (each key once)
    agent_match: Literal["kind", "id_substring"] = "kind"
    signal_boosts: dict[str, float] = Field(default_factory=dict)
    #: ``each``: every present signal adds its boost; ``once``: only the largest applies
    signal_boost_mode: Literal["each", "once"] = "each"
    keyword_boosts: dict[str, float] = Field(default_factory=dict)

    def score(
        self,
        *,
        content: str = "",
        event_type: str | None = None,
        agent_kind: str | None = None,
        payload: Mapping[str, Any] | None = None,
        agent_id: str | None = None,
    ) -> float:
        """The importance of a memory or event described by these signals.

        >>> orka = ImportanceScorer(agent_boosts={"memory": 0.2}, agent_match="id_substring",
        ...                         signal_boosts={"result": 0.1, "response": 0.1},
        ...                         signal_boost_mode="once")
        >>> orka.score(event_type="success", agent_id="memory-reader",
        ...            payload={"result": 1, "response": 2})
        1.0
        >>> orka.score(agent_id="planner", payload={"result": 1, "response": 2})
        0.6
        """
        s = self.base
        if event_type is not None:
            s += self.event_boosts.get(event_type, 0.0)
        if self.agent_match == "kind":
            if agent_kind is not None:
                s += self.agent_boosts.get(agent_kind, 0.0)
        elif agent_id:
            s += sum(b for key, b in self.agent_boosts.items() if key in agent_id)
        present = [b for key, b in self.signal_boosts.items() if payload and payload.get(key)]
        if present:
            s += sum(present) if self.signal_boost_mode == "each" else max(present)
        if content and self.keyword_boosts:
            words = set(content.lower().split())
            words |= {w.strip(".,;:!?\"'()") for w in words}
            s += sum(b for w, b in self.keyword_boosts.items() if w in words)
        return round(min(1.0, max(0.0, s)), 4)


class ClassificationRules(BaseModel):
    """Which tier a record belongs to (the seed's rules, in this order).

    Orchestration logs are short-term. Events in ``long_term_events`` (success, completion,
    write, result) are long-term; events in ``short_term_events`` (debug, processing,
    start, progress) are short-term; any other event is long-term when its importance
    reaches ``long_term_importance`` (0.7), else short-term. A memory with no event type
    (a fact stored with ``remember``) is long-term — the seed's rules classify events.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    log_tier: Tier = Tier.SHORT_TERM
    long_term_events: tuple[str, ...] = ("success", "completion", "write", "result")
    short_term_events: tuple[str, ...] = ("debug", "processing", "start", "progress")
    long_term_importance: float = Field(default=0.7, ge=0.0, le=1.0)

    def tier_for(
        self,
        *,
        kind: Literal["log", "memory"] = "memory",
        event_type: str | None = None,
        importance: float = 0.5,
    ) -> Tier:
        """The tier of a log record (``kind="log"``) or of a memory."""
        if kind == "log":
            return self.log_tier
        if event_type is None:
            return Tier.LONG_TERM
        if event_type in self.long_term_events:
            return Tier.LONG_TERM
        if event_type in self.short_term_events:
            return Tier.SHORT_TERM
        return Tier.LONG_TERM if importance >= self.long_term_importance else Tier.SHORT_TERM


class DecayConfig(BaseModel):
    """Relevance = (w_i * importance + w_a * access signal) * 0.5 ** (days since the last
    access, or creation, / half_life_days)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    half_life_days: float = Field(default=30.0, gt=0.0)
    importance_weight: float = Field(default=0.7, ge=0.0)
    access_weight: float = Field(default=0.3, ge=0.0)
    access_saturation: int = Field(default=10, ge=1)

    def scoring(self) -> Scoring:
        """This formula as a :class:`~graphmem.scoring.Scoring` strategy (what maintenance
        evaluates)."""
        return _decay_scoring(self)


@functools.lru_cache(maxsize=64)
def _decay_scoring(cfg: DecayConfig) -> Scoring:
    return Scoring(
        recency=Curve(shape="half_life", days=cfg.half_life_days, since="access"),
        frequency=Frequency(shape="log", saturation=cfg.access_saturation),
        decay=Curve(shape="half_life", days=cfg.half_life_days, since="access"),
        weights=RankWeights(
            recency=0.0,
            frequency=cfg.access_weight,
            importance=cfg.importance_weight,
            decay=0.0,
            trust=0.0,
        ),
        normalise=False,
        decay_as="factor",
    )


class AgentRetention(BaseModel):
    """An agent's overrides of the company retention policy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: timedelta | None = None
    by_category: dict[str, timedelta] = Field(default_factory=dict)
    max_memories: int | None = Field(default=None, ge=0)


class RetentionPolicy(BaseModel):
    """How long active memories are kept, by category, with per-agent overrides.

    Precedence: agent per-category > company per-category > agent default >
    company default > forever (None). ``max_per_agent`` caps active memories per agent
    (an agent's ``max_memories`` overrides it); the least relevant go first. Entries of
    the orchestration log are deleted when older than ``logs`` (else ``default``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: timedelta | None = None
    by_category: dict[str, timedelta] = Field(default_factory=dict)
    agents: dict[str, AgentRetention] = Field(default_factory=dict)
    max_per_agent: int | None = Field(default=None, ge=0)
    logs: timedelta | None = None

    @property
    def log_period(self) -> timedelta | None:
        """How long orchestration-log entries are kept (None: forever)."""
        return self.logs if self.logs is not None else self.default

    def period_for(self, agent_id: str, category: str) -> timedelta | None:
        """The retention period of a memory of ``agent_id`` in ``category``."""
        agent = self.agents.get(agent_id)
        if agent is not None and category in agent.by_category:
            return agent.by_category[category]
        if category in self.by_category:
            return self.by_category[category]
        if agent is not None and agent.default is not None:
            return agent.default
        return self.default

    def max_for(self, agent_id: str) -> int | None:
        agent = self.agents.get(agent_id)
        if agent is not None and agent.max_memories is not None:
            return agent.max_memories
        return self.max_per_agent


class ConsolidationConfig(BaseModel):
    """Thresholds and scope of consolidation.

    ``merge_threshold``: token Jaccard at which memories are merged; pairs at or above
    ``duplicate_threshold`` are duplicates (merged deterministically even when an LLM is
    configured, since there is nothing to synthesise). ``embedding_threshold`` optionally
    adds pairs whose embeddings have at least that cosine similarity.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    merge_threshold: float = Field(default=0.6, gt=0.0, le=1.0)
    duplicate_threshold: float = Field(default=0.7, gt=0.0, le=1.0)
    embedding_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    scope: tuple[str, ...] = ("agent_id", "namespace")
    exclude_categories: tuple[str, ...] = ("summary",)
    max_group_size: int = Field(default=100, ge=2)
    batch_groups: int = Field(default=200, ge=1)

    @model_validator(mode="after")
    def _order(self) -> ConsolidationConfig:
        if self.duplicate_threshold < self.merge_threshold:
            raise ValueError("duplicate_threshold must be >= merge_threshold")
        for f in self.scope:
            if f not in ("agent_id", "namespace", "run_id", "category", "tier"):
                raise ValueError(f"cannot scope consolidation by {f!r}")
        return self


class LifecycleConfig(BaseModel):
    """Thresholds of the lifecycle (all configurable; frozen)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    short_term_max: int = Field(default=200, ge=1)
    refresh_every: int = Field(default=20, ge=1)
    refresh_min_relevance: float = Field(default=0.1, ge=0.0, le=1.0)
    promote_importance: float = Field(default=0.5, ge=0.0, le=1.0)
    promote_access_count: int = Field(default=3, ge=0)
    summarize_on_run_end: bool = True
    min_summary_sources: int = Field(default=2, ge=1)
    archive_unpromoted_on_run_end: bool = False
    prune_below: float | None = Field(default=0.02, ge=0.0, le=1.0)
    stale_after: timedelta | None = timedelta(days=180)
    stale_max_importance: float = Field(default=0.3, ge=0.0, le=1.0)
    protect_importance: float = Field(default=0.9, ge=0.0, le=1.0)
    improve_limit: int = Field(default=200, ge=0)
    #: scheduled improve also rewrites wording (each rewrite is a new version); by default
    #: it only resolves contradictions
    improve_rewrites: bool = False
    llm_token_budget: int = Field(default=6000, ge=100)
    decay: DecayConfig = Field(default_factory=DecayConfig)
    #: the relevance maintenance measures (refresh, decay, limit); None: ``decay``'s formula
    scoring: Scoring | None = None
    #: a tier over its maximum (``short_term_max``, an agent's cap) is cut to
    #: ``keep_ratio`` x the maximum, the least relevant first; None: cut to the maximum
    keep_ratio: float | None = Field(default=None, gt=0.0, le=1.0)
    #: importance of the run summary written at run end; None: the highest of its sources
    summary_importance: float | None = Field(default=None, ge=0.0, le=1.0)
    #: at run end, archive the run's short-term memories except the newest N (the summary
    #: stands for them); None: keep them all
    run_end_keep_recent: int | None = Field(default=None, ge=0)
    #: expiry given to a write of a tier that sets none: ``{short_term = "1h"}``
    default_expiry: dict[Tier, timedelta] = Field(default_factory=dict)
    retention: RetentionPolicy = Field(default_factory=RetentionPolicy)
    consolidation: ConsolidationConfig = Field(default_factory=ConsolidationConfig)
    scorer: ImportanceScorer = Field(default_factory=ImportanceScorer)
    rules: ClassificationRules = Field(default_factory=ClassificationRules)

    @property
    def gc_scoring(self) -> Scoring:
        """The strategy maintenance measures relevance with."""
        return self.scoring if self.scoring is not None else self.decay.scoring()

    def keep_under(self, cap: int) -> int:
        """How many a tier over ``cap`` keeps."""
        return cap if self.keep_ratio is None else math.floor(cap * self.keep_ratio)

    @field_validator("default_expiry", mode="before")
    @classmethod
    def _intervals(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return {
                k: timedelta(seconds=parse_interval(t)) if isinstance(t, str | int | float) else t
                for k, t in v.items()
            }
        return v

    @model_validator(mode="after")
    def _check(self) -> LifecycleConfig:
        if self.stale_after is not None and self.stale_after <= timedelta(0):
            raise ValueError("stale_after must be positive")
        return self


# ---------------------------------------------------------------------------------------
# maintenance and servers

_INTERVAL_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_interval(value: str | float | int) -> float:
    """Seconds in an interval written ``90``, ``"45s"``, ``"30m"``, ``"1.5h"`` or ``"1d"``.

    >>> parse_interval("30m"), parse_interval(90)
    (1800.0, 90.0)
    """
    if isinstance(value, bool):
        raise ValueError("an interval is a number of seconds or a string like '30m'")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _INTERVAL_RE.match(str(value))
        if match is None:
            raise ValueError(
                f"cannot read interval {value!r}; write e.g. 90, '45s', '30m', '1h' or '1d'"
            )
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
    if not seconds > 0:
        raise ValueError("an interval must be positive")
    return seconds


class MaintenanceSettings(_Frozen):
    """Scheduled maintenance (``graphmem serve``, ``graphmem maintain --every``): the idle
    cycle (expiry, retention, decay, staleness, limits, improve, consolidation) every
    ``every``. ``dry_run`` only logs what each run would do; ``hard_delete`` deletes
    instead of archiving."""

    enabled: bool = True
    every: str = "1h"
    dry_run: bool = False
    hard_delete: bool = False
    #: also run the cycle in the process that opens the store (no server): a daemon
    #: thread started by ``GraphMemory.open`` and stopped by ``close``
    in_process: bool = False

    @field_validator("every", mode="before")
    @classmethod
    def _interval(cls, v: Any) -> str:
        parse_interval(v)
        return str(v)

    @property
    def seconds(self) -> float:
        return parse_interval(self.every)


class LogSettings(_Frozen):
    """The orchestration log (graphmem.eventlog): how payloads are shared.

    ``dedup = "value"`` stores a result/response value over ``dedup_min_chars`` once, at any
    depth; ``"entry"`` stores a whole payload that has a result/response key once when its
    JSON reaches ``dedup_min_chars``. What remains over ``inline_limit`` bytes is stored
    once as well."""

    dedup: Literal["value", "entry"] = "value"
    dedup_min_chars: int = Field(default=200, ge=0)
    inline_limit: int = Field(default=1024, ge=0)


class ServerSettings(_Frozen):
    """The HTTP API and the MCP server.

    With no ``api_keys`` the HTTP API is open (bind it to 127.0.0.1 only); with keys,
    every request needs ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``.
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    api_keys: tuple[ApiKey, ...] = ()
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    max_batch: int = Field(default=1000, ge=1)
    mcp_agent_id: str = "default"
    mcp_namespace: str = "default"
    mcp_port: int = Field(default=8766, ge=0, le=65535)

    def key_for(self, secret: str) -> ApiKey | None:
        """The configured key equal to ``secret`` (compared in constant time), if any."""
        import hmac

        found = None
        for k in self.api_keys:
            if hmac.compare_digest(k.key.get_secret_value().encode(), secret.encode()):
                found = k
        return found


class Settings(_Frozen):
    """Everything graphmem can be configured with (see the module docstring for sources).

    ``url``: a file path (embedded store), ``memory://`` or ``neo4j://host:7687``.
    ``embedder``: ``auto`` | ``none`` | ``hash`` | a sentence-transformers model.
    ``llm``: ``offline`` (deterministic, no network), ``anthropic`` or ``none``.
    """

    url: str = "graphmem.db"
    #: false: ``open_memory`` gives a NullMemory (stores nothing), as KAOS's MEMORY_ENABLED
    enabled: bool = True
    #: the named profile (graphmem.profiles) whose defaults sit under everything configured
    profile: str = "graphmem"
    username: str | None = None
    password: SecretStr | None = None
    database: str | None = None
    embedder: str = "auto"
    llm: Literal["offline", "anthropic", "none"] = "offline"
    llm_model: str = "claude-sonnet-4-5"
    llm_max_tokens: int = Field(default=1024, ge=1, le=64_000)
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    store: StoreSettings = StoreSettings()
    neo4j: Neo4jSettings = Neo4jSettings()
    vectors: VectorSettings = VectorSettings()
    knowledge: KnowledgeSettings = KnowledgeSettings()
    lifecycle: LifecycleConfig = LifecycleConfig()
    recall: RecallConfig = RecallConfig()
    org: OrgConfig = OrgConfig()
    reconcile: ReconcileConfig = ReconcileConfig()
    runs: RunLimits = RunLimits()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    log: LogSettings = LogSettings()
    server: ServerSettings = ServerSettings()
    # what was configured (files, environment, arguments) before the profile's overlay
    _configured: dict[str, Any] | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        # equal settings are equal values, however they were put together
        if isinstance(other, Settings):
            return self.__dict__ == other.__dict__
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.model_dump_json())

    @field_validator("profile", mode="before")
    @classmethod
    def _profile_name(cls, v: Any) -> Any:
        from graphmem.profiles import get_profile

        if isinstance(v, Mapping):  # a [profile] table: name = "..."
            v = v.get("name", "graphmem")
        try:
            return get_profile(v).name
        except ConfigError as e:
            raise ValueError(str(e)) from None

    # -- building ----------------------------------------------------------------------

    @classmethod
    def from_toml(cls, path: str | Path) -> Settings:
        """Defaults overlaid with a TOML file."""
        return cls._build([_read_toml(Path(path))])

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults overlaid with the file named by ``GRAPHMEM_CONFIG`` (if set) and the
        ``GRAPHMEM_*`` variables of ``environ`` (default: ``os.environ``, read now)."""
        return cls.load(environ=environ)

    @classmethod
    def load(
        cls,
        config_file: str | Path | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """All layers: defaults < TOML file < environment < ``overrides``.

        ``config_file`` defaults to ``$GRAPHMEM_CONFIG``. Overrides whose value is None are
        ignored (so unset command-line options fall through). Nested overrides are dicts:
        ``Settings.load(server={"port": 9000})``.
        """
        env = os.environ if environ is None else environ
        layers: list[dict[str, Any]] = [_neo4j_fallbacks(env)]
        path = config_file if config_file is not None else env.get(CONFIG_ENV)
        if path:
            layers.append(_read_toml(Path(path)))
        layers.append(_env_layer(env))
        layers.append({k: v for k, v in overrides.items() if v is not None})
        return cls._build(layers)

    @classmethod
    def _build(cls, layers: list[dict[str, Any]]) -> Settings:
        merged: dict[str, Any] = {}
        for layer in layers:
            merged = _deep_merge(merged, layer)
        configured = merged
        try:
            # the one place a profile applies: its overlay goes under what was configured
            if merged.get("profile") is not None:
                from graphmem.profiles import get_profile

                name = merged["profile"]
                if isinstance(name, Mapping):
                    name = name.get("name", "graphmem")
                merged = _deep_merge(get_profile(name).settings_layer(), merged)
            built = cls.model_validate(merged)
            built._configured = configured
            return built
        except ConfigError as e:
            raise ConfigError(f"invalid settings: profile: {e}") from e
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
                for err in e.errors()
            )
            raise ConfigError(f"invalid settings: {problems}") from e

    def replace(self, **changes: Any) -> Settings:
        """A validated copy with ``changes`` merged in (nested sections as dicts). A new
        ``profile`` replaces the old one's overlay; what was configured stays."""
        if "profile" in changes and changes["profile"] is not None:
            data = self.configured()
        else:
            data = self.model_dump()
        return type(self)._build([data, {k: v for k, v in changes.items() if v is not None}])

    def configured(self) -> dict[str, Any]:
        """What was configured (files, environment, arguments), without the profile's
        overlay and graphmem's defaults."""
        if self._configured is not None:
            return copy.deepcopy(self._configured)
        return self.model_dump(exclude_unset=True)

    # -- using -------------------------------------------------------------------------

    @property
    def auth(self) -> tuple[str, str] | None:
        """``(username, password)`` for a server backend, or None."""
        if self.username is None:
            return None
        pw = self.password.get_secret_value() if self.password is not None else ""
        return (self.username, pw)

    def backend_options(self) -> dict[str, Any]:
        """The options of the backend :attr:`url` names: the embedded store's
        (``store``) or Neo4j's (``neo4j``, with its driver options) — what
        ``GraphMemory.open`` passes to ``open_backend``."""
        scheme = self.url.partition("://")[0] if "://" in self.url else ""
        if scheme.startswith(("neo4j", "bolt")):
            opts = self.neo4j.model_dump(exclude={"driver_options"})
            if opts["cypher_dir"] is None:
                del opts["cypher_dir"]
            return {**opts, **self.neo4j.driver_options}
        return self.store.model_dump()

    def make_llm(self) -> Any | None:
        """The LLM these settings name (constructed lazily: no network here)."""
        if self.llm == "none":
            return None
        if self.llm == "offline":
            from graphmem.llm import OfflineLLM

            return OfflineLLM()
        from graphmem.llm import AnthropicLLM

        key = self.anthropic_api_key.get_secret_value() if self.anthropic_api_key else None
        return AnthropicLLM(
            model=self.llm_model,
            max_tokens=self.llm_max_tokens,
            api_key=key,
            base_url=self.anthropic_base_url,
        )

    def open_memory(self, **options: Any) -> GraphMemory:
        """Open the GraphMemory these settings describe (``options`` go to ``open``); a
        :class:`~graphmem.null.NullMemory` when ``enabled`` is false."""
        from graphmem.memory import GraphMemory

        if not self.enabled:
            from graphmem.null import NullMemory

            return NullMemory()  # type: ignore[return-value]

        options.setdefault("embedder", self.embedder)
        options.setdefault("llm", self.make_llm())
        return GraphMemory.open(settings=self, **options)

    def masked(self) -> dict[str, Any]:
        """The effective settings as plain data with every secret replaced by asterisks
        (including a password embedded in the URL)."""
        data = self.model_dump(mode="json")
        data["url"] = _mask_url(self.url)
        if self.anthropic_base_url:
            data["anthropic_base_url"] = _mask_url(self.anthropic_base_url)
        return data

    def __repr_args__(self) -> Any:  # the URL may carry a password
        for k, v in super().__repr_args__():
            yield k, (_mask_url(v) if k in ("url", "anthropic_base_url") and v else v)


# ---------------------------------------------------------------------------------------


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError as e:
        raise ConfigError(f"config file {str(path)!r} does not exist") from e
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {str(path)!r}: {e}") from e


def _env_value(raw: str) -> Any:
    """Environment strings: JSON for lists/maps, ``null`` for None, the raw string for
    everything else (pydantic converts numbers and booleans)."""
    text = raw.strip()
    if text == "null":  # an optional limit switched off: GRAPHMEM_RUNS__MAX_RUNS=null
        return None
    if text[:1] in ("[", "{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"malformed JSON in environment value: {e}") from e
    return raw


def _env_layer(env: Mapping[str, str]) -> dict[str, Any]:
    """The ``GRAPHMEM_*`` variables as a nested dict: a double underscore descends into a
    section (``GRAPHMEM_LIFECYCLE__DECAY__HALF_LIFE_DAYS``). Unknown names are logged, not
    fatal: other tools may share the prefix."""
    out: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in (CONFIG_ENV, CACHE_DIR_ENV):
            continue
        if name in TEST_ONLY_ENV:
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        if not _known(Settings, path):
            log.warning("ignoring unknown setting %s", name)
            continue
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = _env_value(raw)
    return out


def _known(model: type[BaseModel], path: list[str]) -> bool:
    """Whether ``path`` names a field of ``model`` (descending into nested models)."""
    field = model.model_fields.get(path[0])
    if field is None:
        return False
    if len(path) == 1:
        return True
    inner = field.annotation
    return isinstance(inner, type) and issubclass(inner, BaseModel) and _known(inner, path[1:])


#: Neo4j's own variable names, read when the GRAPHMEM_ ones are not set
NEO4J_FALLBACKS = {
    "url": "NEO4J_URI",
    "username": "NEO4J_USER",
    "password": "NEO4J_PASSWORD",
    "database": "NEO4J_DATABASE",
}


def neo4j_from_env(
    environ: Mapping[str, str] | None = None,
) -> tuple[str, tuple[str, str] | None, str | None] | None:
    """``(url, auth, database)`` of the Neo4j server the environment names — by the one
    convention, ``GRAPHMEM_URL`` / ``GRAPHMEM_USERNAME`` / ``GRAPHMEM_PASSWORD`` /
    ``GRAPHMEM_DATABASE``, with the ``NEO4J_*`` fallbacks — or None when the URL it names
    is not a Neo4j one (read now, when asked)."""
    env = os.environ if environ is None else environ
    found = _neo4j_fallbacks(env)
    for key in NEO4J_FALLBACKS:
        if env.get(ENV_PREFIX + key.upper()):
            found[key] = env[ENV_PREFIX + key.upper()]
    url = found.get("url")
    if not url or not url.startswith(("neo4j", "bolt")):
        return None
    user = found.get("username")
    auth = (user, found.get("password", "")) if user else None
    return url, auth, found.get("database") or None


def _neo4j_fallbacks(env: Mapping[str, str]) -> dict[str, Any]:
    """``NEO4J_URI`` / ``NEO4J_USER`` (or ``NEO4J_USERNAME``) / ``NEO4J_PASSWORD`` /
    ``NEO4J_DATABASE``: the connection when ``GRAPHMEM_URL`` (and the others) are not set
    (the ``GRAPHMEM_*`` layer comes after this one and wins)."""
    out = {k: env[v] for k, v in NEO4J_FALLBACKS.items() if env.get(v)}
    if "username" not in out and env.get("NEO4J_USERNAME"):
        out["username"] = env["NEO4J_USERNAME"]
    if "url" not in out:  # credentials alone do not move the store
        return {}
    return out


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(dict(out[k]), v)
        elif isinstance(v, BaseModel):
            out[k] = _deep_merge(dict(out.get(k) or {}), v.model_dump())
        else:
            out[k] = v
    return out


def _mask_url(url: str) -> str:
    """``neo4j://user:secret@host`` → ``neo4j://user:**********@host``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username}:{_MASK}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))
