// Upsert RELATES relationships (entity)-[:RELATES]->(entity) between Entity and Entity nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'e1', dst: 'e2', props: {predicate: 'lives_in', memory_id: 'm1', valid_from: datetime()}}];
UNWIND $rows AS row
MATCH (a:Entity {id: row.src})
MATCH (b:Entity {id: row.dst})
MERGE (a)-[r:RELATES]->(b)
SET r = row.props;
