// Make a property name known to the database (its token) without writing it on any node:
// the guards lock a node by removing this property, which Neo4j skips, lock and all, while
// the name is unknown (a new database).
:param key => '_graphmem_lock';
CALL db.createProperty($key);
