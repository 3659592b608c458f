// An agent's active memories, newest first, drawn with their tags and run (graph view).
:param agent_id => 'assistant';
:param limit => 50;
MATCH (m:Memory {agent_id: $agent_id})
WHERE m.status = 'active'
WITH m ORDER BY m.created_at DESC LIMIT $limit
OPTIONAL MATCH tagged = (m)-[:TAGGED]->(:Tag)
OPTIONAL MATCH in_run = (m)-[:IN_RUN]->(:Run)
RETURN m, collect(DISTINCT tagged) AS tags, collect(DISTINCT in_run) AS runs;
