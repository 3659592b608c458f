// Uniqueness constraint on Memory.id (also the index every MERGE/lookup by id uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT memory_id_unique IF NOT EXISTS
FOR (n:Memory) REQUIRE n.id IS UNIQUE;
