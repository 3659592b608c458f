// Vector index on Memory.embedding (cosine) for semantic recall, without quantization (Neo4j
// 5.23+; the backend option vector_quantization=False): full-precision neighbours, at about
// twice the search time of the quantized index. The dimension comes from the configured
// embedder and is fixed once the index exists. Idempotent.
:param dimensions => 384;
CREATE VECTOR INDEX memory_embedding_vector IF NOT EXISTS
FOR (n:Memory) ON (n.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: toInteger($dimensions), `vector.similarity_function`: 'cosine', `vector.quantization.enabled`: false}};
