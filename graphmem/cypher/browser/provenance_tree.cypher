// The DERIVED_FROM provenance tree of a consolidated or summarised memory: the memory and every
// source it was derived from, transitively, with the pass that derived it (graph view).
:param memory_id => 'm3';
MATCH (m:Memory {id: $memory_id})
OPTIONAL MATCH tree = (m)-[:DERIVED_FROM*1..20]->(source)
RETURN m, collect(tree) AS provenance;
