// Who and what co-occurs: pairs of entities mentioned by the same active memories, most
// frequent first (optionally only for one entity: set $name, or null for all pairs).
:param name => null;
:param min_count => 2;
MATCH (e1:Entity)<-[:MENTIONS]-(m:Memory {status: 'active'})-[:MENTIONS]->(e2:Entity)
WHERE e1.id < e2.id AND ($name IS NULL OR e1.norm = $name OR e2.norm = $name)
WITH e1, e2, count(m) AS memories
WHERE memories >= $min_count
RETURN e1.name AS entity, e1.type AS type, e2.name AS other, e2.type AS other_type, memories
ORDER BY memories DESC, entity, other
LIMIT 100;
