// Delete relationships given by type and the element ids of their start and end nodes.
:param rows => [];
UNWIND $rows AS row
MATCH (a)-[r]->(b)
WHERE elementId(a) = row.src AND elementId(b) = row.dst AND type(r) = row.type
DELETE r;
