// Upsert SUPERSEDES relationships (newer org fact version)-[:SUPERSEDES]->(older version) between OrgFact and OrgFact nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'f1v2', dst: 'f1v1', props: {at: datetime()}}];
UNWIND $rows AS row
MATCH (a:OrgFact {id: row.src})
MATCH (b:OrgFact {id: row.dst})
MERGE (a)-[r:SUPERSEDES]->(b)
SET r = row.props;
