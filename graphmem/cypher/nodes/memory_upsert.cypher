// Upsert Memory nodes: every property is replaced by row.props, and the structural edges follow
// the properties -- AUTHORED_BY -> Agent(row.agent = agent_id), IN_RUN -> Run(run_id) when set,
// TAGGED -> Tag per tag -- stale ones are removed. Missing Agent / Run / Tag nodes are created
// (Agent from $agent_defaults, Run from row.run, with its RUN_BY); existing ones are kept as
// they are.
:param agent_defaults => ({name: '', seniority: 'junior', autonomy: 1, kind: 'agent', created_at: datetime()});
:param rows => [{id: 'm1', agent: 'assistant', tags: ['prefs'], run: {id: 'r1', agent_id: 'assistant', namespace: 'default', status: 'running', event_count: 0, started_at: datetime()}, props: {id: 'm1', content: 'Alice prefers tea', category: 'semantic', tier: 'long_term', importance: 0.7, confidence: 1.0, created_at: datetime(), updated_at: datetime(), valid_from: datetime(), access_count: 0, agent_id: 'assistant', run_id: 'r1', namespace: 'default', tags: ['prefs'], status: 'active', content_hash: 'example'}}];
UNWIND $rows AS row
MERGE (m:Memory {id: row.id})
SET m = row.props
WITH m, row
FOREACH (stale IN [(m)-[x:AUTHORED_BY]->(old) WHERE old.id <> row.agent | x] | DELETE stale)
FOREACH (stale IN [(m)-[x:IN_RUN]->(old) WHERE row.run IS NULL OR old.id <> row.run.id | x] | DELETE stale)
FOREACH (stale IN [(m)-[x:TAGGED]->(old) WHERE NOT old.id IN row.tags | x] | DELETE stale)
MERGE (a:Agent {id: row.agent})
  ON CREATE SET a += $agent_defaults
MERGE (m)-[:AUTHORED_BY]->(a)
FOREACH (tag IN row.tags |
  MERGE (t:Tag {id: tag})
    ON CREATE SET t.name = tag
  MERGE (m)-[:TAGGED]->(t))
FOREACH (run IN CASE WHEN row.run IS NULL THEN [] ELSE [row.run] END |
  MERGE (r:Run {id: run.id})
    ON CREATE SET r = run
  MERGE (m)-[:IN_RUN]->(r)
  MERGE (ra:Agent {id: r.agent_id})
    ON CREATE SET ra += $agent_defaults
  MERGE (r)-[:RUN_BY]->(ra));
