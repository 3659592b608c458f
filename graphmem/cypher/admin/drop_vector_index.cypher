// Drop the vector index on Memory.embedding, so that it can be created again for another
// dimension (run only when no memory holds a vector any more: a store moving to a new model).
// Idempotent.
// :param none -- this statement takes no parameters
DROP INDEX memory_embedding_vector IF EXISTS;
