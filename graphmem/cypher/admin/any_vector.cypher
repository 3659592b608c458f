// Whether any memory still holds an embedding (the vector index may take another dimension
// only when none does). Stops at the first one found.
// :param none -- this statement takes no parameters
RETURN EXISTS { MATCH (m:Memory) WHERE m.embedding IS NOT NULL } AS found;
