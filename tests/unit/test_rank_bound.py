"""Recall scores only the candidates that can reach the first k: Scoring.ceiling bounds a
candidate's score by its query relevance, for every composition."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from graphmem.models import Memory
from graphmem.models.scoring import Composition, Curve, Frequency, RankWeights, Scoring
from graphmem.retrieval.candidates import _Cand, _scored

NOW = datetime(2026, 6, 1, tzinfo=UTC)

STRATEGIES = [
    Scoring(),
    Scoring(normalise=False, weights=RankWeights(recency=0.9, importance=0.8, trust=0.5)),
    Scoring(decay_as="factor", decay=Curve(shape="exponential", base=0.9, since="created")),
    Scoring(recency=Curve(shape="hyperbolic", days=1.0), frequency=Frequency(shape="linear")),
    Scoring(composition=Composition(kind="blend", signal_weight=0.6, relevance_weight=0.3)),
    Scoring(composition=Composition(kind="signals")),
    Scoring(composition=Composition(kind="multiplier", signal_weight=1.0)),
]


def _cands(rng: random.Random, n: int, negative: bool = False) -> list[_Cand]:
    out = []
    for i in range(n):
        created = NOW - timedelta(days=rng.uniform(0, 400))
        m = Memory(
            content=f"memory {i}",
            importance=rng.random(),
            access_count=rng.randrange(0, 30),
            created_at=created,
            last_accessed=rng.choice([None, created + timedelta(days=rng.uniform(0, 5))]),
        )
        c = _Cand(m)
        c.fused = rng.uniform(-1.0 if negative else 0.0, 1.0) if i % 7 else 0.5  # some ties
        out.append(c)
    return out


def _best(scored: list[tuple[float, str, _Cand, dict[str, float]]], k: int) -> list[str]:
    return [i for _s, i, _c, _sig in sorted(scored, key=lambda s: (-s[0], s[1]))[:k]]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_first_k_are_those_of_scoring_every_candidate(strategy: Scoring) -> None:
    rng = random.Random(5)
    pruned_some = False
    for trial in range(30):
        cands = _cands(rng, rng.randrange(1, 80), negative=trial % 3 == 0)
        every = _scored(cands, strategy, NOW, None)
        assert len(every) == len(cands)
        for keep in (1, 3, 10, 40):
            some = _scored(cands, strategy, NOW, keep)
            assert _best(some, keep) == _best(every, keep)
            pruned_some |= len(some) < len(cands)
    if strategy.composition.kind != "signals":  # (relevance barely moves those scores)
        assert pruned_some


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_ceiling_bounds_every_score(strategy: Scoring) -> None:
    rng = random.Random(11)
    for c in _cands(rng, 300, negative=True):
        score, _sig = strategy.score(c.fused, c.memory, NOW)
        assert score <= strategy.ceiling(c.fused)


def test_a_strategy_copied_with_other_weights_bounds_with_its_own() -> None:
    first = Scoring()
    first.ceiling(1.0)
    copy = first.model_copy(update={"normalise": False, "weights": RankWeights(recency=2.0)})
    rng = random.Random(3)
    cands = _cands(rng, 60)
    assert _best(_scored(cands, copy, NOW, 5), 5) == _best(_scored(cands, copy, NOW, None), 5)
    for c in cands:
        assert copy.score(c.fused, c.memory, NOW)[0] <= copy.ceiling(c.fused)
