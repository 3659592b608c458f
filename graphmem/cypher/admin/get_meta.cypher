// Read one value kept beside the graph (the record of the embedding model that made the
// store's vectors: name, dimension, probe vector), or no row.
:param key => 'embedding_model';
MATCH (m:GraphmemMeta {key: $key})
RETURN m.value AS value
LIMIT 1;
