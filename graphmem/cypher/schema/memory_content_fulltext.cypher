// Full-text (Lucene) index on Memory.content for lexical recall, English analyzer
// (stemming and stop words, like the embedded backend's porter FTS5). Idempotent.
// :param none -- this statement takes no parameters
CREATE FULLTEXT INDEX memory_content_fulltext IF NOT EXISTS
FOR (n:Memory) ON EACH [n.content]
OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}};
