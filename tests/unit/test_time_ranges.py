"""A filter's time ranges admit exactly the memories within them, whatever the bounds and
missing values. On the embedded store the time columns narrow a range first (see
backends/embedded/time_ranges.py), which must never drop a memory the filter admits, nor
one held as a dict rather than a row (a time before 1970)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from graphmem.models import Filter, Memory, Range
from tests.conftest import Stores

T = datetime(2024, 3, 1, tzinfo=UTC)


def _brute(mems: list[Memory], ranges: list[Range]) -> set[str]:
    out = set()
    for m in mems:
        ok = True
        for r in ranges:
            v = getattr(m, r.field)
            if v is None:
                ok = ok and r.or_missing
                continue
            ok = ok and (r.gte is None or v >= r.gte) and (r.gt is None or v > r.gt)
            ok = ok and (r.lte is None or v <= r.lte) and (r.lt is None or v < r.lt)
        if ok:
            out.add(m.id)
    return out


def test_time_ranges_match_exactly_what_a_check_of_every_memory_admits(stores: Stores) -> None:
    rng = random.Random(4)
    stamps = [T + timedelta(microseconds=rng.randrange(10**12)) for _ in range(12)]
    rows = []
    for i in range(200):
        created = rng.choice(stamps) + timedelta(microseconds=rng.choice((-1, 0, 0, 1)))
        rows.append(
            {
                "content": f"memory {i}",
                "agent_id": "a",
                "created_at": created,
                "expires_at": rng.choice((None, created + timedelta(days=rng.randrange(60)))),
            }
        )
    # a memory before 1970 does not fit the columns: held as a dict, still searched
    rows.append(
        {"content": "old one", "agent_id": "a", "created_at": datetime(1960, 1, 1, tzinfo=UTC)}
    )
    with stores.open("m.db", embedder=None) as mem:
        mem.remember_many(rows)
        mems = list(mem.backend.match(Memory, Filter.for_memories(status=None)))
        assert len(mems) == len(rows)
        bounds = [*stamps, datetime(1950, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)]
        for trial in range(80):
            ranges = []
            for field in rng.sample(("created_at", "expires_at"), rng.randrange(1, 3)):
                b = [
                    rng.choice(bounds) + timedelta(microseconds=rng.choice((-1, 0, 1)))
                    if rng.random() < 0.5
                    else None
                    for _ in range(4)
                ]
                ranges.append(
                    Range(
                        field=field,
                        gte=b[0],
                        gt=b[1],
                        lte=b[2],
                        lt=b[3],
                        or_missing=rng.random() < 0.5,
                    )
                )
            flt = Filter.for_memories(status=None).model_copy(update={"ranges": tuple(ranges)})
            got = {m.id for m in mem.backend.match(Memory, flt)}
            assert got == _brute(mems, ranges), (trial, ranges)
            assert mem.backend.count(flt) == len(got)
