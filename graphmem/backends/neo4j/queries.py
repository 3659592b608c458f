"""The query files: which ``.cypher`` files the backend runs, and how they are read and
checked (``:param`` lines must equal the ``$parameters`` a statement uses)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from graphmem.errors import ConfigError
from graphmem.models import EdgeType, NodeLabel

CYPHER_DIR = Path(__file__).resolve().parents[2] / "cypher"  # also at ./cypher (a link)
"""Where the ``.cypher`` files live (the repository's ``cypher/`` folder)."""


FULLTEXT_INDEX = "memory_fulltext"


FULLTEXT_FIELDS = ("content", "agent_id", "namespace", "tags")
"""The Memory properties :data:`FULLTEXT_INDEX` holds: the text recall ranks by, then the
scope fields a scoped search names in its Lucene query (see ``schema/memory_fulltext``)."""


OLD_FULLTEXT_INDEX = "memory_content_fulltext"
"""The content-only full-text index of older stores, dropped once :data:`FULLTEXT_INDEX` is
online (by :data:`OLD_FULLTEXT_DROP`)."""


OLD_FULLTEXT_DROP = "schema/memory_content_fulltext_drop"


FULLTEXT_QUERY = "schema/memory_fulltext"


FULLTEXT_EVENTUAL_QUERY = "schema/memory_fulltext_eventual"
"""The same index updated behind each commit (the ``fulltext_refresh="background"`` option)."""


Q_AWAIT_FULLTEXT = "admin/await_fulltext"


VECTOR_INDEX = "memory_embedding_vector"


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
    "schema/memory_fulltext",
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


Q_RUN_HEADS = "nodes/run_heads"


Q_RUN_HEAD_SET = "nodes/run_head_set"


UNVECTORED = "Unvectored"
"""A second label on memories stored without an embedding: the background vectorizer's
queue, read through the label index (the only label graphmem adds to its own)."""


VECTOR_INDEX_EXACT_QUERY = "schema/memory_embedding_vector_exact"


VECTOR_INDEX_DROP = "schema/memory_embedding_vector_drop"


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


Q_GET_META = "admin/get_meta"


Q_SET_META = "admin/set_meta"


Q_ANY_VECTOR = "admin/any_vector"


Q_WARM_VECTOR_INDEX = "admin/warm_vector_index"


Q_PROPERTY_KEY_KNOWN = "admin/property_key_known"


Q_CREATE_PROPERTY_KEY = "admin/create_property_key"


LOCK_PROPERTY = "_graphmem_lock"
"""A property no node has, removed to take the node's write lock until the transaction ends,
so that a precondition read after it cannot be changed by another writer before the write
commits (``compile_guard``, ``compile_check``). Removing a property takes the node's
exclusive lock before it looks for the property, and a missing one changes nothing: the
lock without the property write and delete that setting it first costs (on a batch that
appends to 800 runs, both the run and its last memory are locked; benchmarks/RESULTS.md,
issue 19, thirteenth session). That holds only while the database knows the property's
name (its token): a removal of a name it has never seen is skipped, lock and all, so first
use makes the name known (:data:`Q_CREATE_PROPERTY_KEY`; no node is written).
tests/neo4j/test_neo4j_live.py checks that the lock holds another writer off, also on a
database that had never seen the name."""


META_LABEL = "GraphmemMeta"
"""The label of the nodes that keep values beside the graph (the embedding model's record)."""


QUERY_NAMES: tuple[str, ...] = (
    *SCHEMA_QUERIES,
    VECTOR_INDEX_QUERY,
    VECTOR_INDEX_EXACT_QUERY,
    VECTOR_INDEX_DROP,
    OLD_FULLTEXT_DROP,
    FULLTEXT_EVENTUAL_QUERY,
    Q_AWAIT_FULLTEXT,
    Q_HUBS,
    Q_VECTORS,
    Q_MISSING_VECTORS,
    Q_RUN_HEADS,
    Q_RUN_HEAD_SET,
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
    Q_PROPERTY_KEY_KNOWN,
    Q_CREATE_PROPERTY_KEY,
    Q_STATS,
    Q_CLEAR,
    Q_GET_META,
    Q_SET_META,
    Q_ANY_VECTOR,
    Q_WARM_VECTOR_INDEX,
)
"""Every query file the backend loads (relative to ``cypher/``, without ``.cypher``)."""


ALL_LABELS = [label.value for label in NodeLabel]


ALL_TYPES = [t.value for t in EdgeType]


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


PARAM_USE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


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
    used = set(PARAM_USE.findall(structure))
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
