"""OpenAI-format chat messages as run events: add_messages and add_events with role dicts."""

from __future__ import annotations

import pytest

from graphmem.errors import AccessDenied, InvalidInput
from graphmem.memory import GraphMemory
from graphmem.messages import message_from_event


def test_add_messages_records_a_run_in_order(mem: GraphMemory) -> None:
    stored = mem.add_messages(
        [
            {"role": "system", "content": "You are a travel assistant."},
            {"role": "user", "content": "I'm vegetarian and I hate flying."},
            {"role": "assistant", "content": [{"type": "text", "text": "Noted: trains."}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "book"}}],
            },
            {"role": "tool", "content": "booked", "tool_call_id": "c1"},
        ],
        agent_id="travel",
        user_id="alice",
        run_id="trip-1",
    )
    assert [e.event_type for e in stored] == [
        "system_message",
        "user_message",
        "agent_response",
        "tool_call",
        "tool_result",
    ]
    assert [e.seq for e in stored] == [0, 1, 2, 3, 4]
    run = mem.runs.get("trip-1")
    assert (run.agent_id, run.user_id) == ("travel", "alice")
    assert stored[2].content == "Noted: trains."
    assert '"book"' in stored[3].content
    assert message_from_event(stored[4]) == {
        "role": "tool",
        "content": "booked",
        "tool_call_id": "c1",
    }
    # a second call appends to the same run; a string is one user message
    more = mem.add_messages("Actually, I eat fish.", agent_id="travel", run_id="trip-1")
    assert more[0].seq == 5 and more[0].event_type == "user_message"
    hits = mem.recall("what does alice eat", agent_id="travel", k=3, user_id="alice")
    assert any("fish" in r.memory.content for r in hits)


def test_add_messages_without_a_run_starts_one(mem: GraphMemory) -> None:
    a = mem.add_messages([{"role": "user", "content": "hello"}], agent_id="bot", user_id="u1")
    b = mem.add_messages([{"role": "user", "content": "hello again"}], agent_id="bot")
    assert a[0].run_id and b[0].run_id and a[0].run_id != b[0].run_id
    assert mem.runs.get(a[0].run_id).user_id == "u1"


def test_add_events_takes_role_dicts_beside_events(mem: GraphMemory) -> None:
    stored = mem.runs.add_events(
        "r1",
        [
            {"role": "user", "content": "Book a table", "importance": 0.9, "tags": ["food"]},
            {"event_type": "observation", "content": "the restaurant is full"},
        ],
    )
    assert [e.event_type for e in stored] == ["user_message", "observation"]
    assert stored[0].importance == 0.9 and stored[0].tags == ("food",)
    assert stored[0].metadata["role"] == "user"


@pytest.mark.parametrize(
    "bad",
    [
        [{"role": "robot", "content": "beep"}],
        [{"role": "user", "content": ""}],
        [{"content": "no role"}],
        [{"role": "user", "content": 42}],
        [],
        ["just a string in a list"],
    ],
)
def test_bad_messages_are_refused_and_change_nothing(mem: GraphMemory, bad: list[object]) -> None:
    mem.add_messages([{"role": "user", "content": "first"}], agent_id="a", run_id="r")
    with pytest.raises(InvalidInput):
        mem.add_messages(bad, agent_id="a", run_id="r")  # type: ignore[arg-type]
    assert [e.content for e in mem.runs.events("r")] == ["first"]


def test_a_run_of_another_agent_is_refused(mem: GraphMemory) -> None:
    mem.add_messages("mine", agent_id="a", run_id="r")
    with pytest.raises(AccessDenied, match="may not add to run"):
        mem.add_messages("yours", agent_id="b", run_id="r")
    assert len(mem.runs.events("r")) == 1


def test_a_member_of_a_runs_namespace_adds_messages_as_it_adds_events(mem: GraphMemory) -> None:
    """The rule of a run (its agent, or a member of its shared namespace) is one for every
    way in: add_messages refused bob, a member of the run's namespace, whom add_event lets
    in; and a non-member got InvalidInput from one and AccessDenied from the other."""
    mem.namespaces.create("team", owner="alice", members=["bob"])
    mem.add_messages("alice opens the run", agent_id="alice", run_id="r", namespace="team")
    by_event = mem.runs.add_event("r", "user_message", "bob, by event", agent_id="bob")
    [by_message] = mem.add_messages("bob, by message", agent_id="bob", run_id="r")
    assert (by_event.agent_id, by_message.agent_id) == ("bob", "bob")  # the member's own
    contents = ["alice opens the run", "bob, by event", "bob, by message"]
    assert [e.content for e in mem.runs.events("r")] == contents
    with pytest.raises(AccessDenied):
        mem.runs.add_event("r", "user_message", "carol, by event", agent_id="carol")
    with pytest.raises(AccessDenied):
        mem.add_messages("carol, by message", agent_id="carol", run_id="r")
    assert [e.content for e in mem.runs.events("r")] == contents
