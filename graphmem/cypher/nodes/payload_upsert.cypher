// Upsert Payload nodes by id; every property is replaced by row.props.
:param rows => [{id: 'p1', props: {id: 'p1', text: 'a large tool result', size: 19, refcount: 1}}];
UNWIND $rows AS row
MERGE (n:Payload {id: row.id})
SET n = row.props;
