// Upsert AUTHORED_BY relationships (memory or org fact)-[:AUTHORED_BY]->(agent) between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:OrgFact {id: 'f1v1'}), (b:Agent {id: 'cto'}) RETURN {src: elementId(a), dst: elementId(b), props: {}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:AUTHORED_BY]->(b)
SET r = row.props;
