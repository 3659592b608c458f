// Uniqueness constraint on Entity.id (also the index every MERGE/lookup by id uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT entity_id_unique IF NOT EXISTS
FOR (n:Entity) REQUIRE n.id IS UNIQUE;
