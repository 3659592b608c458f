// Uniqueness constraint on Tag.name (also the index every MERGE/lookup by name uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT tag_name_unique IF NOT EXISTS
FOR (n:Tag) REQUIRE n.name IS UNIQUE;
