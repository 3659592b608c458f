// The full-text index of schema/memory_fulltext.cypher, updated behind each commit instead of in
// it (`fulltext_refresh="background"`, opt-in): a write commits without waiting for Lucene, and
// the handle that wrote waits for the index (admin/await_fulltext.cypher) before its next
// lexical search; other handles may miss a write for a moment. Idempotent.
// :param none -- this statement takes no parameters
CREATE FULLTEXT INDEX memory_fulltext IF NOT EXISTS
FOR (n:Memory) ON EACH [n.content, n.agent_id, n.namespace, n.tags]
OPTIONS {indexConfig: {`fulltext.analyzer`: 'english', `fulltext.eventually_consistent`: true}};
