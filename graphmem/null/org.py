"""The null org and namespaces: facts and namespaces are validated and returned, nothing is
kept.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from typing import Any

from graphmem.errors import NotFound
from graphmem.models import (
    Namespace,
    OrgFact,
    new_id,
    validated,
)
from graphmem.null.base import NullPart
from graphmem.protocol import (
    NamespacesAPI,
    OrgAPI,
)


class NullOrg(NullPart, OrgAPI):
    """``mem.org`` of a NullMemory: every verb accepted, nothing stored."""

    def publish(
        self,
        content: str,
        *,
        author: str,
        category: str | None = None,
        fact_id: str | None = None,
        tags: Sequence[str] | None = None,
        core: bool | None = None,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> OrgFact:
        data: dict[str, Any] = {"fact_id": fact_id or new_id(), "content": content}
        data["author"] = author
        data.update(category=category, tags=tags, core=core, created_at=self._clock())
        fact: OrgFact = validated(OrgFact, {k: v for k, v in data.items() if v is not None})
        return fact

    def retract(self, fact_id: str, *, author: str, reason: str | None = None) -> OrgFact:
        raise NotFound(f"no org fact {fact_id!r} (NullMemory stores nothing)")

    def get(self, fact_id: str) -> OrgFact:
        raise NotFound(f"no org fact {fact_id!r} (NullMemory stores nothing)")

    def versions(self, fact_id: str) -> builtins.list[OrgFact]:
        raise NotFound(f"no org fact {fact_id!r} (NullMemory stores nothing)")

    def query(
        self,
        text: str | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        tags: Sequence[str] | None = None,
        include_retracted: bool = False,
        limit: int = 10,
    ) -> builtins.list[OrgFact]:
        return []

    def list(
        self,
        *,
        categories: Sequence[str] | None = None,
        include_retracted: bool = False,
        limit: int | None = 100,
        offset: int = 0,
    ) -> builtins.list[OrgFact]:
        return []

    def core_policies(self) -> builtins.list[str]:
        return []

    def __repr__(self) -> str:
        return "<null org>"


class NullNamespaces(NullPart, NamespacesAPI):
    """``mem.namespaces`` of a NullMemory: every verb accepted, nothing stored."""

    def create(self, name: str, *, owner: str, members: Iterable[str] = ()) -> Namespace:
        ns: Namespace = validated(
            Namespace, {"id": name, "owner": owner, "members": [owner, *members]}
        )
        return ns

    def get(self, name: str) -> Namespace:
        raise NotFound(f"no namespace {name!r} (NullMemory stores nothing)")

    def list(self, *, member: str | None = None) -> builtins.list[Namespace]:
        return []

    def add_members(self, name: str, agents: Sequence[str], *, by: str | None = None) -> Namespace:
        raise NotFound(f"no namespace {name!r} (NullMemory stores nothing)")

    def remove_members(
        self, name: str, agents: Sequence[str], *, by: str | None = None
    ) -> Namespace:
        raise NotFound(f"no namespace {name!r} (NullMemory stores nothing)")

    def __repr__(self) -> str:
        return "<null namespaces>"
