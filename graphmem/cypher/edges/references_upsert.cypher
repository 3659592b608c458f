// Upsert REFERENCES relationships (log entry)-[:REFERENCES]->(payload) between LogEntry and Payload nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'l1', dst: 'p1', props: {}}];
UNWIND $rows AS row
MATCH (a:LogEntry {id: row.src})
MATCH (b:Payload {id: row.dst})
MERGE (a)-[r:REFERENCES]->(b)
SET r = row.props;
