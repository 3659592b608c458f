// Range index on Memory.namespace (filters by namespace). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX memory_namespace IF NOT EXISTS
FOR (n:Memory) ON (n.namespace);
