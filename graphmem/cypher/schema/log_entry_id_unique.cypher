// Uniqueness constraint on LogEntry.id (also the index every MERGE/lookup by id uses). Idempotent.
// :param none -- this statement takes no parameters
CREATE CONSTRAINT log_entry_id_unique IF NOT EXISTS
FOR (n:LogEntry) REQUIRE n.id IS UNIQUE;
