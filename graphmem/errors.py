"""Typed errors of graphmem.

Every error raised by graphmem derives from :class:`GraphMemError`; errors of lower layers
(sqlite3, the neo4j driver, the anthropic SDK, pydantic) are translated at the boundary with
``raise Ours(...) from e`` so callers only ever catch graphmem types.

::

    GraphMemError
    ├── InvalidInput          bad arguments or data; nothing was written (also a ValueError)
    │   ├── DimensionMismatch an embedding of the wrong length for the store
    │   └── EmbedderMismatch  another embedding model than the one that made the store's vectors
    ├── NotFound              a node that does not exist (also a KeyError)
    ├── Conflict              a write that contradicts the stored state
    ├── AccessDenied          a write or read the caller may not make
    ├── BackendError          storage layer failures
    │   ├── BackendUnavailable    cannot reach / open the store
    │   └── QueryFailed           the store rejected or failed a query
    ├── LLMError              LLM provider failures
    │   ├── LLMUnavailable        cannot reach the provider / no credentials
    │   └── LLMResponseError      the provider answered something unusable
    └── ConfigError           invalid settings
"""

from __future__ import annotations

__all__ = [
    "AccessDenied",
    "BackendError",
    "BackendUnavailable",
    "ConfigError",
    "Conflict",
    "DimensionMismatch",
    "EmbedderMismatch",
    "GraphMemError",
    "InvalidInput",
    "LLMError",
    "LLMResponseError",
    "LLMUnavailable",
    "NotFound",
    "QueryFailed",
]


class GraphMemError(Exception):
    """Root of every error graphmem raises."""


class InvalidInput(GraphMemError, ValueError):
    """Arguments or data failed validation; the store is unchanged."""


class DimensionMismatch(InvalidInput):
    """An embedding does not have the dimension the store was created with."""


class EmbedderMismatch(InvalidInput):
    """The embedder is not the model that made the store's vectors (even if the dimension
    is the same): its vectors would not be comparable. The message names the reindex
    command that moves the store to the new model."""


class NotFound(GraphMemError, KeyError):
    """The requested node does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "not found"


class Conflict(GraphMemError):
    """The write contradicts the current state (e.g. updating a superseded memory)."""


class AccessDenied(GraphMemError, PermissionError):
    """The caller is not allowed to perform this operation; nothing was written."""


class BackendError(GraphMemError):
    """A failure of the storage backend."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached or opened."""


class QueryFailed(BackendError):
    """The backend rejected or failed a query."""


class LLMError(GraphMemError):
    """A failure of the LLM provider."""


class LLMUnavailable(LLMError):
    """The LLM provider cannot be reached or is not configured."""


class LLMResponseError(LLMError):
    """The LLM answered something that cannot be used (e.g. malformed JSON)."""


class ConfigError(GraphMemError, ValueError):
    """Settings are invalid."""
