// Uniqueness constraint on Payload.id (also the index every MERGE/lookup by id uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT payload_id_unique IF NOT EXISTS
FOR (n:Payload) REQUIRE n.id IS UNIQUE;
