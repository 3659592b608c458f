// An entity's timeline: every memory that mentions it (and how), oldest first, with the
// relations recorded from each memory.
:param name => 'melanie';
MATCH (e:Entity {norm: $name})<-[mm:MENTIONS]-(m:Memory)
OPTIONAL MATCH (e)-[rel:RELATES {memory_id: m.id}]-(other:Entity)
RETURN m.created_at AS at, mm.role AS role, m.status AS status, m.content AS content,
       collect(CASE WHEN rel IS NULL THEN null
                    ELSE startNode(rel).name + ' ' + rel.predicate + ' ' + endNode(rel).name END)
         AS relations
ORDER BY at
LIMIT 200;
