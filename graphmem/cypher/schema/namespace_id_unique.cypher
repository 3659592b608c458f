// Uniqueness constraint on Namespace.id (also the index every MERGE/lookup by id uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT namespace_id_unique IF NOT EXISTS
FOR (n:Namespace) REQUIRE n.id IS UNIQUE;
