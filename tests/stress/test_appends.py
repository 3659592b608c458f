"""Two writer processes of eight threads each append batches of 1-2,000 memories and single
memories to the same runs and to new runs while a third process reads: no acknowledged
write is lost, every run's NEXT chain is one line in each writer's order, the reader sees
every write, and a reopen sees the same. With forgets and new versions in between, the
chains stay free of forks, joins and cycles."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory
from graphmem.errors import BackendUnavailable
from tests.stress._appenders import chains, in_order, read_until, summary, write

pytestmark = pytest.mark.embedded("two writer processes and a reader on one SQLite store file")

OPS = int(os.environ.get("GRAPHMEM_STRESS_OPS", "6"))
BIGGEST = int(os.environ.get("GRAPHMEM_STRESS_BIGGEST", "2000"))
SEED = int(os.environ.get("GRAPHMEM_STRESS_SEED", "0"))


def _run(tmp_path: Path, churn: bool, seed: int) -> None:
    path = str(tmp_path / "shared.db")
    GraphMemory.open(path, embedder=None).close()
    stop, want = str(tmp_path / "stop"), str(tmp_path / "want.json")
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=3, mp_context=ctx) as pool:
        reader = pool.submit(read_until, path, stop, want, 120.0)
        writers = [
            pool.submit(write, path, f"p{i}", 8, OPS, seed * 10 + i, BIGGEST, churn)
            for i in range(2)
        ]
        results = [f.result(timeout=400) for f in writers]
        acked = [a for r in results for a in r["acked"]]
        gone = {i for r in results for _run_id, i in r["gone"]}
        kept = [i for _t, _r, _a, ids in acked for i in ids if i not in gone]
        with open(want, "w") as f:
            json.dump(kept, f)
        Path(stop).touch()
        seen = reader.result(timeout=200)
    assert seen["missing"] == [], f"{len(seen['missing'])} writes the reader never saw"
    if not churn:
        assert seen["went_down"] == []
    _check(path, acked, gone, kept, churn)
    with GraphMemory.open(path, embedder=None) as mem:
        assert seen["summary"] == summary(mem)  # the reader open all along reads the same


def _check(path: str, acked: list[Any], gone: set[str], kept: list[str], churn: bool) -> None:
    views = []
    for _ in range(2):  # the store, then the store reopened from its state file
        with GraphMemory.open(path, embedder=None) as mem:
            present = {m.id for m in mem.list(status=None, limit=None)}
            assert set(kept) <= present, f"{len(set(kept) - present)} acknowledged writes lost"
            assert not gone & {m.id for m in mem.list(limit=None)}
            lines = chains(mem)
            in_order(lines, acked)
            # a run a memory left (forgotten, superseded) or came into outside its chain (a
            # new version, a merge) may stand in pieces; none may fork
            appended = {i for _t, _r, _a, ids in acked for i in ids}
            touched = {r for r, _i in _gone_runs(acked, gone)} | {
                m.run_id
                for m in mem.list(status=None, limit=None)
                if m.run_id and (m.id not in appended or m.status.value != "active")
            }
            for run_id, ls in lines.items():
                if not churn or run_id not in touched:
                    assert len(ls) == 1, f"run {run_id} in {len(ls)} pieces"
            if not churn:
                assert len(present) == len(kept)
                by_tag: dict[str, int] = {}
                for tag, _r, _a, ids in acked:
                    by_tag[tag] = by_tag.get(tag, 0) + len(ids)
                for tag, n in by_tag.items():
                    assert mem.count(tags=[f"w{tag}"]) == n, tag
                runs: dict[str, int] = {}
                for _t, run_id, _a, ids in acked:
                    runs[run_id] = runs.get(run_id, 0) + len(ids)
                for run_id, n in runs.items():
                    assert mem.count(run_id=run_id) == n, run_id
                    assert len(mem.runs.events(run_id)) == n
                shared = sum(len(ids) for _t, _r, a, ids in acked if a == "a")
                assert mem.count(agent_id="a") == shared
                assert mem.count(namespace=["ns0", "ns1"]) == len(kept)
            some = kept[:: max(1, len(kept) // 50)]
            for i in some:
                m = mem.get(i)
                hits = mem.recall(m.content, k=3, touch=False)
                assert i in [h.memory.id for h in hits], m.content
            views.append(
                sorted((m.id, m.content, m.run_id) for m in mem.list(status=None, limit=None))
            )
    assert views[0] == views[1]


def _gone_runs(acked: list[Any], gone: set[str]) -> list[tuple[str, str]]:
    return [(r, i) for _t, r, _a, ids in acked for i in ids if i in gone]


@pytest.mark.slow
def test_two_writer_processes_of_eight_threads_and_a_reader(tmp_path: Path) -> None:
    _run(tmp_path, churn=False, seed=1 + SEED)


@pytest.mark.slow
def test_appends_with_forgets_and_new_versions_between(tmp_path: Path) -> None:
    _run(tmp_path, churn=True, seed=2 + SEED)


@pytest.mark.parametrize("after_s", [0.05, 0.2, 0.5])
def test_a_handle_closed_while_its_threads_append(tmp_path: Path, after_s: float) -> None:
    """A close in the middle of four threads' batches: every later call is refused with
    a typed error, every batch that returned is there, each run's chain one line."""
    path = str(tmp_path / "s.db")
    mem = GraphMemory.open(path, embedder=None)
    done: list[list[str]] = []
    refused: list[BaseException] = []

    def append(t: int) -> None:
        for j in range(200):
            items = [
                {"content": f"t{t} {j} {i}", "agent_id": "a", "run_id": f"q{t}"} for i in range(40)
            ]
            try:
                done.append([m.id for m in mem.remember_many(items)])
            except BackendUnavailable as e:
                refused.append(e)
                return

    threads = [threading.Thread(target=append, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    time.sleep(after_s)
    mem.close()
    for t in threads:
        t.join(60)
    assert len(refused) == 4 and done
    with GraphMemory.open(path, embedder=None) as again:
        assert {m.id for m in again.list(limit=None)} == {i for ids in done for i in ids}
        assert all(len(lines) == 1 for lines in chains(again).values())
