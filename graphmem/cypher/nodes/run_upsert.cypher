// Upsert Run nodes: every property is replaced by row.props, and RUN_BY -> Agent(agent_id)
// follows the agent_id property (a stale RUN_BY is removed; a missing Agent is created from
// $agent_defaults, an existing one is never overwritten).
:param agent_defaults => ({name: '', seniority: 'junior', autonomy: 1, kind: 'agent', created_at: datetime()});
:param rows => [{id: 'r1', agent: 'assistant', props: {id: 'r1', agent_id: 'assistant', user_id: 'alice', app_name: 'demo', namespace: 'default', status: 'running', event_count: 0, started_at: datetime()}}];
UNWIND $rows AS row
MERGE (r:Run {id: row.id})
SET r = row.props
WITH r, row
FOREACH (stale IN [(r)-[x:RUN_BY]->(old) WHERE old.id <> row.agent | x] | DELETE stale)
MERGE (a:Agent {id: row.agent})
  ON CREATE SET a += $agent_defaults
MERGE (r)-[:RUN_BY]->(a);
