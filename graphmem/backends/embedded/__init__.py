"""Embedded backend: an in-memory graph (networkx's MultiDiGraph layout), journalled to one
SQLite file.

Every ``upsert``/``delete``/``touch`` is one SQLite transaction (WAL mode); the in-memory
graph is changed only after the commit succeeds, so a failed write changes nothing and an
acknowledged write survives a crash of the process (``durability="normal"``, SQLite's
``synchronous=NORMAL``) or of the machine (``durability="full"``, an fsync per commit).
Lexical search uses an FTS5 index (BM25, porter stemming) in the same file; vectors live in
a contiguous float32 matrix (:class:`~graphmem.backends.embedded.vector_index.VectorIndex`),
searched through an HNSW graph over 8-bit quantized vectors above 50,000 of them (its
candidates rescored exactly); above 500,000 the matrix is dropped and exact values are read
from the file's rows.

Several threads may share one backend (a lock serialises access). Several *processes* may
open the same file: SQLite's locking keeps the file consistent, and each call first checks
``PRAGMA data_version`` — when another process has committed since, this process reloads
the graph from the file before it reads or writes, so it sees every committed write
(a reload costs about as much as opening the file).

``memory://`` keeps the same SQLite machinery in memory (for tests and throwaway stores).

The package, one module per concern (each imports only those above it): ``ann_graph``
(faiss's HNSW graph over quantized vectors) · ``vector_index`` (the float32 matrix, the
graph at scale, the rows read back once the matrix is dropped)
· ``graph`` (the in-memory graph, its index buckets and the filter evaluated in Python) ·
``journal`` (the SQLite file: open, load, transactions, the change log other processes
catch up from) · ``search`` (BM25 over FTS5, vector search) · ``backend``
(:class:`NetworkXBackend`: write plans, access records, the remaining reads).
The class keeps the name of the graph library it is built on; its URL schemes (a path,
``file:``, ``sqlite:///``, ``networkx:///``, ``memory://``) and ``stats().backend ==
"networkx"`` are unchanged.
"""

from __future__ import annotations

from graphmem.backends.embedded.backend import NetworkXBackend

__all__ = ["NetworkXBackend"]
