"""Dates in questions and memories, for recall's temporal channel. Rules, no model.

- :func:`query_span` — the calendar span a question names: a day ("on 1 May, 2022",
  "May 1st 2022"), a month or part of one ("in July 2022", "early November 2022", "in
  June"), or a year ("in 2022"). A span without a year matches that month in any year.
- :func:`memory_spans` — when what a memory tells happened: the day it was written
  (``created_at``: a session's date), plus each relative date in its text resolved against
  that day ("yesterday", "last Saturday", "two weeks ago", "last month", "next week",
  "this past weekend" ...), as day ranges.
- :func:`is_when_question` — "When did ...?", "How long ago ...?", "What date ...?".

Resolution happens at recall time, over the candidates only: the stored text stays as the
user wrote it, the write path pays nothing, and memories stored before this module existed
resolve the same way.

>>> from datetime import datetime, UTC
>>> query_span("What movie did Joanna watch on 1 May, 2022?")
Span(start=datetime.date(2022, 5, 1), end=datetime.date(2022, 5, 1), any_year=False)
>>> at = datetime(2022, 5, 2, 14, 0, tzinfo=UTC)
>>> [s.start.isoformat() for s in memory_spans("I watched it last night!", at)]
['2022-05-02', '2022-05-01']
"""

from __future__ import annotations

import calendar
import functools
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

__all__ = ["Span", "is_when_question", "memory_spans", "query_span"]

_MONTHS = {
    name: i
    for i, names in enumerate(
        (
            (),
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        )
    )
    for name in names
}
_WEEKDAYS = {
    d: i
    for i, d in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    )
}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple": 2,
    "a couple of": 2,
    "few": 3,
    "a few": 3,
    "several": 4,
}
_MONTH_WORD = (
    r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_DAY_MONTH_RE = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_WORD}\b\.?,?(?:\s+(\d{{4}}))?"
)
_MONTH_DAY_RE = re.compile(
    rf"\b{_MONTH_WORD}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?!\s*\d{{3}})(?:,?\s+(\d{{4}}))?"
)
_MONTH_RE = re.compile(
    r"\b(?:(early|beginning\s+of|start\s+of|first\s+half\s+of|mid|middle\s+of|late|"
    r"end\s+of|second\s+half\s+of)[\s-]+(?:the\s+)?)?" + _MONTH_WORD + r"\b(?:,?\s+(\d{4}))?"
)
_TIME_PREPOSITIONS = frozenset("in of during since until by before after from through".split())
_YEAR_RE = re.compile(r"\b(?:in|during|of|since|for)\s+((?:19|20)\d{2})\b")
_WHEN_RE = re.compile(
    r"^\s*(?:when\b|what\s+(?:date|day|time|year|month|week)\b|which\s+(?:date|day|year|"
    r"month|week)\b|how\s+long\b|on\s+what\s+date\b|in\s+which\s+(?:year|month)\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Span:
    """Days ``start``..``end`` (inclusive); ``any_year``: only month and day count."""

    start: date
    end: date
    any_year: bool = False

    def overlaps(self, other: Span) -> bool:
        if self.any_year or other.any_year:
            return _month_days_overlap(self, other)
        return self.start <= other.end and other.start <= self.end


def _month_days_overlap(a: Span, b: Span) -> bool:
    """Overlap ignoring the year (spans of at most a year)."""

    def days(s: Span) -> set[tuple[int, int]]:
        out: set[tuple[int, int]] = set()
        d = s.start
        while d <= s.end and len(out) < 366:
            out.add((d.month, d.day))
            d += timedelta(days=1)
        return out

    return bool(days(a) & days(b))


def _month(word: str) -> int | None:
    return _MONTHS.get(word.lower().rstrip("."))


def _month_span(year: int, month: int, part: str | None, any_year: bool) -> Span:
    last = calendar.monthrange(year, month)[1]
    lo, hi = 1, last
    part = (part or "").lower()
    if part.startswith(("early", "beginning", "start", "first")):
        hi = 10 if not part.startswith("first") else 15
    elif part.startswith(("mid", "middle")):
        lo, hi = 10, 20
    elif part.startswith(("late", "end", "second")):
        lo = 20 if not part.startswith("second") else 16
    return Span(date(year, month, lo), date(year, month, hi), any_year)


def query_span(text: str) -> Span | None:
    """The calendar span a question names, or None (see the module docstring). "May" counts
    as a month only capitalised (not the verb)."""
    for rx, day_first in ((_DAY_MONTH_RE, True), (_MONTH_DAY_RE, False)):
        for m in rx.finditer(text):
            day_s, month_s = (m.group(1), m.group(2)) if day_first else (m.group(2), m.group(1))
            month = _month(month_s)
            if month is None or (month_s.lower() == "may" and month_s[0] != "M"):
                continue
            year = int(m.group(3)) if m.group(3) else None
            try:
                d = date(year or 2000, month, int(day_s))  # 2000: a leap year
            except ValueError:
                continue
            return Span(d, d, year is None)
    for m in _MONTH_RE.finditer(text):
        month_s = m.group(2)
        month = _month(month_s)
        if month is None or (month_s.lower() == "may" and month_s[0] != "M"):
            continue
        if len(month_s) <= 4 and month_s.lower() not in ("may", "june", "july"):
            continue  # "Mar", "Jun" alone are too often other words
        if month_s.lower() == "may" and not (m.group(1) or m.group(3)):
            # "May I ask": the month only after a preposition of time
            before = text[: m.start()].split()
            if not before or before[-1].lower() not in _TIME_PREPOSITIONS:
                continue
        year = int(m.group(3)) if m.group(3) else None
        return _month_span(year or 2000, month, m.group(1), year is None)
    y = _YEAR_RE.search(text)
    if y:
        year = int(y.group(1))
        return Span(date(year, 1, 1), date(year, 12, 31))
    return None


def is_when_question(text: str) -> bool:
    """Whether a question asks for a time ("When did ...", "How long ...")."""
    return bool(_WHEN_RE.search(text))


# ---------------------------------------------------------------------------------------
# relative dates in memories

_N = (
    r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a\s+couple\s+of|couple"
    r"|a\s+few|few|several)"
)
_AGO_RE = re.compile(rf"\b{_N}\s+(day|week|weekend|month|year)s?\s+ago\b", re.IGNORECASE)
_LAST_WEEKDAY_RE = re.compile(
    r"\b(last|this\s+past|past|on|this|next)\s+(monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)\b",
    re.IGNORECASE,
)
_FIXED: tuple[tuple[re.Pattern[str], int, int], ...] = tuple(
    (re.compile(rf"\b{p}\b", re.IGNORECASE), lo, hi)
    for p, lo, hi in (
        # (phrase, first day, last day) relative to the memory's day
        (r"yesterday|last\s+night", -1, -1),
        (r"the\s+day\s+before\s+yesterday", -2, -2),
        (r"today|tonight|this\s+(?:morning|afternoon|evening)|just\s+now", 0, 0),
        (r"tomorrow", 1, 1),
        (r"last\s+week", -13, -4),
        (r"this\s+week|earlier\s+this\s+week", -6, 0),
        (r"next\s+week", 3, 13),
        (r"(?:last|this\s+past|past)\s+weekend", -9, -1),
        (r"this\s+weekend|next\s+weekend", 1, 9),
        (r"a\s+few\s+days\s+ago|the\s+other\s+day|recently", -7, -1),
    )
)
_MONTHLY_RE = re.compile(r"\b(last|this|next)\s+(month|year)\b", re.IGNORECASE)
_UNIT_DAYS = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}


def _count(word: str) -> int:
    w = " ".join(word.lower().split())
    return int(w) if w.isdigit() else _NUMBERS.get(w, 1)


def _shift_month(d: date, months: int) -> tuple[int, int]:
    total = d.year * 12 + d.month - 1 + months
    return total // 12, total % 12 + 1


def memory_spans(content: str, created_at: datetime) -> list[Span]:
    """When a memory's events happened: the day it was written, then each relative date
    of its text resolved against that day (module docstring)."""
    return list(_spans(content, created_at.date()))


@functools.lru_cache(maxsize=16_384)
def _spans(content: str, day: date) -> tuple[Span, ...]:
    # remembered: recall resolves every candidate, and up to 500 memories of a window,
    # whenever a question names a date, with a dozen expressions each; a memory's
    # text and day do not change
    out = [Span(day, day)]
    for rx, lo, hi in _FIXED:
        if rx.search(content):
            out.append(Span(day + timedelta(days=lo), day + timedelta(days=hi)))
    for m in _AGO_RE.finditer(content):
        n = min(_count(m.group(1)), 100)
        unit = _UNIT_DAYS[m.group(2).lower()]
        centre = day - timedelta(days=n * unit)
        slack = max(1, unit // 2) if unit < 365 else 182
        out.append(Span(centre - timedelta(days=slack), centre + timedelta(days=slack)))
    for m in _LAST_WEEKDAY_RE.finditer(content):
        which, target = m.group(1).lower(), _WEEKDAYS[m.group(2).lower()]
        if which == "next":
            ahead = (target - day.weekday()) % 7 or 7
            d = day + timedelta(days=ahead)
        elif which == "this" or which == "on":
            back = (day.weekday() - target) % 7
            d = day - timedelta(days=back) if back <= 3 else day + timedelta(days=7 - back)
        else:
            back = (day.weekday() - target) % 7 or 7
            d = day - timedelta(days=back)
        out.append(Span(d, d))
    for m in _MONTHLY_RE.finditer(content):
        step = {"last": -1, "this": 0, "next": 1}[m.group(1).lower()]
        if m.group(2).lower() == "month":
            y, mo = _shift_month(day, step)
            out.append(_month_span(y, mo, None, False))
        else:
            out.append(Span(date(day.year + step, 1, 1), date(day.year + step, 12, 31)))
    return tuple(out)
