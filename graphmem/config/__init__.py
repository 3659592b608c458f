"""Settings: one frozen model for everything graphmem can be configured with.

Settings come from four layers; a later layer wins over an earlier one, key by key (nested
sections merge field by field):

1. the defaults below (the embedded store ``./graphmem.db``, no auth, offline LLM);
2. a TOML file — given explicitly (``Settings.load(config_file=...)``, ``graphmem --config``)
   or named by the ``GRAPHMEM_CONFIG`` environment variable;
3. ``GRAPHMEM_*`` environment variables: ``GRAPHMEM_URL``, ``GRAPHMEM_USERNAME``,
   ``GRAPHMEM_PASSWORD``, ``GRAPHMEM_DATABASE`` … for top-level fields and a double
   underscore for each section level, e.g. ``GRAPHMEM_SERVER__PORT=9000`` or
   ``GRAPHMEM_LIFECYCLE__DECAY__HALF_LIFE_DAYS=14``; list and map values
   (``GRAPHMEM_SERVER__API_KEYS``) are JSON. Neo4j's own ``NEO4J_URI``, ``NEO4J_USER``
   (or ``NEO4J_USERNAME``), ``NEO4J_PASSWORD`` and ``NEO4J_DATABASE`` are the documented
   fallbacks for the connection when ``NEO4J_URI`` is set: the ``GRAPHMEM_*`` names win;
4. explicit arguments (``Settings.load(url=...)``, command-line options).

Sections (each one frozen model): ``store`` (the embedded store), ``neo4j`` (the Neo4j
backend and its driver options), ``vectors``, ``knowledge``, ``recall``, ``reconcile``,
``lifecycle`` (with ``decay``, ``retention``, ``consolidation``, ``scorer``, ``rules``),
``org``, ``runs``, ``maintenance``, ``log``, ``server``; ``profile`` names a profile
(:mod:`graphmem.config.profiles`) whose defaults sit under everything configured. The models live
here, at the bottom of the house: this package imports nothing of graphmem but
:mod:`graphmem.errors` and :mod:`graphmem.models` (the scoring strategies are the value types
of :mod:`graphmem.models.scoring`); the modules that act on the settings import them from
here, and :func:`graphmem.opening.open_memory` builds what they describe.

The environment is read only by :meth:`Settings.from_env` and :meth:`Settings.load`, never at
import or in the constructor. Secrets (passwords, API keys) are ``SecretStr`` and print masked.

>>> s = Settings.load(environ={"GRAPHMEM_SERVER__PORT": "9000"}, url="memory://")
>>> (s.url, s.server.port)
('memory://', 9000)
>>> Settings(password="hunter2").masked()["password"]
'**********'
"""

from graphmem.config.lifecycle import (
    AgentRetention,
    ClassificationRules,
    ConsolidationConfig,
    DecayConfig,
    ImportanceScorer,
    LifecycleConfig,
    RetentionPolicy,
)
from graphmem.config.org import (
    DEFAULT_CORE_RULE,
    DEFAULT_RULE,
    DEFAULT_WRITE_RULES,
    HUMAN,
    SENIORITY_LEVELS,
    OrgConfig,
    RunLimits,
    WriteRule,
)
from graphmem.config.recall import (
    PRESETS,
    NearDuplicatePolicy,
    RecallConfig,
    ReconcileConfig,
    ReconcileMode,
)
from graphmem.config.service import LogSettings, MaintenanceSettings, ServerSettings, parse_interval
from graphmem.config.settings import (
    CACHE_DIR_ENV,
    CONFIG_ENV,
    ENV_PREFIX,
    NEO4J_FALLBACKS,
    TEST_ONLY_ENV,
    Settings,
    neo4j_from_env,
)
from graphmem.config.store import (
    ApiKey,
    KnowledgeSettings,
    Neo4jSettings,
    StoreDurability,
    StoreSettings,
    VectorMode,
    VectorSettings,
)
from graphmem.models.scoring import RankWeights

__all__ = [
    "CACHE_DIR_ENV",
    "CONFIG_ENV",
    "DEFAULT_CORE_RULE",
    "DEFAULT_RULE",
    "DEFAULT_WRITE_RULES",
    "ENV_PREFIX",
    "HUMAN",
    "NEO4J_FALLBACKS",
    "PRESETS",
    "SENIORITY_LEVELS",
    "TEST_ONLY_ENV",
    "AgentRetention",
    "ApiKey",
    "ClassificationRules",
    "ConsolidationConfig",
    "DecayConfig",
    "ImportanceScorer",
    "KnowledgeSettings",
    "LifecycleConfig",
    "LogSettings",
    "MaintenanceSettings",
    "NearDuplicatePolicy",
    "Neo4jSettings",
    "OrgConfig",
    "RankWeights",
    "RecallConfig",
    "ReconcileConfig",
    "ReconcileMode",
    "RetentionPolicy",
    "RunLimits",
    "ServerSettings",
    "Settings",
    "StoreDurability",
    "StoreSettings",
    "VectorMode",
    "VectorSettings",
    "WriteRule",
    "neo4j_from_env",
    "parse_interval",
]
