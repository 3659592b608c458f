"""Scoring strategies: how a memory's standing (recency, use, importance, age) is measured
and how it combines with query relevance.

A :class:`Scoring` is data — named curve shapes with their parameters, signal weights and a
composition — so graphmem's own ranking is one instance among others (the profiles of
:mod:`graphmem.config.profiles` choose other shapes, they do not add code paths).

Signals, each in 0..1:

- ``recency``: a :class:`Curve` of the days since the last access (or since creation);
- ``frequency``: a :class:`Frequency` of the access count;
- ``importance``: the memory's importance;
- ``decay``: a :class:`Curve` of the days since creation (or since the last access);
- ``trust``: 0.5 + 0.02 per access, capped at 1.

``signal`` is their weighted sum (divided by the sum of the weights when ``normalise``), or,
with ``decay_as="factor"``, the weighted sum of the other signals multiplied by ``decay``.
:class:`Composition` then gives the score of a recall candidate from its query relevance
(``fused``) and ``signal``:

- ``multiplier``: ``fused * ((1 - signal_weight) + signal_weight * signal)`` — graphmem's
  default: the signals reorder, they never make an irrelevant memory relevant;
- ``signals``: ``signal`` alone ranks the candidates that passed the relevance floor (the
  query relevance only breaks ties);
- ``blend``: ``relevance_weight * fused + signal_weight * signal``.

>>> from datetime import datetime, timedelta, timezone
>>> from graphmem.models import Memory
>>> now = datetime(2026, 1, 31, tzinfo=timezone.utc)
>>> m = Memory(content="x", importance=0.5, access_count=5,
...            created_at=now - timedelta(days=1), last_accessed=now - timedelta(days=1))
>>> round(Scoring().relevance(m, now), 3)        # graphmem's default signals
0.72
>>> oaf = Scoring(recency=Curve(shape="hyperbolic", days=1.0),
...               frequency=Frequency(shape="linear"),
...               decay=Curve(shape="exponential", base=0.95, since="created"))
>>> round(oaf.relevance(m, now), 3)
0.545
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from graphmem.models.nodes import Memory

__all__ = [
    "Composition",
    "Curve",
    "Frequency",
    "RankWeights",
    "Scoring",
    "days_since",
    "trust_score",
]

_DAY = 86_400.0
#: the names of a :meth:`Scoring.signals` dict
_SIGNALS = ("recency", "frequency", "importance", "decay", "trust")
TRUST_BASE = 0.5
TRUST_PER_RECALL = 0.02


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class RankWeights(_Frozen):
    """Weights of the relevance signals."""

    recency: float = Field(default=0.3, ge=0.0)
    frequency: float = Field(default=0.2, ge=0.0)
    importance: float = Field(default=0.4, ge=0.0)
    decay: float = Field(default=0.1, ge=0.0)
    #: :func:`trust_score` (off by default: recall raises it, so it feeds on itself)
    trust: float = Field(default=0.0, ge=0.0)


def trust_score(memory: Memory) -> float:
    """How far a memory has earned trust: 0.5, plus 0.02 per recorded access (each recall
    or context that returned it, each restated duplicate), capped at 1.0."""
    return min(1.0, TRUST_BASE + TRUST_PER_RECALL * memory.access_count)


def days_since(memory: Memory, now: datetime, since: Literal["access", "created"]) -> float:
    """Days from the memory's last access (its creation when never accessed) or from its
    creation to ``now``; never negative."""
    ref = (memory.last_accessed or memory.created_at) if since == "access" else memory.created_at
    return max((now - ref).total_seconds(), 0.0) / _DAY


class Curve(_Frozen):
    """A time curve, 1 at day 0 and falling:

    - ``half_life``: ``0.5 ** (days / days_param)`` (``days`` is the half-life);
    - ``hyperbolic``: ``1 / (1 + days / days_param)``;
    - ``exponential``: ``base ** days``.

    ``since`` says which clock it reads: the last access or the creation.
    """

    shape: Literal["half_life", "hyperbolic", "exponential"] = "half_life"
    days: float = Field(default=7.0, gt=0.0)
    base: float = Field(default=0.95, gt=0.0, le=1.0)
    since: Literal["access", "created"] = "access"

    def value(self, days: float) -> float:
        if self.shape == "half_life":
            return float(0.5 ** (days / self.days))
        if self.shape == "hyperbolic":
            return 1.0 / (1.0 + days / self.days)
        return float(self.base**days)

    def of(self, memory: Memory, now: datetime) -> float:
        return self.value(days_since(memory, now, self.since))


class Frequency(_Frozen):
    """Access frequency in 0..1: ``log`` = ``log1p(n) / log1p(saturation)`` or ``linear`` =
    ``n / saturation``, capped at 1."""

    shape: Literal["log", "linear"] = "log"
    saturation: int = Field(default=10, ge=1)

    def value(self, count: int) -> float:
        if self.shape == "log":
            return min(math.log1p(count) / math.log1p(self.saturation), 1.0)
        return min(count / self.saturation, 1.0)


class Composition(_Frozen):
    """How query relevance (``fused``) and the memory's ``signal`` make a score (see the
    module docs)."""

    kind: Literal["multiplier", "signals", "blend"] = "multiplier"
    signal_weight: float = Field(default=0.15, ge=0.0, le=1.0)
    #: ``blend`` only: the weight of query relevance
    relevance_weight: float = Field(default=0.7, ge=0.0)

    def score(self, fused: float, signal: float) -> float:
        if self.kind == "multiplier":
            return fused * ((1.0 - self.signal_weight) + self.signal_weight * signal)
        if self.kind == "signals":
            # ties (equal standing) still go to the more relevant memory
            return signal + 1e-6 * fused
        return self.relevance_weight * fused + self.signal_weight * signal


class Scoring(_Frozen):
    """One scoring strategy (see the module docs). The defaults are graphmem's recall
    ranking: recency halves every 7 days since the last access, frequency saturates
    logarithmically at 10 accesses, decay halves every 90 days of age, weights 0.3 / 0.2 /
    0.4 / 0.1, applied as a 15 % multiplier."""

    recency: Curve = Curve(shape="half_life", days=7.0, since="access")
    frequency: Frequency = Frequency()
    decay: Curve = Curve(shape="half_life", days=90.0, since="created")
    weights: RankWeights = RankWeights()
    #: divide the weighted sum by the sum of the weights
    normalise: bool = True
    #: ``term``: decay is one weighted signal; ``factor``: it multiplies the others
    decay_as: Literal["term", "factor"] = "term"
    composition: Composition = Composition()

    def signals(self, memory: Memory, now: datetime) -> dict[str, float]:
        """Each signal of ``memory`` at ``now``."""
        return {
            "recency": self.recency.of(memory, now),
            "frequency": self.frequency.value(memory.access_count),
            "importance": memory.importance,
            "decay": self.decay.of(memory, now),
            "trust": trust_score(memory),
        }

    def combine(self, sig: dict[str, float]) -> float:
        """The weighted signal of a :meth:`signals` dict."""
        w = self.weights
        decay_w = w.decay if self.decay_as == "term" else 0.0
        # summed in this order so graphmem's default scores stay bit-identical
        total = w.recency + w.frequency + w.importance + decay_w + w.trust
        value = (
            w.recency * sig["recency"]
            + w.frequency * sig["frequency"]
            + w.importance * sig["importance"]
            + decay_w * sig["decay"]
            + w.trust * sig["trust"]
        )
        if self.normalise:
            value = value / total if total > 0 else 0.0
        if self.decay_as == "factor":
            value *= sig["decay"]
        return value

    def relevance(self, memory: Memory, now: datetime) -> float:
        """The memory's standing at ``now``, independent of any query (the signal)."""
        return self.combine(self.signals(memory, now))

    def ceiling(self, fused: float) -> float:
        """The highest :meth:`score` any memory can have with query relevance ``fused``
        (each signal lies in 0..1 and the weights are not negative, so the combined signal
        lies between its values for all signals 0 and all 1, and a score is monotonic in
        it; the same float operations make the bound exact). It never falls as ``fused``
        rises. A subclass that scores otherwise says so here."""
        top = self.combine(dict.fromkeys(_SIGNALS, 1.0))
        return max(self.composition.score(fused, top), self.composition.score(fused, 0.0))

    def score(self, fused: float, memory: Memory, now: datetime) -> tuple[float, dict[str, float]]:
        """The score of a recall candidate with query relevance ``fused``, and its signals
        (with ``signals`` = the combined signal)."""
        sig = self.signals(memory, now)
        signal = sig["signals"] = self.combine(sig)
        return self.composition.score(fused, signal), sig
