// Upsert NEXT relationships (earlier)-[:NEXT]->(later) inside one run between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:Memory {id: 'm1'}), (b:Memory {id: 'm2'}) RETURN {src: elementId(a), dst: elementId(b), props: {}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:NEXT]->(b)
SET r = row.props;
