// One hop of a neighbourhood expansion: the relationships of the given types around the frontier
// nodes (element ids) in the given direction ('out', 'in' or 'both'), with the node at the other end.
:param eids => COLLECT { MATCH (m:Memory {id: 'm1'}) RETURN elementId(m) };
:param types => ['SUPERSEDES', 'DERIVED_FROM', 'NEXT'];
:param direction => 'both';
:param labels => ['Memory', 'Agent', 'Run', 'Tag', 'OrgFact', 'OrgOperation', 'LogEntry', 'Payload', 'Namespace', 'Entity'];
UNWIND $eids AS eid
MATCH (a) WHERE elementId(a) = eid
MATCH (a)-[r]-(b)
WHERE type(r) IN $types
  AND ($direction = 'both'
       OR ($direction = 'out' AND startNode(r) = a)
       OR ($direction = 'in' AND endNode(r) = a))
  AND any(l IN labels(b) WHERE l IN $labels)
RETURN eid AS from_eid,
       type(r) AS type,
       startNode(r) = a AS outgoing,
       properties(r) AS props,
       elementId(b) AS other_eid,
       [l IN labels(b) WHERE l IN $labels][0] AS other_label,
       properties(b) AS other_props;
