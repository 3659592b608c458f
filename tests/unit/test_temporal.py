"""Dates in questions and memories (graphmem.temporal) and recall's temporal channel."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from graphmem.config import RecallConfig
from graphmem.embeddings import HashEmbedder
from graphmem.temporal import Span, is_when_question, memory_spans, query_span
from tests.conftest import Stores

AT = datetime(2022, 11, 7, 14, 0, tzinfo=UTC)  # a Monday


def days(text: str) -> list[tuple[date, date]]:
    return [(s.start, s.end) for s in memory_spans(text, AT)[1:]]


def test_questions_name_days_months_and_years() -> None:
    assert query_span("What movie did Joanna watch on 1 May, 2022?") == Span(
        date(2022, 5, 1), date(2022, 5, 1)
    )
    assert query_span("What did Caroline do on May 20, 2023?") == Span(
        date(2023, 5, 20), date(2023, 5, 20)
    )
    assert query_span("Where did Joanna travel to in July 2022?") == Span(
        date(2022, 7, 1), date(2022, 7, 31)
    )
    early = query_span("Which tournament did Nate win in the beginning of November 2022?")
    assert early == Span(date(2022, 11, 1), date(2022, 11, 10))
    june = query_span("When did Melanie go camping in June?")
    assert june is not None and june.any_year and june.start.month == 6
    assert query_span("What did she do in 2021?") == Span(date(2021, 1, 1), date(2021, 12, 31))
    assert query_span("May I ask what Jon does?") is None
    assert query_span("When did Jon go to a fair?") is None


def test_when_questions() -> None:
    assert is_when_question("When did Jon go to a fair?")
    assert is_when_question("How long has Nate had his turtles?")
    assert not is_when_question("What does Jon do when he is bored?")


def test_relative_dates_resolve_against_the_day_written() -> None:
    assert memory_spans("nothing dated here", AT) == [Span(date(2022, 11, 7), date(2022, 11, 7))]
    assert days("I watched it last night") == [(date(2022, 11, 6), date(2022, 11, 6))]
    assert days("I won the final last Saturday") == [(date(2022, 11, 5), date(2022, 11, 5))]
    [(lo, hi)] = days("we went camping two weeks ago")
    assert lo <= date(2022, 10, 24) <= hi and hi < date(2022, 11, 7)
    assert days("I moved there last month") == [(date(2022, 10, 1), date(2022, 10, 31))]
    [(lo, hi)] = days("see you next week")
    assert date(2022, 11, 7) < lo <= hi <= date(2022, 11, 21)


def test_a_question_naming_a_day_reaches_the_memory_that_says_last_night(stores: Stores) -> None:
    with stores.open("m1.db", embedder=HashEmbedder(64)) as mem:
        for i in range(30):  # other evenings, other films
            mem.remember(
                f"Joanna: we watched film number {i} together",
                agent_id="j",
                created_at=AT - timedelta(days=40 + i),
            )
        hit = mem.remember(
            "Joanna: I watched The Lord of the Rings last night, awesome!",
            agent_id="j",
            created_at=datetime(2022, 5, 2, 9, 0, tzinfo=UTC),
        )
        question = "What movie did Joanna watch on 1 May, 2022?"
        on = RecallConfig(temporal_weight=1.0)
        found = {r.memory.id: r for r in mem.recall(question, agent_id="j", k=3, config=on)}
        assert hit.id in found and found[hit.id].breakdown["temporal_rank"] == 1.0
        # without the channel it shares too little with the question to be found at all
        off = RecallConfig(temporal_weight=0.0, when_weight=0.0)
        plain = mem.recall(question, agent_id="j", k=10, config=off, touch=False)
        assert hit.id not in {r.memory.id for r in plain}


def test_the_temporal_pool_is_the_most_similar_memories_of_the_span_not_the_first_ids(
    stores: Stores,
) -> None:
    """When the question's span holds more memories than ``temporal_limit``, the channel
    ranks the span's memories most like the question, not whichever come first by id (a
    span of a busy day at 100k memories once gave an arbitrary pool, and took ~0.5 s)."""
    with stores.open("m1.db", embedder=HashEmbedder(64)) as mem:
        day = datetime(2022, 5, 1, 20, 0, tzinfo=UTC)
        mem.remember_many(
            [
                {
                    "id": f"0000-{i:03d}",
                    "content": f"the tomato plants in bed {i} need water and compost",
                    "agent_id": "j",
                    "created_at": day,
                }
                for i in range(40)
            ]
        )
        [hit] = mem.remember_many(
            [
                {
                    "id": "ffff-target",  # after every other id of the span
                    "content": "Joanna watched a movie: The Lord of the Rings, awesome!",
                    "agent_id": "j",
                    "created_at": day,
                }
            ]
        )
        question = "What movie did Joanna watch on 1 May, 2022?"
        cfg = RecallConfig(temporal_weight=1.0, temporal_limit=5)
        found = {r.memory.id: r for r in mem.recall(question, agent_id="j", k=5, config=cfg)}
        assert hit.id in found
        assert found[hit.id].breakdown.get("temporal_rank") == 1.0
