// An entity's neighbourhood: the memories that mention it and the entities those memories
// also mention, with the relations between them (graph view).
:param name => 'melanie';
MATCH (e:Entity {norm: $name})<-[mm:MENTIONS]-(m:Memory {status: 'active'})
OPTIONAL MATCH (m)-[mo:MENTIONS]->(other:Entity)
WHERE other <> e
OPTIONAL MATCH (e)-[rel:RELATES]-(other)
RETURN e, mm, m, mo, other, rel
LIMIT 300;
