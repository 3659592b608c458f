// Upsert Run nodes: every property is replaced by row.props, and RUN_BY -> Agent(agent_id)
// follows the agent_id property (a stale RUN_BY is removed). The Agent hub exists already:
// nodes/hubs.cypher creates the missing ones once per batch, in the same transaction.
:param rows => [{id: 'r1', agent: 'assistant', props: {id: 'r1', agent_id: 'assistant', user_id: 'alice', app_name: 'demo', namespace: 'default', status: 'running', event_count: 0, started_at: datetime()}}];
UNWIND $rows AS row
MERGE (r:Run {id: row.id})
SET r = row.props
WITH r, row
FOREACH (stale IN [(r)-[x:RUN_BY]->(old) WHERE old.id <> row.agent | x] | DELETE stale)
WITH r, row
MATCH (a:Agent {id: row.agent})
MERGE (r)-[:RUN_BY]->(a);
