"""LoCoMo evidence-retrieval benchmark for graphmem recall.

Two ways in, both measured by default (``--path``):

- **user path** — what a user of the public API does: each turn is
  ``remember(text, agent_id=<conversation>, run_id=<session>, created_at=<session date>)``
  and each question ``recall(question, agent_id=<conversation>, k=50)`` with access touching
  on (so earlier questions move recency/frequency for later ones, as in real use);
- **event path** — each session is a run fed with ``add_events`` (NEXT order inside the
  session; the conversation owns the run and authors its events, as a run has one owner, and
  each turn's speaker is in its metadata; namespace = conversation) and questions are asked
  through the :class:`Retriever` with ``touch=False``.

Reported: evidence recall@5/10/25/50 overall and per category, session-level recall,
p50/p95 recall latency (query embedding included) — and, in the same run, BM25-only and
vector-only baselines over the event-path store.

    python benchmarks/locomo.py [--data ../shared/data/locomo_dev.json] [--path both] [--write]

recall@k = |gold ∩ top-k| / |gold|, averaged over questions with gold evidence. Evidence ids
are normalised with ``D:?(\\d+):(\\d+)``; ids that name no turn are dropped (and counted).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from graphmem.config import RecallConfig  # noqa: E402
from graphmem.embeddings import make_embedder  # noqa: E402
from graphmem.memory import GraphMemory  # noqa: E402
from graphmem.models import Filter, Memory, TextQuery, VectorQuery  # noqa: E402
from graphmem.retrieval import Retriever  # noqa: E402

KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE_RE = re.compile(r"D:?(\d+):(\d+)")
_SESSION_RE = re.compile(r"^session_(\d+)$")
# the data sits next to the checkout (main) or two levels up (a worktree under wt/)
DEFAULT_DATA = next(
    (
        p
        for p in (
            ROOT.parent / "shared" / "data" / "locomo_dev.json",
            ROOT.parent.parent / "shared" / "data" / "locomo_dev.json",
        )
        if p.exists()
    ),
    ROOT.parent / "shared" / "data" / "locomo_dev.json",
)


# ---------------------------------------------------------------------------------------
# dataset


@dataclass
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str | None
    at: datetime


@dataclass
class Question:
    text: str
    category: int
    gold: list[str]


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: dict[int, list[Turn]] = field(default_factory=dict)
    questions: list[Question] = field(default_factory=list)
    dropped_evidence: int = 0


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> aware UTC datetime (the dataset gives no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def normalise_evidence(raw: Sequence[str]) -> list[str]:
    out: list[str] = []
    for item in raw:
        for s, t in _EVIDENCE_RE.findall(str(item)):
            dia = f"D{int(s)}:{int(t)}"
            if dia not in out:
                out.append(dia)
    return out


def load(path: Path) -> list[Conversation]:
    data = json.loads(path.read_text())
    convs = []
    for sample in data:
        c = sample["conversation"]
        conv = Conversation(sample["sample_id"], (c.get("speaker_a", ""), c.get("speaker_b", "")))
        for key, turns in c.items():
            m = _SESSION_RE.match(key)
            if not m or not isinstance(turns, list) or not turns:
                continue
            n = int(m.group(1))
            start = parse_session_date(c[f"session_{n}_date_time"])
            conv.sessions[n] = [
                Turn(
                    dia_id=normalise_evidence([t["dia_id"]])[0],
                    session=n,
                    speaker=t["speaker"],
                    text=t.get("text", ""),
                    caption=t.get("blip_caption"),
                    at=start + timedelta(seconds=i),
                )
                for i, t in enumerate(turns)
            ]
        known = {t.dia_id for ts in conv.sessions.values() for t in ts}
        for qa in sample.get("qa", []):
            gold = normalise_evidence(qa.get("evidence", []))
            kept = [g for g in gold if g in known]
            conv.dropped_evidence += len(gold) - len(kept)
            conv.questions.append(Question(qa["question"], int(qa["category"]), kept))
        convs.append(conv)
    return convs


def turn_content(t: Turn) -> str:
    """What a turn looks like as a memory: the speaker, the words, any shared image."""
    text = f"{t.speaker}: {t.text}".strip()
    if t.caption:
        text += f" [shares an image: {t.caption}]"
    return text


def ingest_user(mem: GraphMemory, conv: Conversation) -> int:
    """The user path: one ``remember`` per turn, the conversation as the agent."""
    n = 0
    for s in sorted(conv.sessions):
        for t in conv.sessions[s]:
            mem.remember(
                turn_content(t),
                agent_id=conv.sample_id,
                run_id=f"{conv.sample_id}/session-{s}",
                category="episodic",
                created_at=t.at,
                metadata={"dia_id": t.dia_id, "speaker": t.speaker, "session": s},
            )
            n += 1
    return n


def ingest(mem: GraphMemory, conv: Conversation) -> int:
    n = 0
    for s in sorted(conv.sessions):
        turns = conv.sessions[s]
        run_id = f"{conv.sample_id}/session-{s}"
        # The session is one run holding both speakers' turns; a run has one owner (no other
        # agent may add to it), so the conversation owns it, as on the user path, and each
        # turn's speaker is in its metadata.
        mem.runs.start(
            agent_id=conv.sample_id,
            run_id=run_id,
            namespace=conv.sample_id,
            started_at=turns[0].at,
            metadata={"session": s},
        )
        mem.runs.add_events(
            run_id,
            [
                {
                    "event_type": "message",
                    "content": turn_content(t),
                    "agent_id": conv.sample_id,
                    "namespace": conv.sample_id,
                    "category": "episodic",
                    "tier": "long_term",
                    "created_at": t.at,
                    "metadata": {"dia_id": t.dia_id, "speaker": t.speaker, "session": s},
                }
                for t in turns
            ],
        )
        n += len(turns)
    return n


class DiskCachedEmbedder:
    """Benchmark helper: serves embeddings from an .npz file keyed by text, so repeated
    runs (tuning) do not re-embed the dataset. The wrapped model computes the misses."""

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = path
        self._rows: dict[str, Any] = {}
        if path.exists():
            with np.load(path, allow_pickle=False) as z:
                self._rows = dict(zip(z["texts"].tolist(), z["vecs"], strict=True))
        self._dirty = False

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed(self, texts: Sequence[str]) -> Any:
        missing = [t for t in dict.fromkeys(texts) if t not in self._rows]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self._rows[t] = v
            self._dirty = True
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._rows[t] for t in texts]).astype(np.float32)

    def save(self) -> None:
        if self._dirty:
            texts = list(self._rows)
            vecs = np.stack([self._rows[t] for t in texts])
            np.savez(self.path, texts=np.array(texts), vecs=vecs)


# ---------------------------------------------------------------------------------------
# evaluation


@dataclass
class Scores:
    name: str
    hits: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    by_cat: dict[tuple[int, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    session_hits: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    latencies: list[float] = field(default_factory=list)

    def add(self, q: Question, ranked: list[str], seconds: float) -> None:
        self.latencies.append(seconds)
        gold = set(q.gold)
        gold_sessions = {g.split(":")[0] for g in gold}
        for k in KS:
            top = ranked[:k]
            r = len(gold & set(top)) / len(gold)
            self.hits[k].append(r)
            self.by_cat[(q.category, k)].append(r)
            sess = {d.split(":")[0] for d in top}
            self.session_hits[k].append(len(gold_sessions & sess) / len(gold_sessions))

    def recall(self, k: int) -> float:
        return 100 * statistics.fmean(self.hits[k])

    def session_recall(self, k: int) -> float:
        return 100 * statistics.fmean(self.session_hits[k])

    def cat_recall(self, cat: int, k: int) -> float | None:
        v = self.by_cat.get((cat, k))
        return 100 * statistics.fmean(v) if v else None

    def latency_ms(self, q: float) -> float:
        xs = sorted(self.latencies)
        return 1000 * xs[min(len(xs) - 1, int(q * len(xs)))]


def _dia(m: Memory) -> str:
    return str(m.metadata.get("dia_id", ""))


def evaluate(
    convs: list[Conversation],
    systems: dict[str, Callable[[str, str], list[str]]],
) -> dict[str, Scores]:
    scores = {name: Scores(name) for name in systems}
    for conv in convs:
        for q in conv.questions:
            if not q.gold:
                continue
            for name, run in systems.items():
                t0 = time.perf_counter()
                ranked = run(q.text, conv.sample_id)
                scores[name].add(q, ranked, time.perf_counter() - t0)
    return scores


System = Callable[[str, str], list[str]]


def build_systems(mem: GraphMemory, config: RecallConfig) -> dict[str, System]:
    retriever = Retriever(mem.backend, mem.embedder, config=config)
    backend, embedder = mem.backend, mem.embedder
    kmax = max(KS)

    def scope(sample_id: str) -> Filter:
        return Filter.for_memories(namespace=sample_id)

    def hybrid(question: str, sample_id: str) -> list[str]:
        rs = retriever.recall(question, k=kmax, filter=scope(sample_id), touch=False)
        return [_dia(r.memory) for r in rs]

    def bm25(question: str, sample_id: str) -> list[str]:
        hits = backend.search_text(TextQuery(text=question, filter=scope(sample_id), k=kmax))
        return [_dia(h.node) for h in hits]

    def vector(question: str, sample_id: str) -> list[str]:
        assert embedder is not None
        vec = embedder.embed([question])[0]
        hits = backend.search_vector(
            VectorQuery(vector=tuple(vec.tolist()), filter=scope(sample_id), k=kmax)
        )
        return [_dia(h.node) for h in hits]

    systems = {"event path": hybrid, "BM25 only": bm25}
    if embedder is not None:
        systems["vector only"] = vector
    return systems


def user_system(mem: GraphMemory, config: RecallConfig) -> System:
    kmax = max(KS)

    def user(question: str, sample_id: str) -> list[str]:
        rs = mem.recall(question, agent_id=sample_id, k=kmax, config=config)
        return [_dia(r.memory) for r in rs]

    return user


# ---------------------------------------------------------------------------------------
# report


def report(
    scores: dict[str, Scores],
    convs: list[Conversation],
    args: argparse.Namespace,
    extra: dict[str, Any],
) -> str:
    n_q = sum(1 for c in convs for q in c.questions if q.gold)
    n_all = sum(len(c.questions) for c in convs)
    lines = [
        f"Data: `{args.data}` — {len(convs)} conversations, "
        f"{extra['turns']} turns, {n_q} of {n_all} questions with gold evidence "
        f"({extra['dropped']} evidence ids naming no turn dropped). "
        f"Embedder: {extra['embedder']}. Knowledge layer: {args.knowledge}. "
        f"Ingest: {extra['ingest_s']}. "
        + (
            "Embeddings (turns and questions) came from the cache file "
            f"`{args.embed_cache}`, so ingest and latency exclude the model. "
            if args.embed_cache
            else "Hybrid latency includes embedding the question (the "
            "baselines, run after it, reuse that cached embedding). "
        )
        + f"Load average {os.getloadavg()[0]:.1f} at the end of the run.",
        "",
        "| system | R@5 | R@10 | R@25 | R@50 | session R@5 | session R@10 | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in scores.values():
        lines.append(
            f"| {s.name} | "
            + " | ".join(f"{s.recall(k):.1f}" for k in KS)
            + f" | {s.session_recall(5):.1f} | {s.session_recall(10):.1f}"
            + f" | {s.latency_ms(0.5):.1f} | {s.latency_ms(0.95):.1f} |"
        )
    firsts = [f"{s.name} {1000 * s.latencies[0]:.0f} ms" for s in scores.values() if s.latencies]
    lines += ["", "First recall after the ingest (read your writes included): " + ", ".join(firsts)]
    names = " / ".join(scores)
    lines += [
        "",
        f"Per category ({names}):",
        "",
        "| category | n | " + " | ".join(f"R@{k}" for k in KS) + " |",
        "|---|---|" + "---|" * len(KS),
    ]
    for cat, label in CATEGORIES.items():
        n = len(next(iter(scores.values())).by_cat.get((cat, 10), []))
        if not n:
            continue
        cells = [" / ".join(f"{s.cat_recall(cat, k):.1f}" for s in scores.values()) for k in KS]
        lines.append(f"| {cat} {label} | {n} | " + " | ".join(cells) + " |")
    notes = {
        "user path": "`remember` per turn (agent = conversation, run = session, created_at = "
        "session date), `recall(question, agent_id=..., k=50)` with touching on",
        "user path, no entities": "the same without the knowledge layer (no entity "
        "indexing, no entity hops)",
        "event path": "`add_events` per session (NEXT chain), Retriever with touch=False",
    }
    lines += [""] + [f"- {name}: {notes[name]}." for name in scores if name in notes]
    lines += [
        "",
        "Reference (LoCoMo paper, table 3, DRAGON, turn level, all ten conversations): "
        "R@5 56.7, R@10 66.2, R@25 76.7, R@50 82.7.",
    ]
    return "\n".join(lines)


def write_results(section: str, command: str) -> None:
    path = HERE / "RESULTS.md"
    start, end = "<!-- locomo:start -->", "<!-- locomo:end -->"
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, 24 GiB"
    body = (
        f"{start}\n## LoCoMo evidence retrieval\n\nCommand: `{command}`  \n"
        f"Machine: {machine}, Python {platform.python_version()}; "
        f"run {datetime.now(UTC).strftime('%Y-%m-%d')}.\n\n{section}\n{end}"
    )
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    if start in text and end in text:
        pre, rest = text.split(start, 1)
        _, post = rest.split(end, 1)
        text = pre + body + post
    else:
        text = text.rstrip() + "\n\n" + body + "\n"
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--store", default="memory://", help="graphmem URL to ingest into")
    ap.add_argument("--embedder", default="auto")
    ap.add_argument("--preset", default="balanced")
    ap.add_argument(
        "--embed-cache",
        type=Path,
        default=None,
        help="reuse embeddings from this .npz file (tuning runs)",
    )
    ap.add_argument(
        "--path",
        choices=("user", "events", "both"),
        default="both",
        help="the user path (remember/recall), the event path, or both",
    )
    ap.add_argument(
        "--knowledge",
        choices=("on", "off", "both"),
        default="off",
        help="off (the library's default): no entity indexing and no entity hops; "
        "both: the user path twice, with and without",
    )
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument(
        "--wait",
        action="store_true",
        help="user path: call mem.vectors.wait() after the ingest (default: no wait, as a "
        "user who asks at once; recall itself waits for this handle's pending vectors)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a RecallConfig field (repeatable), e.g. --set rrf_k=20",
    )
    ap.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    ap.add_argument("--write", action="store_true", help="write the section of RESULTS.md")
    ap.add_argument(
        "--wipe",
        action="store_true",
        help="a server store (bolt://, neo4j://) that holds graphmem data is emptied first; "
        "without it such a store is refused (its memories would be recalled too)",
    )
    args = ap.parse_args(argv)
    opens = (args.path in ("user", "both")) * (2 if args.knowledge == "both" else 1) + (
        args.path in ("events", "both")
    )
    if not args.store.startswith("memory:") and opens > 1:
        ap.error(
            f"--store {args.store} holds one system, and this run opens {opens}: "
            "choose --path user or --path events, and --knowledge on or off"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    convs = load(args.data)
    if args.limit:
        convs = convs[: args.limit]
    embedder: Any = None if args.embedder == "none" else make_embedder(args.embedder)
    if embedder is not None and args.embed_cache is not None:
        embedder = DiskCachedEmbedder(embedder, args.embed_cache)
    config = RecallConfig.preset(args.preset)
    if args.set:
        overrides = dict(item.split("=", 1) for item in args.set)
        config = RecallConfig.model_validate({**config.model_dump(), **overrides})
    stores: list[GraphMemory] = []
    plain = config.model_copy(update={"expand_entities": False, "entity_weight": 0.0})
    if args.knowledge == "off":
        config = plain
    elif "expand_entities" not in {item.split("=", 1)[0] for item in args.set}:
        # the layer on: its entity hops too (off in the default recall config)
        config = config.model_copy(update={"expand_entities": True})

    def open_store(knowledge: bool) -> GraphMemory:
        store = GraphMemory.open(args.store, embedder=embedder, knowledge=knowledge)
        stores.append(store)
        if store.backend.stats().nodes:
            clear = getattr(store.backend, "clear", None)
            if not args.wipe or clear is None:
                store.close()
                sys.exit(
                    f"{args.store} already holds graphmem data, which recall would find "
                    "beside the conversations: "
                    + ("pass --wipe to empty it" if clear else "use an empty store")
                )
            clear()
        return store

    systems: dict[str, System] = {}
    timings: list[str] = []
    turns = 0
    if args.path in ("user", "both"):
        umem = open_store(args.knowledge != "off")
        t0 = time.perf_counter()
        turns = sum(ingest_user(umem, c) for c in convs)
        if args.wait:
            umem.vectors.wait()
        # without --wait the first recall waits for the vectors still being computed
        # behind remember() (read your writes); its latency says how long
        timings.append(f"user path {time.perf_counter() - t0:.1f} s")
        systems["user path"] = user_system(umem, config)
        if args.knowledge == "both":
            pmem = open_store(False)
            t0 = time.perf_counter()
            sum(ingest_user(pmem, c) for c in convs)
            if args.wait:
                pmem.vectors.wait()
            timings.append(f"user path without entities {time.perf_counter() - t0:.1f} s")
            systems["user path, no entities"] = user_system(pmem, plain)
    if args.path in ("events", "both"):
        mem = open_store(args.knowledge != "off")
        t0 = time.perf_counter()
        turns = sum(ingest(mem, c) for c in convs)
        mem.vectors.wait()
        timings.append(f"event path {time.perf_counter() - t0:.1f} s")
        built = build_systems(mem, config)
        systems["event path"] = built.pop("event path")
        if not args.no_baselines:
            systems.update(built)
    # warm-up (model load, first queries) outside the measurement; not on the user path,
    # whose recalls touch memories
    if embedder is not None:
        embedder.embed(["warm up"])
    for name, run in systems.items():
        if not name.startswith("user path"):
            run("warm up", convs[0].sample_id)
    scores = evaluate(convs, systems)
    if isinstance(embedder, DiskCachedEmbedder):
        embedder.save()
    extra = {
        "turns": turns,
        "dropped": sum(c.dropped_evidence for c in convs),
        "embedder": getattr(stores[0].embedder, "name", "none"),
        "ingest_s": ", ".join(timings),
    }
    text = report(scores, convs, args, extra)
    print(text)
    if args.write:
        cmd = "python benchmarks/locomo.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_results(text, cmd.strip())
    for store in stores:
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
