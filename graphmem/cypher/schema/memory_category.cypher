// Range index on Memory.category (filters by category). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX memory_category IF NOT EXISTS
FOR (n:Memory) ON (n.category);
