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

The package, one module per concern (each imports only those above it):
``queries`` (the query files) · ``values`` (driver values <-> graphmem values) · ``filters``
(the filter compiler) · ``statements`` (statement composition) · ``session`` (driver,
sessions, error translation) · ``schema`` (version check, constraints, indexes) ·
``writes`` (write plans, guards, deletes, deferred access records) · ``search`` (full-text,
vector, recall statements) · ``backend`` (:class:`Neo4jBackend`, the reads left over).

Example::

    backend = Neo4jBackend("neo4j://localhost:7687", auth=("neo4j", "secret"))
    backend.ensure_schema(embedding_dim=384)
    backend.write(WriteBatch(nodes=[Memory(content="Alice prefers tea", agent_id="assistant")]))
"""

from __future__ import annotations

from graphmem.backends.neo4j.backend import Neo4jBackend
from graphmem.backends.neo4j.expansion import compile_neighbours
from graphmem.backends.neo4j.filters import (
    compile_count,
    compile_match,
    compile_where,
    has_conditions,
)
from graphmem.backends.neo4j.fulltext import lucene_query
from graphmem.backends.neo4j.queries import (
    CYPHER_DIR,
    QUERY_NAMES,
    UNVECTORED,
    CypherQuery,
    load_queries,
    parse_cypher,
)
from graphmem.backends.neo4j.search import (
    compile_recall_search,
    compile_text_search,
    compile_vector_exact_search,
    compile_vector_index_search,
)
from graphmem.backends.neo4j.session import DRIVER_OPTIONS, SCHEMES
from graphmem.backends.neo4j.statements import WritePart, WriteStatement, compose
from graphmem.backends.neo4j.writes import compile_check, compile_guard, guard_rows

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
