// Upsert IN_RUN relationships (memory or log entry)-[:IN_RUN]->(run) between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:LogEntry {id: 'l1'}), (b:Run {id: 'r1'}) RETURN {src: elementId(a), dst: elementId(b), props: {}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:IN_RUN]->(b)
SET r = row.props;
