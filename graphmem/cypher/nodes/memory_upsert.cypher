// Upsert Memory nodes: every property is replaced by row.props, and the structural edges follow
// the properties -- AUTHORED_BY -> Agent(row.agent = agent_id), IN_RUN -> Run(row.run = run_id)
// when set, TAGGED -> Tag per tag -- stale ones are removed. The Agent, Run and Tag hubs exist
// already: nodes/hubs.cypher creates the missing ones once per batch, in the same transaction.
// A memory without an embedding also gets the label Unvectored (the background vectorizer's
// queue: nodes/memory_missing_vectors.cypher).
:param rows => [{id: 'm1', agent: 'assistant', tags: ['prefs'], run: 'r1', props: {id: 'm1', content: 'Alice prefers tea', category: 'semantic', tier: 'long_term', importance: 0.7, confidence: 1.0, created_at: datetime(), updated_at: datetime(), valid_from: datetime(), access_count: 0, agent_id: 'assistant', run_id: 'r1', namespace: 'default', tags: ['prefs'], status: 'active', content_hash: 'example'}}];
UNWIND $rows AS row
MERGE (m:Memory {id: row.id})
SET m = row.props
FOREACH (_ IN CASE WHEN row.props.embedding IS NULL THEN [1] ELSE [] END | SET m:Unvectored)
FOREACH (_ IN CASE WHEN row.props.embedding IS NULL THEN [] ELSE [1] END | REMOVE m:Unvectored)
WITH m, row
FOREACH (stale IN [(m)-[x:AUTHORED_BY]->(old) WHERE old.id <> row.agent | x] | DELETE stale)
FOREACH (stale IN [(m)-[x:IN_RUN]->(old) WHERE row.run IS NULL OR old.id <> row.run | x] | DELETE stale)
FOREACH (stale IN [(m)-[x:TAGGED]->(old) WHERE NOT old.id IN row.tags | x] | DELETE stale)
WITH m, row
MATCH (a:Agent {id: row.agent})
MERGE (m)-[:AUTHORED_BY]->(a)
WITH m, row
OPTIONAL MATCH (r:Run {id: row.run})
FOREACH (run IN CASE WHEN r IS NULL THEN [] ELSE [r] END | MERGE (m)-[:IN_RUN]->(run))
WITH m, row
UNWIND row.tags AS tag
MATCH (t:Tag {id: tag})
MERGE (m)-[:TAGGED]->(t);
