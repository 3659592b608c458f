// Delete nodes (given by element id) with all their relationships; returns how many were deleted.
:param eids => [];
UNWIND $eids AS eid
MATCH (n) WHERE elementId(n) = eid
DETACH DELETE n
RETURN count(*) AS deleted;
