"""benchmarks/locomo.py on a store that outlives the run (a file or a server): a store that
already holds memories would have them recalled beside the conversations, and one store
cannot hold two systems."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from graphmem import GraphMemory

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.embedded(
    "the script's refusal is backend-neutral; a SQLite file is a store that outlives the run"
)


def _locomo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_locomo", ROOT / "benchmarks/locomo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _data(tmp_path: Path) -> Path:
    turns = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
        {"speaker": "Bob", "dia_id": "D1:2", "text": "Miso is a lovely name."},
    ]
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        },
        "qa": [{"question": "What is Ann's cat called?", "evidence": ["D1:1"], "category": 4}],
    }
    path = tmp_path / "conv.json"
    path.write_text(json.dumps([sample]))
    return path


def test_a_store_that_holds_memories_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'held.db'}"
    with GraphMemory.open(url, embedder=None) as mem:
        mem.remember("an unrelated memory from another run", agent_id="other")
    args = ["--data", str(_data(tmp_path)), "--store", url, "--embedder", "none"]
    with pytest.raises(SystemExit) as exc:
        _locomo().main([*args, "--path", "user", "--no-baselines"])
    assert "already holds graphmem data" in str(exc.value.code)
    with GraphMemory.open(url, embedder=None) as mem:
        assert mem.count() == 1


def test_one_store_outliving_the_run_holds_one_system(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'two.db'}"
    with pytest.raises(SystemExit) as exc:
        _locomo().main(["--data", str(_data(tmp_path)), "--store", url, "--path", "both"])
    assert exc.value.code == 2
    assert "holds one system" in capsys.readouterr().err
    assert not (tmp_path / "two.db").exists()


def test_an_empty_store_that_outlives_the_run_is_used(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    args = ["--data", str(_data(tmp_path)), "--store", url, "--embedder", "none"]
    assert _locomo().main([*args, "--path", "user", "--no-baselines"]) == 0
    with GraphMemory.open(url, embedder=None) as mem:
        assert mem.count() == 2


def test_the_event_path_logs_both_speakers_of_a_session_in_its_run(tmp_path: Path) -> None:
    # A session is one run; both speakers' turns are its events, so the run cannot belong to
    # one speaker (another agent may not add to a run): the conversation owns it.
    url = f"sqlite:///{tmp_path / 'events.db'}"
    args = ["--data", str(_data(tmp_path)), "--store", url, "--embedder", "none"]
    assert _locomo().main([*args, "--path", "events", "--no-baselines"]) == 0
    with GraphMemory.open(url, embedder=None) as mem:
        events = mem.list(run_id="conv-x/session-1")
        assert sorted(m.metadata["speaker"] for m in events) == ["Ann", "Bob"]
        assert {m.agent_id for m in events} == {"conv-x"}
