// Up to $limit memories that have no embedding yet (label Unvectored, set by the upsert of a
// memory without one): id and content, for the background vectorizer. Reads the label's
// index, so it costs $limit rows, not a scan of every memory.
:param limit => 100;
MATCH (m:Unvectored)
RETURN m.id AS id, m.content AS content
LIMIT $limit;
