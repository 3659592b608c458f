// Upsert RECORDS relationships (org operation)-[:RECORDS]->(org fact) between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:OrgOperation {id: 'op1'}), (b:OrgFact {id: 'f1v1'}) RETURN {src: elementId(a), dst: elementId(b), props: {}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:RECORDS]->(b)
SET r = row.props;
