// Full-text (Lucene) index for lexical recall, English analyzer (stemming and stop words, like
// the embedded backend's porter FTS5). Recall ranks by the content field alone; the scope
// fields are indexed too so that a scoped search names its scope inside the Lucene query
// (zero-boost required clauses: they select, they do not score), and the index's limit then
// applies to the scope's matches instead of the whole store's. Idempotent.
// :param none -- this statement takes no parameters
CREATE FULLTEXT INDEX memory_fulltext IF NOT EXISTS
FOR (n:Memory) ON EACH [n.content, n.agent_id, n.namespace, n.tags]
OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}};
