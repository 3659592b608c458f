// Vector index on Memory.embedding (cosine) for semantic recall, as the server makes it
// (quantized on Neo4j 5.23+: recall re-scores the neighbours it returns exactly); the
// dimension comes from the configured embedder and is fixed once the index exists. Idempotent.
:param dimensions => 384;
CREATE VECTOR INDEX memory_embedding_vector IF NOT EXISTS
FOR (n:Memory) ON (n.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: toInteger($dimensions), `vector.similarity_function`: 'cosine'}};
