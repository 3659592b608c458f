// List the constraints of the database (ensure_schema creates only the missing ones).
// :param none -- this statement takes no parameters
SHOW CONSTRAINTS YIELD name, type;
