// Whether the database knows a property name (its token), though no node may hold it: the
// guards' lock property must be known, or Neo4j skips its removal and takes no lock.
:param key => '_graphmem_lock';
CALL db.propertyKeys() YIELD propertyKey
WITH propertyKey WHERE propertyKey = $key
RETURN count(*) > 0 AS known;
