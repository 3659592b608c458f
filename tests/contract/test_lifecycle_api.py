"""The issue-5 methods of GraphMemory: thin delegates to lifecycle / consolidation / llm,
exercised on every backend."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from graphmem.backends.base import GraphBackend
from graphmem.config import LifecycleConfig, Settings
from graphmem.errors import InvalidInput, NotFound
from graphmem.memory import GraphMemory
from graphmem.models import Status, Tier

NOW = datetime(2024, 6, 1, tzinfo=UTC)
NO_RECONCILE = Settings(reconcile={"mode": "off"})  # type: ignore[arg-type]


@pytest.fixture
def mem_options() -> dict[str, Any]:
    # these tests build duplicates and contradictions on purpose
    return {"settings": NO_RECONCILE, "clock": lambda: NOW}


def test_consolidate_and_unmerge(mem: GraphMemory) -> None:
    a = mem.remember("The API rate limit is 100 requests per minute.", agent_id="x")
    b = mem.remember("the api rate limit is 100 requests per minute", agent_id="x")
    plan = mem.lifecycle.consolidate(dry_run=True)
    assert [set(g.source_ids) for g in plan.groups] == [{a.id, b.id}]
    [merged_id] = mem.lifecycle.consolidate().merged_ids
    assert mem.get(a.id).status is Status.SUPERSEDED
    assert [m.id for m in mem.history(merged_id)][-1] == merged_id
    mem.lifecycle.unmerge(merged_id)
    assert mem.get(a.id).status is Status.ACTIVE and mem.get(b.id).status is Status.ACTIVE


def test_a_summary_of_an_id_given_twice_is_a_summary_of_it_once(mem: GraphMemory) -> None:
    """The sources were read with the repeated id and counted against the distinct ids:
    a NotFound saying that memories which all exist "do not exist"."""
    a = mem.remember("The nightly job failed on the payments table.")
    b = mem.remember("We fixed the payments index and the job passed.")
    s = mem.lifecycle.summarize([a.id, b.id, a.id])
    sources = {n.id for n in mem.lifecycle.provenance(s.id).nodes} - {s.id}
    assert sources == {a.id, b.id}
    with pytest.raises(NotFound):
        mem.lifecycle.summarize([a.id, "missing", a.id])


def test_summarize_run_improve_reflect_extract(mem: GraphMemory) -> None:
    e1 = mem.remember("The nightly job failed on the payments table.", run_id="r1")
    e2 = mem.remember("We fixed the payments index and the job passed.", run_id="r1")
    s = mem.lifecycle.summarize(run_id="r1")
    assert s.category.value == "summary" and mem.get(s.id).run_id == "r1"
    assert {n.id for n in mem.lifecycle.provenance(s.id).nodes} >= {e1.id, e2.id}
    with pytest.raises(InvalidInput):
        mem.lifecycle.summarize()
    with pytest.raises(NotFound):
        mem.lifecycle.summarize(run_id="missing-run")

    old = mem.remember("Carol works at Initech.", agent_id="c")
    mem.remember("Carol works at Globex.", agent_id="c")
    report = mem.lifecycle.improve(agent_id="c")
    assert report.superseded_ids == (old.id,)

    r = mem.lifecycle.reflect("Where does Carol work?", agent_id="c")
    assert r.cited_ids and "Globex" in r.answer

    facts = mem.lifecycle.extract_facts(
        "My favourite editor is vim. Bye!", agent_id="d", speaker="Dee"
    )
    assert [m.content for m in facts.created] == ["Dee's favourite editor is vim."]


def test_maintain_archive_restore_and_run_hooks(mem: GraphMemory) -> None:
    m = mem.remember(
        "Door code 4711.",
        expires_at=datetime(2024, 5, 1, tzinfo=UTC),
        created_at=datetime(2024, 4, 1, tzinfo=UTC),
    )
    assert mem.lifecycle.maintain(dry_run=True).ids("archive") == [m.id]
    mem.lifecycle.maintain()
    assert mem.get(m.id).status is Status.ARCHIVED
    mem.lifecycle.restore([m.id])
    assert mem.get(m.id).status is Status.ACTIVE
    mem.lifecycle.archive([m.id], reason="user")
    assert mem.count(status="archived") == 1

    st = mem.remember("User asked for a refund.", run_id="r9", tier="short_term", importance=0.7)
    mem.lifecycle.scratchpad("r9").add("draft reply")
    assert mem.lifecycle.on_turn_end("r9").cleared == 1
    report = mem.lifecycle.on_run_end("r9")
    assert report.ids("promote") == [st.id]
    assert mem.get(st.id).tier is Tier.LONG_TERM
    assert mem.lifecycle.on_idle(dry_run=True).dry_run


def _exported_memories(mem: GraphMemory) -> set[str]:
    buf = io.StringIO()
    mem.transfer.export(buf)
    rows = [json.loads(line) for line in buf.getvalue().splitlines()[1:]]
    return {r["props"]["id"] for r in rows if r.get("node") == "Memory"}


@pytest.mark.parametrize("how", ["archive", "maintain"])
def test_a_hard_delete_takes_the_older_versions_it_heads(mem: GraphMemory, how: str) -> None:
    """``archive(..., hard_delete=True)`` and ``maintain(hard_delete=True)`` deleted the
    current version and left its older ones: superseded memories without a head, in
    ``list``, ``history`` and the export, that no update or restore could reach."""
    v1 = mem.remember("Door code 4711.", agent_id="x")
    v2 = mem.update(v1.id, "Door code 4712.")
    v3 = mem.update(v2.id, "Door code 4713.", expires_at=datetime(2024, 5, 1, tzinfo=UTC))
    kept = mem.remember("The office opens at nine.", agent_id="x")
    summary = mem.remember("Door codes change monthly.", agent_id="x", category="summary")
    mem.writes.link(summary.id, [v2.id], pass_name="summarize")

    def hard_delete(dry_run: bool) -> list[str]:
        if how == "archive":
            report = mem.lifecycle.archive([v3.id], hard_delete=True, dry_run=dry_run)
        else:
            report = mem.lifecycle.maintain(hard_delete=True, steps=("expire",), dry_run=dry_run)
        return report.ids("delete")

    assert sorted(hard_delete(dry_run=True)) == sorted([v1.id, v2.id, v3.id])
    assert mem.count(status=None) == 5
    assert sorted(hard_delete(dry_run=False)) == sorted([v1.id, v2.id, v3.id])
    left = {m.id for m in mem.list(status=None)}
    assert left == {kept.id, summary.id} == _exported_memories(mem)
    # what was made from a deleted version stays (a hard delete is not a forget)
    assert mem.get(summary.id).content == "Door codes change monthly."


def test_a_hard_delete_of_an_older_version_keeps_the_newer_ones(mem: GraphMemory) -> None:
    v1 = mem.remember("Door code 4711.", agent_id="x")
    v2 = mem.update(v1.id, "Door code 4712.")
    v3 = mem.update(v2.id, "Door code 4713.")
    report = mem.lifecycle.archive([v2.id], hard_delete=True)
    assert sorted(report.ids("delete")) == sorted([v1.id, v2.id])
    assert [m.id for m in mem.history(v3.id)] == [v3.id]
    assert mem.get(v3.id).status is Status.ACTIVE


def test_write_path_refreshes_short_term_tier(mem: GraphMemory) -> None:
    mem.lifecycle.configure(
        LifecycleConfig(refresh_every=4, short_term_max=2, refresh_min_relevance=0.0)
    )
    ids = [
        mem.remember(
            f"step {i} of the plan", run_id="r1", tier="short_term", importance=0.1 * (i + 1)
        ).id
        for i in range(4)
    ]
    # the 4th write triggered a refresh: the two least relevant are archived
    assert [mem.get(i).status for i in ids] == [
        Status.ARCHIVED,
        Status.ARCHIVED,
        Status.ACTIVE,
        Status.ACTIVE,
    ]


def test_the_lifecycle_reads_its_one_model_from_settings(backend: GraphBackend) -> None:
    cfg = LifecycleConfig(min_summary_sources=5, promote_importance=0.8)
    m = GraphMemory(backend, embedder=None, owns_backend=False, settings=Settings(lifecycle=cfg))
    assert m.lifecycle.config is cfg
    assert Settings().lifecycle == LifecycleConfig()
