// Upsert OrgFact versions: every property is replaced by row.props, and the structural edges
// follow the properties -- AUTHORED_BY -> Agent(row.agent = author), TAGGED -> Tag per tag --
// stale ones are removed. The Agent and Tag hubs exist already: nodes/hubs.cypher creates the
// missing ones once per batch, in the same transaction.
:param rows => [{id: 'f1v1', agent: 'cto', tags: ['security'], props: {id: 'f1v1', fact_id: 'f1', version: 1, content: 'Never commit secrets.', category: 'policy', tags: ['security'], author: 'cto', author_seniority: 'human', created_at: datetime(), status: 'active', core: true}}];
UNWIND $rows AS row
MERGE (f:OrgFact {id: row.id})
SET f = row.props
WITH f, row
FOREACH (stale IN [(f)-[x:AUTHORED_BY]->(old) WHERE old.id <> row.agent | x] | DELETE stale)
FOREACH (stale IN [(f)-[x:TAGGED]->(old) WHERE NOT old.id IN row.tags | x] | DELETE stale)
WITH f, row
MATCH (a:Agent {id: row.agent})
MERGE (f)-[:AUTHORED_BY]->(a)
WITH f, row
UNWIND row.tags AS tag
MATCH (t:Tag {id: tag})
MERGE (f)-[:TAGGED]->(t);
