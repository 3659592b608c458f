// Upsert DERIVED_FROM relationships (memory)-[:DERIVED_FROM]->(source org fact) between Memory and OrgFact nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'm1', dst: 'f1v1', props: {pass: 'consolidate', at: datetime()}}];
UNWIND $rows AS row
MATCH (a:Memory {id: row.src})
MATCH (b:OrgFact {id: row.dst})
MERGE (a)-[r:DERIVED_FROM]->(b)
SET r = row.props;
