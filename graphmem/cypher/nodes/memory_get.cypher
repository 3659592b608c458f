// Fetch Memory nodes by id: the element id (used to address them within one transaction) and,
// when $with_props is true, all their properties.
:param ids => ['m1', 'm2'];
:param with_props => true;
UNWIND $ids AS id
MATCH (n:Memory {id: id})
RETURN n.id AS id, elementId(n) AS eid, CASE WHEN $with_props THEN properties(n) END AS props;
