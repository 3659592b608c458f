// Semantic recall: the $fetch Memory nodes nearest to $vector in the vector index (approximate),
// re-scored exactly with vector.similarity.cosine, best $k first. Scores are Neo4j's normalised
// cosine, (1 + cos) / 2; probe is the score of two opposite vectors (0.0 under that rule).
:param fetch => 100;
:param k => 10;
:param vector => COLLECT { MATCH (m:Memory) WHERE m.embedding IS NOT NULL RETURN m.embedding LIMIT 1 }[0];
CALL db.index.vector.queryNodes('memory_embedding_vector', $fetch, $vector) YIELD node
WITH node, vector.similarity.cosine(node.embedding, $vector) AS score
ORDER BY score DESC, node.id
LIMIT $k
RETURN properties(node) AS props, score, vector.similarity.cosine([1.0, 0.0], [-1.0, 0.0]) AS probe;
