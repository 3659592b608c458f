// Range index on Memory.status (active / superseded / archived filters). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX memory_status IF NOT EXISTS
FOR (n:Memory) ON (n.status);
