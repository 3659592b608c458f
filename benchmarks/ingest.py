"""Batch ingest with embeddings against the model's raw throughput, measured in one run.

    python benchmarks/ingest.py [--n 2000] [--rounds 2] [--chunk 1000] [--busy 0]
                                [--modes background,inline]

The texts are LoCoMo turns (../shared/data/locomo_dev.json) as graphmem stores them. Each
round times, one after the other in this process:

- **raw ONNX**: the ONNX file and tokenizer of graphmem's default embedder, driven directly
  (``tokenizers`` + ``onnxruntime``, no graphmem code): every text tokenized once and
  sorted by token count, batches of 32 run longest first on as many threads as graphmem's
  embedder uses, one intra-op thread per run, mean pooling and L2 normalisation in numpy.
  The model's best plain throughput here.
- **graphmem, background vectors** (the default): ``remember_many`` in chunks of
  ``--chunk`` on a fresh embedded store, then ``mem.vectors.wait()``; the clock stops when
  every memory has its vector (searchable by vector).
- **graphmem, inline vectors**: the same with ``vectors="inline"`` (each chunk embedded
  before its write).

The embedding cache is off, so every text is computed. ``--busy N`` runs N CPU-bound
processes beside it. The ratio column is each row's rate over the raw rate of the same round;
every other round times its rows in the reverse order.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from embed import DEFAULT_DATA, locomo_texts  # noqa: E402

from graphmem.embeddings import OnnxEmbedder  # noqa: E402
from graphmem.memory import GraphMemory  # noqa: E402


class RawOnnx:
    """The embedder's model file, run with nothing of graphmem around it."""

    def __init__(self, model: Path, tokenizer: Path, max_length: int, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tok = Tokenizer.from_file(str(tokenizer))
        self.tok.enable_truncation(max_length)
        self.tok.no_padding()  # each batch is padded to its own longest text below
        self.threads = threads

    def _batch(self, encs: list) -> np.ndarray:
        width = max(len(e) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            ids[i, : len(e)] = e.ids
            mask[i, : len(e)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        out = self.session.run(None, feed)[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (out * m).sum(axis=1) / m.sum(axis=1)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def embed(self, texts: list[str]) -> np.ndarray:
        # every text tokenized once, sorted by token count (batches pad least), batches of
        # 32 run longest first (the threads end together)
        encs = self.tok.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encs[i]))
        chunks = [order[i : i + 32] for i in range(0, len(order), 32)][::-1]
        with ThreadPoolExecutor(self.threads) as pool:
            parts = list(pool.map(self._batch, ([encs[i] for i in c] for c in chunks)))
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        out[[i for c in chunks for i in c]] = np.concatenate(parts)
        return out


def raw_rate(raw: RawOnnx, texts: list[str]) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    raw.embed(texts)
    return len(texts) / (time.perf_counter() - t), time.process_time() - c


def graphmem_rate(texts: list[str], chunk: int, vectors: str) -> tuple[float, float]:
    items = [
        {"content": text, "agent_id": "bench", "run_id": f"run{i // 20}"}
        for i, text in enumerate(texts)
    ]
    with tempfile.TemporaryDirectory() as d:
        embedder = OnnxEmbedder(cache_size=0)
        embedder.embed(["warm up"])  # the model is loaded before the clock starts
        mem = GraphMemory.open(f"{d}/m.db", embedder=embedder, vectors=vectors)
        t, c = time.perf_counter(), time.process_time()
        for i in range(0, len(items), chunk):
            mem.remember_many(items[i : i + chunk])
        mem.vectors.wait()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        have = mem.backend.vector_index
        stored = len(have) if have is not None else 0
        mem.close()
        embedder.close()
    if stored != len(texts):
        raise SystemExit(f"{vectors}: {stored} of {len(texts)} memories have a vector")
    return len(texts) / wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="texts (memories) per measurement")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=1000, help="memories per remember_many call")
    ap.add_argument("--busy", type=int, default=0, help="CPU-bound processes to run beside")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument(
        "--modes", default="background,inline", help="graphmem's vector modes to time, by commas"
    )
    args = ap.parse_args()

    texts = locomo_texts(args.data)[: args.n]
    if len(texts) < args.n:
        raise SystemExit(f"only {len(texts)} texts in {args.data}")
    probe = OnnxEmbedder(cache_size=0)
    model = probe.prepare()
    raw = RawOnnx(model, probe.source / "tokenizer.json", probe._layout.max_length, probe.threads)
    raw.embed(texts[:64])  # warm up
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    modes = [m for m in args.modes.split(",") if m]
    rows: list[tuple[int, str, float, float, float]] = []
    load0 = os.getloadavg()[0]
    try:
        for r in range(args.rounds):
            # every other round runs backwards: a machine that gets busier or calmer within
            # a round then favours neither the raw model nor graphmem
            order = ["raw", *modes] if r % 2 == 0 else [*reversed(modes), "raw"]
            got: dict[str, tuple[float, float]] = {}
            for what in order:
                if what == "raw":
                    got[what] = raw_rate(raw, texts)
                else:
                    got[what] = graphmem_rate(texts, args.chunk, what)
            base = got["raw"][0]
            rows.append((r + 1, "raw ONNX", base, got["raw"][1], 1.0))
            for mode in modes:
                rate, cpu = got[mode]
                rows.append((r + 1, f"graphmem, {mode} vectors", rate, cpu, rate / base))
    finally:
        for p in busy:
            p.kill()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(
        f"`python benchmarks/ingest.py --n {args.n} --rounds {args.rounds} --chunk "
        f"{args.chunk} --busy {args.busy} --modes {args.modes}`; {probe.name} on ONNX Runtime, "
        f"{probe.threads} thread(s); {args.busy} CPU-bound process(es) beside; load average "
        f"{load0:.2f} at start, {os.getloadavg()[0]:.2f} at end; {when}\n"
    )
    print("| round | what | texts/s (wall) | of raw (wall) | process CPU s | texts/s of CPU |")
    print("|---:|---|---:|---:|---:|---:|")
    for r, what, rate, cpu, ratio in rows:
        print(f"| {r} | {what} | {rate:,.1f} | {ratio:.0%} | {cpu:.2f} | {args.n / cpu:,.1f} |")
    # medians over the rounds: on a shared machine one round's wall ratio swings with
    # whether both cores were free while it ran; the CPU ratio is the steadier measure
    print(
        "\n| what | of raw (wall): median (least–most) "
        "| of raw (texts/s of CPU): median (least–most) |"
    )
    print("|---|---:|---:|")
    raws = [cpu for _r, w, _rate, cpu, _ratio in rows if w == "raw ONNX"]
    for mode in modes:
        what = f"graphmem, {mode} vectors"
        mine = [(ratio, cpu) for _r, w, _rate, cpu, ratio in rows if w == what]
        by_cpu = [raw_cpu / cpu for (_ratio, cpu), raw_cpu in zip(mine, raws, strict=True)]
        wall = [ratio for ratio, _cpu in mine]
        print(
            f"| {what} | {statistics.median(wall):.1%} ({min(wall):.0%}–{max(wall):.0%}) | "
            f"{statistics.median(by_cpu):.1%} ({min(by_cpu):.0%}–{max(by_cpu):.0%}) |"
        )


if __name__ == "__main__":
    main()
