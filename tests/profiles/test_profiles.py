"""Each named profile reproduces its source system's worked numbers; graphmem's default
stays what it was."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from graphmem import GraphMemory
from graphmem.config import RetentionPolicy, Settings
from graphmem.config.profiles import PROFILES, get_profile
from graphmem.errors import ConfigError
from graphmem.models import Memory
from tests.conftest import Stores

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
NAMES = ("graphmem", "orka", "kaos", "synthorg", "openagentflow", "operator")

# (days since creation and last access, accesses, importance): the five cases
CASES = ((0, 0, 0.8), (1, 5, 0.5), (7, 10, 1.0), (30, 1, 0.2), (60, 0, 0.1))


class Clock:
    def __init__(self, at: datetime = NOW) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def _case(days: float, accesses: int, importance: float) -> Memory:
    at = NOW - timedelta(days=days)
    return Memory(
        content="case",
        importance=importance,
        access_count=accesses,
        created_at=at,
        last_accessed=at if accesses else None,
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _open(stores: Stores, profile: str, clock: Clock, **settings: object) -> GraphMemory:
    s = Settings.load(environ={}, url="memory://", profile=profile, **settings)
    return stores.open(f"{profile}.db", settings=s, embedder=None, clock=clock)


# -- selecting a profile ------------------------------------------------------------------


def test_the_profiles_are_the_five_sources_and_graphmem() -> None:
    assert set(PROFILES) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_profile_opens_by_argument_env_and_toml(
    name: str, tmp_path: Path, stores: Stores
) -> None:
    with stores.open("m1.db", profile=name, embedder=None) as mem:
        assert mem.settings.profile == name
        mem.remember("the profile opens and stores", agent_id="a")
        assert mem.recall("profile stores")
    assert Settings.load(environ={"GRAPHMEM_PROFILE": name}).profile == name
    table = tmp_path / "table.toml"
    table.write_text(f'[profile]\nname = "{name}"\n')
    assert Settings.load(table, environ={}).profile == name
    top = tmp_path / "top.toml"
    top.write_text(f'profile = "{name}"\n')
    assert Settings.from_toml(top).profile == name


def test_unknown_profile_is_a_config_error_naming_the_choices(stores: Stores) -> None:
    with pytest.raises(ConfigError, match="openagentflow"):
        stores.open("m2.db", profile="openagentflw", embedder=None)
    with pytest.raises(ConfigError, match="unknown profile"):
        Settings.load(environ={"GRAPHMEM_PROFILE": "nope"})


def test_what_the_user_configured_wins_over_the_profile(tmp_path: Path) -> None:
    cfg = tmp_path / "g.toml"
    cfg.write_text('profile = "synthorg"\n[recall]\nrrf_k = 20\n')
    s = Settings.load(cfg, environ={})
    assert (s.recall.rrf_k, s.recall.mmr) == (20, True)  # ours, then the profile's
    moved = s.replace(profile="openagentflow")
    assert (moved.recall.rrf_k, moved.recall.mmr, moved.lifecycle.keep_ratio) == (20, False, 0.7)


def test_graphmem_profile_is_exactly_the_defaults() -> None:
    assert (
        Settings.load(environ={}, profile="graphmem").model_dump()
        == Settings.load(environ={}).model_dump()
    )
    assert get_profile("graphmem").overlay == {}


# -- OpenAgentFlow ------------------------------------------------------------------------


def test_openagentflow_scores_the_five_cases(stores: Stores, clock: Clock) -> None:
    with stores.open("m3.db", profile="openagentflow", embedder=None) as mem:
        got = [mem.relevance(_case(*c), now=NOW) for c in CASES]
    assert got == pytest.approx([0.720, 0.545, 0.707, 0.131, 0.050], abs=1e-3)


def test_graphmem_default_signal_on_the_five_cases_is_unchanged(stores: Stores) -> None:
    with stores.open("m4.db", embedder=None) as mem:
        got = [mem.relevance(_case(*c), now=NOW) for c in CASES]
    assert got == pytest.approx([0.720, 0.720, 0.845, 0.233, 0.104], abs=1e-3)


def test_openagentflow_recency_reads_the_last_access_and_decay_the_creation(stores: Stores) -> None:
    # created 10 days ago, accessed just now: recency 1, decay 0.95^10
    m = Memory(
        content="x",
        importance=0.5,
        access_count=0,
        created_at=NOW - timedelta(days=10),
        last_accessed=NOW,
    )
    with stores.open("m5.db", profile="openagentflow", embedder=None) as mem:
        assert mem.relevance(m, now=NOW) == pytest.approx(0.3 + 0.2 + 0.1 * 0.95**10)


def test_openagentflow_recall_ranks_matches_by_their_relevance(
    stores: Stores, clock: Clock
) -> None:
    with _open(stores, "openagentflow", clock) as mem:
        low = mem.remember("the deploy key rotates weekly", importance=0.1)
        high = mem.remember("the deploy key lives in the vault", importance=0.9)
        hits = mem.recall("deploy key", touch=False)
    assert [h.memory.id for h in hits] == [high.id, low.id]
    assert hits[0].score == pytest.approx(0.3 + 0.4 * 0.9 + 0.1, abs=1e-4)


def test_openagentflow_prunes_long_term_below_0_10_and_marks_stale_after_30_days(
    stores: Stores,
    clock: Clock,
) -> None:
    with _open(stores, "openagentflow", clock) as mem:
        clock.at = NOW - timedelta(days=45)
        faded = mem.remember("an old note nobody reads", importance=0.1)
        clock.at = NOW - timedelta(days=31)
        stale = mem.remember("an important note unread for a month", importance=0.9)
        clock.at = NOW - timedelta(days=29)
        fresh = mem.remember("a note of last month", importance=0.2)
        clock.at = NOW
        dry = mem.lifecycle.maintain(dry_run=True, steps=("decay", "stale"))
        report = mem.lifecycle.maintain(steps=("decay", "stale"))
        assert report.actions == dry.actions
        assert report.ids("archive", "decay") == [faded.id]  # 0.057 < 0.10
        assert report.ids("archive", "stale") == [stale.id]  # 31 days, any importance
        assert mem.get(fresh.id).status.value == "active"
        # archived, not destroyed: restorable
        assert mem.get(faded.id).status.value == "archived"
    with stores.open("m6.db", embedder=None, clock=clock) as default:
        clock.at = NOW - timedelta(days=45)
        kept = default.remember("an old note nobody reads", importance=0.1)
        clock.at = NOW
        assert default.lifecycle.maintain(steps=("decay", "stale")).actions == ()
        assert default.get(kept.id).status.value == "active"


def test_openagentflow_short_term_refresh_every_10_cuts_to_70_of_100(
    stores: Stores, clock: Clock
) -> None:
    with _open(stores, "openagentflow", clock) as mem:
        written = []
        for i in range(110):
            clock.at = NOW + timedelta(seconds=i)
            written.append(
                mem.remember(
                    f"step {i} of the plan",
                    run_id="r1",
                    tier="short_term",
                    importance=round(0.2 + (i % 7) / 10, 2),
                )
            )
        active = mem.list(run_id="r1", tier="short_term", status="active", limit=500)
        assert len(active) == 70  # 110 > 100 at the 11th refresh: cut to 0.7 x 100
        kept = {m.id for m in active}
        gone = [m for m in written if m.id not in kept]
        assert max(m.importance for m in gone) <= min(m.importance for m in active)
    with stores.open("m7.db", embedder=None, clock=clock) as default:
        for i in range(110):
            default.remember(f"step {i}", run_id="r1", tier="short_term", importance=0.5)
        assert default.count(run_id="r1", status="active") == 110  # graphmem: 200 per run


def test_openagentflow_run_summary_has_importance_0_8_and_keeps_the_10_newest(
    stores: Stores,
    clock: Clock,
) -> None:
    with _open(stores, "openagentflow", clock) as mem:
        ids = []
        for i in range(15):
            clock.at = NOW + timedelta(minutes=i)
            ids.append(mem.runs.add_event("r1", "progress", f"step {i} done", importance=0.2).id)
        report = mem.lifecycle.on_run_end("r1")
        [summary_id] = report.ids("create", "summarize")
        assert mem.get(summary_id).importance == 0.8
        assert sorted(report.ids("archive", "run_end")) == sorted(ids[:5])
        assert all(mem.get(i).status.value == "active" for i in ids[5:])


# -- OrKa -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "event", "metadata", "importance", "tier"),
    [
        ("openai-answer-1", "success", {"result": "42", "response": "ok"}, 0.9, "long_term"),
        ("memory-writer", "write", None, 1.0, "long_term"),
        ("memory-reader", "debug", None, 0.7, "short_term"),  # a short-term event stays short
        ("planner", "error", {"response": "boom"}, 0.5, "short_term"),
        ("memory-openai-answer", "step", None, 0.8, "long_term"),  # 0.8 >= 0.7
        ("planner", "step", {"result": "x"}, 0.6, "short_term"),
    ],
)
def test_orka_importance_and_tier(
    stores: Stores,
    clock: Clock,
    agent: str,
    event: str,
    metadata: dict[str, str] | None,
    importance: float,
    tier: str,
) -> None:
    with _open(stores, "orka", clock) as mem:
        m = mem.runs.add_event("r1", event, "an event", agent_id=agent, metadata=metadata)
    assert (m.importance, m.tier.value) == (pytest.approx(importance), tier)


def test_orka_tier_expiry_table_1h_short_24h_long(stores: Stores, clock: Clock) -> None:
    with _open(stores, "orka", clock) as mem:
        short = mem.runs.add_event("r1", "debug", "a debug line", agent_id="planner")
        long = mem.runs.add_event("r1", "success", "the answer", agent_id="planner")
        assert short.expires_at == NOW + timedelta(hours=1)
        assert long.expires_at == NOW + timedelta(hours=24)
        clock.at = NOW + timedelta(hours=2)
        assert mem.lifecycle.expire().ids("archive") == [short.id]
        clock.at = NOW + timedelta(hours=25)
        assert mem.lifecycle.expire().ids("archive") == [long.id]
    with stores.open("m8.db", embedder=None, clock=clock) as default:
        assert default.runs.add_event("r1", "debug", "a line").expires_at is None


def test_orka_sweeps_every_30_minutes() -> None:
    assert Settings.load(environ={}, profile="orka").maintenance.seconds == 1800


# -- KAOS -------------------------------------------------------------------------------


def _events(mem: GraphMemory, n: int) -> list[Memory]:
    return [mem.runs.add_event("s1", "user_message", f"message {i}") for i in range(n)]


@pytest.mark.parametrize(("profile", "archived"), [("kaos", 1), ("graphmem", 3)])
def test_kaos_evicts_the_one_oldest_event_over_the_limit(
    stores: Stores, clock: Clock, profile: str, archived: int
) -> None:
    with _open(stores, profile, clock, runs={"max_events_per_run": 20}) as mem:
        events = _events(mem, 21)
        gone = [e for e in events if mem.get(e.id).status.value == "archived"]
        assert [e.seq for e in gone] == list(range(archived))
        if profile == "kaos":
            mem.runs.add_event("s1", "user_message", "one more")
            assert mem.get(events[1].id).status.value == "archived"
            assert mem.count(run_id="s1", status="active") == 20


# -- SynthOrg ---------------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "k"), [("synthorg", 60), ("graphmem", 10)])
def test_synthorg_fuses_with_rrf_k_60(stores: Stores, clock: Clock, profile: str, k: int) -> None:
    with _open(stores, profile, clock) as mem:
        mem.remember("tea tea tea with milk")
        mem.remember("tea and a biscuit with milk on the side")
        hits = mem.recall("tea milk", touch=False)
    fused = sorted((h.breakdown["fused"] for h in hits), reverse=True)
    # lexical only: rank 1 -> 1, rank 2 -> (k + 1) / (k + 2)
    assert fused == pytest.approx([1.0, (k + 1) / (k + 2)])


def test_synthorg_retention_resolves_agent_category_first() -> None:
    day = timedelta(days=1)
    s = Settings.load(
        environ={},
        profile="synthorg",
        lifecycle={
            "retention": {
                "default": 90 * day,
                "by_category": {"episodic": 30 * day},
                "agents": {"ceo": {"default": 365 * day, "by_category": {"episodic": 7 * day}}},
            }
        },
    )
    policy: RetentionPolicy = s.lifecycle.retention
    assert policy.period_for("ceo", "episodic") == 7 * day  # agent per category
    assert policy.period_for("dev", "episodic") == 30 * day  # company per category
    assert policy.period_for("ceo", "semantic") == 365 * day  # agent default
    assert policy.period_for("dev", "semantic") == 90 * day  # company default


# -- Operator ---------------------------------------------------------------------------


def test_operator_scores_0_7_relevance_plus_0_3_recency(stores: Stores, clock: Clock) -> None:
    with _open(stores, "operator", clock) as mem:
        clock.at = NOW - timedelta(days=30)
        old = mem.remember("the staging database is postgres 16")
        clock.at = NOW
        new = mem.remember("the staging database moved to a new host")
        hits = {h.memory.id: h for h in mem.recall("staging database", touch=False)}
        assert mem.relevance(mem.get(old.id), now=NOW) == pytest.approx(0.5)  # 1/(1+30/30)
    for h, recency in ((hits[old.id], 0.5), (hits[new.id], 1.0)):
        assert h.breakdown["recency"] == pytest.approx(recency)
        assert h.score == pytest.approx(0.7 * h.breakdown["relevance"] + 0.3 * recency)


def test_docs_table_has_a_row_for_every_setting_a_profile_changes() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "profiles.md").read_text("utf-8")
    base = Settings.load(environ={}).model_dump()
    missing = []
    for name in NAMES:
        s = Settings.load(environ={}, profile=name).model_dump()
        for section, fields in s.items():
            if section == "profile" or not isinstance(fields, dict):
                continue
            for field, value in fields.items():
                if value == base[section][field]:
                    continue
                if field == "scorer":
                    keys = [f"scorer.{k}" for k, v in value.items() if v != base[section][field][k]]
                else:
                    keys = [field]
                missing += [f"{section}.{k}" for k in keys if f"| `{section}.{k}` |" not in doc]
    assert not missing, f"docs/profiles.md has no row for {sorted(set(missing))}"


def test_orka_stores_a_whole_log_entry_with_a_result_once_from_200_characters(
    stores: Stores,
    clock: Clock,
) -> None:
    def payload(chars: int) -> dict[str, str]:
        skeleton = len('{"note":"","result":"ok"}')
        return {"result": "ok", "note": "n" * (chars - skeleton)}

    with _open(stores, "orka", clock) as mem:
        assert len(json.dumps(payload(200), separators=(",", ":"))) == 200
        a = mem.log.log("memory-agent", "step", payload(200))
        b = mem.log.log("memory-agent", "step", payload(200))
        small = mem.log.log("memory-agent", "step", payload(199))
        plain = mem.log.log("memory-agent", "step", {"note": "n" * 300})
        assert a.payload is None and a.payload_ref == b.payload_ref
        assert small.payload_ref is None and plain.payload_ref is None
        assert mem.log.stats().payloads == 1
        assert mem.log.entry(b.id).payload == payload(200)
    with _open(stores, "graphmem", clock) as mem:
        entry = mem.log.log("memory-agent", "step", payload(200))
        assert entry.payload_ref is None and mem.log.stats().payloads == 0
