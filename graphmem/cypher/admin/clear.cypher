// Delete up to $batch graphmem nodes (any label in $labels) with their relationships and say how
// many; run it until it returns 0 to empty a store. Other labels in the database are untouched.
:param labels => ['Memory', 'Agent', 'Run', 'Tag', 'OrgFact', 'OrgOperation', 'LogEntry', 'Payload', 'Namespace', 'Entity'];
:param batch => 10000;
MATCH (n)
WHERE any(l IN labels(n) WHERE l IN $labels)
WITH n LIMIT $batch
DETACH DELETE n
RETURN count(*) AS deleted;
