"""Cold start of the command line: ``graphmem recall`` in a new process on an existing store.

    python benchmarks/cold_start.py [--runs 10] [--hogs 1] [--db PATH] [--size 200] [--phases]

Each run is a new ``python -m graphmem recall "<question>" -k 3 --db STORE`` process (the
console script does the same imports), with a different question every time so no cached
query vector helps. Also timed: ``python -c "import graphmem"`` and ``python -c "import
graphmem.cli"``. Reported per command: wall time (min / median / max) and the child's CPU
time (user + sys, from ``wait4``), which load on the machine inflates less than wall time.

The children run as a user's would: bytecode is written (``PYTHONDONTWRITEBYTECODE`` is
removed from their environment) and one warm-up run before the timed runs fills the
bytecode and the OS file cache. ``--hogs N`` starts N CPU-bound processes (``while True:
pass``) beside the runs, the "loaded" case; the machine's own load (``/proc/loadavg``) is
printed before and after, since other work on it counts too.

``--phases`` times the recall phase by phase instead: each run is a new interpreter that
runs the same ``main()`` of the command line, with timestamps taken at its first line, after
``import graphmem.cli``, after the store is open, after ``recall`` returns (within it: the
ONNX model's load and the model runs, the query's and the store's model check's) and after
the answer is printed and the store closed; the parent adds the interpreter's start
(spawn to first line) and its teardown (printed to exit). Wall and CPU per phase.

The store (``--size`` memories of LoCoMo turns, with vectors) is built once in a temporary
folder unless ``--db`` names an existing one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a fresh clone sits beside shared/, a worktree one level deeper
DATA = next(
    (
        p / "shared" / "data" / "locomo_dev.json"
        for p in (ROOT.parent, ROOT.parent.parent)
        if (p / "shared" / "data" / "locomo_dev.json").is_file()
    ),
    ROOT.parent / "shared" / "data" / "locomo_dev.json",
)

QUESTIONS = [
    "where did Alice meet Bob?",
    "what does Caroline paint?",
    "which book was recommended?",
    "when is the camping trip?",
    "what instrument does Melanie play?",
    "who adopted a dog?",
    "what happened at the support group?",
    "which city did they move to?",
    "what is the new job about?",
    "what did they cook for the party?",
    "how was the race last weekend?",
    "what did the kids draw?",
]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def turns(limit: int) -> list[str]:
    if not DATA.is_file():
        words = "alice bob tea meeting lisbon release review garden dog painting".split()
        return [" ".join(words[(i + j) % len(words)] for j in range(8)) for i in range(limit)]
    out: list[str] = []
    for sample in json.loads(DATA.read_text()):
        for key, session in sample["conversation"].items():
            if re.fullmatch(r"session_\d+", key) and isinstance(session, list):
                out.extend(f"{t['speaker']}: {t.get('text', '')}" for t in session)
                if len(out) >= limit:
                    return out[:limit]
    return out


def build_store(path: Path, size: int) -> None:
    code = (
        "import sys, json\n"
        "from graphmem import GraphMemory\n"
        "texts = json.load(sys.stdin)\n"
        "with GraphMemory.open(sys.argv[1]) as mem:\n"
        "    mem.remember_many([{'content': t, 'agent_id': 'bench'} for t in texts])\n"
        "    mem.vectors.wait()\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(path)],
        input=json.dumps(turns(size)),
        text=True,
        check=True,
        env=child_env(),
    )


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + sys) seconds of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=child_env(), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed with status {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def summary(samples: list[tuple[float, float]]) -> str:
    walls = [w for w, _ in samples]
    cpus = [c for _, c in samples]
    return (
        f"{min(walls):.2f} / {statistics.median(walls):.2f} / {max(walls):.2f} | "
        f"{min(cpus):.2f} / {statistics.median(cpus):.2f} / {max(cpus):.2f}"
    )


# The child of ``--phases``: the real ``main()`` of the command line, with marks. Its time
# and CPU at each mark go to stderr as one JSON line; wrappers add up the model's load and
# runs inside recall (a wrapper is set only once its module was imported anyway).
PHASE_CHILD = """
import json, os, sys, time
def now():
    t = os.times()
    return time.time(), t.user + t.system
MARKS = {"first": now()}
import graphmem.cli
MARKS["import"] = now()
from graphmem.memory import GraphMemory
from graphmem.embeddings import onnx
SPENT = {"model load": [0.0, 0.0], "model runs": [0.0, 0.0]}
def adding(owner, name, key):
    inner = getattr(owner, name)
    def wrapper(*a, **k):
        t0, c0 = now()
        try:
            return inner(*a, **k)
        finally:
            t1, c1 = now()
            SPENT[key][0] += t1 - t0
            SPENT[key][1] += c1 - c0
    setattr(owner, name, wrapper)
def marking(owner, name, mark, wrap=lambda f: f):
    inner = getattr(owner, name)
    def wrapper(*a, **k):
        try:
            return inner(*a, **k)
        finally:
            MARKS[mark] = now()
    setattr(owner, name, wrap(wrapper))
adding(onnx, "_onnx_runtime", "model load")
adding(onnx, "_run", "model runs")
marking(GraphMemory, "open", "open", staticmethod)  # the bound classmethod inside
marking(GraphMemory, "recall", "recall")
sys.argv = ["graphmem", *sys.argv[1:]]
try:
    graphmem.cli.main()
except SystemExit as e:
    if e.code:
        raise
MARKS["printed"] = now()
sys.stderr.write("@@" + json.dumps({"marks": MARKS, "spent": SPENT}) + "\\n")
"""

PHASES = [
    "interpreter start",
    "import graphmem.cli",
    "open the store",
    "recall: ONNX model load",
    "recall: model runs (probe + query)",
    "recall: the rest (search, ranking)",
    "print + close",
    "interpreter teardown",
    "total",
]


def phased(argv: list[str]) -> list[tuple[float, float]]:
    """(wall, CPU) of each of PHASES for one child running ``graphmem <argv>``."""
    start = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-c", PHASE_CHILD, *argv],
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    end = time.time()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed:\n{err}")
    data = json.loads(next(x for x in reversed(err.splitlines()) if x.startswith("@@"))[2:])
    m = {k: tuple(v) for k, v in data["marks"].items()}
    load, runs = data["spent"]["model load"], data["spent"]["model runs"]
    recall = (m["recall"][0] - m["open"][0], m["recall"][1] - m["open"][1])
    total_cpu = usage.ru_utime + usage.ru_stime
    return [
        (m["first"][0] - start, m["first"][1]),
        (m["import"][0] - m["first"][0], m["import"][1] - m["first"][1]),
        (m["open"][0] - m["import"][0], m["open"][1] - m["import"][1]),
        (load[0], load[1]),
        (runs[0], runs[1]),
        (recall[0] - load[0] - runs[0], recall[1] - load[1] - runs[1]),
        (m["printed"][0] - m["recall"][0], m["printed"][1] - m["recall"][1]),
        (end - m["printed"][0], total_cpu - m["printed"][1]),
        (end - start, total_cpu),
    ]


def phase_table(db: Path, runs: int) -> list[str]:
    argv = ["recall", "", "-k", "3", "--db", str(db)]
    phased([*argv[:1], QUESTIONS[0] + " (warm-up)", *argv[2:]])
    rows = [
        phased([*argv[:1], QUESTIONS[i % len(QUESTIONS)] + f" ({i})", *argv[2:]])
        for i in range(runs)
    ]
    lines = [
        "| phase | wall s median | wall s min | CPU s median | CPU s min |",
        "|---|---:|---:|---:|---:|",
    ]
    for j, name in enumerate(PHASES):
        walls = [r[j][0] for r in rows]
        cpus = [r[j][1] for r in rows]
        lines.append(
            f"| {name} | {statistics.median(walls):.3f} | {min(walls):.3f} | "
            f"{statistics.median(cpus):.3f} | {min(cpus):.3f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--hogs", type=int, default=0, help="CPU-bound processes beside")
    parser.add_argument("--db", type=Path, help="an existing store (default: build one)")
    parser.add_argument("--size", type=int, default=200, help="memories in a built store")
    parser.add_argument("--phases", action="store_true", help="recall, phase by phase")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "cold.db"
            build_store(db, args.size)
        py = sys.executable
        commands = {
            'python -c "import graphmem"': lambda i: [py, "-c", "import graphmem"],
            'python -c "import graphmem.cli"': lambda i: [py, "-c", "import graphmem.cli"],
            'graphmem recall "<question>" -k 3': lambda i: [
                py,
                "-m",
                "graphmem",
                "recall",
                QUESTIONS[i % len(QUESTIONS)] + f" ({i})",
                "-k",
                "3",
                "--db",
                str(db),
            ],
        }
        for make in commands.values():  # warm-up: bytecode and the OS file cache
            timed(make(-1))
        hogs = [subprocess.Popen([py, "-c", "while True: pass"]) for _ in range(max(0, args.hogs))]
        try:
            before = loadavg()
            if args.phases:
                table = phase_table(db, args.runs)
            else:
                results = {
                    name: [timed(make(i)) for i in range(args.runs)]
                    for name, make in commands.items()
                }
            after = loadavg()
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, hogs {args.hogs}, ", end="")
    print(f"{args.runs} runs each; load {before} -> {after}")
    print()
    if args.phases:
        print(f'`graphmem recall "<question>" -k 3 --db {db}`, phase by phase:')
        print()
        print("\n".join(table))
        return
    print("| command | wall s min / median / max | CPU s min / median / max |")
    print("|---|---|---|")
    for name, samples in results.items():
        print(f"| `{name}` | {summary(samples)} |")


if __name__ == "__main__":
    main()
