"""Settings, the root of all sections, and the layers it is built from (defaults, TOML, env,
arguments).
"""

from __future__ import annotations

import copy
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)

from graphmem.config.lifecycle import LifecycleConfig
from graphmem.config.org import OrgConfig, RunLimits
from graphmem.config.recall import RecallConfig, ReconcileConfig
from graphmem.config.service import LogSettings, MaintenanceSettings, ServerSettings
from graphmem.config.store import (
    KnowledgeSettings,
    Neo4jSettings,
    StoreSettings,
    VectorSettings,
    _Frozen,
    log,
)
from graphmem.errors import ConfigError

ENV_PREFIX = "GRAPHMEM_"
CONFIG_ENV = "GRAPHMEM_CONFIG"
# Read by graphmem.embeddings (where derived model files go), not a Settings field.
CACHE_DIR_ENV = "GRAPHMEM_CACHE_DIR"
#: switches of graphmem's own test suite and notebooks, not settings: recognised, so that
#: every process they start does not warn about them
TEST_ONLY_ENV = frozenset(
    {
        "GRAPHMEM_NEO4J_ALLOW_WIPE",
        "GRAPHMEM_TEST_BACKEND",
        "GRAPHMEM_CYPHER_LINT",
        "GRAPHMEM_NOTEBOOK_NEO4J_CLEANUP",
        "GRAPHMEM_NOTEBOOK_DATA",
        "GRAPHMEM_NOTEBOOK_ANTHROPIC",
    }
)
_MASK = "**********"


class Settings(_Frozen):
    """Everything graphmem can be configured with (see the module docstring for sources).

    ``url``: a file path (embedded store), ``memory://`` or ``neo4j://host:7687``.
    ``embedder``: ``auto`` | ``none`` | ``hash`` | a sentence-transformers model.
    ``llm``: ``offline`` (deterministic, no network), ``anthropic`` or ``none``.
    """

    url: str = "graphmem.db"
    #: false: ``graphmem.opening.open_memory`` gives a NullMemory (stores nothing), as
    #: KAOS's MEMORY_ENABLED
    enabled: bool = True
    #: the named profile (graphmem.config.profiles) whose defaults sit under everything configured
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
    store: StoreSettings = StoreSettings()
    neo4j: Neo4jSettings = Neo4jSettings()
    vectors: VectorSettings = VectorSettings()
    knowledge: KnowledgeSettings = KnowledgeSettings()
    lifecycle: LifecycleConfig = LifecycleConfig()
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
        from graphmem.config.profiles import get_profile

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
        layers: list[dict[str, Any]] = [_neo4j_fallbacks(env)]
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
                from graphmem.config.profiles import get_profile

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

    def backend_options(self) -> dict[str, Any]:
        """The options of the backend :attr:`url` names: the embedded store's
        (``store``) or Neo4j's (``neo4j``, with its driver options) — what
        ``GraphMemory.open`` passes to ``open_backend``."""
        scheme = self.url.partition("://")[0] if "://" in self.url else ""
        if scheme.startswith(("neo4j", "bolt")):
            opts = self.neo4j.model_dump(exclude={"driver_options"})
            if opts["cypher_dir"] is None:
                del opts["cypher_dir"]
            return {**opts, **self.neo4j.driver_options}
        return self.store.model_dump()

    def connection(
        self,
        url: str | None,
        auth: tuple[str, str] | None,
        database: str | None,
        options: dict[str, Any],
    ) -> tuple[str, dict[str, Any]]:
        """The URL and backend options ``GraphMemory.open`` connects with: what is given
        wins over these settings (``url`` None: :attr:`url`, with its credentials)."""
        if url is None:
            url = self.url
            if url.partition("://")[0].startswith(("neo4j", "bolt")):
                # a server's credentials (NEO4J_USER ... may sit beside a file store)
                auth = auth if auth is not None else self.auth
                database = database if database is not None else self.database
        merged = {**self.replace(url=url).backend_options(), **options}
        if auth is not None:
            merged["auth"] = auth
        if database is not None:
            merged["database"] = database
        return url, merged

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
    """The ``GRAPHMEM_*`` variables as a nested dict: a double underscore descends into a
    section (``GRAPHMEM_LIFECYCLE__DECAY__HALF_LIFE_DAYS``). Unknown names are logged, not
    fatal: other tools may share the prefix."""
    out: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in (CONFIG_ENV, CACHE_DIR_ENV):
            continue
        if name in TEST_ONLY_ENV:
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        if not _known(Settings, path):
            log.warning("ignoring unknown setting %s", name)
            continue
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = _env_value(raw)
    return out


def _known(model: type[BaseModel], path: list[str]) -> bool:
    """Whether ``path`` names a field of ``model`` (descending into nested models)."""
    field = model.model_fields.get(path[0])
    if field is None:
        return False
    if len(path) == 1:
        return True
    inner = field.annotation
    return isinstance(inner, type) and issubclass(inner, BaseModel) and _known(inner, path[1:])


#: Neo4j's own variable names, read when the GRAPHMEM_ ones are not set
NEO4J_FALLBACKS = {
    "url": "NEO4J_URI",
    "username": "NEO4J_USER",
    "password": "NEO4J_PASSWORD",
    "database": "NEO4J_DATABASE",
}


def neo4j_from_env(
    environ: Mapping[str, str] | None = None,
) -> tuple[str, tuple[str, str] | None, str | None] | None:
    """``(url, auth, database)`` of the Neo4j server the environment names — by the one
    convention, ``GRAPHMEM_URL`` / ``GRAPHMEM_USERNAME`` / ``GRAPHMEM_PASSWORD`` /
    ``GRAPHMEM_DATABASE``, with the ``NEO4J_*`` fallbacks — or None when the URL it names
    is not a Neo4j one (read now, when asked)."""
    env = os.environ if environ is None else environ
    found = _neo4j_fallbacks(env)
    for key in NEO4J_FALLBACKS:
        if env.get(ENV_PREFIX + key.upper()):
            found[key] = env[ENV_PREFIX + key.upper()]
    url = found.get("url")
    if not url or not url.startswith(("neo4j", "bolt")):
        return None
    user = found.get("username")
    auth = (user, found.get("password", "")) if user else None
    return url, auth, found.get("database") or None


def _neo4j_fallbacks(env: Mapping[str, str]) -> dict[str, Any]:
    """``NEO4J_URI`` / ``NEO4J_USER`` (or ``NEO4J_USERNAME``) / ``NEO4J_PASSWORD`` /
    ``NEO4J_DATABASE``: the connection when ``GRAPHMEM_URL`` (and the others) are not set
    (the ``GRAPHMEM_*`` layer comes after this one and wins)."""
    out = {k: env[v] for k, v in NEO4J_FALLBACKS.items() if env.get(v)}
    if "username" not in out and env.get("NEO4J_USERNAME"):
        out["username"] = env["NEO4J_USERNAME"]
    if "url" not in out:  # credentials alone do not move the store
        return {}
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
