// Uniqueness constraint on Agent.id (also the index every MERGE/lookup by id uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT agent_id_unique IF NOT EXISTS
FOR (n:Agent) REQUIRE n.id IS UNIQUE;
