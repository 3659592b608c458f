// Upsert LogEntry nodes: every property is replaced by row.props, and IN_RUN -> Run(row.run =
// run_id) follows the run_id property (a stale IN_RUN is removed). The Run hub exists already:
// nodes/hubs.cypher creates the missing ones once per batch, in the same transaction.
:param rows => [{id: 'l1', run: 'r1', props: {id: 'l1', agent_id: 'assistant', event_type: 'tool_call', run_id: 'r1', step: 1, at: datetime(), payload: '{"tool": "search"}', payload_size: 18}}];
UNWIND $rows AS row
MERGE (n:LogEntry {id: row.id})
SET n = row.props
WITH n, row
FOREACH (stale IN [(n)-[x:IN_RUN]->(old) WHERE row.run IS NULL OR old.id <> row.run | x] | DELETE stale)
WITH n, row
MATCH (r:Run {id: row.run})
MERGE (n)-[:IN_RUN]->(r);
