"""Consolidation benchmark: time and exactness at 10k / 100k memories, and LLM calls and
tokens per pass against the local Anthropic stub.

    python benchmarks/consolidation.py --sizes 10000 100000 --dup-share 0.1

Corpus: synthetic agent memories — template facts about people/projects/tools mixed with
free text drawn from a Zipf vocabulary (with stop words, so common tokens are common), of
6-40 words; ``--dup-share`` of them are near-duplicates of an earlier memory (0-3 word
edits, case and punctuation changes).

Exactness: at sizes <= ``--brute-max`` every pair is checked by brute force; above it, all
partners of ``--sample`` random memories are computed exactly with a sparse matrix product
over the whole corpus and compared with the pairs consolidation found for them.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np
from scipy import sparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graphmem.backends.embedded import NetworkXBackend  # noqa: E402
from graphmem.consolidation import (  # noqa: E402
    brute_force_pairs,
    consolidate,
    find_similar_pairs,
    improve_memories,
    store_facts,
    summarize_into_memory,
    token_set,
)
from graphmem.llm import AnthropicLLM  # noqa: E402
from graphmem.models import Memory  # noqa: E402

STOP = "the a of to in is and for on with at by it this that was be as are from".split()
PEOPLE = "Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia".split()
THINGS = (
    "tea coffee python rust postgres redis kafka vim emacs linux mac the dashboard "
    "the billing service the api gateway the nightly job the data warehouse"
).split()


def corpus(n: int, dup_share: float, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    vocab = [
        f"{rng.choice('bcdfghjklmnpqrstvwz')}{rng.choice('aeiou')}"
        f"{rng.choice('bcdfghjklmnprst')}{rng.choice('aeiou')}{i}"
        for i in range(30_000)
    ]
    words = STOP + vocab
    cum = list(itertools.accumulate(1.0 / (r + 1) ** 1.05 for r in range(len(words))))
    texts: list[str] = []
    for _ in range(n):
        if texts and rng.random() < dup_share:
            base = rng.choice(texts).rstrip(".!").split()
            for _ in range(rng.randint(0, 3)):
                op = rng.random()
                if op < 0.4:
                    base[rng.randrange(len(base))] = rng.choices(words, cum_weights=cum)[0]
                elif op < 0.7:
                    base.insert(
                        rng.randrange(len(base) + 1), rng.choices(words, cum_weights=cum)[0]
                    )
                elif len(base) > 3:
                    base.pop(rng.randrange(len(base)))
            text = " ".join(base)
            texts.append((text.lower() if rng.random() < 0.3 else text) + rng.choice(".!"))
        elif rng.random() < 0.3:
            who, what = rng.choice(PEOPLE), rng.choice(THINGS)
            extra = " ".join(rng.choices(words, cum_weights=cum, k=rng.randint(3, 20)))
            texts.append(f"{who} prefers {what} when working on {extra}.")
        else:
            texts.append(" ".join(rng.choices(words, cum_weights=cum, k=rng.randint(6, 40))))
    return texts


def exact_partners(texts: list[str], sample: list[int], threshold: float) -> set[tuple[int, int]]:
    """Every pair (i, j), i<j, with one end in ``sample`` and Jaccard >= threshold, computed
    exactly against the whole corpus with a sparse overlap product."""
    from fractions import Fraction

    t = Fraction(str(threshold))
    sets = [token_set(x) for x in texts]
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, s in enumerate(sets):
        for tok in s:
            rows.append(i)
            cols.append(vocab.setdefault(tok, len(vocab)))
    m = sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(sets), len(vocab))
    )
    sizes = np.asarray([len(s) for s in sets], dtype=np.int64)
    out: set[tuple[int, int]] = set()
    for lo in range(0, len(sample), 200):
        block = sample[lo : lo + 200]
        inter = (m[block] @ m.T).toarray().astype(np.int64)
        for r, i in enumerate(block):
            union = sizes[i] + sizes - inter[r]
            ok = (inter[r] * t.denominator >= t.numerator * union) & (union > 0)
            ok[i] = False
            ok &= sizes > 0
            for j in np.nonzero(ok)[0].tolist():
                out.add((min(i, j), max(i, j)))
    return out


def bench_size(n: int, args: argparse.Namespace) -> dict[str, object]:
    texts = corpus(n, args.dup_share, seed=n)
    t0, c0 = time.perf_counter(), time.process_time()
    pairs = find_similar_pairs(texts, 0.6)
    t_pairs, c_pairs = time.perf_counter() - t0, time.process_time() - c0
    if n <= args.brute_max:
        t0 = time.perf_counter()
        exact = brute_force_pairs(texts, 0.6) == pairs
        check = (
            f"brute force over all {n * (n - 1) // 2:,} pairs: identical={exact} "
            f"({time.perf_counter() - t0:.0f} s)"
        )
    else:
        rng = random.Random(1)
        sample = rng.sample(range(n), args.sample)
        want = exact_partners(texts, sample, 0.6)
        sset = set(sample)
        got = {(i, j) for i, j, _ in pairs if i in sset or j in sset}
        exact = want == got
        check = (
            f"exact partners of {args.sample} random memories (sparse product over all "
            f"{n:,}): {len(want)} pairs, identical={exact}"
        )

    backend = NetworkXBackend(None)
    memories = [Memory(content=t, agent_id="bench") for t in texts]
    t0 = time.perf_counter()
    for lo in range(0, n, 5000):
        backend.upsert(memories[lo : lo + 5000])
    t_ingest = time.perf_counter() - t0
    t0 = time.perf_counter()
    plan = consolidate(backend, dry_run=True)
    t_dry = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    done = consolidate(backend)
    t_apply, c_apply = time.perf_counter() - t0, time.process_time() - c0
    merged_sources = sum(len(g.source_ids) for g in done.groups if g.merged_id)
    backend.close()
    return {
        "n": n,
        "pairs": len(pairs),
        "t_pairs": t_pairs,
        "c_pairs": c_pairs,
        "c_apply": c_apply,
        "exact": exact,
        "check": check,
        "t_ingest": t_ingest,
        "t_dry": t_dry,
        "t_apply": t_apply,
        "groups": len(done.groups),
        "superseded": merged_sources,
        "dry_groups": len(plan.groups),
    }


def bench_llm(args: argparse.Namespace) -> dict[str, object]:
    from tests.llm.anthropic_stub import StubAnthropic

    texts = corpus(2000, 0.1, seed=7)
    with StubAnthropic() as stub:
        llm = AnthropicLLM(base_url=stub.url, api_key="bench", max_retries=0)
        backend = NetworkXBackend(None)
        mems = [
            Memory(content=t, agent_id="bench", run_id=f"r{i % 20}") for i, t in enumerate(texts)
        ]
        backend.upsert(mems)
        report = consolidate(backend, llm=llm)
        llm_groups = sum(1 for g in report.groups if g.content_source == "llm")
        for r in range(5):
            run = [m for m in mems if m.run_id == f"r{r}"][:50]
            summarize_into_memory(backend, llm, run, purpose="run")
        for lo in range(0, 200, 50):
            improve_memories(backend, llm, mems[lo : lo + 50])
        for t in texts[:100]:
            store_facts(backend, llm, t, agent_id="bench")
        for t in texts[100:150]:
            llm.reflect(f"What about {t.split()[0]}?", mems[:10])
        usage = llm.usage
        backend.close()
        llm.close()
    return {
        "usage": usage,
        "groups": len(report.groups),
        "llm_groups": llm_groups,
        "requests": len(stub.requests),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--dup-share", type=float, default=0.1)
    ap.add_argument("--brute-max", type=int, default=10_000)
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--no-llm", action="store_true")
    args = ap.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}; dup share {args.dup_share}\n"
    )
    print(
        f"load average at start: {os.getloadavg()[0]:.1f} (wall times include waiting "
        "for the CPU; CPU = this process's CPU time)\n"
    )
    print(
        "| memories | pairs >= 0.6 | pair finding wall / CPU | exactness | "
        "ingest (not counted) | consolidate dry run | consolidate apply wall / CPU | "
        "groups merged | superseded |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        r = bench_size(n, args)
        print(
            f"| {n:,} | {r['pairs']:,} | {r['t_pairs']:.1f} s / {r['c_pairs']:.1f} s | "
            f"{r['check']} | {r['t_ingest']:.1f} s | {r['t_dry']:.1f} s | "
            f"{r['t_apply']:.1f} s / {r['c_apply']:.1f} s | "
            f"{r['groups']:,} | {r['superseded']:,} |",
            flush=True,
        )
    if not args.no_llm:
        r = bench_llm(args)
        print(
            f"\nLLM passes against the local stub ({r['requests']} HTTP requests; "
            f"consolidation: {r['groups']} groups, {r['llm_groups']} synthesised by the LLM, "
            "the rest duplicates merged deterministically). Token counts are the stub's "
            "estimate (request/answer characters / 4), not a real model's.\n"
        )
        print("| pass | calls | input tokens | output tokens | input tokens / call |")
        print("|---|---:|---:|---:|---:|")
        for name, u in sorted(r["usage"].items()):  # type: ignore[attr-defined]
            print(
                f"| {name} | {u.calls} | {u.input_tokens:,} | {u.output_tokens:,} | "
                f"{u.input_tokens // max(u.calls, 1):,} |"
            )


if __name__ == "__main__":
    main()
