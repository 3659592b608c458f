"""Settings: the documented precedence, validation as ConfigError, masked secrets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from graphmem.config import Settings
from graphmem.errors import ConfigError, GraphMemError
from graphmem.opening import open_memory
from tests.conftest import BACKEND_ENV
from tests.neo4j_support import WIPE_OPT_IN

TOML = """
url = "from-file.db"
embedder = "hash"
password = "file-secret"
username = "neo4j"

[lifecycle]
promote_importance = 0.7

[lifecycle.consolidation]
merge_threshold = 0.5

[server]
port = 9100
max_batch = 10

[[server.api_keys]]
key = "file-key-123456"
agent_id = "planner"
namespaces = ["team"]
"""


@pytest.fixture
def toml_file(tmp_path: Path) -> Path:
    p = tmp_path / "graphmem.toml"
    p.write_text(TOML)
    return p


def test_defaults_are_the_embedded_store_without_secrets() -> None:
    s = Settings()
    assert s.url == "graphmem.db" and s.auth is None and s.server.api_keys == ()
    assert s.lifecycle.promote_importance == 0.5 and s.lifecycle.promote_access_count == 3
    cons = s.lifecycle.consolidation
    assert cons.merge_threshold == 0.6 and cons.duplicate_threshold == 0.7


def test_the_constructor_never_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHMEM_URL", "neo4j://elsewhere:7687")
    assert Settings().url == "graphmem.db"
    assert Settings.from_env().url == "neo4j://elsewhere:7687"


def test_importing_graphmem_reads_no_settings() -> None:
    # a malformed environment would raise if anything parsed it at import
    env = {
        "GRAPHMEM_SERVER__PORT": "not-a-port",
        "GRAPHMEM_CONFIG": "/nonexistent.toml",
        "PATH": "/usr/bin:/bin",
    }
    code = "import graphmem, graphmem.config, graphmem.cli, graphmem.aio, graphmem.server.http"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_file_layer(toml_file: Path) -> None:
    s = Settings.from_toml(toml_file)
    assert (s.url, s.embedder, s.server.port, s.server.max_batch) == (
        "from-file.db",
        "hash",
        9100,
        10,
    )
    assert s.auth == ("neo4j", "file-secret")
    assert s.lifecycle.promote_importance == 0.7
    assert s.lifecycle.promote_access_count == 3  # untouched fields keep their defaults
    [key] = s.server.api_keys
    assert key.agent_id == "planner" and key.namespaces == ("team",)


def test_precedence_defaults_file_env_arguments(toml_file: Path) -> None:
    env = {
        "GRAPHMEM_CONFIG": str(toml_file),
        "GRAPHMEM_URL": "from-env.db",
        "GRAPHMEM_SERVER__PORT": "9200",
        "GRAPHMEM_LIFECYCLE__CONSOLIDATION__MERGE_THRESHOLD": "0.55",
    }
    s = Settings.load(environ=env, url="from-arg.db", server={"max_batch": 5})
    assert s.url == "from-arg.db"  # argument beats env beats file
    assert s.server.port == 9200  # env beats file
    assert s.server.max_batch == 5  # argument, while the section's other fields merge
    assert len(s.server.api_keys) == 1  # ...so the file's keys survive
    assert s.embedder == "hash"  # file beats default
    assert s.lifecycle.consolidation.merge_threshold == 0.55  # a nested section, from env
    assert s.lifecycle.promote_importance == 0.7
    # an explicit file argument wins over GRAPHMEM_CONFIG; None overrides fall through
    assert Settings.load(toml_file, environ={}, url=None).url == "from-file.db"


def test_env_lists_are_json() -> None:
    env = {
        "GRAPHMEM_SERVER__API_KEYS": (
            '[{"key": "env-key-1234", "agent_id": "a", "namespaces": ["*"]}]'
        )
    }
    s = Settings.from_env(env)
    assert s.server.api_keys[0].key.get_secret_value() == "env-key-1234"
    assert s.server.key_for("env-key-1234") is s.server.api_keys[0]
    assert s.server.key_for("env-key-1235") is None


def test_unknown_variables_are_ignored(caplog: pytest.LogCaptureFixture) -> None:
    s = Settings.from_env({"GRAPHMEM_NOPE": "1", "GRAPHMEM_SERVER__NOPE": "2", "OTHER": "3"})
    assert s == Settings()
    assert "GRAPHMEM_NOPE" in caplog.text and "GRAPHMEM_SERVER__NOPE" in caplog.text


@pytest.mark.parametrize(
    "name",
    # the suite's own switches (by their constants where it has them), then the notebooks'
    [WIPE_OPT_IN, BACKEND_ENV, "GRAPHMEM_CYPHER_LINT"]
    + [f"GRAPHMEM_NOTEBOOK_{s}" for s in ("NEO4J_CLEANUP", "DATA", "ANTHROPIC")],
)
def test_the_switches_of_the_tests_and_notebooks_are_not_settings_nor_warned_about(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a warning on stderr breaks every test that checks a command's stderr is empty
    assert Settings.from_env({name: "1"}) == Settings()
    assert "unknown setting" not in caplog.text


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"GRAPHMEM_SERVER__PORT": "seventy"}, "server.port"),
        ({"GRAPHMEM_LIFECYCLE__PROMOTE_IMPORTANCE": "1.5"}, "lifecycle.promote_importance"),
        ({"GRAPHMEM_LLM": "gpt"}, "llm"),
        ({"GRAPHMEM_SERVER__API_KEYS": '[{"key": "short"}]'}, "at least 8"),
        ({"GRAPHMEM_SERVER__API_KEYS": "[not json"}, "JSON"),
        ({"GRAPHMEM_CONFIG": "/nonexistent/graphmem.toml"}, "does not exist"),
        # found by probing the servers: each of these keys loaded; one with no namespaces
        # made every write a 500, a padded agent id every write a 422, and a secret given
        # twice acted as whichever agent came last
        (
            {"GRAPHMEM_SERVER__API_KEYS": '[{"key": "key-0000001", "namespaces": []}]'},
            "namespaces",
        ),
        (
            {"GRAPHMEM_SERVER__API_KEYS": '[{"key": "key-0000001", "agent_id": " a "}]'},
            "agent_id",
        ),
        (
            {"GRAPHMEM_SERVER__API_KEYS": '[{"key": "key-0000001", "namespaces": ["", "x"]}]'},
            "namespaces",
        ),
        (
            {
                "GRAPHMEM_SERVER__API_KEYS": '[{"key": "key-0000001", "agent_id": "a"}, '
                '{"key": "key-0000001", "agent_id": "b"}]'
            },
            "more than once",
        ),
        ({"GRAPHMEM_SERVER__MCP_AGENT_ID": ""}, "mcp_agent_id"),
    ],
)
def test_bad_settings_are_config_errors(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[")) as info:
        Settings.from_env(env)
    assert isinstance(info.value, GraphMemError)


def test_malformed_toml_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("url = \n")
    with pytest.raises(ConfigError, match="cannot read"):
        Settings.from_toml(bad)
    bad.write_text("[server]\nbogus = 1\n")
    with pytest.raises(ConfigError, match=r"server\.bogus"):
        Settings.from_toml(bad)


def test_settings_are_frozen() -> None:
    s = Settings()
    with pytest.raises(ValueError):
        s.url = "x"  # type: ignore[misc]
    assert s.replace(url="y").url == "y" and s.url == "graphmem.db"


def test_secrets_are_masked_everywhere(toml_file: Path) -> None:
    s = Settings.load(
        toml_file,
        environ={},
        anthropic_api_key="sk-ant-very-secret",
        url="neo4j://neo4j:url-secret@db.example:7687",
    )
    shown = repr(s) + str(s) + repr(s.masked())
    for secret in ("file-secret", "file-key-123456", "sk-ant-very-secret", "url-secret"):
        assert secret not in shown
    masked = s.masked()
    assert masked["password"] == "**********" and masked["anthropic_api_key"] == "**********"
    assert masked["server"]["api_keys"][0]["key"] == "**********"
    assert masked["url"] == "neo4j://neo4j:**********@db.example:7687"
    assert isinstance(s.password, SecretStr) and s.auth == ("neo4j", "file-secret")


def test_settings_open_the_store_they_name(tmp_path: Path) -> None:
    s = Settings(url=str(tmp_path / "s.db"), embedder="none", llm="none")
    with open_memory(s) as mem:
        mem.remember("configured", agent_id="a")
        assert mem.settings is s and mem.llm is None and mem.embedder is None
    with open_memory(Settings(url=str(tmp_path / "s.db"), embedder="none")) as mem:
        assert mem.count(agent_id="a") == 1
        assert type(mem.llm).__name__ == "OfflineLLM"


def test_a_file_store_opens_beside_neo4j_credentials_in_the_environment(tmp_path: Path) -> None:
    """``--db FILE`` (a url given over NEO4J_URI / NEO4J_USER from the environment): the
    server's credentials are not passed to the embedded store, which takes no auth."""
    env = {"NEO4J_URI": "bolt://db:7687", "NEO4J_USER": "neo", "NEO4J_PASSWORD": "pw"}
    s = Settings.load(environ=env, url=str(tmp_path / "f.db"), embedder="none", llm="none")
    with open_memory(s) as mem:
        mem.remember("stored in the file", agent_id="a")
        assert mem.count(agent_id="a") == 1


def test_lifecycle_is_one_model_reachable_to_every_nested_field() -> None:
    from graphmem.config import LifecycleConfig

    assert Settings().lifecycle == LifecycleConfig()
    s = Settings.load(
        environ={
            "GRAPHMEM_LIFECYCLE__DECAY__HALF_LIFE_DAYS": "14",
            "GRAPHMEM_LIFECYCLE__CONSOLIDATION__MAX_GROUP_SIZE": "7",
            "GRAPHMEM_LIFECYCLE__MIN_SUMMARY_SOURCES": "3",
            "GRAPHMEM_LIFECYCLE__STALE_AFTER": "P10D",
        },
        lifecycle={"decay": {"access_weight": 0.5}},
    )
    lc = s.lifecycle
    assert isinstance(lc, LifecycleConfig)
    assert (lc.decay.half_life_days, lc.decay.access_weight) == (14.0, 0.5)
    assert lc.consolidation.max_group_size == 7 and lc.min_summary_sources == 3
    assert lc.stale_after is not None and lc.stale_after.days == 10
    with pytest.raises(ConfigError, match=r"lifecycle\.decay\.half_life_days"):
        Settings.load(environ={"GRAPHMEM_LIFECYCLE__DECAY__HALF_LIFE_DAYS": "-1"})


def test_store_neo4j_vectors_and_knowledge_sections_reach_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = Settings.load(
        environ={
            "GRAPHMEM_URL": str(tmp_path / "s.db"),
            "GRAPHMEM_STORE__DURABILITY": "full",
            "GRAPHMEM_STORE__BUSY_TIMEOUT_MS": "2500",
            "GRAPHMEM_VECTORS__MODE": "inline",
            "GRAPHMEM_KNOWLEDGE__ENABLED": "false",
            "GRAPHMEM_NEO4J__BATCH_ROWS": "100",
            "GRAPHMEM_NEO4J__DRIVER_OPTIONS": '{"max_connection_pool_size": 5}',
        },
        embedder="none",
    )
    assert s.backend_options() == {"durability": "full", "busy_timeout_ms": 2500}
    neo = s.replace(url="neo4j://localhost:7687").backend_options()
    assert neo["batch_rows"] == 100 and neo["max_connection_pool_size"] == 5
    assert "cypher_dir" not in neo
    with open_memory(s) as mem:
        assert mem.backend._busy_timeout == 2.5  # type: ignore[attr-defined]
        assert mem.knowledge.indexer is None and not mem.vectors.background
    assert "unknown setting" not in caplog.text


@pytest.mark.embedded("the environment names store files, which must appear on disk")
def test_open_reads_the_connection_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphmem.memory import GraphMemory

    for name in ("GRAPHMEM_CONFIG", "NEO4J_URI", "NEO4J_USER", "NEO4J_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GRAPHMEM_URL", str(tmp_path / "env.db"))
    with GraphMemory.open(embedder=None) as mem:
        mem.remember("from the environment")
    assert (tmp_path / "env.db").exists()
    monkeypatch.delenv("GRAPHMEM_URL")
    monkeypatch.setenv("NEO4J_URI", str(tmp_path / "fallback.db"))  # the documented fallback
    with GraphMemory.open(embedder=None) as mem:
        assert mem.count() == 0
    assert (tmp_path / "fallback.db").exists()


def test_neo4j_variables_are_fallbacks_for_the_connection() -> None:
    env = {"NEO4J_URI": "bolt://db:7687", "NEO4J_USER": "neo", "NEO4J_PASSWORD": "pw"}
    s = Settings.load(environ=env)
    assert (s.url, s.auth, s.database) == ("bolt://db:7687", ("neo", "pw"), None)
    s = Settings.load(environ={**env, "GRAPHMEM_URL": "neo4j://other:7687"})
    assert s.url == "neo4j://other:7687" and s.auth == ("neo", "pw")  # GRAPHMEM_ wins
    assert Settings.load(environ={"NEO4J_USER": "x"}).auth is None  # no URI: not used


SECTIONS_TOML = """
url = "memory://"
embedder = "none"
llm = "none"

[lifecycle]
stale_after = "P30D"
improve_limit = 50

[lifecycle.retention]
logs = "P7D"
by_category = { episodic = "P2D" }

[lifecycle.scorer]
base = 0.4

[lifecycle.rules]
long_term_events = ["deploy"]

[recall]
candidates = 40

[recall.weights]
trust = 0.2

[org]
core_policies = ["Never share customer data."]

[org.rules.policy]
min_seniority = "lead"

[runs]
max_runs = 20
max_events_per_run = 100

[reconcile]
mode = "off"

[maintenance]
every = "30m"
dry_run = true
"""


def test_every_section_reaches_the_store(tmp_path: Path) -> None:
    path = tmp_path / "sections.toml"
    path.write_text(SECTIONS_TOML, encoding="utf-8")
    s = Settings.load(
        path,
        environ={
            "GRAPHMEM_RUNS__MAX_RUNS": "25",
            "GRAPHMEM_RECALL__WEIGHTS": '{"trust": 0.3}',
            "GRAPHMEM_LIFECYCLE__IMPROVE_LIMIT": "60",
        },
    )
    assert (s.runs.max_runs, s.runs.max_events_per_run) == (25, 100)  # env over file
    assert s.recall.weights.trust == 0.3 and s.recall.candidates == 40
    with open_memory(s) as mem:
        lc = mem.lifecycle.config
        assert lc.retention.log_period is not None and lc.retention.log_period.days == 7
        assert lc.retention.period_for("a", "episodic") is not None
        assert lc.stale_after is not None and lc.stale_after.days == 30
        assert (lc.improve_limit, lc.scorer.base, lc.rules.long_term_events) == (
            60,
            0.4,
            ("deploy",),
        )
        assert mem.runs.limits.max_runs == 25
        assert mem._retriever().config.candidates == 40
        assert mem.org.config.rule_for("policy").min_seniority == "lead"
        assert "Never share customer data." in mem.context("anything")
        mem.remember("same text")
        mem.remember("same text")
        assert mem.count() == 2  # reconcile = "off"
        assert mem.runs.add_event("r", "deploy", "shipped v2").tier.value == "long_term"
        assert s.maintenance.dry_run and s.maintenance.seconds == 1800


def test_readme_lists_every_knob_with_its_variable_and_its_example_loads(
    tmp_path: Path,
) -> None:
    import re

    from pydantic import BaseModel

    readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text(
        encoding="utf-8"
    )
    match = re.search(r"^## Configuration\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    assert match, "docs/configuration.md has no '## Configuration' section"
    section = match.group(1)

    def documented(path: list[str]) -> bool:
        env = "GRAPHMEM_" + "__".join(p.upper() for p in path)
        return f"| `{'.'.join(path)}` |" in section and f"`{env}`" in section

    def undocumented(model: type[BaseModel], path: list[str]) -> list[str]:
        # a field is documented itself, or (a nested section) field by field
        out: list[str] = []
        for name, field in model.model_fields.items():
            inner = field.annotation
            here = [*path, name]
            if documented(here) or (not path and f"| `{name}` |" in section):
                continue
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                out += undocumented(inner, here)
            else:
                out.append(".".join(here))
        return out

    missing = undocumented(Settings, [])
    assert not missing, f"README's configuration section misses {missing}"
    example = re.search(r"```toml\n(.*?)```", section, re.S)
    assert example
    path = tmp_path / "example.toml"
    path.write_text(example.group(1), encoding="utf-8")
    s = Settings.from_toml(path)
    assert s.runs.max_runs == 1000 and s.lifecycle.retention.logs is not None
