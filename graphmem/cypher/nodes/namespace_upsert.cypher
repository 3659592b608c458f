// Upsert Namespace nodes (shared namespaces and their members) by id; every property is
// replaced by row.props.
:param rows => [{id: 'team', props: {id: 'team', owner: 'planner', members: ['coder', 'planner'], created_at: datetime()}}];
UNWIND $rows AS row
MERGE (n:Namespace {id: row.id})
SET n = row.props;
