// Keep one value beside the graph under a key (a null value removes it): the record of the
// embedding model written with the first vectors and by a reindex to a new model.
:param key => 'embedding_model';
:param value => '{"name": "all-MiniLM-L6-v2", "dim": 384}';
MERGE (m:GraphmemMeta {key: $key})
SET m.value = $value;
