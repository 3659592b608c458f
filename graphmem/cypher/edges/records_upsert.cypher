// Upsert RECORDS relationships (org operation)-[:RECORDS]->(org fact) between OrgOperation and OrgFact nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'op1', dst: 'f1v1', props: {}}];
UNWIND $rows AS row
MATCH (a:OrgOperation {id: row.src})
MATCH (b:OrgFact {id: row.dst})
MERGE (a)-[r:RECORDS]->(b)
SET r = row.props;
