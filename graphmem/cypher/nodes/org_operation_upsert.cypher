// Upsert OrgOperation nodes by id; every property is replaced by row.props.
:param rows => [{id: 'op1', props: {id: 'op1', fact_id: 'f1', operation: 'publish', version: 1, author: 'cto', at: datetime()}}];
UNWIND $rows AS row
MERGE (n:OrgOperation {id: row.id})
SET n = row.props;
