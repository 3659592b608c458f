// Semantic recall: the $k Memory nodes nearest to $vector by cosine, from the vector index
// (approximate), best first. The score here is Neo4j's normalised cosine, (1 + cos) / 2.
:param k => 10;
:param vector => COLLECT { MATCH (m:Memory) WHERE m.embedding IS NOT NULL RETURN m.embedding LIMIT 1 }[0];
CALL db.index.vector.queryNodes('memory_embedding_vector', $k, $vector) YIELD node, score
RETURN properties(node) AS props, score
ORDER BY score DESC, props.id;
