"""Neo4j backend: the GraphBackend protocol over the official ``neo4j`` driver (sync API).

Every Cypher statement lives in a ``.cypher`` file under ``cypher/`` (one statement per file,
parameters only, a comment and ``:param`` lines on top so the file runs as it is in Neo4j
Browser); the files are loaded once, on first use, and checked (declared ``:param`` names
must equal the ``$parameters`` the statement uses). The only Cypher built in Python is the
compiled :class:`~graphmem.models.Filter` (``compile_match`` and friends below): its text is
made of allowlisted labels, model field names and ``$parameters`` — user values (including
metadata keys, read with ``n[$key]``) only ever travel as parameters.

Writes are ``UNWIND``-batched and one :meth:`Neo4jBackend.upsert` call is one managed write
transaction (retried by the driver on transient errors). Reads use managed read transactions
routed to readers, with the driver's bookmark manager for read-your-writes in a cluster.
Driver errors are translated into :mod:`graphmem.errors` at this boundary.

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

from graphmem.backends.base import STRUCTURAL, Direction, structural_targets
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
    node_model,
)

__all__ = [
    "CYPHER_DIR",
    "QUERY_NAMES",
    "SCHEMES",
    "CypherQuery",
    "Neo4jBackend",
    "compile_count",
    "compile_match",
    "compile_text_search",
    "compile_vector_exact_search",
    "compile_vector_index_search",
    "compile_where",
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
}
STRUCTURAL_SHAPES: dict[NodeLabel, frozenset[tuple[EdgeType, NodeLabel]]] = {
    NodeLabel.MEMORY: frozenset({
        (EdgeType.AUTHORED_BY, NodeLabel.AGENT),
        (EdgeType.IN_RUN, NodeLabel.RUN),
        (EdgeType.TAGGED, NodeLabel.TAG),
    }),
    NodeLabel.RUN: frozenset({(EdgeType.RUN_BY, NodeLabel.AGENT)}),
    NodeLabel.ORG_FACT: frozenset({
        (EdgeType.AUTHORED_BY, NodeLabel.AGENT),
        (EdgeType.TAGGED, NodeLabel.TAG),
    }),
    NodeLabel.LOG_ENTRY: frozenset({(EdgeType.IN_RUN, NodeLabel.RUN)}),
}
"""The structural edges each node upsert file maintains (row keys: ``agent`` for an Agent
target, ``run`` for a Run target, ``tags`` for Tag targets). Must describe exactly what
:func:`graphmem.backends.base.structural_targets` yields (a unit test checks)."""

EDGE_UPSERT_QUERIES: dict[EdgeType, str] = {
    EdgeType.SUPERSEDES: "edges/supersedes_upsert",
    EdgeType.DERIVED_FROM: "edges/derived_from_upsert",
    EdgeType.NEXT: "edges/next_upsert",
    EdgeType.RECORDS: "edges/records_upsert",
    EdgeType.REFERENCES: "edges/references_upsert",
    EdgeType.CHILD_OF: "edges/child_of_upsert",
}
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
            f"{name}: :param lines declare {sorted(examples)} but the statement uses "
            f"{sorted(used)}"
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
    if offset < 0 or (limit is not None and limit < 0):
        raise InvalidInput("limit and offset must not be negative")
    label = _label(flt.label)
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
        "RETURN properties(n) AS props, score\nORDER BY score DESC, props.id\nLIMIT $k"
    )
    return text, {**params, "query": query, "k": k}


def compile_vector_index_search(
    flt: Filter, vector: Sequence[float], fetch: int, k: int
) -> tuple[str, dict[str, Any]]:
    """Approximate search: ``fetch`` nearest from the vector index, filtered, best ``k``."""
    _memory_filter(flt, "vector search")
    clauses, params = compile_where(flt)
    text = (
        f"CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $fetch, $vector) "
        f"YIELD node AS n, score{_where(clauses)}\n"
        "RETURN properties(n) AS props, score\nORDER BY score DESC, props.id\nLIMIT $k"
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
        "RETURN properties(n) AS props, score"
    )
    return text, {**params, "vector": list(vector), "k": k}


def _compile_vector_plan(flt: Filter) -> tuple[str, dict[str, Any]]:
    """How many memories match ``flt`` and how many there are (to choose a search plan)."""
    clauses, params = compile_where(flt)
    text = (
        f"MATCH (n:Memory){_where(clauses)}\nWITH count(n) AS matched\n"
        "CALL { MATCH (m:Memory) RETURN count(m) AS total }\nRETURN matched, total"
    )
    return text, params


_STOPWORDS: frozenset[str] | None = None
_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_TERMS = 64


def lucene_query(text: str) -> str | None:
    """A Lucene query for free text: its word tokens, lowercased, each quoted, OR-ed;
    stop words dropped unless nothing else is left (as the embedded backend does). Quoting
    with every quote and backslash escaped means no user text is read as Lucene syntax.
    None when the text has no word at all."""
    global _STOPWORDS
    if _STOPWORDS is None:
        from graphmem.backends.networkx import _STOPWORDS as words  # one list for both

        _STOPWORDS = words
    tokens = list(dict.fromkeys(t.lower() for t in _TOKEN_RE.findall(text)))
    terms = [t for t in tokens if t not in _STOPWORDS] or tokens
    if not terms:
        return None
    return " OR ".join(
        '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in terms[:MAX_QUERY_TERMS]
    )


# ---------------------------------------------------------------------------------------
# values


def _from_db(value: Any) -> Any:
    """A value read from Neo4j as graphmem stores it (temporal values -> aware UTC)."""
    if isinstance(value, list):
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


def _structural_row(
    label: NodeLabel,
    props: Mapping[str, Any],
    run_cache: dict[tuple[str, tuple[tuple[str, Any], ...]], dict[str, Any]],
) -> dict[str, Any]:
    """The structural targets of a node as upsert row keys (see :data:`STRUCTURAL_SHAPES`):
    ``agent`` (Agent id), ``run`` (properties of the Run to create when missing), ``tags``."""
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
        elif tlabel is NodeLabel.RUN:
            key = (tid, tuple(sorted(defaults.items())))
            if key not in run_cache:
                run_cache[key] = Run(id=tid, **defaults).to_props()
            row["run"] = run_cache[key]
        else:
            row["tags"].append(tid)
    return row


def _implied(label: NodeLabel, props: Mapping[str, Any]) -> set[tuple[EdgeType, NodeRef]]:
    return {
        (etype, NodeRef(tlabel, tid))
        for etype, tlabel, tid, _defaults in structural_targets(label, props)
    }


def _memory_from_db(props: Mapping[str, Any]) -> Memory:
    node = _node_from_db(NodeLabel.MEMORY.value, props)
    assert isinstance(node, Memory)
    return node


def _chunks(rows: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", version)[:3]
    return tuple(int(p) for p in parts)


# ---------------------------------------------------------------------------------------
# the backend


class Neo4jBackend:
    """GraphBackend over a Neo4j 5.18+ server. See the module docstring.

    ``url``: ``neo4j://``, ``neo4j+s://``, ``neo4j+ssc://``, ``bolt://``, ``bolt+s://`` or
    ``bolt+ssc://`` (user and password may be given in the URL). ``auth``: ``(user,
    password)`` or any ``neo4j`` auth object. ``database``: the database name (server
    default when None). ``cypher_dir``: where the query files are (default: the packaged
    ``cypher/``). ``batch_rows``: rows per ``UNWIND`` statement. ``exact_search_max``:
    filtered vector searches matching at most this many memories are exact (no index).
    Other keyword options go to ``neo4j.GraphDatabase.driver``.
    """

    name = "neo4j"

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
        **driver_options: Any,
    ) -> None:
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
        if batch_rows < 1 or exact_search_max < 0 or index_timeout_s < 1:
            raise InvalidInput("batch_rows, exact_search_max and index_timeout_s must be positive")
        self._batch_rows = batch_rows
        self._exact_search_max = exact_search_max
        self._index_timeout_s = index_timeout_s
        self._driver_options = driver_options
        self._driver: Any = None
        self._queries: dict[str, CypherQuery] | None = None
        self._lock = threading.RLock()
        self._schema_ready = False
        self._dim: int | None = None
        self._server_version: str | None = None
        self._closed = False

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
            raise QueryFailed(f"{what}: the server refused the query: {_msg(e)}") from e
        except (nx.ServiceUnavailable, nx.SessionExpired, nx.ConnectionPoolError) as e:
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

    def _execute(self, what: str, text: str, params: dict[str, Any]) -> None:
        """Run one write statement in its own transaction (schema commands need that)."""
        self._write(what, lambda tx: tx.run(text, params).consume())

    def _run_all(self, tx: Any, name: str, **params: Any) -> list[Any]:
        text, params = self._bind(name, **params)
        return list(tx.run(text, params))

    def connect(self) -> None:
        """Create the driver and check that the server answers (and the credentials work)."""
        with self._translated("connect"):
            self._get_driver().verify_connectivity()

    def health(self) -> dict[str, Any]:
        """``{"ok": True, "server": ..., "version": ..., "edition": ..., "database": ...,
        "latency_ms": ...}`` when the server answers, else ``{"ok": False, "error": ...}``.
        Never raises for an unreachable server."""
        started = time.perf_counter()
        try:
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
            isinstance(embedding_dim, bool) or not isinstance(embedding_dim, int)
            or embedding_dim <= 0
        ):
            raise InvalidInput("embedding_dim must be a positive integer")
        self._ready()
        if embedding_dim is not None:
            self._ensure_dim(embedding_dim)

    def _ready(self) -> None:
        """On first use: check the server version and create missing schema objects."""
        if self._schema_ready:
            return
        with self._lock:
            if self._schema_ready:
                return
            self.queries()
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
                self._execute(f"create {name}", *self._bind(name))
            if missing:
                log.info("created %d schema objects; waiting for indexes", len(missing))
                self._await_indexes()
            self._schema_ready = True

    def _schema_names(self) -> set[str]:
        indexes = self._read("show indexes", lambda tx: self._run_all(tx, Q_SHOW_INDEXES))
        constraints = self._read(
            "show constraints", lambda tx: self._run_all(tx, Q_SHOW_CONSTRAINTS)
        )
        self._dim = None
        for row in indexes:
            if row["name"] == VECTOR_INDEX:
                config = (row["options"] or {}).get("indexConfig") or {}
                dim = config.get("vector.dimensions")
                self._dim = int(dim) if dim is not None else None
        return {row["name"] for row in indexes} | {row["name"] for row in constraints}

    def _await_indexes(self) -> None:
        self._execute(
            "await indexes", *self._bind(Q_AWAIT_INDEXES, timeout=self._index_timeout_s)
        )

    def _ensure_dim(self, dim: int) -> None:
        if self._dim == dim:
            return
        with self._lock:
            if self._dim is None:
                self._schema_names()  # another process may have created the index
            if self._dim is None:
                self._execute(
                    "create vector index", *self._bind(VECTOR_INDEX_QUERY, dimensions=dim)
                )
                self._await_indexes()
                self._schema_names()
                log.info("vector index %s created with %d dimensions", VECTOR_INDEX, dim)
            if self._dim != dim:
                raise DimensionMismatch(
                    f"embedding has {dim} dimensions; this store uses {self._dim}"
                )

    # -- writes ----------------------------------------------------------------------

    def plan_node_writes(self, nodes: Sequence[GraphNode]) -> list[tuple[str, dict[str, Any]]]:
        """The (query file, parameters) statements that write ``nodes`` (no server needed;
        public so that tests and curious users can see exactly what is sent)."""
        by_label: dict[NodeLabel, dict[str, dict[str, Any]]] = defaultdict(dict)
        run_defaults: dict[tuple[str, tuple[tuple[str, Any], ...]], dict[str, Any]] = {}
        for node in nodes:
            if not isinstance(node, GraphNode):
                raise InvalidInput(f"upsert takes graph nodes, got {type(node).__name__}")
            props = {k: _check_value(k, v) for k, v in node.to_props().items()}
            row: dict[str, Any] = {"id": node.id, "props": props}
            row.update(_structural_row(node.label, props, run_defaults))
            by_label[node.label][node.id] = row  # the last of duplicate ids wins
        agent_defaults = {k: v for k, v in Agent(id="default").to_props().items() if k != "id"}
        plan: list[tuple[str, dict[str, Any]]] = []
        for label in _UPSERT_ORDER:
            rows = list(by_label.get(label, {}).values())
            name = UPSERT_QUERIES[label]
            for chunk in _chunks(rows, self._batch_rows):
                params: dict[str, Any] = {"rows": list(chunk)}
                if "agent_defaults" in self._q(name).params:
                    params["agent_defaults"] = agent_defaults
                plan.append(self._bind(name, **params))
        return plan

    def plan_edge_writes(
        self, edges: Sequence[Edge], eids: Mapping[NodeRef, str]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Statements that write ``edges`` whose endpoints have the given element ids."""
        by_type: dict[EdgeType, dict[tuple[str, str, str], dict[str, Any]]] = defaultdict(dict)
        for e in edges:
            if (e.src.label, e.type) in STRUCTURAL or e.type not in EDGE_UPSERT_QUERIES:
                raise InvalidInput(
                    f"{e.src.label.value} {e.type.value} edges are written by the node upserts"
                )
            props = {k: _check_value(k, v) for k, v in e.props.items()}
            by_type[e.type][e.key] = {"src": eids[e.src], "dst": eids[e.dst], "props": props}
        plan = []
        for etype in EDGE_UPSERT_QUERIES:
            rows = list(by_type.get(etype, {}).values())
            for chunk in _chunks(rows, self._batch_rows):
                plan.append(self._bind(EDGE_UPSERT_QUERIES[etype], rows=list(chunk)))
        return plan

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
                text, params = self._bind(
                    GET_QUERIES[label], ids=list(chunk), with_props=with_props
                )
                for rec in tx.run(text, params):
                    found[NodeRef(label, rec["id"])] = (rec["eid"], rec["props"])
        return found

    def upsert(self, nodes: Sequence[GraphNode] = (), edges: Sequence[Edge] = ()) -> None:
        """Write nodes (maintaining structural edges) and edges in one transaction."""
        for e in edges:
            if not isinstance(e, Edge):
                raise InvalidInput(f"upsert takes Edge values, got {type(e).__name__}")
        if not nodes and not edges:
            return
        edges = list(edges)
        node_plan = self.plan_node_writes(nodes)
        # structural edges are accepted when the source node implies them (as an import or a
        # migration passes them) and then need no write of their own; others are refused
        structural = [e for e in edges if (e.src.label, e.type) in STRUCTURAL]
        edges = [e for e in edges if (e.src.label, e.type) not in STRUCTURAL]
        implied_here = {n.ref: _implied(n.label, n.to_props()) for n in nodes}
        dims = {
            len(n.embedding) for n in nodes if isinstance(n, Memory | OrgFact) and n.embedding
        }
        if len(dims) > 1:
            raise DimensionMismatch(f"embeddings of different dimensions in one batch: {dims}")
        self._ready()
        if dims:
            self._ensure_dim(dims.pop())
        endpoints = {ref for e in edges for ref in (e.src, e.dst)}
        stored_sources = {e.src for e in structural if e.src not in implied_here}

        def work(tx: Any) -> None:
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
            for text, params in node_plan:
                tx.run(text, params).consume()
            if edges:
                found = self._lookup(tx, endpoints)
                for e in edges:
                    for end in (e.src, e.dst):
                        if end not in found:
                            raise InvalidInput(
                                f"edge {e.type.value} refers to missing node {end.key}"
                            )
                eids = {ref: eid for ref, (eid, _props) in found.items()}
                for text, params in self.plan_edge_writes(edges, eids):
                    tx.run(text, params).consume()

        self._write("upsert", work)
        log.debug("upsert: %d nodes, %d edges", len(nodes), len(edges))

    def delete(self, nodes: Sequence[NodeRef] = (), edges: Sequence[Edge] = ()) -> int:
        """Delete nodes with all their relationships, and the listed edges."""
        refs = [NodeRef(NodeLabel(_label(r[0])), r[1]) for r in nodes]
        for e in edges:
            if not isinstance(e, Edge):
                raise InvalidInput(f"delete takes Edge values, got {type(e).__name__}")
        if not refs and not edges:
            return 0
        self._ready()

        def work(tx: Any) -> int:
            found = self._lookup(tx, [*refs, *(x for e in edges for x in (e.src, e.dst))])
            rows = [
                {"src": found[e.src][0], "dst": found[e.dst][0], "type": e.type.value}
                for e in {e.key: e for e in edges}.values()
                if e.src in found and e.dst in found
            ]
            for chunk in _chunks(rows, self._batch_rows):
                text, params = self._bind(Q_DELETE_EDGES, rows=list(chunk))
                tx.run(text, params).consume()
            node_eids = [found[r][0] for r in dict.fromkeys(refs) if r in found]
            deleted = 0
            for eid_chunk in _chunks(node_eids, self._batch_rows):
                text, params = self._bind(Q_DELETE_NODES, eids=list(eid_chunk))
                deleted += tx.run(text, params).single()["deleted"]
            return deleted

        return self._write("delete", work)

    def touch(self, ids: Sequence[str], at: datetime) -> None:
        """Record an access of these memories: access_count += 1, last_accessed = at."""
        if not ids:
            return
        if not isinstance(at, datetime) or at.tzinfo is None or at.utcoffset() is None:
            raise InvalidInput("touch time must be a timezone-aware datetime")
        unique = list(dict.fromkeys(ids))
        self._ready()

        def work(tx: Any) -> None:
            for chunk in _chunks(unique, self._batch_rows):
                text, params = self._bind(Q_TOUCH, ids=list(chunk), at=at.astimezone(UTC))
                tx.run(text, params).consume()

        self._write("touch", work)

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
                out.append(_node_from_db(lab.value, hit[1]))
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
        rows = self._read("match", lambda tx: list(tx.run(text, params)))
        return [_node_from_db(flt.label.value, r["props"]) for r in rows]

    def count(self, flt: Filter) -> int:
        """How many nodes match the filter."""
        text, params = compile_count(flt)
        self._ready()
        return int(self._read("count", lambda tx: tx.run(text, params).single()["count"]))

    def search_text(self, query: TextQuery) -> list[Hit]:
        """Full-text search over Memory content (Lucene score), filter before the top-k."""
        _memory_filter(query.filter, "text search")
        lucene = lucene_query(query.text)
        if lucene is None:
            return []
        if has_conditions(query.filter):
            text, params = compile_text_search(query.filter, lucene, query.k)
        else:
            text, params = self._bind(Q_SEARCH_TEXT, query=lucene, k=query.k)
        self._ready()
        rows = self._read("text search", lambda tx: list(tx.run(text, params)))
        return [
            Hit(node=_memory_from_db(r["props"]), score=float(r["score"]))
            for r in rows
        ]

    def search_vector(self, query: VectorQuery) -> list[Hit]:
        """Cosine nearest neighbours (score = cosine), filter applied before the top-k cut:
        a selective filter is searched exactly; otherwise the vector index is over-fetched
        and widened until k memories pass the filter."""
        flt = query.filter
        _memory_filter(flt, "vector search")
        self._ready()
        if self._dim is None:
            self._schema_names()
        if self._dim is None:
            return []  # nothing was ever embedded
        if len(query.vector) != self._dim:
            raise DimensionMismatch(
                f"query vector has {len(query.vector)} dimensions; this store uses {self._dim}"
            )
        q = np.asarray(query.vector, dtype=np.float32)
        if not np.isfinite(q).all() or float(np.linalg.norm(q)) == 0.0:
            raise InvalidInput("query vector must be finite and not all zeros")
        vector = q.tolist()
        k = query.k
        filtered = has_conditions(flt)

        def work(tx: Any) -> list[Any]:
            if not filtered:
                text, params = self._bind(Q_SEARCH_VECTOR, k=k, vector=vector)
                return list(tx.run(text, params))
            text, params = _compile_vector_plan(flt)
            plan = tx.run(text, params).single()
            matched, total = int(plan["matched"]), int(plan["total"])
            if matched == 0:
                return []
            if matched <= max(self._exact_search_max, k):
                text, params = compile_vector_exact_search(flt, vector, k)
                return list(tx.run(text, params))
            fetch = min(total, max(4 * k, math.ceil(2 * k * total / matched)))
            while True:
                text, params = compile_vector_index_search(flt, vector, fetch, k)
                rows = list(tx.run(text, params))
                if len(rows) >= k or fetch >= total:
                    return rows
                if fetch * 4 > max(total // 2, self._exact_search_max):
                    # widening further costs about as much as an exact scan: do that
                    text, params = compile_vector_exact_search(flt, vector, k)
                    return list(tx.run(text, params))
                fetch = min(total, fetch * 4)

        rows = self._read("vector search", work)
        hits = []
        qn = float(np.linalg.norm(q))
        for r in rows:
            node = _memory_from_db(r["props"])
            emb = np.asarray(node.embedding or (), dtype=np.float32)
            if emb.shape != q.shape:
                continue
            en = float(np.linalg.norm(emb)) or 1e-12
            hits.append(Hit(node=node, score=float(emb @ q) / (en * qn)))
        hits.sort(key=lambda h: -h.score)
        return hits[:k]

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
                    Q_EXPAND, eids=frontier, types=types, direction=direction,
                    labels=_ALL_LABELS,
                )
                rank = {eid: i for i, eid in enumerate(frontier)}
                records = sorted(
                    tx.run(text, params),
                    key=lambda r: (
                        rank[r["from_eid"]], r["type"], r["other_label"],
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
                        type=EdgeType(r["type"]), src=src, dst=dst,
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
            nodes=tuple(_node_from_db(label, props) for label, props in node_rows),
            edges=tuple(edge_list),
        )

    def scan(
        self, *, batch_size: int = 1000
    ) -> Iterator[tuple[list[GraphNode], list[Edge]]]:
        """Every node, then every edge, in batches (streamed from the server)."""
        if batch_size < 1:
            raise InvalidInput("batch_size must be >= 1")
        self._ready()
        with self._translated("scan"), self._session(write=False) as session:
            text, params = self._bind(Q_SCAN_NODES, labels=_ALL_LABELS)
            result = session.run(text, params)
            while batch := result.fetch(batch_size):
                yield [_node_from_db(r["label"], r["props"]) for r in batch], []
            text, params = self._bind(Q_SCAN_EDGES, types=_ALL_TYPES, labels=_ALL_LABELS)
            result = session.run(text, params)
            while batch := result.fetch(batch_size):
                yield [], [
                    Edge(
                        type=EdgeType(r["type"]),
                        src=NodeRef(NodeLabel(r["src_label"]), r["src"]),
                        dst=NodeRef(NodeLabel(r["dst_label"]), r["dst"]),
                        props=_props_from_db(r["props"]),
                    )
                    for r in batch
                    if r["src_label"] and r["dst_label"] and r["src"] and r["dst"]
                ]

    def stats(self) -> BackendStats:
        """Node counts per label and edge counts per type (non-zero ones), the location and
        the vector dimension."""
        self._ready()
        row = self._read("stats", lambda tx: tx.run(*self._bind(Q_STATS)).single())
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
            deleted = int(self._write("clear", lambda tx: tx.run(text, params).single()[0]))
            total += deleted
            if deleted == 0:
                log.info("cleared %d nodes from %s", total, self.location)
                return total

    def close(self) -> None:
        """Close the driver this backend created (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            drv, self._driver = self._driver, None
        if drv is not None:
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
