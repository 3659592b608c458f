// Upsert Agent nodes by id; every property is replaced by row.props.
:param rows => [{id: 'assistant', props: {id: 'assistant', name: 'Assistant', seniority: 'senior', autonomy: 2, kind: 'agent', created_at: datetime()}}];
UNWIND $rows AS row
MERGE (n:Agent {id: row.id})
SET n = row.props;
