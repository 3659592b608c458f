"""Finding near-duplicates: token-Jaccard pairs (exact or banded), embedding pairs, grouping."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from graphmem.errors import InvalidInput
from graphmem.llm import (
    tokens,
)

log = logging.getLogger("graphmem.consolidation")

CONSOLIDATE_PASS = "consolidate"
Embed = Callable[[list[str]], Any]
"""Texts -> a (n, dim) array of vectors (e.g. ``GraphMemory.embedder.embed``)."""


# ---------------------------------------------------------------------------------------
# exact token-Jaccard pairs


def token_set(text: str) -> frozenset[str]:
    """The set of lowercased word tokens of ``text`` (punctuation-insensitive)."""
    return frozenset(tokens(text))


def _fraction(threshold: float) -> Fraction:
    # Fraction(str(0.6)) == 3/5 exactly, so 0.6 * 5 is 3, not 3.0000000000000004
    t = Fraction(str(threshold))
    if not 0 < t <= 1:
        raise InvalidInput(f"threshold must be in (0, 1], got {threshold}")
    return t


def jaccard(a: frozenset[str] | set[Any], b: frozenset[str] | set[Any]) -> float:
    """|a & b| / |a | b| (0.0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _reaches(inter: int, union: int, t: Fraction) -> bool:
    return inter * t.denominator >= t.numerator * union


def brute_force_pairs(texts: Sequence[str], threshold: float) -> list[tuple[int, int, float]]:
    """Every pair ``(i, j, similarity)`` with ``i < j`` and Jaccard >= threshold, by comparing
    all pairs. O(n²): the reference for tests and benchmarks, not for production use."""
    t = _fraction(threshold)
    sets = [token_set(x) for x in texts]
    out = []
    for i in range(len(sets)):
        a = sets[i]
        if not a:
            continue
        for j in range(i + 1, len(sets)):
            b = sets[j]
            if not b:
                continue
            inter = len(a & b)
            union = len(a) + len(b) - inter
            if _reaches(inter, union, t):
                out.append((i, j, inter / union))
    return out


_BITMAP_WORDS = 4  # 256-bit token bitmaps


def _popcount_rows(words: np.ndarray) -> np.ndarray:
    counts: np.ndarray
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        counts = np.bitwise_count(words).sum(axis=1, dtype=np.int64)
    else:
        bytes_ = words.view(np.uint8).reshape(len(words), -1)
        counts = _POP8[bytes_].sum(axis=1, dtype=np.int64)
    return counts


_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def find_similar_pairs(
    texts: Sequence[str] | Sequence[frozenset[str]], threshold: float = 0.6
) -> list[tuple[int, int, float]]:
    """Every pair ``(i, j, similarity)``, ``i < j``, whose token Jaccard similarity is at
    least ``threshold`` — exactly the pairs :func:`brute_force_pairs` finds, sorted.

    Prefix filtering with an inverted index over the rarest-first token order and a size
    filter produce candidates; a bitmap filter (256-bit token bitmaps: the bits that differ
    bound the symmetric difference from below, so the overlap from above) discards most of
    them in numpy; the rest are verified exactly. Texts without a word token never pair.
    ``texts`` may also be token sets.
    """
    t = _fraction(threshold)
    num, den = t.numerator, t.denominator
    sets = [x if isinstance(x, frozenset) else token_set(x) for x in texts]
    df: Counter[str] = Counter()
    for ts in sets:
        df.update(ts)
    # rank tokens rarest first (ties by the token itself, for determinism)
    ranked = sorted(df.items(), key=lambda kv: (kv[1], kv[0]))
    rank = {tok: r for r, (tok, _) in enumerate(ranked)}
    records = [sorted(rank[tok] for tok in ts) for ts in sets]
    sizes_l = [len(r) for r in records]
    sizes = np.asarray(sizes_l, dtype=np.int64)
    bits = _BITMAP_WORDS * 64
    bitmaps = np.zeros((len(records), _BITMAP_WORDS), dtype=np.uint64)
    for i, rec in enumerate(records):
        row = [0] * _BITMAP_WORDS
        for r in rec:
            b = (r * 0x9E3779B1 >> 7) % bits
            row[b >> 6] |= 1 << (b & 63)
        bitmaps[i] = row
    order = sorted((i for i in range(len(records)) if records[i]), key=lambda i: sizes_l[i])
    index: dict[int, list[int]] = defaultdict(list)  # token rank -> record ids, by size
    start: dict[int, int] = {}  # per posting list: first entry still large enough
    rsets: dict[int, frozenset[int]] = {}
    out: list[tuple[int, int, float]] = []
    for x in order:
        rec = records[x]
        n = len(rec)
        min_size = (num * n + den - 1) // den  # ceil(t*n): smaller partners cannot reach t
        seen: set[int] = set()
        for tok in rec[: n - min_size + 1]:
            plist = index.get(tok)
            if plist is None:
                continue
            lo = start.get(tok, 0)
            # posting lists are in increasing size and later records are no smaller, so
            # entries too small now stay too small: skip them for good
            while lo < len(plist) and sizes_l[plist[lo]] < min_size:
                lo += 1
            if lo:
                start[tok] = lo
            seen.update(plist[lo:] if lo else plist)
        if seen:
            cand = np.fromiter(seen, dtype=np.int64, count=len(seen))
            if len(cand) > 8:
                msize = sizes[cand]
                differ = _popcount_rows(bitmaps[cand] ^ bitmaps[x])
                bound = (n + msize - differ) // 2  # overlap <= (|x|+|y|-differing bits)/2
                cand = cand[bound * (num + den) >= num * (n + msize)]
            if len(cand):
                sx = frozenset(rec)
                for y in cand.tolist():
                    sy = rsets.get(y)
                    if sy is None:
                        sy = rsets[y] = frozenset(records[y])
                    inter = len(sx & sy)
                    union = n + sizes_l[y] - inter
                    if inter * den >= num * union:
                        out.append((min(x, y), max(x, y), inter / union))
        # index a shorter prefix: a partner z processed later (|z| >= n) needs an overlap
        # of at least ceil(2t/(1+t)*n) with this record, so only that prefix can meet it
        for tok in rec[: n - (2 * num * n + (num + den) - 1) // (num + den) + 1]:
            index[tok].append(x)
    out.sort()
    return out


def group_pairs(n: int, pairs: Iterable[tuple[int, int, float]]) -> list[list[int]]:
    """Connected components (of size >= 2) of the pair graph over ``range(n)``, each sorted,
    ordered by their smallest member."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b, _ in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    comps: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        comps[find(i)].append(i)
    return sorted((c for c in comps.values() if len(c) > 1), key=lambda c: c[0])


def embedding_pairs(
    vectors: np.ndarray, threshold: float, *, block: int = 2048
) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, cosine)`` with cosine >= threshold (exact, blocked matrix products)."""
    raw = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    v = raw / np.where(norms == 0, 1, norms)
    out: list[tuple[int, int, float]] = []
    for lo in range(0, len(v), block):
        sims = v[lo : lo + block] @ v.T
        ii, jj = np.nonzero(sims >= threshold)
        for i, j in zip(ii.tolist(), jj.tolist(), strict=True):
            gi = lo + i
            if gi < j:
                out.append((gi, j, float(sims[i, j])))
    return out
