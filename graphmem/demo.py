"""The demo: a short multi-session agent conversation, recalled and explained.

Runs on the embedded default with no server and no API key::

    graphmem demo            # writes ./graphmem.db
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from graphmem.memory import GraphMemory
from graphmem.models import Status

__all__ = ["DEMO_NAMESPACE", "DemoClock", "run_demo"]

DEMO_NAMESPACE = "demo"
_T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class DemoClock:
    """The demo's own time, for ``GraphMemory.open(..., clock=...)``: it starts at the first
    session (2 March 2026) and :func:`run_demo` moves it on as the story goes, so runs end,
    new versions are written and recall counts its accesses on the conversation's dates,
    not on today's."""

    def __init__(self, at: datetime = _T0) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


# (session, speaker, text): three sessions between a user and an assistant agent
CONVERSATION: list[tuple[int, str, str]] = [
    (1, "user", "Hi! I'm Alice. I'm planning a trip to Lisbon in May."),
    (1, "assistant", "Great choice. Do you have dietary preferences for restaurant tips?"),
    (1, "user", "I'm vegetarian, and I drink tea, never coffee."),
    (1, "assistant", "Noted: vegetarian, tea instead of coffee."),
    (2, "user", "My sister Carla will join me; she is allergic to peanuts."),
    (2, "assistant", "I'll avoid places that cook with peanuts for Carla."),
    (2, "user", "We booked a hotel in Alfama for five nights."),
    (3, "user", "Change of plan: the trip moves to June because of work."),
    (3, "assistant", "Understood, I'll look at June events in Lisbon instead."),
    (3, "user", "Also, I started drinking coffee again, a flat white in the morning."),
]

FACTS: list[tuple[str, list[str], float]] = [
    ("Alice is vegetarian.", ["prefs", "food"], 0.8),
    ("Alice drinks tea and never coffee.", ["prefs", "drinks"], 0.6),
    ("Alice is travelling to Lisbon in May.", ["trip"], 0.9),
    ("Carla, Alice's sister, is allergic to peanuts.", ["family", "health"], 1.0),
    ("The hotel is in Alfama, booked for five nights.", ["trip"], 0.7),
]

QUESTIONS = [
    "What should we avoid cooking for Carla?",
    "When is Alice going to Lisbon?",
    "What does Alice drink in the morning?",
]


def run_demo(
    mem: GraphMemory, out: Callable[[str], Any] = print, clock: DemoClock | None = None
) -> dict[str, Any]:
    """Ingest the conversation, update two facts, recall, and print what happened.

    ``clock``: the clock ``mem`` was opened with; the demo sets it to each moment of its
    story (without one, only the writes that take a timestamp carry the story's dates)."""

    def now(at: datetime) -> None:
        if clock is not None:
            clock.at = at

    old = mem.list(namespace=DEMO_NAMESPACE, status=None, limit=None)
    for m in old:
        try:
            mem.forget(m.id)
        except KeyError:  # already removed by an earlier cascade
            pass
    if old:
        out(f"(removed {len(old)} memories left by an earlier demo run)")

    agent = "travel-assistant"
    mem.agents.register(agent, name="Travel assistant", seniority="senior")
    for session in (1, 2, 3):
        run_id = f"demo-session-{session}"
        start = _T0 + timedelta(days=7 * (session - 1))
        now(start)
        for existing in mem.runs.list(agent_id=agent):
            if existing.id == run_id:
                break
        else:
            mem.runs.start(
                agent,
                run_id=run_id,
                user_id="alice",
                app_name="demo",
                namespace=DEMO_NAMESPACE,
                started_at=start,
            )
        turns = [t for t in CONVERSATION if t[0] == session]
        mem.runs.add_events(
            run_id,
            [
                {
                    "event_type": "user_message" if who == "user" else "agent_response",
                    "content": text,
                    "agent_id": agent,
                    "namespace": DEMO_NAMESPACE,
                    "created_at": start + timedelta(minutes=i),
                    "metadata": {"speaker": who},
                }
                for i, (_s, who, text) in enumerate(turns)
            ],
        )
        now(start + timedelta(minutes=len(turns)))
        mem.runs.end(run_id)
    out(f"Ingested {len(CONVERSATION)} turns in 3 sessions (runs) for agent {agent!r}.")

    facts = mem.remember_many(
        [
            {
                "content": text,
                "agent_id": agent,
                "namespace": DEMO_NAMESPACE,
                "tags": tags,
                "importance": imp,
                "category": "semantic",
                "created_at": _T0 + timedelta(hours=1),
            }
            for text, tags, imp in FACTS
        ]
    )
    by_text = {m.content: m for m in facts}
    out(f"Stored {len(facts)} long-term facts.")

    # the changes hold from session 3 of the demo's own timeline, not from today
    session_3 = _T0 + timedelta(days=14)
    now(session_3 + timedelta(minutes=10))  # after the session, the assistant files its notes
    moved = mem.update(
        by_text["Alice is travelling to Lisbon in May."].id,
        "Alice is travelling to Lisbon in June (moved from May for work).",
        reason="user changed the travel month in session 3",
        valid_from=session_3,
    )
    coffee = mem.update(
        by_text["Alice drinks tea and never coffee."].id,
        "Alice drinks coffee again: a flat white in the morning.",
        reason="user said so in session 3",
        valid_from=session_3 + timedelta(minutes=2),
    )
    out("Updated 2 facts as new versions (the old ones stay, superseded).")

    # reconcile on write, offline: a repeat is not stored twice, a contradiction of the
    # same subject and attribute becomes a new version of the old statement
    mem.remember(
        "Alice is vegetarian.", agent_id=agent, namespace=DEMO_NAMESPACE, created_at=session_3
    )
    repeat = mem.last_reconcile
    mem.remember(
        "Alice lives in Porto.",
        agent_id=agent,
        namespace=DEMO_NAMESPACE,
        created_at=_T0 + timedelta(hours=2),
    )
    mem.remember(
        "Alice lives in Lisbon.",
        agent_id=agent,
        namespace=DEMO_NAMESPACE,
        created_at=session_3 + timedelta(minutes=5),
    )
    moved_home = mem.last_reconcile
    if repeat is not None and moved_home is not None:
        out(f"Remembered 'Alice is vegetarian.' again: {repeat.action} (not stored twice).")
        out(
            f"Remembered 'Alice lives in Lisbon.': {moved_home.action} 'Alice lives in "
            f"Porto.' ({moved_home.reason})."
        )

    now(session_3 + timedelta(hours=1))  # the questions come after the third session
    out("")
    for q in QUESTIONS:
        out(f"Q: {q}")
        for r in mem.recall(q, agent_id=agent, namespace=DEMO_NAMESPACE, k=3):
            out(f"   {r.score:6.3f}  {r.memory.content}")
    out("")
    out("History of the travel-month fact (SUPERSEDES chain, oldest first):")
    for v in mem.history(moved.id):
        since = (v.valid_from or v.created_at).date().isoformat()
        to = v.valid_to.date().isoformat() if v.valid_to else "now"
        out(f"   [{v.status.value:10}] valid {since} .. {to}: {v.content}")
    stats = mem.stats()
    out("")
    out("Graph statistics:")
    out(f"   nodes: {stats['nodes']}")
    out(f"   edges: {stats['edges']}")
    out(f"   memories by status: {stats['memories_by_status']}")
    out(f"   store: {stats['location']}")
    superseded = mem.count(namespace=DEMO_NAMESPACE, status=Status.SUPERSEDED.value)
    return {"facts": len(facts), "superseded": superseded, "coffee": coffee.id, "moved": moved.id}
