// Upsert REFERENCES relationships (log entry)-[:REFERENCES]->(payload) between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:LogEntry {id: 'l1'}), (b:Payload {id: 'p1'}) RETURN {src: elementId(a), dst: elementId(b), props: {}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:REFERENCES]->(b)
SET r = row.props;
