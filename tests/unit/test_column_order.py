"""A page of memories in an order (``match`` with a limit; ``mem.list()``) is the same page
as the whole ordered list gives, whatever the field, the direction, ties and missing
values. On the embedded store the first memories by a numeric or time field come from
the columns (backends/embedded/column_order.py), which must never change a page."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from graphmem.models import Filter, Memory
from tests.conftest import Stores

T = datetime(2024, 3, 1, tzinfo=UTC)
FIELDS = (
    "created_at",
    "updated_at",
    "valid_from",
    "last_accessed",
    "valid_to",
    "expires_at",
    "importance",
    "confidence",
    "access_count",
    "id",
)


def test_a_page_in_any_order_is_the_slice_of_the_whole_ordered_list(stores: Stores) -> None:
    rng = random.Random(9)
    stamps = [T + timedelta(seconds=rng.randrange(10**6)) for _ in range(6)]
    rows = []
    for i in range(240):
        at = rng.choice(stamps)
        rows.append(
            {
                "content": f"memory number {i}",
                "agent_id": rng.choice(("a", "b")),
                "created_at": at,
                "importance": rng.choice((0.1, 0.5, 0.5, 0.9)),
                "confidence": rng.choice((0.3, 1.0)),
                "last_accessed": rng.choice((None, None, at + timedelta(days=1))),
                "expires_at": rng.choice((None, at + timedelta(days=rng.randrange(1, 9)))),
            }
        )
    # a time before 1970 does not fit the columns: that memory is held as a dict
    rows.append(
        {"content": "an old one", "agent_id": "a", "created_at": datetime(1960, 1, 1, tzinfo=UTC)}
    )
    with stores.open("m.db", embedder=None) as mem:
        mem.remember_many(rows)
        every = Filter.for_memories(status=None)
        for flt in (every, Filter.for_memories(agent_id="a")):
            for field in FIELDS:
                for descending in (False, True):
                    whole = [
                        m.id
                        for m in mem.backend.match(
                            Memory, flt, order_by=field, descending=descending
                        )
                    ]
                    for limit, offset in ((1, 0), (5, 0), (7, 3), (20, 10)):
                        page = mem.backend.match(
                            Memory,
                            flt,
                            limit=limit,
                            offset=offset,
                            order_by=field,
                            descending=descending,
                        )
                        assert [m.id for m in page] == whole[offset : offset + limit], (
                            field,
                            descending,
                            limit,
                            offset,
                        )
