"""Sections for what runs beside the store: maintenance schedule, event log, servers."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
)

from graphmem.config.store import ApiKey, _Frozen, check_setting_id

# ---------------------------------------------------------------------------------------
# maintenance and servers

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

    @field_validator("api_keys")
    @classmethod
    def _distinct_keys(cls, v: tuple[ApiKey, ...]) -> tuple[ApiKey, ...]:
        # one secret for two agents would act as whichever is found: refuse it at start
        secrets = [k.key.get_secret_value() for k in v]
        if len(set(secrets)) != len(secrets):
            raise ValueError("an API key is configured more than once")
        return v

    @field_validator("mcp_agent_id", "mcp_namespace")
    @classmethod
    def _ids(cls, v: str, info: ValidationInfo) -> str:
        return check_setting_id(v, str(info.field_name))

    def key_for(self, secret: str) -> ApiKey | None:
        """The configured key equal to ``secret`` (compared in constant time), if any."""
        import hmac

        found = None
        for k in self.api_keys:
            if hmac.compare_digest(k.key.get_secret_value().encode(), secret.encode()):
                found = k
        return found
