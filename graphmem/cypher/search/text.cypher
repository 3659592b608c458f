// Lexical recall: Memory nodes whose content matches $query in the full-text index, best first.
// graphmem builds $query from quoted terms only (on the content field, plus zero-boost scope
// clauses when scoped), so user text cannot inject Lucene operators.
:param query => 'content:("tea" OR "drink")';
:param k => 10;
CALL db.index.fulltext.queryNodes('memory_fulltext', $query) YIELD node, score
RETURN properties(node) AS props, score
ORDER BY score DESC, props.id
LIMIT $k;
