"""Scheduled maintenance: the settings, the scheduler they make, `graphmem serve`'s
lifespan and `graphmem maintain --every`."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphmem.cli import app
from graphmem.config import MaintenanceSettings, Settings, parse_interval
from graphmem.errors import ConfigError
from graphmem.memory import GraphMemory
from graphmem.models import Status
from tests.conftest import Stores

PAST = datetime(2020, 1, 1, tzinfo=UTC)
ENV = {"GRAPHMEM_EMBEDDER": "none", "GRAPHMEM_CONFIG": ""}


def test_intervals() -> None:
    assert [parse_interval(v) for v in ("90", "45s", "30m", "1.5h", "1d", 20)] == [
        90.0,
        45.0,
        1800.0,
        5400.0,
        86400.0,
        20.0,
    ]
    for bad in ("soon", "-5m", "0", True):
        with pytest.raises(ValueError):
            parse_interval(bad)  # type: ignore[arg-type]
    s = Settings.load(
        environ={"GRAPHMEM_MAINTENANCE__EVERY": "30m", "GRAPHMEM_MAINTENANCE__DRY_RUN": "true"}
    )
    assert (s.maintenance.seconds, s.maintenance.dry_run, s.maintenance.enabled) == (
        1800.0,
        True,
        True,
    )
    assert MaintenanceSettings().every == "1h"
    with pytest.raises(ConfigError):
        Settings.load(environ={"GRAPHMEM_MAINTENANCE__EVERY": "whenever"})


def expired(mem: GraphMemory) -> str:
    return mem.remember(
        "the temporary door code is 4711", expires_at=PAST + timedelta(days=1), created_at=PAST
    ).id


def test_scheduler_from_settings(stores: Stores, caplog: pytest.LogCaptureFixture) -> None:
    off = Settings(maintenance=MaintenanceSettings(enabled=False))
    dry = Settings(maintenance=MaintenanceSettings(every="1h", dry_run=True))
    real = Settings(maintenance=MaintenanceSettings(every="1h"))
    with stores.open(embedder=None) as mem:
        assert mem.lifecycle.scheduled(off) is None
        gone = expired(mem)
        sched = mem.lifecycle.scheduled(dry, run_immediately=True)
        assert sched is not None and sched.interval == 3600.0
        with caplog.at_level(logging.INFO, logger="graphmem.lifecycle"), sched:
            assert sched.wait_for_runs(1, timeout=60)
        assert "dry run, nothing changed" in caplog.text and "expire:archive" in caplog.text
        assert mem.get(gone).status is Status.ACTIVE
        sched = mem.lifecycle.scheduled(real, run_immediately=True)
        assert sched is not None
        with sched:
            assert sched.wait_for_runs(1, timeout=60)
        assert sched.errors == 0 and mem.get(gone).status is Status.ARCHIVED


def test_serve_runs_the_scheduler_in_its_lifespan(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from graphmem.server.http import create_app

    url = str(tmp_path / "served.db")
    on = Settings(url=url, embedder="none", llm="none")
    with TestClient(create_app(on)) as client:
        sched = client.app.state.maintenance  # type: ignore[attr-defined]
        assert sched is not None and sched.running and sched.interval == 3600.0
    assert not sched.running  # stopped with the app
    off = on.replace(maintenance={"enabled": False})
    with TestClient(create_app(off)) as client:
        assert client.app.state.maintenance is None  # type: ignore[attr-defined]


@pytest.mark.embedded("the CLI maintains a store file named by --db")
def test_cli_maintain_every(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    with GraphMemory.open(db, embedder=None) as mem:
        gone = expired(mem)
    result = CliRunner().invoke(
        app,
        ["maintain", "--db", db, "--every", "1ms", "--count", "2", "--apply", "--json"],
        env=ENV,
    )
    assert result.exit_code == 0, result.output
    docs = [json.loads(d) for d in result.stdout.replace("}\n{", "}\x00{").split("\x00")]
    assert len(docs) == 2  # two runs: the first archived, the second found nothing
    assert [len(d["actions"]) for d in docs] == [1, 0]
    with GraphMemory.open(db, embedder=None) as mem:
        assert mem.get(gone).status is Status.ARCHIVED
    bad = CliRunner().invoke(app, ["maintain", "--db", db, "--every", "soon"], env=ENV)
    assert bad.exit_code == 2 and "--every" in bad.output
