// Upsert Entity nodes (what memories are about; one per audience and normalised name) by id;
// every property is replaced by row.props.
:param rows => [{id: 'e1', props: {id: 'e1', name: 'Melanie', norm: 'melanie', type: 'person', aliases: ['Mel'], first_seen: datetime(), last_seen: datetime(), mention_count: 2, agent_id: 'assistant', namespace: 'default', visibility: 'private', audience: 'agent:assistant'}}];
UNWIND $rows AS row
MERGE (n:Entity {id: row.id})
SET n = row.props;
