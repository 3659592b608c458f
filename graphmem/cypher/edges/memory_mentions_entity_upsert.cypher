// Upsert MENTIONS relationships (memory)-[:MENTIONS]->(entity it mentions) between Memory and Entity nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'm1', dst: 'e1', props: {role: 'subject'}}];
UNWIND $rows AS row
MATCH (a:Memory {id: row.src})
MATCH (b:Entity {id: row.dst})
MERGE (a)-[r:MENTIONS]->(b)
SET r = row.props;
