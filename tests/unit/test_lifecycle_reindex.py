"""Embeddings that follow the store: reindex (API and CLI), and opening with a model of
another dimension."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from graphmem.cli import app
from graphmem.embeddings import HashEmbedder
from graphmem.errors import DimensionMismatch
from graphmem.memory import GraphMemory

pytestmark = pytest.mark.embedded("reindexes store files, also through the CLI on their paths")

ENV = {"GRAPHMEM_EMBEDDER": "none", "GRAPHMEM_CONFIG": ""}
TEXTS = ["Alice prefers tea", "the deploy key rotates monthly", "Bob works at Acme"]


class CountingEmbedder:
    """Another model of the same dimension: every vector says which text it came from."""

    name = "counting-32"
    dim = 32

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, len(text) % self.dim] = 1.0
        return out


def unvectored(tmp: Path) -> str:
    db = str(tmp / "store.db")
    with GraphMemory.open(db, embedder=None) as mem:
        for t in TEXTS:
            mem.remember(t)
    return db


def vectors(db: str) -> dict[str, tuple[float, ...] | None]:
    with GraphMemory.open(db, embedder=None) as mem:
        return {m.content: m.embedding for m in mem.list()}


def test_reindex_embeds_what_has_no_vector(tmp_path: Path) -> None:
    db = unvectored(tmp_path)
    with GraphMemory.open(db, embedder=None) as mem:
        dry = mem.vectors.reindex(embedder=HashEmbedder(32), dry_run=True)
        assert (dry.missing, dry.embedded, dry.store_dim) == (3, 0, None)
        seen: list[tuple[int, int]] = []
        report = mem.vectors.reindex(
            embedder=HashEmbedder(32), batch_size=2, progress=lambda d, t: seen.append((d, t))
        )
        assert (report.embedded, report.batches, report.dim) == (3, 2, 32)
        assert seen == [(2, 3), (3, 3)]
        assert mem.vectors.reindex(embedder=HashEmbedder(32)).embedded == 0  # nothing left
    assert all(v is not None and len(v) == 32 for v in vectors(db).values())


def test_reindex_all_re_embeds_for_a_new_model(tmp_path: Path) -> None:
    db = unvectored(tmp_path)
    with GraphMemory.open(db, embedder=None) as mem:
        mem.vectors.reindex(embedder=HashEmbedder(32))
        report = mem.vectors.reindex(embedder=CountingEmbedder(), all=True)
        assert (report.cleared, report.embedded, report.store_dim) == (3, 3, 32)
    after = vectors(db)
    for text, vec in after.items():
        assert vec is not None and vec[len(text) % 32] == 1.0 and sum(vec) == 1.0


def test_opening_with_another_dimension_says_what_to_run(tmp_path: Path) -> None:
    db = unvectored(tmp_path)
    with GraphMemory.open(db, embedder=HashEmbedder(32)) as mem:
        mem.vectors.reindex()
    with pytest.raises(DimensionMismatch, match="'hash-64' with `graphmem reindex --all"):
        GraphMemory.open(db, embedder=HashEmbedder(64))
    with GraphMemory.open(db, embedder=None) as mem:
        with pytest.raises(DimensionMismatch, match="reindex --all"):
            mem.vectors.reindex(embedder=HashEmbedder(64))  # only all=True may change the model


def test_cli_reindex(tmp_path: Path) -> None:
    db = unvectored(tmp_path)
    runner = CliRunner()
    dry = runner.invoke(app, ["reindex", "--db", db, "--embedder", "hash:32", "--dry-run"], env=ENV)
    assert dry.exit_code == 0 and "would clear 0 vectors and embed 3" in dry.stdout
    done = runner.invoke(app, ["reindex", "--db", db, "--embedder", "hash:32", "--json"], env=ENV)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["embedded"] == 3
    again = runner.invoke(app, ["reindex", "--db", db, "--embedder", "hash:32", "--all"], env=ENV)
    assert again.exit_code == 0 and "embedded 3 memories" in again.stdout
    none = runner.invoke(app, ["reindex", "--db", db], env=ENV)
    assert none.exit_code == 2 and "needs an embedder" in none.output
