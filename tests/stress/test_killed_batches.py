"""A writer process killed (SIGKILL) at random moments in the middle of large batches:
after a reopen each batch is all there or not there at all, every batch the writer saw
return is there, every run's chain is one line, the file passes SQLite's own checks and its
full-text index holds exactly the memory rows, and the state file beside the store (kept,
deleted, stale or corrupted) never changes what the store reads."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphmem import GraphMemory
from graphmem.backends.embedded.journal import STATE_MIN_NODES
from graphmem.backends.embedded.state_file import file_of
from tests.stress._appenders import chains

pytestmark = pytest.mark.embedded("a writer process killed mid-batch on one SQLite store file")

KILLS = int(os.environ.get("GRAPHMEM_STRESS_KILLS", "3"))
SEED = int(os.environ.get("GRAPHMEM_STRESS_SEED", "0"))

WRITER = """
import random, sys
from graphmem import GraphMemory
path, rounds, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
mem = GraphMemory.open(path, embedder=None)
for j in range(10_000):
    n = rng.choice((1, 17, 300, 1000, 2500))
    run = rng.choice(("k0", "k1", f"new{rounds}x{j}"))
    tag = f"b{rounds}x{j}"
    items = [{"content": f"{tag} of {n} item {i}", "agent_id": "w", "run_id": run, "tags": [tag]}
             for i in range(n)]
    mem.remember_many(items)
    print(tag, n, flush=True)
"""


def _view(path: Path) -> list[tuple[str, str, str | None]]:
    with GraphMemory.open(str(path), embedder=None) as mem:
        chains(mem)  # one line a run, no fork, no cycle: the whole of each batch appended
        for run_id, lines in chains(mem).items():
            assert len(lines) == 1, f"run {run_id} in {len(lines)} pieces"
        return sorted((m.id, m.content, m.run_id) for m in mem.list(status=None, limit=None))


def _file_holds_up(path: Path) -> None:
    """The file as a crash left it passes SQLite's integrity checks (the tables' and the
    full-text index's own), and a lexical search for each batch's tag (every memory's first
    word) finds exactly that batch's rows: no text of a lost batch, none missing."""
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        db.execute("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")
        rows: dict[str, set[int]] = {}
        for rid, props in db.execute("SELECT rid, props FROM nodes WHERE label = 'Memory'"):
            rows.setdefault(json.loads(props)["content"].split()[0], set()).add(rid)
        search = "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?"
        for tag, rids in rows.items():
            assert {r for (r,) in db.execute(search, (f'"{tag}"',))} == rids, tag
        indexed = db.execute(search.replace("rowid", "count(*)"), ("item OR seed",))
        assert indexed.fetchone()[0] == sum(map(len, rows.values()))
    finally:
        db.close()


def _harm(path: Path, rng: random.Random) -> str:
    state = file_of(path)
    if not state.exists():
        return "none"
    what = rng.choice(("keep", "delete", "flip", "truncate"))
    if what == "delete":
        state.unlink()
    elif what == "flip":
        data = bytearray(state.read_bytes())
        at = rng.randrange(len(data))
        data[at] ^= 0xFF
        state.write_bytes(bytes(data))
    elif what == "truncate":
        data = state.read_bytes()
        state.write_bytes(data[: rng.randrange(len(data))])
    return what


@pytest.mark.slow
def test_killed_mid_batch_each_batch_is_whole_or_absent(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    path = tmp_path / "s.db"
    with GraphMemory.open(str(path), embedder=None) as mem:
        mem.remember_many(
            [
                {"content": f"seed {i}", "agent_id": "w", "run_id": f"k{i % 2}", "tags": ["seed"]}
                for i in range(STATE_MIN_NODES)
            ]
        )
    assert file_of(path).exists()  # the clean close left a state file
    acked: dict[str, int] = {}
    for k in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(k), str(SEED * 100 + k)],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(rng.uniform(0.5, 3.0))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
        for line in out.splitlines():
            tag, n = line.split()
            acked[tag] = int(n)
        _file_holds_up(path)
        harmed = _harm(path, rng)
        bare = tmp_path / f"bare{k}"
        bare.mkdir()
        for f in path.parent.glob("s.db*"):
            if not f.name.endswith("-state.bin"):
                shutil.copy(f, bare / f.name)
        seen = _view(path)
        assert seen == _view(bare / "s.db"), f"the state file ({harmed}) changed what is read"
        with GraphMemory.open(str(path), embedder=None) as mem:
            for tag, n in acked.items():
                assert mem.count(tags=[tag]) == n, f"acknowledged batch {tag} lost"
            batches: dict[str, list[str]] = {}
            for m in mem.list(status=None, limit=None):
                if m.tags != ("seed",):
                    batches.setdefault(m.tags[0], []).append(m.content)
            for tag, contents in batches.items():
                size = int(contents[0].split()[2])
                assert len(contents) == size, f"batch {tag}: {len(contents)} of {size}"
        if rng.random() < 0.3:
            GraphMemory.open(str(path), embedder=None).close()  # a fresh state file, soon stale
        shutil.rmtree(bare)
