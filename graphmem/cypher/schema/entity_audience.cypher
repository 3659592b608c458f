// Range index on Entity.audience (listing the entities of a scope). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX entity_audience IF NOT EXISTS
FOR (n:Entity) ON (n.audience);
