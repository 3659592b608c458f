// Read the vector index once after it was populated (a bulk load's end): its graph is then in
// memory, and the first recall after the load does not pay for reading it from the store.
:param vector => [1.0, 0.0, 0.0, 0.0];
CALL db.index.vector.queryNodes('memory_embedding_vector', 10, $vector) YIELD node
RETURN count(node) AS found;
