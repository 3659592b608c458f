// Uniqueness constraint on OrgOperation.id (also the index every MERGE/lookup by id uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT org_operation_id_unique IF NOT EXISTS
FOR (n:OrgOperation) REQUIRE n.id IS UNIQUE;
