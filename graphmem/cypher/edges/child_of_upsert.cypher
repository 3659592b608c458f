// Upsert CHILD_OF relationships (child log entry)-[:CHILD_OF]->(parent log entry) between LogEntry and LogEntry nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'l2', dst: 'l1', props: {}}];
UNWIND $rows AS row
MATCH (a:LogEntry {id: row.src})
MATCH (b:LogEntry {id: row.dst})
MERGE (a)-[r:CHILD_OF]->(b)
SET r = row.props;
