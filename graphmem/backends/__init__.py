"""Storage backends and the URL-based chooser.

``open_backend(url)`` is the only place that maps a URL to a backend class:

- ``None`` / ``""``  -> the embedded default, ``./graphmem.db``
- a path, ``file:PATH``, ``file:///ABSOLUTE-PATH``, ``sqlite:///PATH``, ``networkx:///PATH``
  -> embedded, durable file (a leading ``~`` is the user's home folder)
- ``memory://``       -> embedded, in memory (tests, throwaway stores)
- ``neo4j://``, ``neo4j+s://``, ``neo4j+ssc://``, ``bolt://``, ``bolt+s://``, ``bolt+ssc://``
  -> Neo4j
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from graphmem.backends.base import GraphBackend
from graphmem.errors import BackendUnavailable, ConfigError, InvalidInput

__all__ = ["DEFAULT_PATH", "GraphBackend", "open_backend", "register_scheme", "store_path"]

DEFAULT_PATH = "graphmem.db"

_SCHEMES: dict[str, Callable[..., GraphBackend]] = {}


def register_scheme(scheme: str, factory: Callable[..., GraphBackend]) -> None:
    """Map a URL scheme (``"neo4j"``) to a factory ``factory(url, **options)``."""
    _SCHEMES[scheme] = factory


def store_path(url: str | None) -> str | None:
    """The file of the embedded store ``url`` names (None: a store in memory, or a server's
    URL), for whatever opens it or checks it is there: one reading of a URL. InvalidInput
    for a URL that names no file (an unknown scheme, ``file://`` with a host, ``sqlite://``
    with two slashes, a NUL)."""
    url = url or DEFAULT_PATH
    scheme, sep, _rest = url.partition("://")
    if sep and scheme in _SCHEMES:
        return None
    if sep and scheme not in ("memory", "sqlite", "networkx", "file"):
        raise InvalidInput(
            f"unknown backend URL scheme {scheme!r}; use a file path, memory://, "
            f"or one of {sorted(_SCHEMES)}"
        )
    if url == "memory://":
        return None
    if url.startswith("memory:"):
        # not a file named 'memory:/...' in the working directory
        raise InvalidInput(f"{url!r}: memory:// takes nothing after it (an in-memory store)")
    path = url
    if sep:  # only these: file://HOST/... would be a path on another machine, and
        # sqlite://x.db a folder named 'sqlite:' in the working directory
        prefix = "file://" if scheme == "file" else f"{scheme}:///"
        if not (url.startswith(prefix) and (scheme != "file" or _rest.startswith("/"))):
            raise InvalidInput(
                f"no file path in {url!r}: use {scheme}:///PATH"
                + (" or file:PATH" if scheme == "file" else "")
            )
        path = url[len(prefix) :]
    elif url.startswith("file:"):
        path = url[len("file:") :]
    if not path or "\x00" in path:
        raise InvalidInput(f"no file path in {url!r}")
    return os.path.expanduser(path)


def _embedded(url: str, **options: Any) -> GraphBackend:
    from graphmem.backends.embedded import NetworkXBackend

    path = store_path(url)
    allowed = {"durability", "busy_timeout_ms"}
    unknown = sorted(set(options) - allowed)
    if unknown:  # a misspelled option must not silently fall back to a default
        raise InvalidInput(
            f"unknown option(s) {unknown} for the embedded store; it takes {sorted(allowed)}"
        )
    try:
        return NetworkXBackend(path, **options)
    except OSError as e:  # a folder that cannot be made, a parent that is a file, ...
        raise BackendUnavailable(f"cannot open the store at {path!r}: {e.strerror or e}") from e


def open_backend(url: str | None = None, **options: Any) -> GraphBackend:
    """Open the backend a URL names (see the module docstring). Makes no network call:
    server backends connect on first use."""
    url = url or DEFAULT_PATH
    scheme, sep, _rest = url.partition("://")
    if sep and scheme in _SCHEMES:
        return _SCHEMES[scheme](url, **options)
    return _embedded(url, **options)


def _neo4j(url: str, **options: Any) -> GraphBackend:
    import importlib.util

    if importlib.util.find_spec("neo4j") is None:
        raise ConfigError(
            f"{url.partition('://')[0]}:// needs the Neo4j driver: pip install -e '.[neo4j]' "
            "in the graphmem folder"
        )
    from graphmem.backends.neo4j import Neo4jBackend  # the driver loads only when used

    return Neo4jBackend(url, **options)


for _scheme in ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc"):
    register_scheme(_scheme, _neo4j)
