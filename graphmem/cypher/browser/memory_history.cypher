// The SUPERSEDES history of a memory: every earlier and later version of it, newest first, with
// the reason each replacement gave and when each version stopped being valid (table view).
:param memory_id => 'm1';
MATCH (m:Memory {id: $memory_id})
WITH COLLECT { MATCH (v:Memory)-[:SUPERSEDES*1..100]->(m) RETURN v }
     + [m]
     + COLLECT { MATCH (m)-[:SUPERSEDES*1..100]->(v:Memory) RETURN v } AS versions
UNWIND versions AS v
OPTIONAL MATCH (v)-[s:SUPERSEDES]->(:Memory)
RETURN v.id AS id, v.status AS status, v.created_at AS created_at, v.valid_to AS valid_to,
       s.reason AS replaced_because, v.content AS content
ORDER BY v.created_at DESC, v.id;
