// Drop the vector index on Memory.embedding (a bulk load defers it: every vector written while
// the index exists is inserted into it at commit, one at a time, which costs far more than one
// population of the whole index after the load); also run when a store moves to a model of
// another dimension and no memory holds a vector any more. Idempotent.
// :param none
DROP INDEX memory_embedding_vector IF EXISTS;
