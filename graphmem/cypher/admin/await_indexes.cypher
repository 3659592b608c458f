// Wait until every index is online (after ensure_schema created some), at most $timeout seconds.
:param timeout => 300;
CALL db.awaitIndexes($timeout);
