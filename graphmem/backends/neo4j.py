"""Neo4j backend: the GraphBackend protocol over the official ``neo4j`` driver (sync API).

Every Cypher statement lives in a ``.cypher`` file under ``cypher/`` (one statement per file,
parameters only, a comment and ``:param`` lines on top so the file runs as it is in Neo4j
Browser); the files are loaded once, on first use, and checked (declared ``:param`` names
must equal the ``$parameters`` the statement uses). Cypher built in Python is made only of
allowlisted labels, relationship types, model field names and ``$parameters`` — user
values (including metadata keys, read with ``n[$key]``) only ever travel as parameters:
the compiled :class:`~graphmem.models.Filter` (``compile_match`` and friends), recall's two
statements (``compile_recall_search``, ``compile_neighbours``), a write's preconditions
(``compile_guard``, ``compile_check``), and :func:`compose`, which joins query files into
one statement.

Round trips: one write is one managed write transaction of ceil(rows / ``batch_rows``)
statements — the Agent / Tag / Run hubs once per batch (``nodes/hubs``), the nodes, then the
relationships, composed — with its preconditions locked and checked first inside the same
statement; recall is two read statements (both searches, then the whole graph expansion);
recall's access records are kept in the process and sent with the next write. Reads use
managed read transactions routed to readers, with the driver's bookmark manager for
read-your-writes in a cluster. Driver errors are translated into :mod:`graphmem.errors` at
this boundary. ``tests/neo4j/fake_driver.py`` records what is sent, so the budget of each
operation is tested without a server.

Nothing connects in the constructor: the driver is created on first use (or ``connect()``),
and the schema (constraints, range/full-text/vector indexes) is ensured on first use.
Needs Neo4j 5.18 or later (vector index, ``vector.similarity.cosine``).

Example::

    backend = Neo4jBackend("neo4j://localhost:7687", auth=("neo4j", "secret"))
    backend.ensure_schema(embedding_dim=384)
    backend.upsert([Memory(content="Alice prefers tea", agent_id="assistant")])
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

import numpy as np

from graphmem.backends.base import (
    STRUCTURAL,
    Direction,
    Expect,
    WriteBatch,
    expect_failure,
    structural_targets,
)
from graphmem.errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    Conflict,
    DimensionMismatch,
    GraphMemError,
    InvalidInput,
    QueryFailed,
)
from graphmem.models import (
    METADATA_PREFIX,
    Agent,
    BackendStats,
    Edge,
    EdgeType,
    Filter,
    GraphNode,
    Hit,
    Memory,
    NodeLabel,
    NodeRef,
    OrgFact,
    Range,
    Run,
    Subgraph,
    TextQuery,
    VectorQuery,
    check_field,
    check_page,
    node_model,
)
from graphmem.text import query_terms

__all__ = [
    "CYPHER_DIR",
    "DRIVER_OPTIONS",
    "QUERY_NAMES",
    "SCHEMES",
    "UNVECTORED",
    "CypherQuery",
    "Neo4jBackend",
    "WritePart",
    "WriteStatement",
    "compile_check",
    "compile_count",
    "compile_guard",
    "compile_match",
    "compile_neighbours",
    "compile_recall_search",
    "compile_text_search",
    "compile_vector_exact_search",
    "compile_vector_index_search",
    "compile_where",
    "compose",
    "guard_rows",
    "has_conditions",
    "load_queries",
    "lucene_query",
    "parse_cypher",
]

log = logging.getLogger("graphmem.backends.neo4j")

T = TypeVar("T")

SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")
"""URL schemes served by this backend (registered in :mod:`graphmem.backends`)."""

CYPHER_DIR = Path(__file__).resolve().parents[1] / "cypher"  # also at ./cypher (a link)
"""Where the ``.cypher`` files live (the repository's ``cypher/`` folder)."""

MIN_SERVER_VERSION = (5, 18)
FULLTEXT_INDEX = "memory_content_fulltext"
VECTOR_INDEX = "memory_embedding_vector"

# ---------------------------------------------------------------------------------------
# the query files this module runs (every other .cypher file is a Browser query)

SCHEMA_QUERIES: tuple[str, ...] = (
    "schema/memory_id_unique",
    "schema/agent_id_unique",
    "schema/run_id_unique",
    "schema/tag_id_unique",
    "schema/tag_name_unique",
    "schema/org_fact_id_unique",
    "schema/org_operation_id_unique",
    "schema/log_entry_id_unique",
    "schema/payload_id_unique",
    "schema/namespace_id_unique",
    "schema/entity_id_unique",
    "schema/entity_norm",
    "schema/entity_audience",
    "schema/memory_agent_id",
    "schema/memory_run_id",
    "schema/memory_namespace",
    "schema/memory_audience",
    "schema/memory_status",
    "schema/memory_category",
    "schema/memory_created_at",
    "schema/memory_content_hash",
    "schema/run_agent_id",
    "schema/org_fact_fact_id",
    "schema/log_entry_run_id",
    "schema/memory_content_fulltext",
)
VECTOR_INDEX_QUERY = "schema/memory_embedding_vector"

UPSERT_QUERIES: dict[NodeLabel, str] = {
    NodeLabel.MEMORY: "nodes/memory_upsert",
    NodeLabel.AGENT: "nodes/agent_upsert",
    NodeLabel.RUN: "nodes/run_upsert",
    NodeLabel.TAG: "nodes/tag_upsert",
    NodeLabel.ORG_FACT: "nodes/org_fact_upsert",
    NodeLabel.ORG_OPERATION: "nodes/org_operation_upsert",
    NodeLabel.LOG_ENTRY: "nodes/log_entry_upsert",
    NodeLabel.PAYLOAD: "nodes/payload_upsert",
    NodeLabel.NAMESPACE: "nodes/namespace_upsert",
    NodeLabel.ENTITY: "nodes/entity_upsert",
}
GET_QUERIES: dict[NodeLabel, str] = {
    NodeLabel.MEMORY: "nodes/memory_get",
    NodeLabel.AGENT: "nodes/agent_get",
    NodeLabel.RUN: "nodes/run_get",
    NodeLabel.TAG: "nodes/tag_get",
    NodeLabel.ORG_FACT: "nodes/org_fact_get",
    NodeLabel.ORG_OPERATION: "nodes/org_operation_get",
    NodeLabel.LOG_ENTRY: "nodes/log_entry_get",
    NodeLabel.PAYLOAD: "nodes/payload_get",
    NodeLabel.NAMESPACE: "nodes/namespace_get",
    NodeLabel.ENTITY: "nodes/entity_get",
}
STRUCTURAL_SHAPES: dict[NodeLabel, frozenset[tuple[EdgeType, NodeLabel]]] = {
    NodeLabel.MEMORY: frozenset(
        {
            (EdgeType.AUTHORED_BY, NodeLabel.AGENT),
            (EdgeType.IN_RUN, NodeLabel.RUN),
            (EdgeType.TAGGED, NodeLabel.TAG),
        }
    ),
    NodeLabel.RUN: frozenset({(EdgeType.RUN_BY, NodeLabel.AGENT)}),
    NodeLabel.ORG_FACT: frozenset(
        {
            (EdgeType.AUTHORED_BY, NodeLabel.AGENT),
            (EdgeType.TAGGED, NodeLabel.TAG),
        }
    ),
    NodeLabel.LOG_ENTRY: frozenset({(EdgeType.IN_RUN, NodeLabel.RUN)}),
}
"""The structural edges each node upsert file maintains (row keys: ``agent`` for an Agent
target, ``run`` for a Run target, ``tags`` for Tag targets). Must describe exactly what
:func:`graphmem.backends.base.structural_targets` yields (a unit test checks)."""

EDGE_UPSERT_QUERIES: dict[tuple[EdgeType, NodeLabel, NodeLabel], str] = {
    (EdgeType.SUPERSEDES, NodeLabel.MEMORY, NodeLabel.MEMORY): "edges/supersedes_upsert",
    (
        EdgeType.SUPERSEDES,
        NodeLabel.ORG_FACT,
        NodeLabel.ORG_FACT,
    ): "edges/org_fact_supersedes_upsert",
    (EdgeType.DERIVED_FROM, NodeLabel.MEMORY, NodeLabel.MEMORY): "edges/derived_from_upsert",
    (
        EdgeType.DERIVED_FROM,
        NodeLabel.ORG_FACT,
        NodeLabel.MEMORY,
    ): "edges/org_fact_derived_from_upsert",
    (
        EdgeType.DERIVED_FROM,
        NodeLabel.MEMORY,
        NodeLabel.ORG_FACT,
    ): "edges/derived_from_org_fact_upsert",
    (EdgeType.NEXT, NodeLabel.MEMORY, NodeLabel.MEMORY): "edges/next_upsert",
    (EdgeType.NEXT, NodeLabel.LOG_ENTRY, NodeLabel.LOG_ENTRY): "edges/log_entry_next_upsert",
    (EdgeType.RECORDS, NodeLabel.ORG_OPERATION, NodeLabel.ORG_FACT): "edges/records_upsert",
    (EdgeType.REFERENCES, NodeLabel.LOG_ENTRY, NodeLabel.PAYLOAD): "edges/references_upsert",
    (EdgeType.CHILD_OF, NodeLabel.LOG_ENTRY, NodeLabel.LOG_ENTRY): "edges/child_of_upsert",
    (EdgeType.MENTIONS, NodeLabel.MEMORY, NodeLabel.ENTITY): "edges/memory_mentions_entity_upsert",
    (EdgeType.RELATES, NodeLabel.ENTITY, NodeLabel.ENTITY): "edges/entity_relates_upsert",
}
"""The upsert file of each (edge type, source label, target label) that callers write (the
structural edges are written by the node upserts). Endpoints are matched by id."""
Q_HUBS = "nodes/hubs"
Q_VECTORS = "nodes/memory_vectors"
Q_MISSING_VECTORS = "nodes/memory_missing_vectors"
UNVECTORED = "Unvectored"
"""A second label on memories stored without an embedding: the background vectorizer's
queue, read through the label index (the only label graphmem adds to its own)."""
VECTOR_INDEX_EXACT_QUERY = "schema/memory_embedding_vector_exact"
Q_DELETE_NODES = "nodes/delete"
Q_TOUCH = "nodes/touch"
Q_SCAN_NODES = "nodes/scan"
Q_DELETE_EDGES = "edges/delete"
Q_SCAN_EDGES = "edges/scan"
Q_EXPAND = "edges/expand"
Q_SEARCH_TEXT = "search/text"
Q_SEARCH_VECTOR = "search/vector"
Q_SHOW_INDEXES = "admin/show_indexes"
Q_SHOW_CONSTRAINTS = "admin/show_constraints"
Q_AWAIT_INDEXES = "admin/await_indexes"
Q_COMPONENTS = "admin/components"
Q_STATS = "admin/stats"
Q_CLEAR = "admin/clear"

QUERY_NAMES: tuple[str, ...] = (
    *SCHEMA_QUERIES,
    VECTOR_INDEX_QUERY,
    VECTOR_INDEX_EXACT_QUERY,
    Q_HUBS,
    Q_VECTORS,
    Q_MISSING_VECTORS,
    *UPSERT_QUERIES.values(),
    *GET_QUERIES.values(),
    *EDGE_UPSERT_QUERIES.values(),
    Q_DELETE_NODES,
    Q_TOUCH,
    Q_SCAN_NODES,
    Q_DELETE_EDGES,
    Q_SCAN_EDGES,
    Q_EXPAND,
    Q_SEARCH_TEXT,
    Q_SEARCH_VECTOR,
    Q_SHOW_INDEXES,
    Q_SHOW_CONSTRAINTS,
    Q_AWAIT_INDEXES,
    Q_COMPONENTS,
    Q_STATS,
    Q_CLEAR,
)
"""Every query file the backend loads (relative to ``cypher/``, without ``.cypher``)."""

# explicit nodes first, so that structural defaults are not created only to be replaced
_UPSERT_ORDER = (
    NodeLabel.AGENT,
    NodeLabel.TAG,
    NodeLabel.RUN,
    NodeLabel.MEMORY,
    NodeLabel.ORG_FACT,
    NodeLabel.ORG_OPERATION,
    NodeLabel.LOG_ENTRY,
    NodeLabel.PAYLOAD,
    NodeLabel.NAMESPACE,
    NodeLabel.ENTITY,
)
_ALL_LABELS = [label.value for label in NodeLabel]
_ALL_TYPES = [t.value for t in EdgeType]
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_INT64 = (-(2**63), 2**63 - 1)

# ---------------------------------------------------------------------------------------
# query files


@dataclass(frozen=True)
class CypherQuery:
    """One statement loaded from a ``.cypher`` file."""

    name: str
    text: str
    """The statement sent to the server (header comments and ``:param`` lines removed)."""
    params: tuple[str, ...]
    """Parameter names declared with ``:param`` (equal to the ``$names`` the text uses)."""
    examples: Mapping[str, str]
    """The Browser ``:param`` example expression of each parameter (Cypher text)."""
    description: str


_PARAM_LINE = re.compile(r"^:param\s+([A-Za-z_][A-Za-z0-9_]*)\s*=>\s*(.+?)\s*;?\s*$")
_NO_PARAMS = re.compile(r"^//\s*:param\s+none\b")
_PARAM_USE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def strip_literals(text: str) -> str:
    """``text`` with string literals, backtick names and comments blanked out (same length
    per line), so that checks on the statement's structure cannot be fooled by them."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" and c != "`" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_cypher(source: str, name: str = "<text>") -> CypherQuery:
    """Parse the text of a ``.cypher`` file (see ``cypher/README.md`` for the format).

    Raises ``ConfigError`` when the file breaks the format: no leading description comment,
    more than one statement, or ``:param`` lines that differ from the parameters used.
    """
    lines = source.strip().splitlines()
    description: list[str] = []
    examples: dict[str, str] = {}
    no_params = False
    body_start = len(lines)
    for i, raw in enumerate(lines):
        line = raw.strip()
        if _NO_PARAMS.match(line):
            no_params = True
        elif line.startswith("//"):
            if examples:
                raise ConfigError(f"{name}: description comments must come before :param lines")
            description.append(line[2:].strip())
        elif line.startswith(":param"):
            m = _PARAM_LINE.match(line)
            if m is None:
                raise ConfigError(f"{name}: malformed line {line!r}")
            examples[m.group(1)] = m.group(2)
        elif line:
            body_start = i
            break
    if not lines or not lines[0].lstrip().startswith("//") or not description:
        raise ConfigError(f"{name}: must start with a // comment saying what it does")
    text = "\n".join(lines[body_start:]).strip()
    if text.endswith(";"):
        text = text[:-1].rstrip()
    if not text:
        raise ConfigError(f"{name}: no statement")
    structure = strip_literals(text)
    if ";" in structure:
        raise ConfigError(f"{name}: holds more than one statement")
    if ":param" in structure:
        raise ConfigError(f"{name}: :param lines must come before the statement")
    used = set(_PARAM_USE.findall(structure))
    if used != set(examples):
        raise ConfigError(
            f"{name}: :param lines declare {sorted(examples)} but the statement uses {sorted(used)}"
        )
    if not examples and not no_params:
        raise ConfigError(f"{name}: a statement without parameters says '// :param none'")
    return CypherQuery(
        name=name,
        text=text,
        params=tuple(sorted(examples)),
        examples=examples,
        description=" ".join(description),
    )


def load_queries(
    names: Iterable[str] = QUERY_NAMES, directory: str | Path | None = None
) -> dict[str, CypherQuery]:
    """Load and check the named query files (``name`` is relative to ``directory``, default
    :data:`CYPHER_DIR`, without ``.cypher``). Files are read once per process."""
    root = Path(directory) if directory is not None else CYPHER_DIR
    return {name: _load_one(str(root.resolve()), name) for name in names}


@lru_cache(maxsize=512)
def _load_one(root: str, name: str) -> CypherQuery:
    path = Path(root) / f"{name}.cypher"
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(
            f"cannot read Cypher file {path}: {e}. The Neo4j backend needs the repository's "
            "cypher/ folder (pass cypher_dir=... when graphmem is installed elsewhere)"
        ) from e
    return parse_cypher(source, name)


# ---------------------------------------------------------------------------------------
# filter compiler: parameterised Cypher from a Filter


def _label(label: NodeLabel | str) -> str:
    """An allowlisted label, safe to place in Cypher text."""
    try:
        value = NodeLabel(label).value
    except ValueError as e:
        raise InvalidInput(f"unknown node label {label!r}") from e
    if not _IDENT_RE.match(value):  # allowlist values are identifiers; belt and braces
        raise InvalidInput(f"label {value!r} is not an identifier")
    return value


class _Params:
    """Collects parameters under generated names (``$f0``, ``$f1`` ...)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.values: dict[str, Any] = {}

    def __call__(self, value: Any) -> str:
        name = f"{self.prefix}{len(self.values)}"
        self.values[name] = _param_value(value)
        return "$" + name


def _param_value(value: Any) -> Any:
    if isinstance(value, str):
        return str(value)  # StrEnum -> its value
    if isinstance(value, tuple | list):
        return [_param_value(v) for v in value]
    return value


def _property(model: type[GraphNode], field: str, var: str, param: _Params) -> str:
    """The Cypher expression of a filter field: ``n.field`` for a model field (a fixed
    identifier), ``n[$fN]`` for ``metadata.<key>`` (any characters, passed as a parameter)."""
    try:
        check_field(model, field)
    except ValueError as e:
        raise InvalidInput(str(e)) from e
    if field.startswith(METADATA_PREFIX):
        return f"{var}[{param(field)}]"
    if not _IDENT_RE.match(field):
        raise InvalidInput(f"{field!r} is not a filterable field")
    return f"{var}.{field}"


def compile_where(
    flt: Filter, *, var: str = "n", prefix: str = "f"
) -> tuple[list[str], dict[str, Any]]:
    """The conditions of ``flt`` on variable ``var`` (to be AND-ed) and their parameters.

    Field names are re-checked against the label's model; values are always parameters.
    """
    if not _IDENT_RE.match(var) or not _IDENT_RE.match(prefix):
        raise InvalidInput("variable and parameter prefix must be identifiers")
    if set(type(flt).model_fields) != _FILTER_FIELDS or set(Range.model_fields) != _RANGE_FIELDS:
        # a new kind of condition must be compiled here, never silently ignored
        raise QueryFailed("internal error: Filter has fields the Neo4j compiler does not know")
    model = node_model(flt.label)
    param = _Params(prefix)
    clauses: list[str] = []
    if flt.ids is not None:
        clauses.append(f"{var}.id IN {param(list(flt.ids))}")
    for field, value in flt.equals.items():
        prop = _property(model, field, var, param)
        clauses.append(f"{prop} IS NULL" if value is None else f"{prop} = {param(value)}")
    for field, values in flt.any_of.items():
        prop = _property(model, field, var, param)
        clauses.append(f"{prop} IN {param(list(values))}")
    for rng in flt.ranges:
        prop = _property(model, rng.field, var, param)
        bounds = [
            f"{prop} {op} {param(bound)}"
            for op, bound in ((">=", rng.gte), (">", rng.gt), ("<=", rng.lte), ("<", rng.lt))
            if bound is not None
        ]
        if rng.or_missing:
            if bounds:
                clauses.append(f"({prop} IS NULL OR ({' AND '.join(bounds)}))")
        else:
            clauses.extend(bounds or [f"{prop} IS NOT NULL"])
    if flt.tags_all:
        if "tags" not in model.model_fields:
            raise InvalidInput(f"{model.label.value} has no tags")
        clauses.append(f"all(tag IN {param(list(flt.tags_all))} WHERE tag IN {var}.tags)")
    return clauses, param.values


_FILTER_FIELDS = {"label", "ids", "equals", "any_of", "ranges", "tags_all"}
_RANGE_FIELDS = {"field", "gte", "gt", "lte", "lt", "or_missing"}


def _where(clauses: Sequence[str]) -> str:
    return ("\nWHERE " + "\n  AND ".join(clauses)) if clauses else ""


def compile_match(
    flt: Filter,
    *,
    limit: int | None = None,
    offset: int = 0,
    order_by: str = "id",
    descending: bool = False,
) -> tuple[str, dict[str, Any]]:
    """Cypher and parameters returning ``properties(n) AS props`` for ``match``.

    Ordered by ``order_by`` (missing values last in both directions), ties by id in the
    same direction; paged with ``SKIP $skip LIMIT $limit``.
    """
    label = _label(flt.label)
    check_page(
        node_model(flt.label), limit=limit, offset=offset, order_by=order_by, descending=descending
    )
    clauses, params = compile_where(flt)
    direction = "DESC" if descending else "ASC"
    if order_by == "id":
        order = f"n.id {direction}"
    else:
        order_param = _Params("o")
        key = _property(node_model(flt.label), order_by, "n", order_param)
        params.update(order_param.values)
        order = f"{key} IS NULL, {key} {direction}, n.id {direction}"
    text = f"MATCH (n:{label}){_where(clauses)}\nRETURN properties(n) AS props\nORDER BY {order}"
    if offset:
        text += "\nSKIP $skip"
        params["skip"] = offset
    if limit is not None:
        text += "\nLIMIT $limit"
        params["limit"] = limit
    return text, params


def compile_count(flt: Filter) -> tuple[str, dict[str, Any]]:
    """Cypher and parameters returning ``count`` of the nodes matching ``flt``."""
    clauses, params = compile_where(flt)
    return f"MATCH (n:{_label(flt.label)}){_where(clauses)}\nRETURN count(n) AS count", params


def has_conditions(flt: Filter) -> bool:
    """Whether ``flt`` restricts anything beyond its label."""
    return bool(flt.ids is not None or flt.equals or flt.any_of or flt.ranges or flt.tags_all)


def _memory_filter(flt: Filter, what: str) -> None:
    if flt.label is not NodeLabel.MEMORY:
        raise InvalidInput(f"{what} runs over Memory nodes")


def compile_text_search(flt: Filter, query: str, k: int) -> tuple[str, dict[str, Any]]:
    """Full-text search with the filter applied to every hit before the top-``k`` cut."""
    _memory_filter(flt, "text search")
    clauses, params = compile_where(flt)
    text = (
        f"CALL db.index.fulltext.queryNodes('{FULLTEXT_INDEX}', $query) YIELD node AS n, score"
        f"{_where(['n:Memory', *clauses])}\n"
        "WITH n, score ORDER BY score DESC, n.id LIMIT $k\n"
        "RETURN properties(n) AS props, score"
    )
    return text, {**params, "query": query, "k": k}


def compile_vector_index_search(
    flt: Filter, vector: Sequence[float], fetch: int, k: int
) -> tuple[str, dict[str, Any]]:
    """``fetch`` nearest from the vector index, filtered, re-scored exactly, best ``k``."""
    _memory_filter(flt, "vector search")
    clauses, params = compile_where(flt)
    text = (
        f"CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $fetch, $vector) "
        f"YIELD node AS n{_where(clauses)}\n"
        "WITH n, vector.similarity.cosine(n.embedding, $vector) AS score\n"
        "ORDER BY score DESC, n.id\nLIMIT $k\n"
        f"RETURN properties(n) AS props, score, {COSINE_PROBE}"
    )
    return text, {**params, "fetch": fetch, "vector": list(vector), "k": k}


def compile_vector_exact_search(
    flt: Filter, vector: Sequence[float], k: int
) -> tuple[str, dict[str, Any]]:
    """Exact search over the memories matching ``flt`` (for selective filters)."""
    _memory_filter(flt, "vector search")
    clauses, params = compile_where(flt)
    text = (
        f"MATCH (n:Memory){_where(['n.embedding IS NOT NULL', *clauses])}\n"
        "WITH n, vector.similarity.cosine(n.embedding, $vector) AS score\n"
        "ORDER BY score DESC, n.id\nLIMIT $k\n"
        f"RETURN properties(n) AS props, score, {COSINE_PROBE}"
    )
    return text, {**params, "vector": list(vector), "k": k}


def _compile_vector_plan(flt: Filter) -> tuple[str, dict[str, Any]]:
    """How many memories match ``flt`` and how many there are (to choose a search plan)."""
    clauses, params = compile_where(flt)
    text = (
        f"RETURN COUNT {{ MATCH (n:Memory){_where(clauses)} }} AS matched,\n"
        "       COUNT { (:Memory) } AS total"
    )
    return text, params


@lru_cache(maxsize=1024)
def _composed_part(text: str, i: int) -> tuple[str, bool, bool]:
    """Part ``i`` of a composed statement: its text with parameters renamed ``$p<i>_<name>``,
    and whether it has a ``RETURN`` / a ``WITH`` outside literals and comments. Cached: the
    parts are the same few statements on every write, and scanning them is not free."""
    structure = strip_literals(text)
    pieces: list[str] = []
    last = 0
    for m in _PARAM_USE.finditer(structure):
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


LOCK_PROPERTY = "_graphmem_lock"
"""Set and removed in one statement: takes the node's write lock until the transaction
ends, so that a precondition read after it cannot be changed by another writer before the
write commits (Neo4j's documented way to avoid lost updates)."""


def compile_check(expects: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """The statement that locks the nodes of these preconditions (``Expect`` values) and
    returns, per existing node, ``label, id, props`` and ``sources``: ``{type, id}`` of each
    edge of the expected types into it. One ``UNION ALL`` branch per label; labels and
    types are allowlisted, ids are parameters."""
    by_label: dict[NodeLabel, dict[str, set[str]]] = defaultdict(dict)
    for ex in expects:
        types = by_label[ex.ref.label].setdefault(ex.ref.id, set())
        types.update(EdgeType(t).value for t in ex.incoming)
    branches: list[str] = []
    params: dict[str, Any] = {}
    for i, (label, ids) in enumerate(sorted(by_label.items(), key=lambda kv: kv[0].value)):
        lab = _label(label)
        params[f"ids{i}"] = sorted(ids)
        params[f"types{i}"] = sorted({t for ts in ids.values() for t in ts})
        branches.append(
            f"UNWIND $ids{i} AS id\n"
            f"MATCH (n:{lab} {{id: id}})\n"
            f"SET n.{LOCK_PROPERTY} = true\n"
            f"REMOVE n.{LOCK_PROPERTY}\n"
            f"RETURN '{lab}' AS label, n.id AS id, properties(n) AS props,\n"
            f"       [(s)-[r]->(n) WHERE type(r) IN $types{i} | {{type: type(r), id: s.id}}]"
            " AS sources"
        )
    return "\nUNION ALL\n".join(branches), params


GUARD_ERROR = "ArithmeticError"
"""The error code a failed guard raises (its ``1 / 0``)."""


def compile_guard(
    label: NodeLabel, rows: Sequence[Mapping[str, Any]]
) -> tuple[str, dict[str, Any]]:
    """A write part that locks the nodes of preconditions on ``label`` nodes and stops the
    whole statement (and so its transaction) when one does not hold, by evaluating
    ``1 / 0`` (Cypher has no assertion clause without APOC; the backend reads the resulting
    ArithmeticError as a Conflict and then names the failing precondition). Rows come from
    :func:`guard_rows`. The label is allowlisted; everything else is a parameter."""
    lab = _label(label)
    text = (
        "UNWIND $rows AS row\n"
        f"OPTIONAL MATCH (n:{lab} {{id: row.id}})\n"
        "FOREACH (x IN CASE WHEN n IS NULL THEN [] ELSE [n] END |\n"
        f"  SET x.{LOCK_PROPERTY} = true\n"
        f"  REMOVE x.{LOCK_PROPERTY})\n"
        "WITH row, n, CASE WHEN n IS NULL THEN []\n"
        "  ELSE [(s)-[r]->(n) WHERE type(r) IN row.types | s.id] END AS sources\n"
        "WHERE 1 / CASE WHEN (n IS NULL AND NOT row.exists)\n"
        "  OR (n IS NOT NULL AND row.exists\n"
        "      AND all(k IN keys(row.props) WHERE n[k] = row.props[k])\n"
        "      AND all(k IN row.nulls WHERE n[k] IS NULL)\n"
        "      AND (row.sources IS NULL OR (all(x IN sources WHERE x IN row.sources)\n"
        "                                   AND all(x IN row.sources WHERE x IN sources))))\n"
        "  THEN 1 ELSE 0 END = 1"
    )
    return text, {"rows": [dict(r) for r in rows]}


def guard_rows(expects: Sequence[Any]) -> dict[NodeLabel, list[dict[str, Any]]]:
    """The rows of :func:`compile_guard` per label for these ``Expect`` values."""
    out: dict[NodeLabel, list[dict[str, Any]]] = defaultdict(list)
    for ex in expects:
        props = {k: _check_value(k, _param_value(v)) for k, v in ex.props.items() if v is not None}
        out[ex.ref.label].append(
            {
                "id": ex.ref.id,
                "exists": bool(ex.exists),
                "props": props,
                "nulls": sorted(k for k, v in ex.props.items() if v is None),
                "types": sorted({EdgeType(t).value for t in ex.incoming}),
                "sources": None if ex.sources is None else sorted(ex.sources),
            }
        )
    return out


COSINE_PROBE = "vector.similarity.cosine([1.0, 0.0], [-1.0, 0.0]) AS probe"
"""Returned with every vector score: 0.0 when the server reports cosine as (1 + cos) / 2 (the
documented normalisation), -1.0 if it ever reports the plain cosine."""


def compile_recall_search(
    flt: Filter,
    *,
    lucene: str | None,
    text_k: int,
    vector: Sequence[float] | None,
    vector_fetch: int,
    vector_k: int,
) -> tuple[str, dict[str, Any]]:
    """Recall's two searches in one statement, a ``UNION ALL`` of two independent branches
    (one finding nothing does not empty the other), each with the filter applied before its
    cut: full-text (``channel = 'lexical'``, Lucene score, best ``text_k``) and vector
    (``channel = 'vector'``: the index's nearest ``vector_fetch``, filtered, re-scored
    exactly with ``vector.similarity.cosine`` so that an approximate or quantized index does
    not decide the order, best ``vector_k``; ``fetched`` = how many the index returned).
    Rows: ``channel, props, score, fetched, probe``."""
    _memory_filter(flt, "recall search")
    if lucene is None and vector is None:
        raise QueryFailed("internal error: a recall search needs text or a vector")
    clauses, params = compile_where(flt)
    branches: list[str] = []
    if lucene is not None:
        branches.append(
            f"CALL db.index.fulltext.queryNodes('{FULLTEXT_INDEX}', $query) YIELD node AS n, score"
            f"{_where(['n:Memory', *clauses])}\n"
            "WITH n, score ORDER BY score DESC, n.id LIMIT $text_k\n"
            "RETURN 'lexical' AS channel, properties(n) AS props, score, null AS fetched,\n"
            "       null AS probe"
        )
        params.update(query=lucene, text_k=text_k)
    if vector is not None:
        passing = " AND ".join(clauses) if clauses else "true"
        branches.append(
            f"CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $fetch, $vector) YIELD node\n"
            "WITH collect(node) AS near\n"
            f"WITH size(near) AS fetched, [n IN near WHERE {passing}] AS passed\n"
            # a row even when none passes: it says how many the index returned
            "UNWIND CASE WHEN size(passed) = 0 THEN [null] ELSE passed END AS n\n"
            "WITH n, fetched, CASE WHEN n IS NULL THEN null\n"
            "  ELSE vector.similarity.cosine(n.embedding, $vector) END AS score\n"
            "ORDER BY score DESC, n.id LIMIT $vector_k\n"
            "RETURN 'vector' AS channel, CASE WHEN n IS NULL THEN null ELSE properties(n) END\n"
            f"       AS props, score, fetched, {COSINE_PROBE}"
        )
        params.update(fetch=vector_fetch, vector=list(vector), vector_k=vector_k)
    return "\nUNION ALL\n".join(branches), params


def compile_neighbours(
    flt: Filter,
    seeds: Sequence[str],
    *,
    link_types: Sequence[EdgeType],
    tag_limit: int,
    entity_hub_limit: int = 0,
    entity_limit: int = 8,
) -> tuple[str, dict[str, Any]]:
    """Recall's graph expansion in one statement: per seed memory, the memories one
    ``link_types`` edge away (either direction) and at most ``tag_limit`` memories sharing a
    tag with it (the LIMIT is inside the per-seed subquery, so a Tag hub holding thousands of
    memories costs ``tag_limit`` rows, not thousands), and at most ``entity_limit``
    memories sharing with it an entity mentioned by 2..``entity_hub_limit`` memories (each
    credited to its rarest shared entity; 0 turns this off), all passing ``flt``. Returns
    rows ``seed, linked ([{type, props}]), tagged ([props]), entities ([{entity, props}])``.
    """
    _memory_filter(flt, "recall expansion")
    clauses, params = compile_where(flt)
    types = sorted({EdgeType(t).value for t in link_types})
    # every node the subqueries reach is label-checked with labels(), not with a label
    # predicate: the planner then cannot start from an index seek over every memory that
    # passes the filter and join (a plan it picks for a Tag hub, or for a relationship type
    # no edge has yet); it walks from the seed and, where there is one, stops at the limit
    is_memory = "'Memory' IN labels(n)"
    link_where = _where([is_memory, "type(r) IN $types", *clauses]).replace("\n", "\n    ")
    tag_where = _where([is_memory, "n <> s", *clauses]).replace("\n", "\n    ")
    entity_where = _where(
        [
            "'Entity' IN labels(e)",
            "e.mention_count > 1",
            "e.mention_count <= $entity_hub_limit",
            is_memory,
            "n <> s",
            *clauses,
        ]
    ).replace("\n", "\n    ")
    text = (
        "UNWIND $seeds AS seed\n"
        "MATCH (s:Memory {id: seed})\n"
        "RETURN seed,\n"
        "  COLLECT {\n"
        f"    MATCH (s)-[r:NEXT|DERIVED_FROM]-(n){link_where}\n"
        "    RETURN {type: type(r), props: properties(n)}\n"
        "  } AS linked,\n"
        "  COLLECT {\n"
        f"    MATCH (s)-[:TAGGED]->()<-[:TAGGED]-(n){tag_where}\n"
        "    WITH DISTINCT n LIMIT $tag_limit\n"
        "    RETURN properties(n)\n"
        "  } AS tagged,\n"
        "  COLLECT {\n"
        f"    MATCH (s)-[:MENTIONS]->(e)<-[:MENTIONS]-(n){entity_where}\n"
        "    WITH n, e ORDER BY e.mention_count, e.id\n"
        "    WITH n, head(collect(e)) AS e\n"
        "    ORDER BY e.mention_count, n.id LIMIT $entity_limit\n"
        "    RETURN {entity: e.name, props: properties(n)}\n"
        "  } AS entities"
    )
    return text, {
        **params,
        "seeds": list(seeds),
        "types": types,
        "tag_limit": tag_limit,
        "entity_hub_limit": entity_hub_limit,
        "entity_limit": entity_limit if entity_hub_limit > 1 else 0,
    }


def lucene_query(text: str) -> str | None:
    """A Lucene query for free text: its word tokens, lowercased, each quoted, OR-ed;
    stop words dropped unless nothing else is left (as the embedded backend does). Quoting
    with every quote and backslash escaped means no user text is read as Lucene syntax.
    None when the text has no word at all."""
    terms = query_terms(text)
    if not terms:
        return None
    return " OR ".join('"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in terms)


# ---------------------------------------------------------------------------------------
# values


_PLAIN = frozenset({str, float, int, bool, type(None)})


def _from_db(value: Any) -> Any:
    """A value read from Neo4j as graphmem stores it (temporal values -> aware UTC)."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, list):
        # a stored list is homogeneous: an embedding is hundreds of floats, none to convert
        if value and type(value[0]) in _PLAIN:
            return value
        return [_from_db(v) for v in value]
    to_native = getattr(value, "to_native", None)
    if to_native is not None and type(value).__module__.startswith("neo4j"):
        native = to_native()
        if isinstance(native, datetime) and native.tzinfo is not None:
            return native.astimezone(UTC)
        return native
    return value


def _props_from_db(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _from_db(v) for k, v in props.items()}


def _check_value(key: str, value: Any) -> Any:
    """Refuse values Neo4j cannot store (integers beyond 64 bits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidInput(f"property {key!r} is outside the 64-bit integer range")
    elif isinstance(value, list):
        for v in value:
            _check_value(key, v)
    return value


def _node_from_db(label: str, props: Mapping[str, Any]) -> GraphNode:
    model = node_model(label)
    try:
        return model.from_props(_props_from_db(props))
    except (InvalidInput, ValueError) as e:
        raise BackendError(f"stored {label} node {props.get('id')!r} is not valid: {e}") from e


class _Hubs:
    """The Agent, Tag and Run nodes a batch points to (created once per batch)."""

    def __init__(self) -> None:
        self.agents: dict[str, None] = {}
        self.tags: dict[str, None] = {}
        self.runs: dict[str, dict[str, Any]] = {}

    def params(self, agent_defaults: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "agent_defaults": dict(agent_defaults),
            "agents": list(self.agents),
            "tags": list(self.tags),
            "runs": list(self.runs.values()),
        }

    def __bool__(self) -> bool:
        return bool(self.agents or self.tags or self.runs)


def _structural_row(label: NodeLabel, props: Mapping[str, Any], hubs: _Hubs) -> dict[str, Any]:
    """The structural targets of a node as upsert row keys (see :data:`STRUCTURAL_SHAPES`):
    ``agent`` (Agent id), ``run`` (Run id or None), ``tags``; the targets join ``hubs``."""
    shapes = STRUCTURAL_SHAPES.get(label, frozenset())
    row: dict[str, Any] = {}
    if any(tl is NodeLabel.TAG for _t, tl in shapes):
        row["tags"] = []
    if any(tl is NodeLabel.RUN for _t, tl in shapes):
        row["run"] = None
    for etype, tlabel, tid, defaults in structural_targets(label, props):
        if (etype, tlabel) not in shapes:
            raise QueryFailed(
                f"internal error: the Neo4j upsert of {label.value} does not maintain "
                f"{etype.value} -> {tlabel.value} (cypher/nodes is out of date)"
            )
        if tlabel is NodeLabel.AGENT:
            row["agent"] = tid
            hubs.agents[tid] = None
        elif tlabel is NodeLabel.RUN:
            row["run"] = tid
            if tid not in hubs.runs:
                run = Run(id=tid, **defaults).to_props()
                hubs.runs[tid] = run
                hubs.agents[str(run["agent_id"])] = None
        else:
            row["tags"].append(tid)
            hubs.tags[tid] = None
    return row


def _implied(label: NodeLabel, props: Mapping[str, Any]) -> set[tuple[EdgeType, NodeRef]]:
    return {
        (etype, NodeRef(tlabel, tid))
        for etype, tlabel, tid, _defaults in structural_targets(label, props)
    }


def _chunks(rows: Sequence[T], size: int) -> Iterator[Sequence[T]]:
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


def _vector_rows(vectors: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
    rows = []
    for ident, vec in vectors.items():
        values = [float(x) for x in vec]
        if not values or not all(math.isfinite(x) for x in values):
            raise InvalidInput(f"embedding of {ident!r} must be a non-empty finite vector")
        rows.append({"id": str(ident), "embedding": values})
    return rows


_HUB_LABELS = frozenset({NodeLabel.AGENT, NodeLabel.TAG, NodeLabel.RUN})


def _create_variant(text: str, label: NodeLabel) -> str:
    """An upsert file's statement with its node MERGE made a CREATE."""
    new, n = re.subn(
        rf"^MERGE (\(\w+:{_label(label)} \{{id: row\.id\}}\))$",
        r"CREATE \1",
        text,
        count=1,
        flags=re.MULTILINE,
    )
    if n != 1:
        raise QueryFailed(f"internal error: no node MERGE in the {label.value} upsert")
    return new


class _GuardFailed(GraphMemError):
    """A write's guard part stopped it (see :func:`compile_guard`)."""


def _cosine(score: Any, probe: Any) -> float:
    """The cosine behind a Neo4j vector score (see :data:`COSINE_PROBE`)."""
    s = float(score)
    return 2.0 * s - 1.0 if abs(float(probe)) < 0.5 else s


_BACKEND_OPTIONS = (
    "auth",
    "database",
    "cypher_dir",
    "batch_rows",
    "exact_search_max",
    "index_timeout_s",
    "connect_timeout_s",
    "retry_s",
    "vector_overfetch",
    "touch_flush_s",
    "touch_flush_rows",
    "driver",
)


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", version)[:3]
    return tuple(int(p) for p in parts)


# ---------------------------------------------------------------------------------------
# the backend


DRIVER_OPTIONS = frozenset(
    {
        "connection_timeout",
        "connection_acquisition_timeout",
        "max_connection_lifetime",
        "max_connection_pool_size",
        "max_transaction_retry_time",
        "keep_alive",
        "liveness_check_timeout",
        "encrypted",
        "trust",
        "trusted_certificates",
        "ssl_context",
        "client_certificate",
        "user_agent",
        "resolver",
        "fetch_size",
        "telemetry_disabled",
        "notifications_min_severity",
        "notifications_disabled_categories",
        "notifications_disabled_classifications",
        "warn_notification_severity",
        "initial_retry_delay",
        "retry_delay_multiplier",
        "retry_delay_jitter_factor",
    }
)
"""Options of ``neo4j.GraphDatabase.driver`` a backend passes on; any other keyword is a
misspelling and raises InvalidInput when the backend is made."""


class Neo4jBackend:
    """GraphBackend over a Neo4j 5.18+ server. See the module docstring.

    ``url``: ``neo4j://``, ``neo4j+s://``, ``neo4j+ssc://``, ``bolt://``, ``bolt+s://`` or
    ``bolt+ssc://`` (user and password may be given in the URL). ``auth``: ``(user,
    password)`` or any ``neo4j`` auth object. ``database``: the database name (server
    default when None). ``cypher_dir``: where the query files are (default: the packaged
    ``cypher/``). ``batch_rows``: rows per statement (a write of N nodes is
    ceil(N / batch_rows) statements). ``exact_search_max``: filtered vector searches matching
    at most this many memories are exact (no index). ``connect_timeout_s``: how long to wait
    for a connection; ``retry_s``: how long the driver retries a transaction that failed on a
    transient error or a lost connection (an unreachable server fails after about
    ``connect_timeout_s``, never after minutes). ``vector_overfetch``: recall reads this many
    times k from the vector index and re-scores them exactly. ``touch_flush_s`` /
    ``touch_flush_rows``: recall's access records (``touch``) are kept in this process and
    written with the next write, at ``close()``, or once they are this old / this many
    (``touch_flush_s=0``: written at once). ``driver``: an already made driver (the backend
    will not close it). Other keywords must be ``neo4j`` driver options
    (:data:`DRIVER_OPTIONS`).
    """

    name = "neo4j"
    capabilities: frozenset[str] = frozenset({"vectors"})
    """``vectors``: a write may set embeddings of existing memories alone."""

    def __init__(
        self,
        url: str = "neo4j://localhost:7687",
        *,
        auth: Any = None,
        database: str | None = None,
        cypher_dir: str | Path | None = None,
        batch_rows: int = 5000,
        exact_search_max: int = 5000,
        index_timeout_s: int = 300,
        connect_timeout_s: float = 3.0,
        retry_s: float = 5.0,
        vector_overfetch: int = 10,
        touch_flush_s: float = 5.0,
        touch_flush_rows: int = 1000,
        driver: Any = None,
        **driver_options: Any,
    ) -> None:
        unknown = sorted(set(driver_options) - DRIVER_OPTIONS)
        if unknown:
            import difflib

            known = sorted(DRIVER_OPTIONS | set(_BACKEND_OPTIONS))
            hints = [
                f"{u!r} (did you mean {m[0]!r}?)"
                if (m := difflib.get_close_matches(u, known, 1))
                else repr(u)
                for u in unknown
            ]
            raise InvalidInput(
                f"unknown Neo4j backend option {', '.join(hints)}; backend options: "
                f"{', '.join(_BACKEND_OPTIONS)}; driver options: "
                f"{', '.join(sorted(DRIVER_OPTIONS))}"
            )
        try:
            parts = urlsplit(url)
            port = parts.port
        except (ValueError, AttributeError) as e:
            raise InvalidInput(f"malformed Neo4j URL: {e}") from e
        if parts.scheme not in SCHEMES:
            raise InvalidInput(
                f"not a Neo4j URL: {url!r} (schemes: {', '.join(s + '://' for s in SCHEMES)})"
            )
        if not parts.hostname:
            raise InvalidInput(f"no host in Neo4j URL {parts.scheme}://...")
        if parts.username is not None and auth is None:
            auth = (unquote(parts.username), unquote(parts.password or ""))
        host = parts.hostname + (f":{port}" if port else "")
        self._url = urlunsplit((parts.scheme, host, parts.path, parts.query, ""))
        self._auth = auth
        self._user = auth[0] if isinstance(auth, tuple) and auth else None
        self._database = database or None
        self._cypher_dir = Path(cypher_dir) if cypher_dir is not None else CYPHER_DIR
        numbers = {
            "batch_rows": batch_rows,
            "exact_search_max": exact_search_max,
            "index_timeout_s": index_timeout_s,
            "connect_timeout_s": connect_timeout_s,
            "retry_s": retry_s,
            "vector_overfetch": vector_overfetch,
            "touch_flush_s": touch_flush_s,
            "touch_flush_rows": touch_flush_rows,
        }
        for key, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InvalidInput(f"{key} must be a non-negative number, got {value!r}")
        if batch_rows < 1 or index_timeout_s < 1 or connect_timeout_s <= 0 or vector_overfetch < 1:
            raise InvalidInput(
                "batch_rows, index_timeout_s, connect_timeout_s and "
                "vector_overfetch must be positive"
            )
        self._batch_rows = int(batch_rows)
        self._exact_search_max = int(exact_search_max)
        self._index_timeout_s = int(index_timeout_s)
        self._vector_overfetch = int(vector_overfetch)
        self._touch_flush_s = float(touch_flush_s)
        self._touch_flush_rows = int(touch_flush_rows)
        self._driver_options = {
            "connection_timeout": float(connect_timeout_s),
            "max_transaction_retry_time": float(retry_s),
            # the statements are fixed and linted; the server's notes about them (e.g. a
            # relationship type no edge has yet) would be logged as a warning per call
            "notifications_min_severity": "OFF",
            **driver_options,
        }
        self._driver: Any = driver
        self._owns_driver = driver is None
        self._queries: dict[str, CypherQuery] | None = None
        self._lock = threading.RLock()
        self._schema_ready = False
        self._dim: int | None = None
        self._server_version: str | None = None
        self._closed = False
        # deferred touches: memory id -> [accesses, latest access time]
        self._touches: dict[str, list[Any]] = {}
        self._touches_since: float | None = None
        self._touch_lock = threading.Lock()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **options: Any) -> Neo4jBackend:
        """A backend configured from ``NEO4J_URI``, ``NEO4J_USER`` (or ``NEO4J_USERNAME``),
        ``NEO4J_PASSWORD`` and ``NEO4J_DATABASE`` (read now, when asked; never at import)."""
        import os

        env = os.environ if env is None else env
        uri = env.get("NEO4J_URI")
        if not uri:
            raise ConfigError("NEO4J_URI is not set")
        user = env.get("NEO4J_USER") or env.get("NEO4J_USERNAME")
        auth = (user, env.get("NEO4J_PASSWORD", "")) if user else None
        options.setdefault("auth", auth)
        options.setdefault("database", env.get("NEO4J_DATABASE") or None)
        return cls(uri, **options)

    # -- plumbing --------------------------------------------------------------------

    @property
    def location(self) -> str:
        """The server URL (without credentials) and database."""
        return self._url + (f" database={self._database}" if self._database else "")

    @property
    def database(self) -> str | None:
        return self._database

    def queries(self) -> dict[str, CypherQuery]:
        """The loaded query files (loaded and checked on first call)."""
        if self._queries is None:
            self._queries = load_queries(QUERY_NAMES, self._cypher_dir)
        return self._queries

    def _q(self, name: str) -> CypherQuery:
        return self.queries()[name]

    def _bind(self, name: str, **params: Any) -> tuple[str, dict[str, Any]]:
        """Text and parameters of a query file; the parameters must be exactly the declared
        ones (a mismatch is a bug in this module, caught here rather than by the server)."""
        q = self._q(name)
        if set(params) != set(q.params):
            raise QueryFailed(
                f"internal error: {name} takes {list(q.params)}, got {sorted(params)}"
            )
        return q.text, params

    def _get_driver(self) -> Any:
        with self._lock:
            if self._closed:
                raise BackendUnavailable(f"the Neo4j backend for {self.location} is closed")
            if self._driver is None:
                import neo4j

                try:
                    self._driver = neo4j.GraphDatabase.driver(
                        self._url, auth=self._auth, **self._driver_options
                    )
                except (ValueError, TypeError, neo4j.exceptions.ConfigurationError) as e:
                    raise ConfigError(f"invalid Neo4j driver settings for {self._url}: {e}") from e
                log.info("neo4j driver created for %s", self.location)
            return self._driver

    @contextmanager
    def _translated(self, what: str) -> Iterator[None]:
        """Translate driver errors into graphmem errors (messages carry no memory content)."""
        from neo4j import exceptions as nx

        try:
            yield
        except GraphMemError:
            raise
        except nx.AuthError as e:
            raise BackendUnavailable(
                f"Neo4j at {self._url} rejected the credentials"
                f"{f' of user {self._user!r}' if self._user else ''} ({what}): "
                f"{_msg(e)}. Pass auth=(user, password) or set NEO4J_USER/NEO4J_PASSWORD."
            ) from e
        except nx.ConstraintError as e:
            raise Conflict(f"{what}: constraint violated: {_msg(e)}") from e
        except nx.CypherTypeError as e:
            raise InvalidInput(f"{what}: a value has a type Neo4j cannot use: {_msg(e)}") from e
        except nx.CypherSyntaxError as e:
            raise QueryFailed(f"{what}: Cypher rejected by the server: {_msg(e)}") from e
        except nx.ClientError as e:
            if "EntityNotFound" in str(getattr(e, "code", "")):
                # a node this write checked was deleted by another writer meanwhile
                raise Conflict(f"{what}: a node changed concurrently: {_msg(e)}") from e
            if "AuthenticationRateLimit" in str(getattr(e, "code", "")):
                # the user is locked for a while (dbms.security.auth_lock_time) after
                # repeated wrong passwords: even the right one is refused until then
                raise BackendUnavailable(
                    f"Neo4j at {self._url} refuses user {self._user!r} for now ({what}): "
                    f"{_msg(e)} Retry after the lock time (a few seconds by default)."
                ) from e
            raise QueryFailed(f"{what}: the server refused the query: {_msg(e)}") from e
        except (nx.ServiceUnavailable, nx.SessionExpired) as e:
            raise BackendUnavailable(f"cannot reach Neo4j at {self._url} ({what}): {e}") from e
        except nx.DatabaseUnavailable as e:
            raise BackendUnavailable(f"database unavailable at {self._url} ({what}): {e}") from e
        except nx.TransientError as e:
            raise QueryFailed(f"{what}: transient server error after retries: {_msg(e)}") from e
        except nx.Neo4jError as e:
            raise QueryFailed(f"{what}: {_msg(e)}") from e
        except nx.ConfigurationError as e:
            raise ConfigError(f"{what}: {e}") from e
        except nx.DriverError as e:
            if type(e).__name__ == "ConnectionPoolError" or isinstance(
                e, getattr(nx, "ConnectionPoolError", ())
            ):
                raise BackendUnavailable(f"cannot reach Neo4j at {self._url} ({what}): {e}") from e
            raise BackendError(f"{what}: Neo4j driver error: {e}") from e

    def _session(self, write: bool) -> Any:
        import neo4j

        drv = self._get_driver()
        return drv.session(
            database=self._database,
            default_access_mode=neo4j.WRITE_ACCESS if write else neo4j.READ_ACCESS,
            bookmark_manager=drv.execute_query_bookmark_manager,
        )

    def _read(self, what: str, work: Callable[[Any], T]) -> T:
        with self._translated(what), self._session(write=False) as session:
            return session.execute_read(work)  # type: ignore[no-any-return]

    def _write(self, what: str, work: Callable[[Any], T]) -> T:
        with self._translated(what), self._session(write=True) as session:
            return session.execute_write(work)  # type: ignore[no-any-return]

    @staticmethod
    def _run(tx: Any, name: str, text: str, params: Mapping[str, Any]) -> Any:
        """Send one statement; its first line names it (``// graphmem: <name>``) so that a
        server's query log and the test suite's recording driver show what sent it."""
        return tx.run(f"// graphmem: {name}\n{text}", dict(params))

    def _run_file(self, tx: Any, name: str, **params: Any) -> Any:
        return self._run(tx, name, *self._bind(name, **params))

    def _execute(self, what: str, name: str, text: str, params: dict[str, Any]) -> None:
        """Run one write statement in its own transaction (schema commands need that)."""
        self._write(what, lambda tx: self._run(tx, name, text, params).consume())

    def _run_all(self, tx: Any, name: str, **params: Any) -> list[Any]:
        return list(self._run_file(tx, name, **params))

    def connect(self) -> None:
        """Create the driver and check that the server answers (and the credentials work).
        One attempt, bounded by ``connect_timeout_s``: no transaction retries."""
        with self._translated("connect"):
            self._get_driver().verify_connectivity()

    def health(self) -> dict[str, Any]:
        """``{"ok": True, "server": ..., "version": ..., "edition": ..., "database": ...,
        "latency_ms": ...}`` when the server answers, else ``{"ok": False, "error": ...}``.
        Never raises for an unreachable server."""
        started = time.perf_counter()
        try:
            self.connect()
            rows = self._read("health", lambda tx: self._run_all(tx, Q_COMPONENTS))
        except GraphMemError as e:
            return {"ok": False, "url": self._url, "error": str(e)}
        row = rows[0] if rows else None
        return {
            "ok": True,
            "url": self._url,
            "database": self._database,
            "server": row["name"] if row else None,
            "version": row["version"] if row else None,
            "edition": row["edition"] if row else None,
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        }

    # -- schema ----------------------------------------------------------------------

    def ensure_schema(self, *, embedding_dim: int | None = None) -> None:
        """Create the constraints and indexes that are missing (``IF NOT EXISTS``; cheap
        once done) and wait until they are online. ``embedding_dim`` creates the vector
        index with that dimension the first time; a different one later is a
        DimensionMismatch."""
        if embedding_dim is not None and (
            isinstance(embedding_dim, bool)
            or not isinstance(embedding_dim, int)
            or embedding_dim <= 0
        ):
            raise InvalidInput("embedding_dim must be a positive integer")
        self._ready()
        if embedding_dim is not None:
            self._ensure_dim(embedding_dim)

    def _ready(self) -> None:
        """On first use: reach the server (one bounded attempt, so that an unreachable URL
        fails in seconds), check its version and create missing schema objects."""
        if self._schema_ready:
            return
        with self._lock:
            if self._schema_ready:
                return
            self.queries()
            self.connect()
            components = self._read("version check", lambda tx: self._run_all(tx, Q_COMPONENTS))
            version = components[0]["version"] if components else "unknown"
            self._server_version = version
            if _version_tuple(version) < MIN_SERVER_VERSION:
                raise BackendUnavailable(
                    f"Neo4j {version} at {self._url} is too old: graphmem needs 5.18 or later"
                )
            existing = self._schema_names()
            missing = [q for q in SCHEMA_QUERIES if q.split("/", 1)[1] not in existing]
            for name in missing:
                self._execute(f"create {name}", name, *self._bind(name))
            if missing:
                log.info("created %d schema objects; waiting for indexes", len(missing))
                self._await_indexes()
            self._schema_ready = True

    def _schema_names(self) -> set[str]:
        def work(tx: Any) -> tuple[list[Any], list[Any]]:
            return (self._run_all(tx, Q_SHOW_INDEXES), self._run_all(tx, Q_SHOW_CONSTRAINTS))

        indexes, constraints = self._read("show schema", work)
        self._dim = None
        for row in indexes:
            if row["name"] == VECTOR_INDEX:
                config = (row["options"] or {}).get("indexConfig") or {}
                dim = config.get("vector.dimensions")
                self._dim = int(dim) if dim is not None else None
        return {row["name"] for row in indexes} | {row["name"] for row in constraints}

    def _await_indexes(self) -> None:
        self._execute(
            "await indexes",
            Q_AWAIT_INDEXES,
            *self._bind(Q_AWAIT_INDEXES, timeout=self._index_timeout_s),
        )

    def vector_index_query(self) -> str:
        """The query file that creates the vector index on this server: without quantization
        where the server has the option (5.23+), so that the index's neighbours are the true
        ones (recall re-scores exactly in any case)."""
        version = _version_tuple(self._server_version or "0")
        return VECTOR_INDEX_EXACT_QUERY if version >= (5, 23) else VECTOR_INDEX_QUERY

    def _ensure_dim(self, dim: int) -> None:
        if self._dim == dim:
            return
        with self._lock:
            if self._dim is None:
                self._schema_names()  # another process may have created the index
            if self._dim is None:
                name = self.vector_index_query()
                self._execute("create vector index", name, *self._bind(name, dimensions=dim))
                self._await_indexes()
                self._schema_names()
                log.info("vector index %s created with %d dimensions", VECTOR_INDEX, dim)
            if self._dim != dim:
                raise DimensionMismatch(
                    f"embedding has {dim} dimensions; this store uses {self._dim}"
                )

    # -- writes ----------------------------------------------------------------------

    def _node_parts(
        self, nodes: Sequence[GraphNode], create: frozenset[NodeRef] = frozenset()
    ) -> list[WritePart]:
        """The upsert parts that write ``nodes``: the hubs they point to (once), then one
        part per label and chunk of ``batch_rows`` rows. Nodes in ``create`` must be new:
        their part CREATEs instead of MERGEs, so that the id's uniqueness constraint stops
        a concurrent writer of the same id (a Conflict) instead of letting one overwrite
        the other."""
        latest: dict[NodeRef, GraphNode] = {}
        for node in nodes:
            if not isinstance(node, GraphNode):
                raise InvalidInput(f"upsert takes graph nodes, got {type(node).__name__}")
            latest[node.ref] = node  # the last of duplicate ids wins
        by_label: dict[NodeLabel, list[dict[str, Any]]] = defaultdict(list)
        hubs = _Hubs()
        for node in latest.values():
            props = {k: _check_value(k, v) for k, v in node.to_props().items()}
            row: dict[str, Any] = {"id": node.id, "props": props}
            row.update(_structural_row(node.label, props, hubs))
            by_label[node.label].append(row)
        for ref in latest:  # written explicitly, with their own properties
            if ref.label is NodeLabel.AGENT:
                hubs.agents.pop(ref.id, None)
            elif ref.label is NodeLabel.TAG:
                hubs.tags.pop(ref.id, None)
            elif ref.label is NodeLabel.RUN:
                hubs.runs.pop(ref.id, None)
        parts: list[WritePart] = []
        if hubs:
            agent_defaults = {k: v for k, v in Agent(id="default").to_props().items() if k != "id"}
            parts.append(WritePart(Q_HUBS, *self._bind(Q_HUBS, **hubs.params(agent_defaults))))
        for label in _UPSERT_ORDER:
            name = UPSERT_QUERIES[label]
            rows = by_label.get(label, [])
            new = [r for r in rows if NodeRef(label, r["id"]) in create]
            old = [r for r in rows if NodeRef(label, r["id"]) not in create]
            for chunk in _chunks(new, self._batch_rows):
                text, params = self._bind(name, rows=list(chunk))
                parts.append(
                    WritePart(
                        f"{name} (create)", _create_variant(text, label), params, rows=len(chunk)
                    )
                )
            for chunk in _chunks(old, self._batch_rows):
                parts.append(WritePart(name, *self._bind(name, rows=list(chunk)), rows=len(chunk)))
        return parts

    def _edge_parts(self, edges: Sequence[Edge]) -> list[WritePart]:
        """The upsert parts that write (non-structural) ``edges``, endpoints matched by id."""
        groups: dict[tuple[EdgeType, NodeLabel, NodeLabel], dict[Any, tuple[Edge, Any]]] = (
            defaultdict(dict)
        )
        for e in edges:
            key = (e.type, e.src.label, e.dst.label)
            if key not in EDGE_UPSERT_QUERIES:
                if (e.src.label, e.type) in STRUCTURAL:
                    raise InvalidInput(
                        f"{e.src.label.value} {e.type.value} edges are written by the node upserts"
                    )
                raise InvalidInput(
                    f"no {e.type.value} edge from {e.src.label.value} to {e.dst.label.value}"
                )
            props = {k: _check_value(k, v) for k, v in e.props.items()}
            groups[key][e.key] = (e, {"src": e.src.id, "dst": e.dst.id, "props": props})
        parts: list[WritePart] = []
        for key, name in EDGE_UPSERT_QUERIES.items():
            for chunk in _chunks(list(groups.get(key, {}).values()), self._batch_rows):
                parts.append(
                    WritePart(
                        name,
                        *self._bind(name, rows=[row for _e, row in chunk]),
                        rows=len(chunk),
                        edges=tuple(e for e, _row in chunk),
                    )
                )
        return parts

    def _pack(self, parts: Sequence[WritePart]) -> list[WriteStatement]:
        """Parts packed into statements of at most ``batch_rows`` rows (a part is never
        split here; the planners chunk them), each composed into one round trip."""
        groups: list[list[WritePart]] = []
        rows = 0
        for part in parts:
            if not groups or (rows + part.rows > self._batch_rows and groups[-1]):
                groups.append([])
                rows = 0
            groups[-1].append(part)
            rows += part.rows
        return [
            WriteStatement(
                tuple(g),
                *compose(
                    [(p.text, p.params) for p in g],
                    counted=[i for i, p in enumerate(g) if p.edges],
                ),
            )
            for g in groups
        ]

    def plan_writes(
        self, nodes: Sequence[GraphNode] = (), edges: Sequence[Edge] = ()
    ) -> list[WriteStatement]:
        """The statements an upsert of ``nodes`` and ``edges`` sends, in order (no server
        needed; public so that tests and curious users can see exactly what is sent)."""
        plain = [e for e in edges if (e.src.label, e.type) not in STRUCTURAL]
        return self._pack([*self._node_parts(nodes), *self._edge_parts(plain)])

    def write(self, batch: WriteBatch) -> None:
        """Apply a :class:`~graphmem.backends.base.WriteBatch` in one managed write
        transaction: lock and check its preconditions (Conflict, nothing written, when one
        fails), upsert nodes and edges, then delete. A write of N nodes without
        preconditions or deletes is ceil(N / batch_rows) statements."""
        self._apply(batch)

    def upsert(self, nodes: Sequence[GraphNode] = (), edges: Sequence[Edge] = ()) -> None:
        """Write nodes (maintaining structural edges) and edges in one transaction."""
        self._apply(WriteBatch(nodes=nodes, edges=edges))

    def delete(self, nodes: Sequence[NodeRef] = (), edges: Sequence[Edge] = ()) -> int:
        """Delete nodes with all their relationships, and the listed edges."""
        refs = [NodeRef(NodeLabel(_label(r[0])), r[1]) for r in nodes]
        return self._apply(WriteBatch(delete_nodes=refs, delete_edges=edges))

    def _apply(self, batch: WriteBatch) -> int:
        """Apply a batch; returns how many nodes it deleted."""
        if not isinstance(batch, WriteBatch):
            raise InvalidInput(f"write takes a WriteBatch, got {type(batch).__name__}")
        nodes = list(batch.nodes)
        edges = list(batch.edges)
        for e in (*edges, *batch.delete_edges):
            if not isinstance(e, Edge):
                raise InvalidInput(f"write takes Edge values, got {type(e).__name__}")
        for ex in batch.expect:
            if not isinstance(ex, Expect):
                raise InvalidInput(f"preconditions are Expect values, got {type(ex).__name__}")
        doomed = list(
            dict.fromkeys(NodeRef(NodeLabel(_label(r[0])), r[1]) for r in batch.delete_nodes)
        )
        if {n.ref for n in nodes if isinstance(n, GraphNode)} & set(doomed):
            raise InvalidInput("one write cannot both upsert and delete the same node")
        vectors = _vector_rows(getattr(batch, "vectors", None) or {})
        if not batch and not batch.expect and not vectors:
            return 0
        # structural edges are accepted when the source node implies them (as an import or a
        # migration passes them) and then need no write of their own; others are refused
        structural = [e for e in edges if (e.src.label, e.type) in STRUCTURAL]
        plain = [e for e in edges if (e.src.label, e.type) not in STRUCTURAL]
        gone = set(doomed)
        for e in plain:
            for end in (e.src, e.dst):
                if end in gone:
                    raise InvalidInput(f"edge {e.type.value} refers to missing node {end.key}")
        # "must not exist" on a node this write creates: a CREATE, checked by the id's
        # uniqueness constraint (hub labels, MERGEd by other writes too, use the guard)
        upserted = {n.ref for n in nodes if isinstance(n, GraphNode)}
        create = frozenset(
            ex.ref
            for ex in batch.expect
            if not ex.exists and ex.ref in upserted and ex.ref.label not in _HUB_LABELS
        )
        guarded = [ex for ex in batch.expect if ex.exists or ex.ref not in create]
        parts = [*self._node_parts(nodes, create), *self._edge_parts(plain)]
        # only an import or a migration passes structural edges: check those against the
        # nodes (an ordinary write does not pay for it)
        implied_here = {n.ref: _implied(n.label, n.to_props()) for n in nodes} if structural else {}
        dims = {
            len(n.embedding) for n in nodes if isinstance(n, Memory | OrgFact) and n.embedding
        } | {len(r["embedding"]) for r in vectors}
        if len(dims) > 1:
            raise DimensionMismatch(f"embeddings of different dimensions in one batch: {dims}")
        self._ready()
        if dims:
            self._ensure_dim(dims.pop())
        stored_sources = {e.src for e in structural if e.src not in implied_here}
        touches = self._take_touches()
        if touches:
            # before the node upserts: a node written back by the caller carries the counts
            # it read (touches included) and must not be counted twice
            parts.insert(
                0, WritePart(Q_TOUCH, *self._bind(Q_TOUCH, rows=touches), rows=len(touches))
            )
        for chunk in _chunks(vectors, self._batch_rows):
            parts.append(
                WritePart(Q_VECTORS, *self._bind(Q_VECTORS, rows=list(chunk)), rows=len(chunk))
            )
        # preconditions first, in the same statement: a failing one stops the transaction
        guards = [
            WritePart(f"guard {label.value}", *compile_guard(label, rows), rows=len(rows))
            for label, rows in sorted(guard_rows(guarded).items(), key=lambda kv: kv[0].value)
        ]
        statements = self._pack([*guards, *parts])
        written = {n.ref for n in nodes}

        def work(tx: Any) -> int:
            from neo4j.exceptions import ClientError

            if structural:
                implied = dict(implied_here)
                for ref, (_eid, props) in self._lookup(tx, stored_sources, with_props=True).items():
                    implied[ref] = _implied(ref.label, _props_from_db(props or {}))
                for e in structural:
                    if (e.type, e.dst) not in implied.get(e.src, set()):
                        raise InvalidInput(
                            f"{e.type.value} edges follow the node's fields (agent_id, run_id, "
                            f"tags); {e.src.key} does not imply one to {e.dst.key}"
                        )
            for st in statements:
                try:
                    record = self._run(tx, st.name, st.text, st.params).single()
                except ClientError as e:
                    if guards and (
                        GUARD_ERROR in str(getattr(e, "code", "")) or "/ by zero" in str(e)
                    ):
                        raise _GuardFailed(str(e)) from e
                    raise
                for i, part in enumerate(st.parts):
                    if part.edges and int(record[f"c{i}"]) < part.rows:
                        self._missing_end(tx, part.edges, written)
            if doomed or batch.delete_edges:
                return self._delete_in(tx, doomed, batch.delete_edges)
            return 0

        try:
            deleted = self._write("write", work)
        except _GuardFailed:
            self._restore_touches(touches)
            # name the precondition that failed (a read of the locked state; writes nothing)
            self._write("check", lambda tx: self._check(tx, batch.expect))
            raise Conflict("precondition failed: the nodes it names changed concurrently") from None
        except BaseException:
            self._restore_touches(touches)
            raise
        log.debug(
            "write: %d nodes, %d edges, %d deletes, %d preconditions in %d statements",
            len(nodes),
            len(edges),
            len(doomed) + len(batch.delete_edges),
            len(batch.expect),
            len(statements),
        )
        return deleted

    def _check(self, tx: Any, expects: Sequence[Expect]) -> None:
        """Lock the nodes the preconditions name, then check them (same transaction)."""
        text, params = compile_check(expects)
        found: dict[NodeRef, tuple[dict[str, Any], list[Any]]] = {}
        for rec in self._run(tx, "check", text, params):
            ref = NodeRef(NodeLabel(rec["label"]), rec["id"])
            found[ref] = (_props_from_db(rec["props"]), list(rec["sources"]))
        for ex in expects:
            hit = found.get(ex.ref)
            props, sources = hit if hit is not None else (None, [])
            types = {EdgeType(t).value for t in ex.incoming}
            ids = [s["id"] for s in sources if s["type"] in types]
            why = expect_failure(ex, props, ids)
            if why is not None:
                raise Conflict(f"precondition failed: {why}")

    def _missing_end(self, tx: Any, edges: Sequence[Edge], written: set[NodeRef]) -> None:
        """Raise InvalidInput naming an endpoint of ``edges`` that does not exist."""
        ends = [end for e in edges for end in (e.src, e.dst) if end not in written]
        found = self._lookup(tx, ends)
        for e in edges:
            for end in (e.src, e.dst):
                if end not in found and end not in written:
                    raise InvalidInput(f"edge {e.type.value} refers to missing node {end.key}")
        raise QueryFailed("an edge upsert wrote fewer edges than it was sent")

    def _delete_in(self, tx: Any, refs: Sequence[NodeRef], edges: Sequence[Edge]) -> int:
        found = self._lookup(tx, [*refs, *(x for e in edges for x in (e.src, e.dst))])
        rows = [
            {"src": found[e.src][0], "dst": found[e.dst][0], "type": e.type.value}
            for e in {e.key: e for e in edges}.values()
            if e.src in found and e.dst in found
        ]
        for chunk in _chunks(rows, self._batch_rows):
            self._run_file(tx, Q_DELETE_EDGES, rows=list(chunk)).consume()
        node_eids = [found[r][0] for r in refs if r in found]
        deleted = 0
        for eid_chunk in _chunks(node_eids, self._batch_rows):
            deleted += int(
                self._run_file(tx, Q_DELETE_NODES, eids=list(eid_chunk)).single()["deleted"]
            )
        return deleted

    def _lookup(
        self, tx: Any, refs: Iterable[NodeRef], *, with_props: bool = False
    ) -> dict[NodeRef, tuple[str, dict[str, Any] | None]]:
        """Element ids (and properties) of the existing nodes among ``refs``."""
        by_label: dict[NodeLabel, list[str]] = defaultdict(list)
        for ref in dict.fromkeys(refs):
            by_label[ref.label].append(ref.id)
        found: dict[NodeRef, tuple[str, dict[str, Any] | None]] = {}
        for label, ids in by_label.items():
            for chunk in _chunks(ids, self._batch_rows):
                for rec in self._run_file(
                    tx, GET_QUERIES[label], ids=list(chunk), with_props=with_props
                ):
                    found[NodeRef(label, rec["id"])] = (rec["eid"], rec["props"])
        return found

    # -- deferred access records -------------------------------------------------------

    def touch(self, ids: Sequence[str], at: datetime) -> None:
        """Record an access of these memories: access_count += 1, last_accessed = at.

        Kept in this process (reads through this backend see them at once) and written with
        the next write transaction, by :meth:`flush`, at :meth:`close`, or when
        ``touch_flush_rows`` are pending or the oldest is ``touch_flush_s`` old; so recall
        adds no write transaction of its own to the read path."""
        if not ids:
            return
        if not isinstance(at, datetime) or at.tzinfo is None or at.utcoffset() is None:
            raise InvalidInput("touch time must be a timezone-aware datetime")
        at = at.astimezone(UTC)
        now = time.monotonic()
        with self._touch_lock:
            for ident in dict.fromkeys(ids):
                entry = self._touches.get(ident)
                if entry is None:
                    self._touches[ident] = [1, at]
                else:
                    entry[0] += 1
                    entry[1] = at
            if self._touches_since is None:
                self._touches_since = now
            due = (
                len(self._touches) >= self._touch_flush_rows
                or now - self._touches_since >= self._touch_flush_s
            )
        if due:
            self.flush()

    def missing_vectors(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` memories (id, content) that have no embedding yet (one indexed
        read of ``limit`` rows; the background vectorizer's queue)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInput("limit must be a non-negative int")
        if limit == 0:
            return []
        self._ready()
        rows = self._read(
            "missing vectors", lambda tx: self._run_all(tx, Q_MISSING_VECTORS, limit=limit)
        )
        return [(str(r["id"]), str(r["content"])) for r in rows]

    def pending_touches(self) -> int:
        """How many memories have access records not yet written to the server."""
        return len(self._touches)

    def flush(self) -> None:
        """Write the deferred access records now (one write transaction)."""
        rows = self._take_touches()
        if not rows:
            return
        try:
            self._ready()
            self._write(
                "touch",
                lambda tx: [
                    self._run_file(tx, Q_TOUCH, rows=list(chunk)).consume()
                    for chunk in _chunks(rows, self._batch_rows)
                ],
            )
        except BaseException:
            self._restore_touches(rows)
            raise

    def _take_touches(self) -> list[dict[str, Any]]:
        with self._touch_lock:
            taken, self._touches, self._touches_since = self._touches, {}, None
        return [{"id": i, "count": c, "at": at} for i, (c, at) in taken.items()]

    def _restore_touches(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Put back access records whose write failed (newer ones keep their time)."""
        if not rows:
            return
        with self._touch_lock:
            for row in rows:
                entry = self._touches.get(row["id"])
                if entry is None:
                    self._touches[row["id"]] = [row["count"], row["at"]]
                else:
                    entry[0] += row["count"]
            if self._touches_since is None:
                self._touches_since = time.monotonic()

    def _node(self, label: str, props: Mapping[str, Any]) -> GraphNode:
        """A node read from the server, with this process's pending access records."""
        node = _node_from_db(label, props)
        if self._touches and isinstance(node, Memory):
            entry = self._touches.get(node.id)
            if entry is not None:
                node = node.model_copy(
                    update={
                        "access_count": node.access_count + entry[0],
                        "last_accessed": entry[1],
                    }
                )
        return node

    def _memory(self, props: Mapping[str, Any]) -> Memory:
        node = self._node(NodeLabel.MEMORY.value, props)
        assert isinstance(node, Memory)
        return node

    # -- reads -----------------------------------------------------------------------

    def get(self, label: NodeLabel, ids: Sequence[str]) -> list[GraphNode]:
        """The nodes with these ids that exist, in the order of ``ids``."""
        lab = NodeLabel(_label(label))
        if not ids:
            return []
        self._ready()
        found = self._read(
            "get", lambda tx: self._lookup(tx, [NodeRef(lab, i) for i in ids], with_props=True)
        )
        out = []
        for ident in ids:
            hit = found.get(NodeRef(lab, ident))
            if hit is not None and hit[1] is not None:
                out.append(self._node(lab.value, hit[1]))
        return out

    def match(
        self,
        flt: Filter,
        *,
        limit: int | None = None,
        offset: int = 0,
        order_by: str = "id",
        descending: bool = False,
    ) -> list[GraphNode]:
        """Nodes of ``flt.label`` matching the filter, ordered and paged."""
        text, params = compile_match(
            flt, limit=limit, offset=offset, order_by=order_by, descending=descending
        )
        self._ready()
        rows = self._read("match", lambda tx: list(self._run(tx, "match", text, params)))
        return [self._node(flt.label.value, r["props"]) for r in rows]

    def count(self, flt: Filter) -> int:
        """How many nodes match the filter."""
        text, params = compile_count(flt)
        self._ready()
        return int(
            self._read("count", lambda tx: self._run(tx, "count", text, params).single()["count"])
        )

    def search_text(self, query: TextQuery) -> list[Hit]:
        """Full-text search over Memory content (Lucene score), filter before the top-k."""
        _memory_filter(query.filter, "text search")
        lucene = lucene_query(query.text)
        if lucene is None:
            return []
        if has_conditions(query.filter):
            text, params = compile_text_search(query.filter, lucene, query.k)
            name = "search/text (filtered)"
        else:
            text, params = self._bind(Q_SEARCH_TEXT, query=lucene, k=query.k)
            name = Q_SEARCH_TEXT
        self._ready()
        rows = self._read("text search", lambda tx: list(self._run(tx, name, text, params)))
        return [Hit(node=self._memory(r["props"]), score=float(r["score"])) for r in rows]

    def _query_vector(self, query: VectorQuery) -> list[float] | None:
        """The query vector as sent, or None when nothing was ever embedded (no index)."""
        _memory_filter(query.filter, "vector search")
        self._ready()
        if self._dim is None:
            self._schema_names()
        if self._dim is None:
            return None
        if len(query.vector) != self._dim:
            raise DimensionMismatch(
                f"query vector has {len(query.vector)} dimensions; this store uses {self._dim}"
            )
        q = np.asarray(query.vector, dtype=np.float32)
        if not np.isfinite(q).all() or float(np.linalg.norm(q)) == 0.0:
            raise InvalidInput("query vector must be finite and not all zeros")
        return [float(x) for x in query.vector]

    def search_vector(self, query: VectorQuery) -> list[Hit]:
        """Cosine nearest neighbours (score = cosine), filter applied before the top-k cut:
        a selective filter is searched exactly; otherwise the vector index is over-fetched
        (``vector_overfetch`` x k), re-scored exactly on the server, and widened until k
        memories pass the filter. The server computes every score; none is recomputed here."""
        flt = query.filter
        vector = self._query_vector(query)
        if vector is None:
            return []  # nothing was ever embedded
        k = query.k
        fetch0 = max(k * self._vector_overfetch, 100)

        def work(tx: Any) -> list[Any]:
            if not has_conditions(flt):
                return list(self._run_file(tx, Q_SEARCH_VECTOR, fetch=fetch0, k=k, vector=vector))
            text, params = _compile_vector_plan(flt)
            plan = self._run(tx, "vector plan", text, params).single()
            matched, total = int(plan["matched"]), int(plan["total"])
            if matched == 0:
                return []
            if matched <= max(self._exact_search_max, k):
                text, params = compile_vector_exact_search(flt, vector, k)
                return list(self._run(tx, "vector exact", text, params))
            fetch = min(total, max(fetch0, math.ceil(2 * k * total / matched)))
            while True:
                text, params = compile_vector_index_search(flt, vector, fetch, k)
                rows = list(self._run(tx, "vector index", text, params))
                if len(rows) >= k or fetch >= total:
                    return rows
                if fetch * 4 > max(total // 2, self._exact_search_max):
                    # widening further costs about as much as an exact scan: do that
                    text, params = compile_vector_exact_search(flt, vector, k)
                    return list(self._run(tx, "vector exact", text, params))
                fetch = min(total, fetch * 4)

        rows = self._read("vector search", work)
        return [
            Hit(node=self._memory(r["props"]), score=_cosine(r["score"], r["probe"])) for r in rows
        ]

    def search_both(
        self, text: TextQuery | None, vector: VectorQuery | None
    ) -> tuple[list[Hit], list[Hit]]:
        """Recall's lexical and vector searches in one round trip (one statement, a
        ``UNION ALL`` of both, each filtered before its cut). Same results as
        :meth:`search_text` and :meth:`search_vector`; when a selective filter leaves fewer
        than k of the over-fetched vector neighbours, the vector search is redone by
        :meth:`search_vector` (one more round trip)."""
        if text is not None and vector is not None and text.filter != vector.filter:
            return self.search_text(text), self.search_vector(vector)
        if text is None and vector is None:
            return [], []
        flt = text.filter if text is not None else vector.filter  # type: ignore[union-attr]
        _memory_filter(flt, "recall search")
        lucene = lucene_query(text.text) if text is not None else None
        qvec = self._query_vector(vector) if vector is not None else None
        if lucene is None and qvec is None:
            return [], []
        self._ready()
        vector_k = vector.k if vector is not None else 0
        fetch = max(vector_k * self._vector_overfetch, 100)
        stmt = compile_recall_search(
            flt,
            lucene=lucene,
            text_k=text.k if text is not None else 0,
            vector=qvec,
            vector_fetch=fetch,
            vector_k=vector_k,
        )
        rows = self._read("recall search", lambda tx: list(self._run(tx, "recall search", *stmt)))
        lexical = [
            Hit(node=self._memory(r["props"]), score=float(r["score"]))
            for r in rows
            if r["channel"] == "lexical"
        ]
        near = [
            Hit(node=self._memory(r["props"]), score=_cosine(r["score"], r["probe"]))
            for r in rows
            if r["channel"] == "vector" and r["props"] is not None
        ]
        if vector is not None and qvec is not None and len(near) < vector.k and has_conditions(flt):
            fetched = max((int(r["fetched"]) for r in rows if r["channel"] == "vector"), default=0)
            if fetched >= fetch:  # the filter passed too few of all the index returned
                near = self.search_vector(vector)
        return lexical, near

    def neighbours(
        self,
        seeds: Sequence[str],
        flt: Filter,
        *,
        link_types: Sequence[EdgeType] = (EdgeType.NEXT, EdgeType.DERIVED_FROM),
        tag_limit: int = 8,
        entity_hub_limit: int = 0,
        entity_limit: int = 8,
    ) -> list[tuple[str, str, Memory]]:
        """Recall's graph expansion in one round trip: ``(seed id, via, memory)`` for every
        memory one ``link_types`` edge from a seed (via = the edge type) and up to
        ``tag_limit`` per seed sharing a tag with it (via = ``"tag"``) and, with
        ``entity_hub_limit`` > 1, up to ``entity_limit`` per seed sharing an entity mentioned
        by at most that many memories (via = ``"entity:<name>"``, each memory once, for
        the best seed), all matching ``flt``, in seed order."""
        if tag_limit < 0 or entity_hub_limit < 0 or entity_limit < 0:
            raise InvalidInput("tag_limit, entity_hub_limit and entity_limit must be >= 0")
        if not seeds:
            return []
        text, params = compile_neighbours(
            flt,
            seeds,
            link_types=link_types,
            tag_limit=tag_limit,
            entity_hub_limit=entity_hub_limit,
            entity_limit=entity_limit,
        )
        self._ready()
        rows = self._read(
            "recall expansion", lambda tx: list(self._run(tx, "recall expansion", text, params))
        )
        rank = {s: i for i, s in enumerate(seeds)}
        out: list[tuple[str, str, Memory]] = []
        credited: set[Any] = set(seeds)
        for r in sorted(rows, key=lambda r: rank.get(r["seed"], len(rank))):
            linked = sorted(r["linked"], key=lambda x: (x["type"], str(x["props"].get("id"))))
            out.extend((r["seed"], x["type"], self._memory(x["props"])) for x in linked)
            tagged = sorted(r["tagged"], key=lambda p: str(p.get("id")))
            out.extend((r["seed"], "tag", self._memory(p)) for p in tagged)
            for x in r["entities"]:
                ident = x["props"].get("id")
                if ident not in credited:  # best seed first: a memory is credited once
                    credited.add(ident)
                    out.append((r["seed"], f"entity:{x['entity']}", self._memory(x["props"])))
        return out

    def expand(
        self,
        seeds: Sequence[NodeRef],
        edge_types: Sequence[EdgeType],
        *,
        direction: Direction = "both",
        depth: int = 1,
        limit: int = 1000,
    ) -> Subgraph:
        """Nodes within ``depth`` hops of the seeds over ``edge_types`` (breadth first, at
        most ``limit`` nodes, seeds included) and the traversed edges between them."""
        if depth < 0 or limit < 1:
            raise InvalidInput("depth must be >= 0 and limit >= 1")
        if direction not in ("out", "in", "both"):
            raise InvalidInput("direction must be 'out', 'in' or 'both'")
        try:
            types = sorted({EdgeType(t).value for t in edge_types})
        except ValueError as e:
            raise InvalidInput(f"unknown edge type in {list(edge_types)!r}") from e
        seed_refs = [NodeRef(NodeLabel(_label(s[0])), s[1]) for s in seeds]
        if not seed_refs:
            return Subgraph()
        self._ready()

        def work(tx: Any) -> tuple[list[tuple[str, dict[str, Any]]], list[Edge]]:
            found = self._lookup(tx, seed_refs, with_props=True)
            ref_of: dict[str, NodeRef] = {}
            seen: dict[str, tuple[str, dict[str, Any]]] = {}
            for ref in dict.fromkeys(seed_refs):
                if ref in found:
                    eid, props = found[ref]
                    ref_of[eid] = ref
                    seen[eid] = (ref.label.value, props or {})
            frontier = list(seen)
            edges: dict[tuple[str, str, str], Edge] = {}
            for _ in range(depth):
                if not frontier or not types:
                    break
                text, params = self._bind(
                    Q_EXPAND,
                    eids=frontier,
                    types=types,
                    direction=direction,
                    labels=_ALL_LABELS,
                )
                rank = {eid: i for i, eid in enumerate(frontier)}
                records = sorted(
                    self._run(tx, Q_EXPAND, text, params),
                    key=lambda r: (
                        rank[r["from_eid"]],
                        r["type"],
                        r["other_label"],
                        str(r["other_props"].get("id")),
                    ),
                )
                nxt = []
                for r in records:
                    other = r["other_eid"]
                    if other not in ref_of:
                        ref_of[other] = NodeRef(NodeLabel(r["other_label"]), r["other_props"]["id"])
                    here, there = ref_of[r["from_eid"]], ref_of[other]
                    src, dst = (here, there) if r["outgoing"] else (there, here)
                    edge = Edge(
                        type=EdgeType(r["type"]),
                        src=src,
                        dst=dst,
                        props=_props_from_db(r["props"]),
                    )
                    edges[edge.key] = edge
                    if other not in seen and len(seen) < limit:
                        seen[other] = (r["other_label"], r["other_props"])
                        nxt.append(other)
                frontier = nxt
            kept = {ref_of[eid] for eid in seen}
            return (
                list(seen.values()),
                [e for e in edges.values() if e.src in kept and e.dst in kept],
            )

        node_rows, edge_list = self._read("expand", work)
        return Subgraph(
            nodes=tuple(self._node(label, props) for label, props in node_rows),
            edges=tuple(edge_list),
        )

    def scan(self, *, batch_size: int = 1000) -> Iterator[tuple[list[GraphNode], list[Edge]]]:
        """Every node, then every edge, in batches (streamed from the server)."""
        if batch_size < 1:
            raise InvalidInput("batch_size must be >= 1")
        self._ready()
        with self._translated("scan"), self._session(write=False) as session:
            text, params = self._bind(Q_SCAN_NODES, labels=_ALL_LABELS)
            result = self._run(session, Q_SCAN_NODES, text, params)
            while batch := result.fetch(batch_size):
                yield [self._node(r["label"], r["props"]) for r in batch], []
            text, params = self._bind(Q_SCAN_EDGES, types=_ALL_TYPES, labels=_ALL_LABELS)
            result = self._run(session, Q_SCAN_EDGES, text, params)
            while batch := result.fetch(batch_size):
                yield (
                    [],
                    [
                        Edge(
                            type=EdgeType(r["type"]),
                            src=NodeRef(NodeLabel(r["src_label"]), r["src"]),
                            dst=NodeRef(NodeLabel(r["dst_label"]), r["dst"]),
                            props=_props_from_db(r["props"]),
                        )
                        for r in batch
                        if r["src_label"] and r["dst_label"] and r["src"] and r["dst"]
                    ],
                )

    def stats(self) -> BackendStats:
        """Node counts per label and edge counts per type (non-zero ones), the location and
        the vector dimension."""
        self._ready()
        row = self._read("stats", lambda tx: self._run_file(tx, Q_STATS).single())
        if self._dim is None:
            self._schema_names()
        return BackendStats(
            backend=self.name,
            nodes={k: int(v) for k, v in row["nodes"].items() if v},
            edges={k: int(v) for k, v in row["edges"].items() if v},
            location=self.location,
            file_bytes=None,
            embedding_dim=self._dim,
        )

    def clear(self, *, batch: int = 10_000) -> int:
        """Delete every graphmem node and relationship in the database (other labels are left
        alone), in transactions of ``batch`` nodes; returns how many nodes were deleted. For
        benchmarks and throwaway stores: there is no undo."""
        if batch < 1:
            raise InvalidInput("batch must be >= 1")
        text, params = self._bind(Q_CLEAR, labels=_ALL_LABELS, batch=batch)
        total = 0
        while True:
            deleted = int(
                self._write("clear", lambda tx: self._run(tx, Q_CLEAR, text, params).single()[0])
            )
            total += deleted
            if deleted == 0:
                log.info("cleared %d nodes from %s", total, self.location)
                return total

    def close(self) -> None:
        """Write the deferred access records, then close the driver this backend created
        (idempotent)."""
        with self._lock:
            if self._closed:
                return
        if self._touches:
            try:
                self.flush()
            except GraphMemError as e:  # closing must not raise over a lost connection
                log.warning(
                    "%d access records not written at close: %s",
                    len(self._touches),
                    type(e).__name__,
                )
        with self._lock:
            if self._closed:
                return
            self._closed = True
            drv, self._driver = self._driver, None
        if drv is not None and self._owns_driver:
            try:
                drv.close()
            except Exception as e:  # closing must not raise over a lost connection
                log.warning("error while closing the Neo4j driver: %s", type(e).__name__)

    def __enter__(self) -> Neo4jBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Neo4jBackend({self.location!r})"


def _msg(e: Any) -> str:
    text = str(getattr(e, "message", None) or e)
    return text if len(text) <= 300 else text[:297] + "..."
