// Create the hub nodes a batch of upserts points to, once per batch (not once per row): missing
// Agents (from $agent_defaults), Tags, and Runs (from their row) with RUN_BY -> Agent. Existing
// hubs are kept as they are. The node upserts that follow in the same transaction MATCH them.
:param agent_defaults => ({name: '', seniority: 'junior', autonomy: 1, kind: 'agent', created_at: datetime()});
:param agents => ['assistant'];
:param tags => ['prefs'];
:param runs => [{id: 'r1', agent_id: 'assistant', namespace: 'default', status: 'running', event_count: 0, started_at: datetime()}];
UNWIND $agents AS agent_id
MERGE (a:Agent {id: agent_id})
  ON CREATE SET a += $agent_defaults
WITH count(*) AS agents
UNWIND $tags AS tag
MERGE (t:Tag {id: tag})
  ON CREATE SET t.name = tag
WITH count(*) AS tags
UNWIND $runs AS run
MERGE (r:Run {id: run.id})
  ON CREATE SET r = run
WITH r
MERGE (ra:Agent {id: r.agent_id})
  ON CREATE SET ra += $agent_defaults
MERGE (r)-[:RUN_BY]->(ra);
