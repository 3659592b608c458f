"""Embedding speed: one text at a time (p50/p95) and one large batch (texts/s), per runtime.

    python benchmarks/embed.py [--runtime onnx onnx:int8 torch torch-unpinned]
                               [--single 300] [--batch 1024] [--busy 1]

Texts are LoCoMo turns ("speaker: words [shares an image: …]") from
../shared/data/locomo_dev.json, as graphmem stores them; the embedding cache is off so every
text is computed. ``--busy N`` starts N CPU-bound processes (``while True: pass``) beside the
measurement, the "under load" case; the machine's own load is printed too, since other work on
it counts. ``cos vs torch`` is the smallest cosine between a runtime's vector and the
sentence-transformers vector of the same text (batch run). ``torch-unpinned`` is the old
behaviour: every call on torch's default thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from graphmem.embeddings import (  # noqa: E402
    Embedder,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
)

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo_dev.json"


def locomo_texts(path: Path) -> list[str]:
    if not path.is_file():
        words = "alice bob tea meeting berlin release review server crash garden".split()
        rng = np.random.default_rng(0)
        return [" ".join(rng.choice(words, size=rng.integers(4, 40))) for _ in range(4000)]
    out: list[str] = []
    for sample in json.loads(path.read_text()):
        for key, turns in sample["conversation"].items():
            if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                for t in turns:
                    text = f"{t['speaker']}: {t.get('text', '')}"
                    if t.get("blip_caption"):
                        text += f" [shares an image: {t['blip_caption']}]"
                    out.append(text)
    rng = np.random.default_rng(0)
    rng.shuffle(out)  # type: ignore[arg-type]
    return out


class UnpinnedTorch(SentenceTransformerEmbedder):
    """Every call on torch's default thread count (graphmem before per-call threads)."""

    def threads_for(self, n_texts: int) -> int:
        import torch

        return int(torch.get_num_threads())


def make(runtime: str) -> Embedder:
    if runtime == "onnx":
        e: Any = OnnxEmbedder(cache_size=0)
    elif runtime == "onnx:int8":
        e = OnnxEmbedder(quantize="int8", cache_size=0)
    elif runtime == "torch":
        e = SentenceTransformerEmbedder(cache_size=0)
    elif runtime == "torch-unpinned":
        e = UnpinnedTorch(cache_size=0)
    else:
        raise SystemExit(f"unknown runtime {runtime!r}")
    if isinstance(e, OnnxEmbedder):
        e.prepare()
    return e  # type: ignore[no-any-return]


def measure(e: Embedder, single: list[str], batch: list[str]) -> dict[str, float]:
    e.embed(single[:3])  # load the model, warm up
    e.embed(batch[:64])
    lat = []
    for text in single:
        t0 = time.perf_counter()
        e.embed([text])
        lat.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    vecs = e.embed(batch)
    seconds = time.perf_counter() - t0
    return {
        "p50": float(np.percentile(lat, 50)),
        "p95": float(np.percentile(lat, 95)),
        "rate": len(batch) / seconds,
        "vecs": vecs,  # type: ignore[dict-item]
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--runtime", nargs="+", default=["onnx", "onnx:int8", "torch", "torch-unpinned"]
    )
    ap.add_argument("--single", type=int, default=300, help="texts embedded one at a time")
    ap.add_argument("--batch", type=int, default=1024, help="texts in the one batch call")
    ap.add_argument("--busy", type=int, default=0, help="CPU-bound processes to run beside")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()

    texts = locomo_texts(args.data)
    single = texts[: args.single]
    batch = texts[args.single : args.single + args.batch]
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)
    ]
    try:
        time.sleep(1.0 if spinners else 0.0)
        load_before = os.getloadavg()
        rows = []
        ref: np.ndarray | None = None
        for runtime in args.runtime:
            r = measure(make(runtime), single, batch)
            if runtime == "torch":
                ref = r["vecs"]  # type: ignore[assignment]
            rows.append((runtime, r))
        load_after = os.getloadavg()
    finally:
        for p in spinners:
            p.kill()
            p.wait()

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"busy processes beside: {args.busy}; load average (1 min) "
        f"{load_before[0]:.2f} at start, {load_after[0]:.2f} at end"
    )
    print(f"texts: {len(single)} single, batch of {len(batch)} (LoCoMo turns)\n")
    print("| runtime | single p50 ms | single p95 ms | batch texts/s | min cos vs torch |")
    print("|---|---:|---:|---:|---:|")
    for runtime, r in rows:
        cos = "—"
        if ref is not None:
            cos = f"{float((r['vecs'] * ref).sum(axis=1).min()):.4f}"  # type: ignore[operator]
        print(f"| {runtime} | {r['p50']:.1f} | {r['p95']:.1f} | {r['rate']:.0f} | {cos} |")


if __name__ == "__main__":
    main()
