"""The demo (the README's first command) works on a fresh store and when run again."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmem.cli import app
from graphmem.demo import DEMO_NAMESPACE, run_demo
from graphmem.memory import GraphMemory
from graphmem.models import Status

pytestmark = pytest.mark.embedded("the demo builds its own store file on its timeline")


def test_demo_tells_the_story(tmp_path: Path) -> None:
    lines: list[str] = []
    with GraphMemory.open(str(tmp_path / "d.db"), embedder=None) as mem:
        result = run_demo(mem, out=lines.append)
        assert result["facts"] == 5 and result["superseded"] == 3  # 2 updates, 1 reconciled
        history = mem.history(result["moved"])
        assert [v.status for v in history] == [Status.SUPERSEDED, Status.ACTIVE]
        assert "June" in history[-1].content and "May" in history[0].content
        assert len(mem.runs.events("demo-session-1")) == 4
    text = "\n".join(lines)
    assert "Carla, Alice's sister, is allergic to peanuts." in text
    assert "[superseded]" in text and "Graph statistics" in text
    assert "again: duplicate" in text and "superseded 'Alice lives in Porto.'" in text


def test_demo_command_is_repeatable(tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    runner = CliRunner()
    first = runner.invoke(app, ["demo", "--db", db, "--embedder", "none"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["demo", "--db", db, "--embedder", "none"])
    assert second.exit_code == 0, second.output
    assert "removed" in second.output
    with GraphMemory.open(db, embedder=None) as mem:
        # 10 turns + 5 facts + where Alice lives; the repeated fact was not stored twice
        assert mem.count(namespace=DEMO_NAMESPACE) == 16
        assert mem.count(namespace=DEMO_NAMESPACE, status="superseded") == 3


def test_demo_history_follows_its_own_timeline(tmp_path: Path) -> None:
    lines: list[str] = []
    with GraphMemory.open(str(tmp_path / "d.db"), embedder=None) as mem:
        result = run_demo(mem, out=lines.append)
        old, new = mem.history(result["moved"])
    session_3 = "2026-03-16"  # the third weekly session of the demo's conversation
    assert old.valid_to is not None and old.valid_to.date().isoformat() == session_3
    assert new.valid_from is not None and new.valid_from.date().isoformat() == session_3
    history = "\n".join(lines[lines.index(next(x for x in lines if x.startswith("History"))) :])
    assert f".. {session_3}: Alice is travelling to Lisbon in May." in history
    assert f"valid {session_3} .. now: Alice is travelling to Lisbon in June" in history


def test_the_demo_command_lists_its_people_and_places_with_their_types(tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    runner = CliRunner()
    assert runner.invoke(app, ["demo", "--db", db, "--embedder", "none"]).exit_code == 0
    with GraphMemory.open(db, embedder=None) as mem:
        types = {e.name: e.type.value for e in mem.knowledge.entities(namespace=DEMO_NAMESPACE)}
    assert types == {"Alice": "person", "Carla": "person", "Lisbon": "place", "Alfama": "place"}


def _dates(value: object) -> list[str]:
    """Every ISO date-time string in a JSON-like value."""
    if isinstance(value, dict):
        return [d for v in value.values() for d in _dates(v)]
    if isinstance(value, list):
        return [d for v in value for d in _dates(v)]
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] == "T":
        return [value[:10]]
    return []


def test_the_demo_store_lives_on_the_demo_timeline_only(tmp_path: Path) -> None:
    """Runs end, versions are written, and recall touches memories on the demo's clock
    (March 2026), never on today's date."""
    import json

    db = str(tmp_path / "demo.db")
    runner = CliRunner()
    assert runner.invoke(app, ["demo", "--db", db, "--embedder", "none"]).exit_code == 0
    listed = runner.invoke(app, ["list", "--db", db, "--status", "all", "--json"])
    runs = runner.invoke(app, ["runs", "list", "--db", db, "--json"])
    assert listed.exit_code == 0 and runs.exit_code == 0, listed.output + runs.output
    dates = _dates(json.loads(listed.output)) + _dates(json.loads(runs.output))
    assert len(dates) > 40
    assert {d[:7] for d in dates} == {"2026-03"}, sorted(set(dates))
    with GraphMemory.open(db, embedder=None) as mem:
        ended = [r.ended_at for r in mem.runs.list(agent_id="travel-assistant")]
        assert all(e is not None and e.date().isoformat() < "2026-03-17" for e in ended)


def test_recall_touches_unless_told_not_to(tmp_path: Path) -> None:
    """Recall counts an access on each result (recency and frequency move, so scores of a
    repeated query may drift); ``--no-touch`` only looks."""
    db = str(tmp_path / "t.db")
    with GraphMemory.open(db, embedder=None) as mem:
        m = mem.remember("Alice prefers green tea", agent_id="a")
    runner = CliRunner()
    looked = runner.invoke(
        app, ["recall", "green tea", "--db", db, "--embedder", "none", "--no-touch"]
    )
    assert looked.exit_code == 0 and m.id in looked.output, looked.output
    with GraphMemory.open(db, embedder=None) as mem:
        assert mem.get(m.id).access_count == 0 and mem.get(m.id).last_accessed is None
    touched = runner.invoke(app, ["recall", "green tea", "--db", db, "--embedder", "none"])
    assert touched.exit_code == 0 and m.id in touched.output, touched.output
    with GraphMemory.open(db, embedder=None) as mem:
        assert mem.get(m.id).access_count == 1 and mem.get(m.id).last_accessed is not None
