// List the indexes of the database with their state and configuration (ensure_schema reads
// which graphmem indexes exist, whether they are online, and the vector dimension).
// :param none -- this statement takes no parameters
SHOW INDEXES YIELD name, type, state, options;
