// Upsert OrgFact versions: every property is replaced by row.props, and TAGGED -> Tag follows
// the tags (stale TAGGED edges are removed, missing Tag nodes created).
:param rows => [{id: 'f1v1', tags: ['security'], props: {id: 'f1v1', fact_id: 'f1', version: 1, content: 'Never commit secrets.', category: 'policy', tags: ['security'], author: 'cto', author_seniority: 'human', created_at: datetime(), status: 'active', core: true}}];
UNWIND $rows AS row
MERGE (f:OrgFact {id: row.id})
SET f = row.props
WITH f, row
FOREACH (stale IN [(f)-[x:TAGGED]->(old) WHERE NOT old.id IN row.tags | x] | DELETE stale)
FOREACH (tag IN row.tags |
  MERGE (t:Tag {id: tag})
    ON CREATE SET t.name = tag
  MERGE (f)-[:TAGGED]->(t));
