// Range index on Memory.run_id (filters by run). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX memory_run_id IF NOT EXISTS
FOR (n:Memory) ON (n.run_id);
