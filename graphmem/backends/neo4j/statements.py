"""Statement composition: several query files joined into one statement (one round trip),
and the parts a write is made of."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

from graphmem.backends.neo4j.filters import allowed_label
from graphmem.backends.neo4j.queries import PARAM_USE, strip_literals
from graphmem.backends.neo4j.values import temporal_fields
from graphmem.errors import QueryFailed
from graphmem.models import Edge, NodeLabel

T = TypeVar("T")


@lru_cache(maxsize=1024)
def _composed_part(text: str, i: int) -> tuple[str, bool, bool]:
    """Part ``i`` of a composed statement: its text with parameters renamed ``$p<i>_<name>``,
    and whether it has a ``RETURN`` / a ``WITH`` outside literals and comments. Cached: the
    parts are the same few statements on every write, and scanning them is not free."""
    structure = strip_literals(text)
    pieces: list[str] = []
    last = 0
    for m in PARAM_USE.finditer(structure):
        pieces.append(text[last : m.start()] + f"$p{i}_{m.group(1)}")
        last = m.end()
    pieces.append(text[last:])
    return (
        "".join(pieces),
        re.search(r"\bRETURN\b", structure, re.IGNORECASE) is not None,
        re.search(r"\bWITH\b", structure, re.IGNORECASE) is not None,
    )


def compose(
    parts: Sequence[tuple[str, Mapping[str, Any]]], *, counted: Sequence[int] = ()
) -> tuple[str, dict[str, Any]]:
    """One statement that runs several write statements in order (one round trip).

    Each part's parameters are renamed ``$p<i>_<name>``, and an aggregation ``WITH
    count(*) AS c<i>`` ends each part (all of its rows are written before the next part
    starts, and a part with no rows does not stop the next one). The statement returns
    ``c<i>`` for the parts listed in ``counted``: the rows that part ended with (for an
    edge upsert, the edges whose two ends exist). A part must end with an update clause (no
    ``RETURN``), and a part after a counted one must have no ``WITH`` of its own (it would
    drop the count).
    """
    if not parts:
        raise QueryFailed("internal error: nothing to compose")
    texts: list[str] = []
    params: dict[str, Any] = {}
    carried: list[str] = []
    for i, (text, part_params) in enumerate(parts):
        renamed, has_return, has_with = _composed_part(text, i)
        if has_return:
            raise QueryFailed("internal error: a composed part must not RETURN")
        if carried and has_with:
            raise QueryFailed("internal error: a part with WITH follows a counted part")
        texts.append(renamed)
        params.update({f"p{i}_{k}": v for k, v in part_params.items()})
        texts.append("WITH " + "".join(f"{c}, " for c in carried) + f"count(*) AS c{i}")
        if i in counted:
            carried.append(f"c{i}")
    texts.append("RETURN " + ", ".join([*carried, f"c{len(parts) - 1}"][: max(len(carried), 1)]))
    return "\n".join(texts), params


def chunks(rows: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


@dataclass(frozen=True)
class WritePart:
    """One query file's statement inside a composed write (see :func:`compose`)."""

    name: str
    text: str
    params: dict[str, Any]
    rows: int = 0
    """Rows it sends (what a statement's ``batch_rows`` budget counts)."""
    edges: tuple[Edge, ...] = ()
    """For an edge upsert: the edges, each of which must be written."""


@dataclass(frozen=True)
class WriteStatement:
    """Parts composed into one statement: one round trip."""

    parts: tuple[WritePart, ...]
    text: str
    params: dict[str, Any]

    @property
    def name(self) -> str:
        return "write " + " + ".join(dict.fromkeys(p.name for p in self.parts))


def create_variant(text: str, label: NodeLabel) -> str:
    """An upsert file's statement for nodes that are new: its node MERGE made a CREATE, and
    what only an existing node needs left out: the removal of stale structural edges and of
    the Unvectored label (a new node has neither), and its structural edges CREATEd instead
    of MERGEd (a new node has none yet to find: each MERGE read the other end's edges, the
    most expensive part of a bulk write, e.g. a Run's hundreds of IN_RUN edges)."""
    new, n = re.subn(
        rf"^MERGE (\((\w+):{allowed_label(label)} \{{id: row\.id\}}\))$",
        r"CREATE \1",
        text,
        count=1,
        flags=re.MULTILINE,
    )
    if n != 1:
        raise QueryFailed(f"internal error: no node MERGE in the {label.value} upsert")
    var = re.escape(text[text.index("MERGE (") + 7 :].split(":", 1)[0])
    new = re.sub(r"^FOREACH \(stale IN .*\n", "", new, flags=re.MULTILINE)
    new = re.sub(rf"^FOREACH \(.*\| REMOVE {var}:\w+\)\n", "", new, flags=re.MULTILINE)
    return re.sub(rf"\bMERGE \({var}\)-\[", f"CREATE ({var})-[", new)


def create_edge_variant(text: str) -> str:
    """An edge upsert file's statement for edges with a new end (a node this write
    creates): the edge cannot exist yet, so it is CREATEd instead of MERGEd, and its
    properties are added (``+=``) rather than replaced: the same on an edge without any,
    and an empty map (a NEXT edge's) then costs one store access per edge instead of two."""
    new, n = re.subn(
        r"^MERGE (\(a\)-\[r:\w+\]->\(b\))$", r"CREATE \1", text, count=1, flags=re.MULTILINE
    )
    if n != 1:
        raise QueryFailed("internal error: no relationship MERGE in an edge upsert")
    new, n = re.subn(
        r"^SET r = row\.props$", "SET r += row.props", new, count=1, flags=re.MULTILINE
    )
    if n != 1:
        raise QueryFailed("internal error: no SET r = row.props in an edge upsert")
    return new


def times_as_text(label: NodeLabel, props: dict[str, Any]) -> dict[str, Any]:
    """``props`` with the model's datetimes as ISO 8601 text (``props`` is changed).

    The driver converts a Python datetime to a Bolt structure in Python, one value at a
    time: for a batch of memories that conversion cost more than everything else on the
    client. ISO text is made in C and the server parses it (see :func:`times_from_text`)."""
    for field in temporal_fields(label):
        value = props.get(field)
        if isinstance(value, datetime):
            props[field] = value.isoformat()
    return props


_SET_PROPS = re.compile(r"^SET (\w+) = row\.props\b.*$", re.MULTILINE)


@lru_cache(maxsize=256)
def times_from_text(text: str, label: NodeLabel) -> str:
    """An upsert file's statement that turns the ISO texts of :func:`times_as_text` back
    into datetimes on the server, inside its ``SET x = row.props``: the map it sets is
    ``row.props`` with each temporal field replaced by ``datetime(...)`` of its text, so
    each property is written once (setting the texts and then the datetimes over them cost
    a tenth of a batch's server time). ``datetime(null)`` is null: a field left out stays
    absent."""
    fields = temporal_fields(label)
    if not fields:
        return text
    m = _SET_PROPS.search(text)
    if m is None:
        raise QueryFailed(f"internal error: no SET ... = row.props in the {label.value} upsert")
    times = ", ".join(f"{f}: datetime(_p.{f})" for f in fields)
    line = m.group(0).replace("row.props", f"_p {{.*, {times}}}", 1)
    return f"{text[: m.start()]}WITH *, row.props AS _p\n{line}{text[m.end() :]}"
