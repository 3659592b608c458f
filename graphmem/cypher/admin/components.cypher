// Server name, version and edition (health check; graphmem needs Neo4j 5.18 or later).
// :param none -- this statement takes no parameters
CALL dbms.components() YIELD name, versions, edition
RETURN name, versions[0] AS version, edition;
