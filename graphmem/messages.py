"""Chat messages in the OpenAI format (``{"role", "content", ...}``) as run events.

This is the seam the framework adapters and Mem0-style code use: a message list becomes the
ordered events of a run, and a run's events read back as messages.

>>> event_from_message({"role": "user", "content": "I'm vegetarian"})["event_type"]
'user_message'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from graphmem.errors import InvalidInput

if TYPE_CHECKING:
    from graphmem.models import Memory
    from graphmem.protocol import MemoryAPI

__all__ = [
    "EVENT_ROLES",
    "ROLE_EVENTS",
    "add_messages",
    "event_from_message",
    "message_from_event",
]

#: the event type each chat role is stored as
ROLE_EVENTS: dict[str, str] = {
    "user": "user_message",
    "assistant": "agent_response",
    "system": "system_message",
    "developer": "system_message",
    "tool": "tool_result",
    "function": "tool_result",
}
#: the role each conversational event type reads back as
EVENT_ROLES: dict[str, str] = {
    "user_message": "user",
    "agent_response": "assistant",
    "system_message": "system",
    "tool_result": "tool",
    "tool_call": "assistant",
}
# message keys kept in the event's metadata (flat values only: metadata is flat)
_KEPT = ("name", "tool_call_id")


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a part list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    raise InvalidInput(f"message content must be a string or a list of parts, not {content!r}")


def event_from_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """The event (fields for ``add_events``) a chat message is stored as.

    ``role`` picks the event type (:data:`ROLE_EVENTS`); an assistant message that only calls
    tools becomes a ``tool_call`` event whose content is the calls as JSON. The role, ``name``
    and ``tool_call_id`` go into the metadata; other graphmem event fields given beside them
    (``importance``, ``tags``, ``metadata``, ``created_at`` ...) are kept.
    """
    if not isinstance(message, Mapping):
        raise InvalidInput(f"a message is a mapping with 'role' and 'content', not {message!r}")
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLE_EVENTS:
        raise InvalidInput(f"unknown message role {role!r}; one of {sorted(ROLE_EVENTS)}")
    event = {k: v for k, v in message.items() if k not in ("role", "content", "tool_calls", *_KEPT)}
    text = _text(message.get("content"))
    event_type = ROLE_EVENTS[role]
    calls = message.get("tool_calls")
    if role == "assistant" and calls:
        if not text.strip():
            event_type = "tool_call"
            text = json.dumps(calls, ensure_ascii=False, default=str)
    meta = dict(message.get("metadata") or {})
    meta["role"] = role
    for key in _KEPT:
        if isinstance(message.get(key), str):
            meta[key] = message[key]
    if not text.strip():
        raise InvalidInput(f"a {role} message with no text content cannot be stored")
    event.update(event_type=event.get("event_type") or event_type, content=text, metadata=meta)
    return event


def as_event(item: Mapping[str, Any]) -> Mapping[str, Any]:
    """An ``add_events`` item: an event as is, a chat message (it has ``role`` and no
    ``event_type``) converted by :func:`event_from_message`."""
    if isinstance(item, Mapping) and "role" in item and "event_type" not in item:
        return event_from_message(item)
    return item


def message_from_event(event: Memory) -> dict[str, Any]:
    """A run event as a chat message (``role`` from the metadata, else the event type; a
    ``tool_call`` event gives back its ``tool_calls``)."""
    role = event.metadata.get("role") or EVENT_ROLES.get(event.event_type or "", "user")
    msg: dict[str, Any] = {"role": role, "content": event.content}
    if event.event_type == "tool_call" and role == "assistant":
        try:  # stored as the calls' JSON by event_from_message
            calls = json.loads(event.content)
        except ValueError:
            calls = None
        if isinstance(calls, list):
            msg = {"role": role, "content": None, "tool_calls": calls}
    for key in _KEPT:
        if key in event.metadata:
            msg[key] = event.metadata[key]
    return msg


def add_messages(
    mem: MemoryAPI,
    messages: str | Sequence[Mapping[str, Any]],
    *,
    agent_id: str | None = None,
    user_id: str | None = None,
    run_id: str | None = None,
    namespace: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> list[Memory]:
    """Store OpenAI-format ``messages`` as the next events of run ``run_id``.

    The run is started when it does not exist (with ``agent_id``, ``user_id`` and
    ``namespace``); without ``run_id`` a new run is started. A plain string is one user
    message. ``metadata`` is added to every event, and so is ``user_id`` (as
    ``metadata.user_id``, what ``recall(user_id=...)`` filters on; by default the run's).
    The events are ``agent_id``'s (the run's agent's when not given); only the run's
    agent, or a member of the run's shared namespace, adds to an existing run
    (AccessDenied otherwise, nothing written), as with ``runs.add_event``. Returns the
    stored events in order.
    """
    items: Sequence[Mapping[str, Any]] = (
        [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
    )
    if not isinstance(items, Sequence) or not items:
        raise InvalidInput("messages must be a non-empty list of {'role', 'content'} mappings")
    events = []
    for i, message in enumerate(items):
        try:
            event = event_from_message(message)
        except InvalidInput as e:
            raise InvalidInput(f"message {i}: {e}") from e
        if metadata:
            event["metadata"] = {**metadata, **event["metadata"]}
        events.append(event)
    runs = mem.runs
    options: dict[str, Any] = {"agent_id": agent_id or "default", "user_id": user_id}
    if namespace is not None:
        options["namespace"] = namespace
    if run_id is None:
        run_id = _start(mem, options)
    else:
        run, _created = runs.get_or_create(run_id, **options)
        user_id = user_id or run.user_id
    if agent_id is not None:
        # the events are the caller's: who may add them to the run is the run's one rule
        # (its agent, or a member of its shared namespace; AccessDenied otherwise), asked
        # by the write path as for add_event
        for event in events:
            event.setdefault("agent_id", agent_id)
    if user_id is not None:  # how graphmem scopes a memory to an end user
        for event in events:
            event["metadata"]["user_id"] = user_id
    result: list[Memory] = runs.add_events(run_id, events)
    return result


def _start(mem: MemoryAPI, options: dict[str, Any]) -> str:
    agent = options.pop("agent_id")
    run = mem.runs.start(agent, **{k: v for k, v in options.items() if v is not None})
    return str(run.id)
