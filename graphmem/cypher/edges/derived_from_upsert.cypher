// Upsert DERIVED_FROM relationships (derived)-[:DERIVED_FROM]->(source) between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:Memory {id: 's1'}), (b:Memory {id: 'm1'}) RETURN {src: elementId(a), dst: elementId(b), props: {pass: 'consolidate', at: datetime()}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:DERIVED_FROM]->(b)
SET r = row.props;
