// The shape of the stored graph: which labels each relationship type connects, and how many
// such relationships there are (table view).
// :param none -- this statement takes no parameters
MATCH (a)-[r]->(b)
RETURN labels(a)[0] AS from_label, type(r) AS type, labels(b)[0] AS to_label, count(*) AS relationships
ORDER BY relationships DESC;
