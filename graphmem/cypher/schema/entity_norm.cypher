// Range index on Entity.norm (entity lookup by normalised name: about, the entity channel
// when the scope does not give the audience). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX entity_norm IF NOT EXISTS
FOR (n:Entity) ON (n.norm);
