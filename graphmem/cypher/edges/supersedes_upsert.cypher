// Upsert SUPERSEDES relationships (newer)-[:SUPERSEDES]->(older) between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:Memory {id: 'm2'}), (b:Memory {id: 'm1'}) RETURN {src: elementId(a), dst: elementId(b), props: {reason: 'corrected', at: datetime()}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:SUPERSEDES]->(b)
SET r = row.props;
