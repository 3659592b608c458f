// Upsert Tag nodes by id (the normalised tag name); properties are replaced by row.props and
// name always equals id.
:param rows => [{id: 'prefs', props: {id: 'prefs'}}];
UNWIND $rows AS row
MERGE (n:Tag {id: row.id})
SET n = row.props, n.name = row.id;
