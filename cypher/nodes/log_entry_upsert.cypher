// Upsert LogEntry nodes by id; every property is replaced by row.props.
:param rows => [{id: 'l1', props: {id: 'l1', agent_id: 'assistant', event_type: 'tool_call', run_id: 'r1', step: 1, at: datetime(), payload: '{"tool": "search"}', payload_size: 18}}];
UNWIND $rows AS row
MERGE (n:LogEntry {id: row.id})
SET n = row.props;
