// Range index on Memory.agent_id (filters by agent). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX memory_agent_id IF NOT EXISTS
FOR (n:Memory) ON (n.agent_id);
