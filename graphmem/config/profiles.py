"""Named profiles: the defaults of the systems graphmem was built from, one switch away.

A profile is data: an overlay of :class:`~graphmem.config.Settings` (nested sections as
dicts) whose scoring entries are :class:`~graphmem.models.scoring.Scoring` strategies — named curve
shapes and a composition — so no profile adds a code path of its own. ``graphmem`` (the
default) is the empty overlay.

Select one with ``GraphMemory.open(url, profile="openagentflow")``, ``profile =
"openagentflow"`` (or a ``[profile]`` table with ``name = ...``) in the TOML file, or
``GRAPHMEM_PROFILE=openagentflow``. The overlay sits between graphmem's defaults and what the
user configured: a setting given in TOML, the environment or code still wins over the
profile's.

>>> from graphmem.config import Settings
>>> Settings.load(environ={}, profile="synthorg").recall.rrf_k
60
>>> Settings.load(environ={}, profile="synthorg", recall={"rrf_k": 20}).recall.rrf_k
20
>>> sorted(PROFILES)
['graphmem', 'kaos', 'openagentflow', 'operator', 'orka', 'synthorg']
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from graphmem.errors import ConfigError
from graphmem.models.scoring import Composition, Curve, Frequency, RankWeights, Scoring

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile", "get_profile", "with_profile"]

DEFAULT_PROFILE = "graphmem"


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def _thawed(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    return copy.deepcopy(value)


@dataclass(frozen=True)
class Profile:
    """One named profile: ``overlay`` is a read-only nested mapping of Settings fields."""

    name: str
    source: str
    summary: str
    overlay: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overlay", _frozen(self.overlay))

    def settings_layer(self) -> dict[str, Any]:
        """The overlay as a fresh, mutable dict (a layer of ``Settings.load``)."""
        out: dict[str, Any] = _thawed(self.overlay)
        return out

    @property
    def scoring(self) -> Scoring:
        """The recall scoring strategy this profile sets (graphmem's when it sets none)."""
        recall = self.overlay.get("recall", {})
        found = recall.get("scoring") if isinstance(recall, Mapping) else None
        return found if isinstance(found, Scoring) else Scoring()


# OpenAgentFlow's three tiers: relevance = 0.3 recency + 0.2 frequency + 0.4 importance +
# 0.1 decay, recency 1/(1 + days since the last access), frequency min(accesses/10, 1), decay
# 0.95^days since creation; the relevance ranks what a query matched
OPENAGENTFLOW_SCORING = Scoring(
    recency=Curve(shape="hyperbolic", days=1.0, since="access"),
    frequency=Frequency(shape="linear", saturation=10),
    decay=Curve(shape="exponential", base=0.95, since="created"),
    weights=RankWeights(recency=0.3, frequency=0.2, importance=0.4, decay=0.1),
    composition=Composition(kind="signals"),
)

# Operator memory: score = 0.7 relevance + 0.3 recency, recency 1/(1 + age_days/30)
OPERATOR_SCORING = Scoring(
    recency=Curve(shape="hyperbolic", days=30.0, since="created"),
    weights=RankWeights(recency=1.0, frequency=0.0, importance=0.0, decay=0.0),
    composition=Composition(kind="blend", relevance_weight=0.7, signal_weight=0.3),
)

_PROFILES = (
    Profile(
        name="graphmem",
        source="graphmem",
        summary="graphmem's own defaults (tuned on LoCoMo)",
    ),
    Profile(
        name="openagentflow",
        source="OpenAgentFlow (three-tier memory)",
        summary=(
            "linear relevance of recency, frequency, importance and decay; short-term pruned "
            "below 0.15 (100 entries, every 10 writes), long-term below 0.10, stale after 30 "
            "days, cut to 70 % when over capacity; run summary of importance 0.8 replaces all "
            "but the 10 newest entries"
        ),
        overlay={
            "recall": {"scoring": OPENAGENTFLOW_SCORING, "fleeting_match": "substring"},
            "lifecycle": {
                "scoring": OPENAGENTFLOW_SCORING,
                "short_term_max": 100,
                "refresh_every": 10,
                "refresh_min_relevance": 0.15,
                "prune_below": 0.10,
                "stale_after": timedelta(days=30),
                "stale_max_importance": 1.0,
                "protect_importance": 1.0,
                "keep_ratio": 0.7,
                "summary_importance": 0.8,
                "run_end_keep_recent": 10,
            },
        },
    ),
    Profile(
        name="orka",
        source="OrKa (BaseMemoryLogger)",
        summary=(
            "importance from event type, agent-id substrings (memory +0.2, openai-answer "
            "+0.1) and one +0.1 for a result/response; short-term expires after 1 h, "
            "long-term after 24 h; the decay sweep runs every 30 min when switched on; a log "
            "payload with a result/response key stored once, whole, from 200 characters"
        ),
        overlay={
            "lifecycle": {
                "scorer": {
                    "base": 0.5,
                    "event_boosts": {
                        "write": 0.3,
                        "success": 0.2,
                        "completion": 0.2,
                        "result": 0.1,
                        "error": -0.1,
                    },
                    "agent_boosts": {"memory": 0.2, "openai-answer": 0.1},
                    "agent_match": "id_substring",
                    "signal_boosts": {"result": 0.1, "response": 0.1},
                    "signal_boost_mode": "once",
                },
                "default_expiry": {"short_term": "1h", "long_term": "24h"},
            },
            "maintenance": {"every": "30m"},
            "log": {"dedup": "entry", "dedup_min_chars": 200},
        },
    ),
    Profile(
        name="kaos",
        source="KAOS (LocalMemory)",
        summary=(
            "1000 sessions, 500 events per session; over a limit the one oldest is evicted "
            "(archived)"
        ),
        overlay={
            "runs": {"max_runs": 1000, "max_events_per_run": 500, "eviction": "oldest"},
        },
    ),
    Profile(
        name="synthorg",
        source="SynthOrg memory",
        summary=(
            "RRF k = 60; MMR diversity (bigram Jaccard without embeddings); the asking "
            "agent's own memories boosted; dense content compressed in context"
        ),
        overlay={
            "recall": {
                "rrf_k": 60,
                "mmr": True,
                "personal_boost": 0.1,
                "compress_dense": True,
            },
        },
    ),
    Profile(
        name="operator",
        source="Operator memory layer",
        summary="score = 0.7 relevance + 0.3 recency, recency 1/(1 + age_days/30)",
        overlay={"recall": {"scoring": OPERATOR_SCORING}},
    ),
)

#: every profile by name
PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in _PROFILES})


def get_profile(name: str) -> Profile:
    """The profile called ``name`` (case-insensitive); ConfigError names the choices."""
    if not isinstance(name, str):
        raise ConfigError(f"a profile name is a string, not {type(name).__name__}")
    try:
        return PROFILES[name.strip().lower()]
    except KeyError:
        raise ConfigError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}") from None


def with_profile(settings: Any | None, name: str) -> Any:
    """``settings`` (a :class:`~graphmem.config.Settings`, or None for the defaults) under
    the profile ``name``: what they configured stays, the profile fills the rest."""
    from graphmem.config import Settings

    get_profile(name)  # an unknown name fails here, before anything opens
    if settings is None:
        return Settings.load(environ={}, profile=name)
    if not isinstance(settings, Settings):
        raise ConfigError("a profile applies to graphmem.config.Settings")
    return settings.replace(profile=name)
