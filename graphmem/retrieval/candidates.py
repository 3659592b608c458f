"""A recall candidate and how a channel's ranking is fused into the candidates (the
first stage of :class:`graphmem.retrieval.retriever.Retriever`'s pipeline)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from datetime import datetime

from graphmem.config import RecallConfig
from graphmem.models import Hit, Memory
from graphmem.models.scoring import Scoring
from graphmem.models.values import assembled


def _fusion_top(cfg: RecallConfig, lexical: list[Hit], vector: list[Hit]) -> float:
    """The fused score of first place in every channel that ran (fusion divides by it)."""
    ran = (cfg.lexical_weight if lexical else 0.0) + (cfg.vector_weight if vector else 0.0)
    return (ran / (cfg.rrf_k + 1) if cfg.fusion == "rrf" else ran) or 1.0


def _add_ranked(
    cands: dict[str, _Cand], ranked: list[Memory], channel: str, weight: float, cfg: RecallConfig
) -> None:
    """Fuse a channel's ranking by rank: the n-th memory adds weight / (rrf_k + n)."""
    for rank, m in enumerate(ranked, start=1):
        c = cands.get(m.id)
        if c is None:
            c = cands[m.id] = _Cand(m)
        c.seed = True
        c.breakdown[f"{channel}_rank"] = float(rank)
        c.fused += weight / (cfg.rrf_k + rank)
        c.breakdown["fused"] = c.fused


def _own(memory: Memory) -> Memory:
    """A copy of ``memory`` with its own metadata dict, to hand out: a backend's searches
    may give recall its own models (see ``RecallSearch``)."""
    data = memory.__dict__.copy()
    data["metadata"] = dict(memory.metadata)
    return assembled(type(memory), data, set(memory.__pydantic_fields_set__))


def _scored(
    cands: Iterable[_Cand], strategy: Scoring, now: datetime, keep: int | None
) -> list[tuple[float, str, _Cand, dict[str, float]]]:
    """``(score, id, candidate, signals)`` of the candidates, most relevant first. With
    ``keep``, those that cannot reach the best ``keep`` scores are left out unscored: a
    candidate scores at most ``strategy.ceiling(fused)``, so once that is below the
    ``keep``-th best score found, no later (less relevant) candidate reaches it either."""
    scored: list[tuple[float, str, _Cand, dict[str, float]]] = []
    best: list[float] = []  # the best `keep` scores so far, the least first
    for c in sorted(cands, key=_most_fused):
        if keep and len(best) == keep and strategy.ceiling(c.fused) < best[0]:
            break
        score, sig = strategy.score(c.fused, c.memory, now)
        scored.append((score, c.memory.id, c, sig))
        if keep:
            if len(best) < keep:
                heapq.heappush(best, score)
            elif score > best[0]:
                heapq.heapreplace(best, score)
    return scored


def _most_fused(c: _Cand) -> float:
    return -c.fused


class _Cand:
    __slots__ = ("breakdown", "cosine", "fused", "memory", "seed")

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.breakdown: dict[str, float] = {}
        self.cosine: float | None = None
        self.fused = 0.0
        self.seed = False
