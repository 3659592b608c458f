// Upsert OrgFact versions: every property is replaced by row.props, and the structural edges
// follow the properties -- AUTHORED_BY -> Agent(row.agent = author), TAGGED -> Tag per tag --
// stale ones are removed. Missing Agent / Tag nodes are created (Agent from $agent_defaults);
// existing ones are kept as they are.
:param agent_defaults => ({name: '', seniority: 'junior', autonomy: 1, kind: 'agent', created_at: datetime()});
:param rows => [{id: 'f1v1', agent: 'cto', tags: ['security'], props: {id: 'f1v1', fact_id: 'f1', version: 1, content: 'Never commit secrets.', category: 'policy', tags: ['security'], author: 'cto', author_seniority: 'human', created_at: datetime(), status: 'active', core: true}}];
UNWIND $rows AS row
MERGE (f:OrgFact {id: row.id})
SET f = row.props
WITH f, row
FOREACH (stale IN [(f)-[x:AUTHORED_BY]->(old) WHERE old.id <> row.agent | x] | DELETE stale)
FOREACH (stale IN [(f)-[x:TAGGED]->(old) WHERE NOT old.id IN row.tags | x] | DELETE stale)
MERGE (a:Agent {id: row.agent})
  ON CREATE SET a += $agent_defaults
MERGE (f)-[:AUTHORED_BY]->(a)
FOREACH (tag IN row.tags |
  MERGE (t:Tag {id: tag})
    ON CREATE SET t.name = tag
  MERGE (f)-[:TAGGED]->(t));
