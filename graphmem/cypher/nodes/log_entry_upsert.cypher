// Upsert LogEntry nodes: every property is replaced by row.props, and IN_RUN -> Run(run_id)
// follows the run_id property (a stale IN_RUN is removed). A missing Run is created from row.run
// with its RUN_BY -> Agent (Agent from $agent_defaults); existing nodes are kept as they are.
:param agent_defaults => ({name: '', seniority: 'junior', autonomy: 1, kind: 'agent', created_at: datetime()});
:param rows => [{id: 'l1', run: {id: 'r1', agent_id: 'assistant', namespace: 'default', status: 'running', event_count: 0, started_at: datetime()}, props: {id: 'l1', agent_id: 'assistant', event_type: 'tool_call', run_id: 'r1', step: 1, at: datetime(), payload: '{"tool": "search"}', payload_size: 18}}];
UNWIND $rows AS row
MERGE (n:LogEntry {id: row.id})
SET n = row.props
WITH n, row
FOREACH (stale IN [(n)-[x:IN_RUN]->(old) WHERE row.run IS NULL OR old.id <> row.run.id | x] | DELETE stale)
FOREACH (run IN CASE WHEN row.run IS NULL THEN [] ELSE [row.run] END |
  MERGE (r:Run {id: run.id})
    ON CREATE SET r = run
  MERGE (n)-[:IN_RUN]->(r)
  MERGE (ra:Agent {id: r.agent_id})
    ON CREATE SET ra += $agent_defaults
  MERGE (r)-[:RUN_BY]->(ra));
