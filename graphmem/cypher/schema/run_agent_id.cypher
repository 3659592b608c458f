// Range index on Run.agent_id (an agent's runs). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX run_agent_id IF NOT EXISTS
FOR (n:Run) ON (n.agent_id);
