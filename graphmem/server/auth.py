"""Where the servers may listen: an open server (no API keys) only on this machine."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from graphmem.config import ApiKey
from graphmem.errors import InvalidInput

__all__ = ["check_bind", "is_loopback"]

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys: Sequence[ApiKey], *, allow_open: bool, what: str) -> None:
    """InvalidInput when a server without API keys would listen beyond this machine and
    ``allow_open`` does not say that is meant (anyone who reaches it could read and write)."""
    if keys or allow_open or is_loopback(host):
        return
    raise InvalidInput(
        f"refusing to serve the {what} on {host!r} without API keys: anyone who can reach it "
        "could read, write and forget. Configure server.api_keys (GRAPHMEM_SERVER__API_KEYS), "
        "bind 127.0.0.1, or pass --allow-open to serve it open on purpose"
    )
