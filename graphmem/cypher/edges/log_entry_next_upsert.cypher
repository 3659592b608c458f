// Upsert NEXT relationships (earlier log entry)-[:NEXT]->(later log entry) between LogEntry and LogEntry nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'l1', dst: 'l2', props: {}}];
UNWIND $rows AS row
MATCH (a:LogEntry {id: row.src})
MATCH (b:LogEntry {id: row.dst})
MERGE (a)-[r:NEXT]->(b)
SET r = row.props;
