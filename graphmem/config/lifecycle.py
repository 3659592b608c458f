"""The lifecycle section: importance scorer, classification, decay, retention, consolidation."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from graphmem.config.service import parse_interval
from graphmem.models import Tier
from graphmem.models.scoring import Curve, Frequency, RankWeights, Scoring

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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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
        return self._event_tier(event_type) or self._importance_tier(importance)

    def tiers_for(
        self, event_types: Sequence[str | None], importances: Sequence[float]
    ) -> list[Tier]:
        """``tier_for`` of each memory of a batch (its event types and importances): the
        rules asked once per event type, the importance only where it decides."""
        by_event = {e: self._event_tier(e) for e in set(event_types)}
        decided = {e: tier for e, tier in by_event.items() if tier is not None}
        if len(decided) == len(by_event):
            return list(map(decided.__getitem__, event_types))
        return [
            by_event[e] or self._importance_tier(i)
            for e, i in zip(event_types, importances, strict=True)
        ]

    def _event_tier(self, event_type: str | None) -> Tier | None:
        """The tier an event type decides, or None when the importance does."""
        if event_type is None:
            return Tier.LONG_TERM
        if event_type in self.long_term_events:
            return Tier.LONG_TERM
        if event_type in self.short_term_events:
            return Tier.SHORT_TERM
        return None

    def _importance_tier(self, importance: float) -> Tier:
        return Tier.LONG_TERM if importance >= self.long_term_importance else Tier.SHORT_TERM


class DecayConfig(BaseModel):
    """Relevance = (w_i * importance + w_a * access signal) * 0.5 ** (days since the last
    access, or creation, / half_life_days)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    half_life_days: float = Field(default=30.0, gt=0.0)
    importance_weight: float = Field(default=0.7, ge=0.0)
    access_weight: float = Field(default=0.3, ge=0.0)
    access_saturation: int = Field(default=10, ge=1)

    def scoring(self) -> Scoring:
        """This formula as a :class:`~graphmem.models.scoring.Scoring` strategy (what maintenance
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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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
