// Range index on Memory.content_hash (exact-duplicate detection). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX memory_content_hash IF NOT EXISTS
FOR (n:Memory) ON (n.content_hash);
