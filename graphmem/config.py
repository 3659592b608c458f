"""Settings: one frozen model for everything graphmem can be configured with.

Settings come from four layers; a later layer wins over an earlier one, key by key (nested
sections merge field by field):

1. the defaults below (the embedded store ``./graphmem.db``, no auth, offline LLM);
2. a TOML file — given explicitly (``Settings.load(config_file=...)``, ``graphmem --config``)
   or named by the ``GRAPHMEM_CONFIG`` environment variable;
3. ``GRAPHMEM_*`` environment variables: ``GRAPHMEM_URL``, ``GRAPHMEM_PASSWORD`` … for top-level
   fields and a double underscore for sections, e.g. ``GRAPHMEM_SERVER__PORT=9000`` or
   ``GRAPHMEM_LIFECYCLE__PROMOTE_IMPORTANCE=0.6``; list values (``GRAPHMEM_SERVER__API_KEYS``)
   are JSON;
4. explicit arguments (``Settings.load(url=...)``, command-line options).

The environment is read only by :meth:`Settings.from_env` and :meth:`Settings.load`, never at
import or in the constructor. Secrets (passwords, API keys) are ``SecretStr`` and print masked.

>>> s = Settings.load(environ={"GRAPHMEM_SERVER__PORT": "9000"}, url="memory://")
>>> (s.url, s.server.port)
('memory://', 9000)
>>> Settings(password="hunter2").masked()["password"]
'**********'
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)

from graphmem.errors import ConfigError
from graphmem.lifecycle import ClassificationRules, ImportanceScorer, RetentionPolicy
from graphmem.models import Tier
from graphmem.org import OrgConfig
from graphmem.reconcile import ReconcileConfig
from graphmem.retrieval import RecallConfig
from graphmem.runs import RunLimits
from graphmem.scoring import Scoring

if TYPE_CHECKING:
    from graphmem.memory import GraphMemory

__all__ = [
    "ENV_PREFIX",
    "ApiKey",
    "LifecycleSettings",
    "LogSettings",
    "MaintenanceSettings",
    "ServerSettings",
    "Settings",
    "parse_interval",
]

log = logging.getLogger("graphmem.config")

ENV_PREFIX = "GRAPHMEM_"
CONFIG_ENV = "GRAPHMEM_CONFIG"
# Read by graphmem.embeddings (where derived model files go), not a Settings field.
CACHE_DIR_ENV = "GRAPHMEM_CACHE_DIR"
_MASK = "**********"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ApiKey(_Frozen):
    """One HTTP API key: the agent it acts as and the namespaces it may touch.

    ``namespaces=("*",)`` allows every namespace.
    """

    key: SecretStr
    agent_id: str = "default"
    namespaces: tuple[str, ...] = ("default",)

    @field_validator("key")
    @classmethod
    def _long_enough(cls, v: SecretStr) -> SecretStr:
        if len(v.get_secret_value()) < 8:
            raise ValueError("an API key must have at least 8 characters")
        return v


class LifecycleSettings(_Frozen):
    """Thresholds of the memory lifecycle and of consolidation; GraphMemory turns them into
    a :class:`graphmem.lifecycle.LifecycleConfig` (defaults kept equal to its defaults)."""

    short_term_max: int = Field(default=200, ge=1)
    refresh_every: int = Field(default=20, ge=1)
    refresh_threshold: float = Field(default=0.1, ge=0.0, le=1.0)
    promote_importance: float = Field(default=0.5, ge=0.0, le=1.0)
    promote_access_count: int = Field(default=3, ge=0)
    decay_half_life_days: float = Field(default=30.0, gt=0.0)
    max_memories_per_agent: int | None = Field(default=None, ge=1)
    merge_threshold: float = Field(default=0.6, gt=0.0, le=1.0)
    duplicate_threshold: float = Field(default=0.7, gt=0.0, le=1.0)
    prune_below: float | None = Field(default=0.02, ge=0.0, le=1.0)
    stale_after_days: float | None = Field(default=180.0, gt=0.0)
    stale_max_importance: float = Field(default=0.3, ge=0.0, le=1.0)
    protect_importance: float = Field(default=0.9, ge=0.0, le=1.0)
    summarize_on_run_end: bool = True
    archive_unpromoted_on_run_end: bool = False
    improve_limit: int = Field(default=200, ge=0)
    improve_rewrites: bool = False
    llm_token_budget: int = Field(default=6000, ge=100)
    #: the relevance maintenance measures (graphmem.scoring); None: the decay formula
    scoring: Scoring | None = None
    #: a tier over its maximum is cut to keep_ratio x the maximum (None: to the maximum)
    keep_ratio: float | None = Field(default=None, gt=0.0, le=1.0)
    summary_importance: float | None = Field(default=None, ge=0.0, le=1.0)
    run_end_keep_recent: int | None = Field(default=None, ge=0)
    #: expiry of a write of a tier that sets none: ``{short_term = "1h"}``
    default_expiry: dict[Tier, timedelta] = Field(default_factory=dict)
    #: how long memories (by category, per agent) and log entries are kept
    retention: RetentionPolicy = RetentionPolicy()
    #: importance of a write that does not set it (the seed's rule by default)
    scorer: ImportanceScorer = ImportanceScorer()
    #: tier of a write that does not set it (the seed's rules by default)
    rules: ClassificationRules = ClassificationRules()

    @field_validator("default_expiry", mode="before")
    @classmethod
    def _intervals(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return {
                k: timedelta(seconds=parse_interval(t)) if isinstance(t, str | int | float) else t
                for k, t in v.items()
            }
        return v


_INTERVAL_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_interval(value: str | float | int) -> float:
    """Seconds in an interval written ``90``, ``"45s"``, ``"30m"``, ``"1.5h"`` or ``"1d"``.

    >>> parse_interval("30m"), parse_interval(90)
    (1800.0, 90.0)
    """
    if isinstance(value, bool):
        raise ValueError("an interval is a number of seconds or a string like '30m'")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _INTERVAL_RE.match(str(value))
        if match is None:
            raise ValueError(
                f"cannot read interval {value!r}; write e.g. 90, '45s', '30m', '1h' or '1d'"
            )
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
    if not seconds > 0:
        raise ValueError("an interval must be positive")
    return seconds


class MaintenanceSettings(_Frozen):
    """Scheduled maintenance (``graphmem serve``, ``graphmem maintain --every``): the idle
    cycle (expiry, retention, decay, staleness, limits, improve, consolidation) every
    ``every``. ``dry_run`` only logs what each run would do; ``hard_delete`` deletes
    instead of archiving."""

    enabled: bool = True
    every: str = "1h"
    dry_run: bool = False
    hard_delete: bool = False
    #: also run the cycle in the process that opens the store (no server): a daemon
    #: thread started by ``GraphMemory.open`` and stopped by ``close``
    in_process: bool = False

    @field_validator("every", mode="before")
    @classmethod
    def _interval(cls, v: Any) -> str:
        parse_interval(v)
        return str(v)

    @property
    def seconds(self) -> float:
        return parse_interval(self.every)


class LogSettings(_Frozen):
    """The orchestration log (graphmem.eventlog): how payloads are shared.

    ``dedup = "value"`` stores a result/response value over ``dedup_min_chars`` once, at any
    depth; ``"entry"`` stores a whole payload that has a result/response key once when its
    JSON reaches ``dedup_min_chars``. What remains over ``inline_limit`` bytes is stored
    once as well."""

    dedup: Literal["value", "entry"] = "value"
    dedup_min_chars: int = Field(default=200, ge=0)
    inline_limit: int = Field(default=1024, ge=0)


class ServerSettings(_Frozen):
    """The HTTP API and the MCP server.

    With no ``api_keys`` the HTTP API is open (bind it to 127.0.0.1 only); with keys,
    every request needs ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``.
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    api_keys: tuple[ApiKey, ...] = ()
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    max_batch: int = Field(default=1000, ge=1)
    mcp_agent_id: str = "default"
    mcp_namespace: str = "default"
    mcp_port: int = Field(default=8766, ge=0, le=65535)

    def key_for(self, secret: str) -> ApiKey | None:
        """The configured key equal to ``secret`` (compared in constant time), if any."""
        import hmac

        found = None
        for k in self.api_keys:
            if hmac.compare_digest(k.key.get_secret_value().encode(), secret.encode()):
                found = k
        return found


class Settings(_Frozen):
    """Everything graphmem can be configured with (see the module docstring for sources).

    ``url``: a file path (embedded store), ``memory://`` or ``neo4j://host:7687``.
    ``embedder``: ``auto`` | ``none`` | ``hash`` | a sentence-transformers model.
    ``llm``: ``offline`` (deterministic, no network), ``anthropic`` or ``none``.
    """

    url: str = "graphmem.db"
    #: false: ``open_memory`` gives a NullMemory (stores nothing), as KAOS's MEMORY_ENABLED
    enabled: bool = True
    #: the named profile (graphmem.profiles) whose defaults sit under everything configured
    profile: str = "graphmem"
    username: str | None = None
    password: SecretStr | None = None
    database: str | None = None
    embedder: str = "auto"
    llm: Literal["offline", "anthropic", "none"] = "offline"
    llm_model: str = "claude-sonnet-4-5"
    llm_max_tokens: int = Field(default=1024, ge=1, le=64_000)
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    lifecycle: LifecycleSettings = LifecycleSettings()
    recall: RecallConfig = RecallConfig()
    org: OrgConfig = OrgConfig()
    reconcile: ReconcileConfig = ReconcileConfig()
    runs: RunLimits = RunLimits()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    log: LogSettings = LogSettings()
    server: ServerSettings = ServerSettings()
    # what was configured (files, environment, arguments) before the profile's overlay
    _configured: dict[str, Any] | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        # equal settings are equal values, however they were put together
        if isinstance(other, Settings):
            return self.__dict__ == other.__dict__
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.model_dump_json())

    @field_validator("profile", mode="before")
    @classmethod
    def _profile_name(cls, v: Any) -> Any:
        from graphmem.profiles import get_profile

        if isinstance(v, Mapping):  # a [profile] table: name = "..."
            v = v.get("name", "graphmem")
        try:
            return get_profile(v).name
        except ConfigError as e:
            raise ValueError(str(e)) from None

    # -- building ----------------------------------------------------------------------

    @classmethod
    def from_toml(cls, path: str | Path) -> Settings:
        """Defaults overlaid with a TOML file."""
        return cls._build([_read_toml(Path(path))])

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults overlaid with the file named by ``GRAPHMEM_CONFIG`` (if set) and the
        ``GRAPHMEM_*`` variables of ``environ`` (default: ``os.environ``, read now)."""
        return cls.load(environ=environ)

    @classmethod
    def load(
        cls,
        config_file: str | Path | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """All layers: defaults < TOML file < environment < ``overrides``.

        ``config_file`` defaults to ``$GRAPHMEM_CONFIG``. Overrides whose value is None are
        ignored (so unset command-line options fall through). Nested overrides are dicts:
        ``Settings.load(server={"port": 9000})``.
        """
        env = os.environ if environ is None else environ
        layers: list[dict[str, Any]] = []
        path = config_file if config_file is not None else env.get(CONFIG_ENV)
        if path:
            layers.append(_read_toml(Path(path)))
        layers.append(_env_layer(env))
        layers.append({k: v for k, v in overrides.items() if v is not None})
        return cls._build(layers)

    @classmethod
    def _build(cls, layers: list[dict[str, Any]]) -> Settings:
        merged: dict[str, Any] = {}
        for layer in layers:
            merged = _deep_merge(merged, layer)
        configured = merged
        try:
            # the one place a profile applies: its overlay goes under what was configured
            if merged.get("profile") is not None:
                from graphmem.profiles import get_profile

                name = merged["profile"]
                if isinstance(name, Mapping):
                    name = name.get("name", "graphmem")
                merged = _deep_merge(get_profile(name).settings_layer(), merged)
            built = cls.model_validate(merged)
            built._configured = configured
            return built
        except ConfigError as e:
            raise ConfigError(f"invalid settings: profile: {e}") from e
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
                for err in e.errors()
            )
            raise ConfigError(f"invalid settings: {problems}") from e

    def replace(self, **changes: Any) -> Settings:
        """A validated copy with ``changes`` merged in (nested sections as dicts). A new
        ``profile`` replaces the old one's overlay; what was configured stays."""
        if "profile" in changes and changes["profile"] is not None:
            data = self.configured()
        else:
            data = self.model_dump()
        return type(self)._build([data, {k: v for k, v in changes.items() if v is not None}])

    def configured(self) -> dict[str, Any]:
        """What was configured (files, environment, arguments), without the profile's
        overlay and graphmem's defaults."""
        if self._configured is not None:
            return copy.deepcopy(self._configured)
        return self.model_dump(exclude_unset=True)

    # -- using -------------------------------------------------------------------------

    @property
    def auth(self) -> tuple[str, str] | None:
        """``(username, password)`` for a server backend, or None."""
        if self.username is None:
            return None
        pw = self.password.get_secret_value() if self.password is not None else ""
        return (self.username, pw)

    def make_llm(self) -> Any | None:
        """The LLM these settings name (constructed lazily: no network here)."""
        if self.llm == "none":
            return None
        if self.llm == "offline":
            from graphmem.llm import OfflineLLM

            return OfflineLLM()
        from graphmem.llm import AnthropicLLM

        key = self.anthropic_api_key.get_secret_value() if self.anthropic_api_key else None
        return AnthropicLLM(
            model=self.llm_model,
            max_tokens=self.llm_max_tokens,
            api_key=key,
            base_url=self.anthropic_base_url,
        )

    def open_memory(self, **options: Any) -> GraphMemory:
        """Open the GraphMemory these settings describe (``options`` go to ``open``); a
        :class:`~graphmem.null.NullMemory` when ``enabled`` is false."""
        from graphmem.memory import GraphMemory

        if not self.enabled:
            from graphmem.null import NullMemory

            return NullMemory()  # type: ignore[return-value]

        options.setdefault("embedder", self.embedder)
        options.setdefault("llm", self.make_llm())
        return GraphMemory.open(
            self.url, auth=self.auth, database=self.database, settings=self, **options
        )

    def masked(self) -> dict[str, Any]:
        """The effective settings as plain data with every secret replaced by asterisks
        (including a password embedded in the URL)."""
        data = self.model_dump(mode="json")
        data["url"] = _mask_url(self.url)
        if self.anthropic_base_url:
            data["anthropic_base_url"] = _mask_url(self.anthropic_base_url)
        return data

    def __repr_args__(self) -> Any:  # the URL may carry a password
        for k, v in super().__repr_args__():
            yield k, (_mask_url(v) if k in ("url", "anthropic_base_url") and v else v)


# ---------------------------------------------------------------------------------------


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError as e:
        raise ConfigError(f"config file {str(path)!r} does not exist") from e
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {str(path)!r}: {e}") from e


def _section_fields() -> dict[str, type[BaseModel]]:
    return {
        "lifecycle": LifecycleSettings,
        "recall": RecallConfig,
        "org": OrgConfig,
        "reconcile": ReconcileConfig,
        "runs": RunLimits,
        "maintenance": MaintenanceSettings,
        "log": LogSettings,
        "server": ServerSettings,
    }


def _env_value(raw: str) -> Any:
    """Environment strings: JSON for lists/maps, ``null`` for None, the raw string for
    everything else (pydantic converts numbers and booleans)."""
    text = raw.strip()
    if text == "null":  # an optional limit switched off: GRAPHMEM_RUNS__MAX_RUNS=null
        return None
    if text[:1] in ("[", "{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"malformed JSON in environment value: {e}") from e
    return raw


def _env_layer(env: Mapping[str, str]) -> dict[str, Any]:
    """The ``GRAPHMEM_*`` variables as a nested dict (unknown names are logged, not fatal:
    other tools may share the prefix)."""
    top = Settings.model_fields
    sections = _section_fields()
    out: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in (CONFIG_ENV, CACHE_DIR_ENV):
            continue
        key = name[len(ENV_PREFIX) :].lower()
        section, sep, field = key.partition("__")
        if sep:
            model = sections.get(section)
            if model is None or field not in model.model_fields:
                log.warning("ignoring unknown setting %s", name)
                continue
            out.setdefault(section, {})[field] = _env_value(raw)
        elif key in top and key not in sections:
            out[key] = _env_value(raw)
        else:
            log.warning("ignoring unknown setting %s", name)
    return out


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(dict(out[k]), v)
        elif isinstance(v, BaseModel):
            out[k] = _deep_merge(dict(out.get(k) or {}), v.model_dump())
        else:
            out[k] = v
    return out


def _mask_url(url: str) -> str:
    """``neo4j://user:secret@host`` → ``neo4j://user:**********@host``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username}:{_MASK}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))
