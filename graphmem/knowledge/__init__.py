"""The knowledge layer: what memories are about.

Entities (people, places, organisations, events, objects and activities) are extracted
from each memory on the write path with no model and no LLM (:mod:`.extract`), resolved
against the entities the store already knows in the same scope (:mod:`.resolve`), and
written as ``Entity`` nodes with ``(Memory)-[:MENTIONS]->(Entity)`` and
``(Entity)-[:RELATES {predicate, memory_id, valid_from}]->(Entity)`` edges by the store's
write path (:class:`.KnowledgeIndexer`, a post-write hook). Recall reads them back through
the entity channel and multi-hop expansion (:mod:`.channel`); :mod:`.api` answers "which
entities" and "what about this one".
"""

from __future__ import annotations

from .api import About, Knowledge, RelationView, about, entities
from .channel import EntityHit, Neighbour, entity_channel, shared_entity_neighbours
from .extract import Extraction, Mention, Relation, extract, normalise
from .indexer import KnowledgeBatch, KnowledgeIndexer
from .resolve import Gazetteer, entity_id

__all__ = [
    "About",
    "EntityHit",
    "Extraction",
    "Gazetteer",
    "Knowledge",
    "KnowledgeBatch",
    "KnowledgeIndexer",
    "Mention",
    "Neighbour",
    "Relation",
    "RelationView",
    "about",
    "entities",
    "entity_channel",
    "entity_id",
    "extract",
    "normalise",
    "shared_entity_neighbours",
]
