// Range index on Memory.audience (every scoped recall filters on it). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX memory_audience IF NOT EXISTS
FOR (n:Memory) ON (n.audience);
