// Stream every graphmem relationship: type, the label and id of both ends, and its properties
// (export and migration).
:param types => ['SUPERSEDES', 'DERIVED_FROM', 'AUTHORED_BY', 'IN_RUN', 'RUN_BY', 'TAGGED', 'NEXT', 'RECORDS', 'REFERENCES', 'CHILD_OF', 'MENTIONS', 'RELATES'];
:param labels => ['Memory', 'Agent', 'Run', 'Tag', 'OrgFact', 'OrgOperation', 'LogEntry', 'Payload', 'Namespace', 'Entity'];
MATCH (a)-[r]->(b)
WHERE type(r) IN $types
RETURN type(r) AS type,
       [l IN labels(a) WHERE l IN $labels][0] AS src_label, a.id AS src,
       [l IN labels(b) WHERE l IN $labels][0] AS dst_label, b.id AS dst,
       properties(r) AS props;
