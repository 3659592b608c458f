// Stream every graphmem node with its label and properties (export and migration).
:param labels => ['Memory', 'Agent', 'Run', 'Tag', 'OrgFact', 'OrgOperation', 'LogEntry', 'Payload', 'Namespace', 'Entity'];
MATCH (n)
WHERE any(l IN labels(n) WHERE l IN $labels)
RETURN [l IN labels(n) WHERE l IN $labels][0] AS label, properties(n) AS props;
