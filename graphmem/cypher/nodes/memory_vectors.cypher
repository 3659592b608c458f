// Set the embedding of existing Memory nodes without rewriting their other properties (the
// background vectorizer); rows naming a memory that no longer exists are skipped.
:param rows => [{id: 'm1', embedding: [0.1, 0.2, 0.3]}];
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
SET m.embedding = row.embedding
REMOVE m:Unvectored;
