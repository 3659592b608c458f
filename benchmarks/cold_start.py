"""Cold start of the command line: ``graphmem recall`` in a new process on an existing store.

    python benchmarks/cold_start.py [--runs 7] [--hogs 1] [--db PATH] [--size 200]

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
DATA = ROOT.parent / "shared" / "data" / "locomo_dev.json"

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--hogs", type=int, default=0, help="CPU-bound processes beside")
    parser.add_argument("--db", type=Path, help="an existing store (default: build one)")
    parser.add_argument("--size", type=int, default=200, help="memories in a built store")
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
            results = {
                name: [timed(make(i)) for i in range(args.runs)] for name, make in commands.items()
            }
            after = loadavg()
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, hogs {args.hogs}, ", end="")
    print(f"{args.runs} runs each; load {before} -> {after}")
    print()
    print("| command | wall s min / median / max | CPU s min / median / max |")
    print("|---|---|---|")
    for name, samples in results.items():
        print(f"| `{name}` | {summary(samples)} |")


if __name__ == "__main__":
    main()
