// Upsert CHILD_OF relationships (child log entry)-[:CHILD_OF]->(parent log entry) between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:LogEntry {id: 'l2'}), (b:LogEntry {id: 'l1'}) RETURN {src: elementId(a), dst: elementId(b), props: {}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:CHILD_OF]->(b)
SET r = row.props;
