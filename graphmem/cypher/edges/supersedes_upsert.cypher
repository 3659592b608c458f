// Upsert SUPERSEDES relationships (newer memory)-[:SUPERSEDES]->(older memory) between Memory and Memory nodes given by
// id; the relationship's properties are replaced by row.props. A row whose ends do not both
// exist writes nothing (the backend compares the rows written with the rows sent).
:param rows => [{src: 'm2', dst: 'm1', props: {reason: 'corrected', at: datetime()}}];
UNWIND $rows AS row
MATCH (a:Memory {id: row.src})
MATCH (b:Memory {id: row.dst})
MERGE (a)-[r:SUPERSEDES]->(b)
SET r = row.props;
