// Uniqueness constraint on Tag.id (also the index every MERGE/lookup by id uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT tag_id_unique IF NOT EXISTS
FOR (n:Tag) REQUIRE n.id IS UNIQUE;
