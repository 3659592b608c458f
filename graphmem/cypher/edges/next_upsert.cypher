// Upsert NEXT relationships (earlier event)-[:NEXT]->(later event, same run) between Memory and Memory nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'm1', dst: 'm2', props: {}}];
UNWIND $rows AS row
MATCH (a:Memory {id: row.src})
MATCH (b:Memory {id: row.dst})
MERGE (a)-[r:NEXT]->(b)
SET r = row.props;
