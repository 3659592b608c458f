// Uniqueness constraint on OrgFact.id (also the index every MERGE/lookup by id uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT org_fact_id_unique IF NOT EXISTS
FOR (n:OrgFact) REQUIRE n.id IS UNIQUE;
