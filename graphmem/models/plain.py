"""A new :class:`~graphmem.models.Memory` from a plain mapping without pydantic's walk, for
batch writes: the same rules (the helpers the model's validators call), applied only where
every value already has its field's exact type. Anything else — a missing required field, a
value pydantic would convert (an int for a float, text for a datetime, a str subclass), an
unknown key, a value a rule refuses — returns None, and the caller validates with the model,
which then says what is wrong. ``tests/unit/test_plain_memory.py`` compares the two on
generated items."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic_core import PydanticUndefined

from graphmem.models.nodes import Memory
from graphmem.models.values import (
    _EVENT_RE,
    Category,
    Tier,
    Visibility,
    _aware,
    _check_id,
    _flat_metadata,
    assembled,
    audience_key,
    check_content,
    check_tags,
    content_hash,
    new_id,
)

#: field -> the enum whose members or values it takes
_ENUMS: dict[str, type[StrEnum]] = {"category": Category, "tier": Tier, "visibility": Visibility}
_SCOPES = ("agent_id", "namespace", "run_id")
_KEYS = frozenset(
    {
        "id",
        "content",
        "importance",
        "confidence",
        "created_at",
        "tags",
        "metadata",
        "event_type",
        "expires_at",
        *_ENUMS,
        *_SCOPES,
    }
)

_defaults: list[dict[str, Any]] = []


def _template() -> dict[str, Any]:
    """Every field of Memory at its declared default (factories left as None: the fast path
    fills ``id``, ``created_at`` and ``metadata`` itself), in field order."""
    if not _defaults:
        out: dict[str, Any] = {}
        for name, field in Memory.model_fields.items():
            default = field.default
            out[name] = None if default is PydanticUndefined else default
        _defaults.append(out)
    return _defaults[0]


def _unit(value: Any) -> bool:
    return value.__class__ is float and 0.0 <= value <= 1.0


def plain_memory(item: Mapping[str, Any], ident: str | None = None) -> Memory | None:
    """The Memory ``Memory.model_validate(item)`` would make, or None when ``item`` needs
    the model's own validation (see the module docstring). ``item`` holds no None values;
    ``ident``: the new id to give it when it has none (a batch makes its ids at once)."""
    if not _KEYS.issuperset(item):
        return None
    content = item.get("content")
    if content.__class__ is not str:
        return None
    data = dict(_template())
    try:
        data["content"] = check_content(content)
        given = item.get("id")
        if given is None:
            data["id"] = new_id() if ident is None else ident
        elif given.__class__ is str:
            data["id"] = _check_id(given, "id")
        else:
            return None
        for name in _SCOPES:
            value = item.get(name)
            if value is not None:
                if value.__class__ is not str:
                    return None
                data[name] = _check_id(value, name)
        for name, enum in _ENUMS.items():
            value = item.get(name)
            if value is not None:
                if value.__class__ is enum:
                    data[name] = value
                elif value.__class__ is str and value in enum._value2member_map_:
                    data[name] = enum._value2member_map_[value]
                else:
                    return None
        for name in ("importance", "confidence"):
            value = item.get(name)
            if value is not None:
                if not _unit(value):
                    return None
                data[name] = value
        event = item.get("event_type")
        if event is not None:
            if event.__class__ is not str or not _EVENT_RE.match(event):
                return None
            data["event_type"] = event
        tags = item.get("tags")
        if tags is not None:
            if tags.__class__ not in (list, tuple) or any(t.__class__ is not str for t in tags):
                return None
            data["tags"] = check_tags(tags)
        meta = item.get("metadata")
        if meta is not None and meta.__class__ is not dict:
            return None
        data["metadata"] = _flat_metadata(meta)
        created = item.get("created_at")
        if created is None:
            created = datetime.now(UTC)
        elif created.__class__ is not datetime:
            return None
        created = _aware(created, "created_at")
        expires = item.get("expires_at")
        if expires is not None:
            if expires.__class__ is not datetime:
                return None
            data["expires_at"] = _aware(expires, "expires_at")
    except ValueError:
        return None
    data["created_at"] = data["updated_at"] = data["valid_from"] = created
    data["content_hash"] = content_hash(data["content"])
    data["audience"] = audience_key(data["visibility"], data["agent_id"], data["namespace"])
    return _construct(data, set(item))


def _construct(data: dict[str, Any], fields_set: set[str]) -> Memory:
    """What pydantic's validation leaves behind, without running it (as ``from_trusted``)."""
    return assembled(Memory, data, fields_set)
