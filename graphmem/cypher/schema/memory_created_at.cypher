// Range index on Memory.created_at (time ranges and newest-first listings). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX memory_created_at IF NOT EXISTS
FOR (n:Memory) ON (n.created_at);
