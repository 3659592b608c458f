// Fetch Entity nodes by id: the element id (used to address them within one transaction)
// and, when $with_props is true, all their properties.
:param ids => ['e1'];
:param with_props => true;
UNWIND $ids AS id
MATCH (n:Entity {id: id})
RETURN n.id AS id, elementId(n) AS eid, CASE WHEN $with_props THEN properties(n) END AS props;
