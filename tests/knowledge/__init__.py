"""Tests of the knowledge layer (entities, relations, the entity channel)."""

from __future__ import annotations

from graphmem.knowledge import KnowledgeIndexer
from graphmem.memory import GraphMemory


def indexed(m: GraphMemory) -> KnowledgeIndexer:
    """The knowledge indexer GraphMemory attaches by default."""
    assert m.knowledge.indexer is not None, "open the store with knowledge=True"
    return m.knowledge.indexer
