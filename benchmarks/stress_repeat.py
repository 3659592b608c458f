"""Run ``python -m pytest tests/stress`` again and again beside CPU-bound processes.

The stress tests race processes and threads against each other; a rare interleaving shows
only when the scheduler is under pressure, so this script keeps ``--hogs`` busy-loop
processes running (each ``python -c 'while 1: pass'``) for the whole run and stops at the
first failing run. It prints one line per run and a summary with the count of consecutive
passes and /proc/loadavg, and always ends its hogs (bounded by ``--runs`` and
``--max-minutes``).

    python benchmarks/stress_repeat.py --runs 100 --hogs 1

Each run is a fresh ``python -m pytest -q -x tests/stress`` process; plugin autoloading is
off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 -p pytest_timeout``) unless ``--all-plugins``,
because the installed plugins (hypothesis, langsmith, ...) only add start-up time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" (")[0].strip()
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--hogs", type=int, default=1, help="CPU-bound processes beside the runs")
    ap.add_argument("--max-minutes", type=float, default=120.0)
    ap.add_argument("--target", default="tests/stress")
    ap.add_argument(
        "--all-plugins",
        action="store_true",
        help="load every installed pytest plugin (by default only pytest-timeout: the others "
        "add ~15 s of imports to each run and take no part in the stress test)",
    )
    args = ap.parse_args(argv)

    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    plugins: list[str] = []
    if not args.all_plugins:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        plugins = ["-p", "pytest_timeout"]
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.hogs)]
    passed = 0
    failed_output = ""
    started = time.monotonic()
    try:
        for i in range(1, args.runs + 1):
            if time.monotonic() - started > args.max_minutes * 60:
                print(f"time limit reached after {passed} runs", flush=True)
                break
            t0 = time.monotonic()
            proc = subprocess.run(
                [
                    *(sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"),
                    *plugins,
                    args.target,
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            took = time.monotonic() - t0
            ok = proc.returncode == 0
            print(f"run {i}: {'pass' if ok else 'FAIL'} {took:.1f}s load {_load()}", flush=True)
            if not ok:
                failed_output = proc.stdout[-4000:] + proc.stderr[-2000:]
                break
            passed += 1
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    minutes = (time.monotonic() - started) / 60
    print(
        f"{passed} consecutive passes of `python -m pytest {args.target}` beside "
        f"{args.hogs} CPU-bound process(es) in {minutes:.1f} min; load {_load()}",
        flush=True,
    )
    if failed_output:
        print(failed_output)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
